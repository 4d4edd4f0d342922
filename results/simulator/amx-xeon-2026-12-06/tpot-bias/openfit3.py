# ruff: noqa: S301  (a scratch analysis of the pickle lab2.py wrote, kept as run)
"""lab2.py's starts fitted two ways and the SLO check's Poisson loads (128/16 at 110 and 130 requests/s) predicted:
"kept", the calibration as kvviz makes it; "open", with the start's open loop of 256/32 added as openfit2.py fits it
(openfit.patch applied: a, c from the closed loops' decode rows; b, d and a lone offset o, uncharged, from the lone
prompts and the open loop's rows with prompt tokens). Not optimistic by construction: the open loop's lengths are
not the predicted loads'. python openfit3.py PKL, from the repository root with PYTHONPATH=. and the patch applied."""

import pickle
import sys

import numpy as np

from kvviz.sim import calibrate as cal
from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted

with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)
errors = {}
for i, s in enumerate(starts):
    for name, runs, mode in (("kept", s["cal"], [False, False]), ("open", s["cal"] + [s["open"]], [True, True])):
        cal.OPEN_MODE[:] = mode
        cal.OFFSET[0] = 0.0
        f = fit_runs(runs, s["engine"])
        st = f.step
        line = (f"start {i} {name}: a {1e3 * st.a:.2f} ms, c {1e6 * st.c:.0f} us, b {1e6 * st.b:.1f} us, d "
                f"{1e9 * st.d:.1f} ns, e {1e12 * st.e:.0f} ps, o {1e3 * cal.OFFSET[0]:.2f} ms; 128 tokens "
                f"{1e3 * (st.b * 128 + st.d * 128 * 129 / 2):.2f} ms;")
        for m in s["held"]:
            p = _predicted(m.point, s["engine"], f)[0]
            e = (p.tpot.p50 / m.stats.tpot.p50 - 1, p.tpot.p90 / m.stats.tpot.p90 - 1,
                 p.ttft.p50 / m.stats.ttft.p50 - 1, p.ttft.p90 / m.stats.ttft.p90 - 1)
            errors.setdefault(name, []).append(e)
            line += f" {m.point.rate:g}/s TPOT {e[0]:+.0%} {e[1]:+.0%} TTFT {e[2]:+.0%} {e[3]:+.0%};"
        print(line, flush=True)
for name, e in errors.items():
    a = np.array(e)
    print(f"{name}: mean |error| TPOT p50 {np.abs(a[:, 0]).mean():.1%}, p90 {np.abs(a[:, 1]).mean():.1%}, TTFT p50 "
          f"{np.abs(a[:, 2]).mean():.1%}, p90 {np.abs(a[:, 3]).mean():.1%}; signed TPOT p50 {a[:, 0].mean():+.1%}, "
          f"p90 {a[:, 1].mean():+.1%}; worst |TPOT p90| {np.abs(a[:, 1]).max():.1%}")
