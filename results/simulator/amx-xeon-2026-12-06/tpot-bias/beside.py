
"""Decodes beside a prompt: vLLM's per-step log of tiny under Poisson load (2026-12-05, tiny-steps/ana.txt) has the
steps that compute one 128-token prompt take 4.08, 4.10 and 3.86 ms with 0-3, 4-7 and 8-11 decodes beside it, where
the decode-only steps take 1.35, 2.01 and 2.45 ms: a decode costs the step next to nothing where the step computes a
prompt. The step model charges c for every decode. Prototyped here (kvviz.sim.calibrate patched in the script, not
in the package): the decode term split by the step's kind, c per decode in a step without prompt tokens, g per
decode in a step with them, t = a + b·P + c·D·[P = 0] + g·D·[P > 0] + d·pairs + e·cross. "free": g = 0; "fitted": g
fitted with e on the rows that are neither decode-only nor lone prompts (staged_fit as it is); "token": g = b (in
a step that computes prompts, a decode is one more token of the batch: the column of b counts it). Scored as sixth.py:
the saved starts' Poisson loads (128/16 at 110 and 130 requests/s) and the validation's held-out loads.
python beside.py, from this folder with PYTHONPATH set to the repository root."""

from dataclasses import dataclass

import numpy as np
from score import score

from kvviz.sim import calibrate as cal

KEPT = {"K": cal.K, "cumulative": cal._cumulative, "linear": cal.LinearStepTime}


@dataclass(frozen=True)
class Beside:
    a: float
    b: float
    c: float
    d: float
    e: float = 0.0
    g: float = 0.0
    token: bool = False  # g = b

    def seconds(self, step) -> float:
        per_decode = (self.b if self.token else self.g) if step.prefill_tokens else self.c
        return (self.a + self.b * step.prefill_tokens + per_decode * step.decode_seqs
                + self.d * step.attention_pairs + self.e * step.prompt_cross)


def columns(with_g: bool, token: bool = False):
    def cumulative(trace):
        rows = [(1.0, s.prefill_tokens + (s.decode_seqs if token and s.prefill_tokens else 0),
                 0.0 if s.prefill_tokens else s.decode_seqs, s.attention_pairs, s.prompt_cross)
                + ((float(s.decode_seqs) if s.prefill_tokens else 0.0,) if with_g else ()) for s in trace]
        k = 6 if with_g else 5
        x = np.array(rows, dtype=float).reshape(-1, k)
        return np.vstack([np.zeros((1, k)), np.cumsum(x, axis=0)])
    return cumulative


def use(mode: str) -> None:
    cal.K = 6 if mode == "fitted" else KEPT["K"]
    cal._cumulative = KEPT["cumulative"] if mode == "kept" else columns(mode == "fitted", mode == "token")
    cal.LinearStepTime = (KEPT["linear"] if mode == "kept" else
                          (lambda *c: Beside(*c, token=True)) if mode == "token" else Beside)


def say(f) -> str:
    st = f.step
    return (f"a {1e3 * st.a:.2f} ms, b {1e6 * st.b:.1f} us, c {1e6 * st.c:.0f} us, d {1e9 * st.d:.1f} ns, "
            f"e {1e12 * st.e:.0f} ps, g {1e6 * (st.b if getattr(st, 'token', False) else getattr(st, 'g', st.c)):.1f}"
            " us")


score(("kept", "free", "fitted", "token"), use, say, 6)
