
"""A prototype of the sixth term docs/simulator.md points at, fitted, not set by hand: f, a fixed cost of a step that
computes prompt tokens, paid once however many prompts the step holds. kvviz.sim.calibrate patched here, not in the
package: the rows get a sixth column (1 for each step with prompt tokens), the step time is
a + b·P + c·D + d·pairs + e·cross + f·[P > 0], and the staged fit keeps f (and e) from the other rows when it fits b
and d on the lone prompts (lone row: a + f + b·p + d·pairs), alternating until they settle. Scored on the saved
starts' Poisson loads (128/16 at 110 and 130 requests/s: spread.pkl, hot-lab.pkl, open-lab.pkl) and on the
validation's held-out loads of check-start/validation-loads.pkl (tiny and SmolLM2, calibrations without lone
prompts), kept against sixth. python sixth.py, from this folder with PYTHONPATH set to the repository root (sixth.txt).

python sixth.py lone (sixth_lone.txt, 2026-12-06 06:28 UTC): f fitted where the prompts alone can tell it, the lone
rows fitting b, d and f together when they tell three apart (four rows or more: the loop of one at 64 and the lone
prompts of 128, 384 and 960), e (and the overhead) from the other rows with those kept."""

import sys
from dataclasses import dataclass

import numpy as np
from score import score

from kvviz.sim import calibrate as cal

KEPT = {"K": cal.K, "cumulative": cal._cumulative, "staged": cal.staged_fit, "linear": cal.LinearStepTime}
F = 5  # the sixth column
LONE = sys.argv[1:] == ["lone"]  # f fitted with b and d on the lone rows


@dataclass(frozen=True)
class WithF:
    a: float
    b: float
    c: float
    d: float
    e: float = 0.0
    f: float = 0.0

    def seconds(self, step) -> float:
        return (self.a + self.b * step.prefill_tokens + self.c * step.decode_seqs + self.d * step.attention_pairs
                + self.e * step.prompt_cross + (self.f if step.prefill_tokens else 0.0))


def cumulative(trace):
    x = np.array([(1.0, s.prefill_tokens, s.decode_seqs, s.attention_pairs, s.prompt_cross,
                   1.0 if s.prefill_tokens else 0.0) for s in trace], dtype=float).reshape(-1, 6)
    return np.vstack([np.zeros((1, 6)), np.cumsum(x, axis=0)])


def staged(x, y, w, lone=None):
    """cal.staged_fit with the other rows' coefficients (e, f) kept from the last round in the lone stage."""
    coef, keep = cal.fit_setting_aside(x, y, w)
    decode = keep & (x[:, cal.COL_B] == 0)
    cols = list(cal.DECODE_COLS)
    if decode.sum() < len(cols) or np.linalg.matrix_rank(x[decode][:, cols]) < len(cols):
        return coef, keep
    rest = [j for j in range(x.shape[1]) if j not in cols and x[keep, j].any()]
    alone = keep & lone if lone is not None else np.zeros(len(y), dtype=bool)
    by_lone = np.linalg.matrix_rank(x[alone][:, list(cal.LONE_COLS)]) == len(cal.LONE_COLS)
    lone_cols = [*cal.LONE_COLS, F]
    three = LONE and np.linalg.matrix_rank(x[alone][:, lone_cols]) == 3 and alone.sum() > 3
    lone_cols = lone_cols if three else list(cal.LONE_COLS)
    others = [j for j in rest if j not in lone_cols]
    for _ in range(4 * cal.STAGE_ROUNDS):
        found = np.zeros(x.shape[1])
        found[cols] = cal._fit_cols(x, y, w, decode, cols, np.where(np.arange(x.shape[1]) == cal.COL_D, coef, 0.0))
        if by_lone:
            known = found.copy()
            known[others] = coef[others]
            found[lone_cols] = cal._fit_cols(x, y, w, alone, lone_cols, known)
            found[others] = cal._fit_cols(x, y, w, keep & ~alone, others, found)
        else:
            found[rest] = cal._fit_cols(x, y, w, keep, rest, found)
        if np.allclose(found, coef, rtol=1e-6, atol=0.0):
            break
        coef = found
    return coef, keep


def use(sixth: bool) -> None:
    cal.K = 6 if sixth else KEPT["K"]
    cal._cumulative = cumulative if sixth else KEPT["cumulative"]
    cal.staged_fit = staged if sixth else KEPT["staged"]
    cal.LinearStepTime = WithF if sixth else KEPT["linear"]


def say(f) -> str:
    st = f.step
    return (f"a {1e3 * st.a:.2f} ms, b {1e6 * st.b:.1f} us, c {1e6 * st.c:.0f} us, d {1e9 * st.d:.1f} ns, "
            f"e {1e12 * st.e:.0f} ps, f {1e3 * getattr(st, 'f', 0.0):.2f} ms")


score(("kept", "sixth"), lambda name: use(name == "sixth"), say, 5)
