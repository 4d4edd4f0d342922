# ruff: noqa: S301  (a scratch analysis of a committed pickle, kept as run)
"""The five starts of ../amx-xeon-2026-12-05/spread/spread.pkl refitted with the code as it is, on the calibration's
six loads alone and with the three lone prompts' loads (128, 384 and 960 tokens alone: the calibration as kvviz now
runs it), and each start's Poisson loads (128/16 at 110 and 130 requests/s, 600 requests) predicted: TPOT p50 and
p90 errors. python refit.py PKL, from the repository root with PYTHONPATH=."""

import pickle
import sys

import numpy as np

from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted

with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)
errors = {}
for i, s in enumerate(starts):
    for name, runs in (("six loads", s["cal"]), ("with the lone prompts", s["cal"] + s["lone"])):
        f = fit_runs(runs, s["engine"])
        st = f.step
        line = (f"start {i}, {name}: a {1e3 * st.a:.2f} ms, b {1e6 * st.b:.1f} us, c {1e6 * st.c:.0f} us, "
                f"d {1e9 * st.d:.1f} ns, e {1e12 * st.e:.0f} ps;")
        for m in s["held"]:
            p = _predicted(m.point, s["engine"], f)[0]
            e50, e90 = p.tpot.p50 / m.stats.tpot.p50 - 1, p.tpot.p90 / m.stats.tpot.p90 - 1
            errors.setdefault(name, []).append((e50, e90))
            line += f" {m.point.rate:g}/s TPOT p50 {e50:+.0%}, p90 {e90:+.0%};"
        print(line, flush=True)
for name, e in errors.items():
    a = np.abs(np.array(e))
    print(f"{name}: mean |error| TPOT p50 {a[:, 0].mean():.1%}, p90 {a[:, 1].mean():.1%}; "
          f"worst p90 {a[:, 1].max():.1%}")
