# ruff: noqa: S301  (a scratch analysis of committed pickles, kept as run)
"""openfit.py's "open" with the open loop's decode-only rows left out of a and c (openfit.patch as committed, its
OPEN_MODE[1]): a and c from the closed loops' decode rows alone, b, d and the lone offset o from the lone prompts and
the open loop's rows with prompt tokens, e from the rest. python openfit2.py PKL..., from the repository root with
PYTHONPATH=. and the patch applied."""

import pickle
import sys

import numpy as np

from kvviz.sim import calibrate as cal
from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted

errors = {}
cal.OPEN_MODE[:] = [True, True]
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        starts = pickle.load(handle)
    for i, s in enumerate(starts):
        runs = s["cal"] + s.get("lone", [])
        for k in (0, 1):
            extra, target = s["held"][k], s["held"][1 - k]
            f = fit_runs([*runs, extra], s["engine"])
            p = _predicted(target.point, s["engine"], f)[0]
            e = (p.tpot.p50 / target.stats.tpot.p50 - 1, p.tpot.p90 / target.stats.tpot.p90 - 1,
                 p.ttft.p50 / target.stats.ttft.p50 - 1)
            errors.setdefault("open2", []).append(e)
            st = f.step
            print(f"{path.split('/')[-1]} {i} +{extra.point.rate:g}/s -> {target.point.rate:g}/s: a {1e3 * st.a:.2f} "
                  f"c {1e6 * st.c:.0f} b {1e6 * st.b:.1f} d {1e9 * st.d:.1f} o {1e3 * cal.OFFSET[0]:.2f} "
                  f"TPOT {e[0]:+.0%} {e[1]:+.0%} TTFT {e[2]:+.0%}", flush=True)
for name, e in errors.items():
    a = np.array(e)
    print(f"{name}: mean |error| TPOT p50 {np.abs(a[:, 0]).mean():.1%}, p90 {np.abs(a[:, 1]).mean():.1%}, TTFT p50 "
          f"{np.abs(a[:, 2]).mean():.1%}; signed TPOT p50 {a[:, 0].mean():+.1%}, p90 {a[:, 1].mean():+.1%}; "
          f"worst |TPOT p90| {np.abs(a[:, 1]).max():.1%}")
