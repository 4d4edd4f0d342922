# ruff: noqa: S301  (a scratch analysis of a committed pickle, kept as run)
"""As refit.py with the lone prompts, but the prompts-alone stage fitted with an intercept of its own, dropped after
(vLLM's prefill clock on a prompt alone holding a fixed time beyond the decode step's a, which b otherwise takes):
each start's b, d, e, c, the offset (as the last handoff tried fitted it: the kept handoff's may differ), and its
Poisson loads' TPOT errors. Tried offline, not kept. python
refit-offset.py PKL, from the repository root with PYTHONPATH=."""

import pickle
import sys

import numpy as np

import kvviz.sim.calibrate as calibrate
from kvviz.sim.validate import _predicted

as_is = calibrate._fit_cols
offsets = []


def with_offset(x, y, w, rows, cols, known):
    if list(cols) != list(calibrate.LONE_COLS):
        return as_is(x, y, w, rows, cols, known)
    design = np.column_stack([np.ones(int(rows.sum())), x[rows][:, cols]])
    sw = np.sqrt(w[rows])
    solution = calibrate.nonnegative_lstsq(design * sw[:, None], (y[rows] - x[rows] @ known) * sw)
    offsets.append(solution[0])
    return solution[1:]


calibrate._fit_cols = with_offset
with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)
errors = []
for i, s in enumerate(starts):
    f = calibrate.fit_runs(s["cal"] + s["lone"], s["engine"])
    st = f.step
    line = (f"start {i}: offset (last handoff) {1e3 * offsets[-1]:.2f} ms, b {1e6 * st.b:.1f} us, "
            f"d {1e9 * st.d:.1f} ns, e {1e12 * st.e:.0f} ps, c {1e6 * st.c:.0f} us;")
    for m in s["held"]:
        p = _predicted(m.point, s["engine"], f)[0]
        e50, e90 = p.tpot.p50 / m.stats.tpot.p50 - 1, p.tpot.p90 / m.stats.tpot.p90 - 1
        errors.append((e50, e90))
        line += f" {m.point.rate:g}/s TPOT p50 {e50:+.0%}, p90 {e90:+.0%};"
    print(line, flush=True)
a = np.array(errors)
print(f"mean error TPOT p50 {a[:, 0].mean():+.1%}, p90 {a[:, 1].mean():+.1%}; mean |error| p50 "
      f"{np.abs(a[:, 0]).mean():.1%}, p90 {np.abs(a[:, 1]).mean():.1%}; worst p90 {np.abs(a[:, 1]).max():.1%}")
