# ruff: noqa: S301  (a scratch analysis of the pickle lab.py wrote, kept as run)
"""How much of the calibration's spread is its lone loads' own noise: each start of hot-lab.pkl fitted with its first
set of lone-prompt loads (the calibration's), with the second (lab.py's "cold again", a minute later on the same
start), and with both; the Poisson loads' TPOT p50 / p90 error with each. python lone_twice.py, from this folder with
PYTHONPATH set to the repository root."""

import pickle

from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted

with open("hot-lab.pkl", "rb") as handle:
    starts = pickle.load(handle)
for i, s in enumerate(starts):
    lone = [m for m in s["cal"] if m.point.concurrency == 1 and m.point.mix.prompt_tokens >= 128]
    rest = [m for m in s["cal"] if m not in lone]
    for name, runs in (("first lone set", s["cal"]), ("second lone set", rest + s["cold"]),
                       ("both", s["cal"] + s["cold"])):
        f = fit_runs(runs, s["engine"])
        st = f.step
        line = f"start {i} {name:15s}: b {1e6 * st.b:.1f} us, d {1e9 * st.d:.1f} ns, e {1e12 * st.e:.0f} ps;"
        for m in s["held"]:
            p = _predicted(m.point, s["engine"], f)[0]
            line += (f" {m.point.rate:g}/s TPOT {p.tpot.p50 / m.stats.tpot.p50 - 1:+.0%} "
                     f"{p.tpot.p90 / m.stats.tpot.p90 - 1:+.0%};")
        print(line, flush=True)
