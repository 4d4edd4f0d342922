# ruff: noqa: S301  (a scratch analysis of a committed pickle, kept as run)
"""window.py found the simulator's steps right (a decode step's base within 0.1-0.2 ms) but a 128-token prompt that
joins a step of decodes priced 2.5-3.0 ms where the client saw 1.8-2.9 (2.3 on the mean): b and d come from
prompts computed alone, whose step holds a fixed time of its own beside a decode step's. Tried here on the five
starts of spread.pkl, their ten Poisson loads (128/16 at 110 and 130 requests/s) predicted after each refit:
  kept:   the fit as kvviz makes it (b, d from the lone prompts; e from the other rows)
  joined: b, d from the lone prompts and the gap rows whose steps hold one request's prompt beside decodes (a
          prompt joining a running batch, as under load), the lone rows with a fixed offset o of their own that
          the simulator does not charge
python joined.py PKL, from the repository root with PYTHONPATH=."""

import pickle
import sys

import numpy as np

from kvviz.sim import calibrate as cal
from kvviz.sim.calibrate import COL_A, COL_B, COL_D, CROSS, DECODE_COLS, _fit_cols, fit_runs, fit_setting_aside
from kvviz.sim.validate import _predicted

KEPT = cal.staged_fit


def joined_fit(x, y, w, lone=None):
    """staged_fit with b, d (and a lone offset) from the lone rows and the rows of one prompt beside decodes."""
    coef, keep = fit_setting_aside(x, y, w)
    decode = keep & (x[:, COL_B] == 0)
    cols = list(DECODE_COLS)
    if lone is None or decode.sum() < len(cols) or np.linalg.matrix_rank(x[decode][:, cols]) < len(cols):
        return KEPT(x, y, w, lone)
    alone = keep & lone
    one = keep & ~alone & (x[:, COL_B] > 0) & (x[:, CROSS] == 0) & (x[:, COL_A] < 50)  # gaps and spans, not waves
    xo = np.column_stack([x, alone.astype(float)])  # the lone prompt's offset, a sixth column on its rows alone
    rows = alone | one
    rest = [j for j in range(x.shape[1]) if j not in cols and j not in (COL_B, COL_D) and x[keep & ~rows, j].any()]
    for _ in range(cal.STAGE_ROUNDS):
        found = np.zeros(xo.shape[1])
        found[cols] = _fit_cols(xo, y, w, decode, cols, np.where(np.arange(xo.shape[1]) == COL_D, np.append(coef, 0)
                                                                 if len(coef) < xo.shape[1] else coef, 0.0))
        found[[COL_B, COL_D, x.shape[1]]] = _fit_cols(xo, y, w, rows, [COL_B, COL_D, x.shape[1]], found)
        if rest:
            found[rest] = _fit_cols(xo, y, w, keep & ~rows, rest, found)
        old = coef if len(coef) == xo.shape[1] else np.append(coef, 0.0)
        if np.allclose(found, old, rtol=1e-9, atol=0.0):
            break
        coef = found
    global OFFSETS
    OFFSETS.append(coef[-1])
    return coef[:-1], keep


OFFSETS = []
with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)
errors = {}
for i, s in enumerate(starts):
    for name, fn in (("kept", KEPT), ("joined", joined_fit)):
        cal.staged_fit = fn
        OFFSETS.clear()
        f = fit_runs(s["cal"] + s["lone"], s["engine"])
        st = f.step
        line = (f"start {i}, {name:6s}: a {1e3 * st.a:.2f} ms, b {1e6 * st.b:.1f} us, c {1e6 * st.c:.0f} us, "
                f"d {1e9 * st.d:.1f} ns, e {1e12 * st.e:.0f} ps"
                + (f", o {1e3 * OFFSETS[-1]:.2f} ms" if OFFSETS else "")
                + f"; 128 tokens {1e3 * (st.b * 128 + st.d * 128 * 129 / 2):.2f} ms;")
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
          f"{np.abs(a[:, 2]).mean():.1%}, p90 {np.abs(a[:, 3]).mean():.1%}; mean signed TPOT p90 {a[:, 1].mean():+.1%};"
          f" worst |TPOT p90| {np.abs(a[:, 1]).max():.1%}")
