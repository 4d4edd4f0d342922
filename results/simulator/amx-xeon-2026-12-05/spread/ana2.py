# ruff: noqa: S301  (a scratch analysis of the pickle written beside it, kept as run)
"""lab.py's starts fitted as kvviz does after this change (kvviz.sim.calibrate.staged_fit's lone rows): on the
calibration's six loads of before (b and d from every row), and with the lone prompts of 128, 384 and 960 tokens
(b and d from the loops of one alone); the Poisson loads' TPOT p50 / p90 predicted by each. python ana2.py PKL."""

import pickle
import sys

import numpy as np

from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted

with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)
errors = {}
for i, s in enumerate(starts):
    fits = {"six loads (b, d from every row)": fit_runs(s["cal"], s["engine"]),
            "with the lone prompts (b, d from them)": fit_runs(s["cal"] + s["lone"], s["engine"])}
    for name, f in fits.items():
        st = f.step
        line = (f"start {i}, {name}: a {1e3 * st.a:.2f} ms, b {1e6 * st.b:.1f} us, c {1e6 * st.c:.1f} us, "
                f"d {1e9 * st.d:.1f} ns;")
        for m in s["held"]:
            p = _predicted(m.point, s["engine"], f)[0]
            e50, e90 = p.tpot.p50 / m.stats.tpot.p50 - 1, p.tpot.p90 / m.stats.tpot.p90 - 1
            errors.setdefault(name, []).append((e50, e90))
            line += f" {m.point.rate:g}/s TPOT p50 {e50:+.0%}, p90 {e90:+.0%};"
        print(line)
for name, e in errors.items():
    a = np.abs(np.array(e))
    print(f"{name}: mean |error| TPOT p50 {a[:, 0].mean():.1%}, p90 {a[:, 1].mean():.1%}; "
          f"worst p90 {a[:, 1].max():.1%}")
