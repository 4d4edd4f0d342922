# ruff: noqa: S301  (a scratch analysis of committed pickles, kept as run)
"""Could an open loop in the calibration teach the fit what a prompt costs when it joins a running batch? Offline, on
the starts of spread.pkl (five) and hot-lab.pkl (three), with kvviz/sim/calibrate.py patched (openfit.patch): each
start's calibration with one of its Poisson loads (128/16 at 110 or 130 requests/s) added, replayed as an open
loop (in the order sent, with its gap and TTFT rows as load_rows gives them), fitted two ways:
  open:   b, d (with a lone offset o that the simulator does not charge) on the lone prompts' rows and the open
          loop's rows that hold prompt tokens, a and c from decode rows, e from the rest
  rest:   the staged fit as kept, the open loop's rows among the other rows (e only)
and the other Poisson load predicted. Optimistic by construction (the added load has the predicted one's lengths):
a test of the mechanism, not of a calibration. python openfit.py PKL..., from the repository root with PYTHONPATH=."""

import pickle
import sys

import numpy as np

from kvviz.sim import calibrate as cal
from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted

errors = {}
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        starts = pickle.load(handle)
    for i, s in enumerate(starts):
        runs = s["cal"] + s.get("lone", [])
        for k in (0, 1):
            extra, target = s["held"][k], s["held"][1 - k]
            fits = {"kept": fit_runs(runs, s["engine"])}
            cal.OPEN_MODE[0] = True
            fits["open"] = fit_runs([*runs, extra], s["engine"])
            offset = cal.OFFSET[0]
            cal.OPEN_MODE[0] = False
            fits["rest"] = fit_runs([*runs, extra], s["engine"])
            line = f"{path.split('/')[-1]} {i} +{extra.point.rate:g}/s -> {target.point.rate:g}/s:"
            for name, f in fits.items():
                p = _predicted(target.point, s["engine"], f)[0]
                e = (p.tpot.p50 / target.stats.tpot.p50 - 1, p.tpot.p90 / target.stats.tpot.p90 - 1,
                     p.ttft.p50 / target.stats.ttft.p50 - 1)
                errors.setdefault(name, []).append(e)
                st = f.step
                line += (f" {name} b {1e6 * st.b:.1f} d {1e9 * st.d:.1f}"
                         + (f" o {1e3 * offset:.2f}" if name == "open" else "")
                         + f" TPOT {e[0]:+.0%} {e[1]:+.0%} TTFT {e[2]:+.0%};")
            print(line, flush=True)
for name, e in errors.items():
    a = np.array(e)
    print(f"{name}: mean |error| TPOT p50 {np.abs(a[:, 0]).mean():.1%}, p90 {np.abs(a[:, 1]).mean():.1%}, TTFT p50 "
          f"{np.abs(a[:, 2]).mean():.1%}; signed TPOT p50 {a[:, 0].mean():+.1%}, p90 {a[:, 1].mean():+.1%}; "
          f"worst |TPOT p90| {np.abs(a[:, 1]).max():.1%}")
