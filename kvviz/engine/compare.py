"""Cached against uncached decoding on the same prompt, device and settings, with the model's prediction.

Both modes run after a short warm-up of each, one after the other. The result holds the per-token
rows of both (a pandas DataFrame), the speedup, whether the tokens agree and where they first part,
and the roofline prediction for every step: with the cache a step reads the weights and the cache
and does work that barely grows; without it every step is a prefill of the whole sequence. It knows
the engine and the estimates; it draws nothing.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, replace

import pandas as pd

from kvviz.calc.dtypes import kv_dtype, weight_dtype
from kvviz.calc.hardware import device_accelerator
from kvviz.calc.params import count_params
from kvviz.calc.roofline import decode_estimate, prefill_estimate
from kvviz.engine.events import Finished, TokenEvent
from kvviz.engine.loading import LoadedModel
from kvviz.engine.loop import run_to_end
from kvviz.engine.metrics import RunSummary
from kvviz.engine.request import GenerationRequest


class CompareError(RuntimeError):
    """One of the two runs failed; the message is its error."""


@dataclass(frozen=True)
class Comparison:
    rows: pd.DataFrame  # one row per token per mode
    prediction: pd.DataFrame  # one row per step: predicted FLOPs, bytes and lower-bound time, both modes
    cached: RunSummary
    uncached: RunSummary
    cached_text: str
    uncached_text: str
    speedup: float  # uncached time / cached time, request received to last token, queue excluded
    decode_speedup: float | None  # uncached TPOT / cached TPOT
    tokens_identical: bool
    first_divergence: int | None  # index of the first token where the two runs part
    compared_tokens: int

    def as_dict(self) -> dict:
        return {
            "speedup": self.speedup, "decode_speedup": self.decode_speedup,
            "tokens_identical": self.tokens_identical, "first_divergence": self.first_divergence,
            "compared_tokens": self.compared_tokens,
            "cached": {"summary": self.cached.as_dict(), "lesson": self.cached.lesson(), "text": self.cached_text},
            "uncached": {"summary": self.uncached.as_dict(), "lesson": self.uncached.lesson(),
                         "text": self.uncached_text},
            "rows": self.rows.to_dict(orient="records"),
            "prediction": self.prediction.to_dict(orient="records"),
        }


def token_frame(tokens: list[TokenEvent], mode: str) -> pd.DataFrame:
    """Per-token rows of one run."""
    frame = pd.DataFrame([asdict(t) for t in tokens], columns=list(TokenEvent.__dataclass_fields__))
    frame.insert(0, "mode", mode)
    return frame


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where two token lists differ (within the shorter), or None."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)


def predict_steps(lm: LoadedModel, prompt_tokens: int, steps: int) -> pd.DataFrame:
    """Roofline lower bounds per step for both modes on this device.

    Step 0 is the prefill in both. After it, the cached step i decodes one token against
    prompt_tokens + i - 1 cached ones; the uncached step i runs a prefill of prompt_tokens + i tokens.
    """
    arch = lm.arch
    count = count_params(arch)
    accel = device_accelerator(str(lm.device))
    wd, kvd = weight_dtype(lm.dtype_name), kv_dtype(lm.dtype_name)
    rows = []
    for i in range(steps):
        seq_len = prompt_tokens + i
        full = prefill_estimate(arch, count, accel, wd, kvd, 1, seq_len)
        cached = full if i == 0 else decode_estimate(arch, count, accel, wd, kvd, 1, seq_len)
        rows.append({"index": i, "seq_len": seq_len,
                     "cached_flops": cached.flops, "cached_bytes": cached.bytes,
                     "cached_lower_bound_s": cached.lower_bound_s,
                     "uncached_flops": full.flops, "uncached_bytes": full.bytes,
                     "uncached_lower_bound_s": full.lower_bound_s})
    return pd.DataFrame(rows)


def _run(lm: LoadedModel, req: GenerationRequest, cancel: threading.Event | None) -> tuple[list[TokenEvent], Finished]:
    tokens, finished = run_to_end(lm, req, cancel)
    if finished is not None and finished.bad_input:
        raise ValueError(finished.error)  # what was asked cannot run (a prompt too long): not a fault
    if cancel is not None and cancel.is_set():
        raise CompareError("the comparison was stopped")
    if finished is None or finished.summary is None:
        raise CompareError((finished.error if finished else None) or "the run ended without finishing")
    return tokens, finished


def compare(lm: LoadedModel, req: GenerationRequest, warmup_tokens: int = 4,
            cancel: threading.Event | None = None) -> Comparison:
    """Run `req` with and without the cache (after warming both up) and put the two side by side.

    Setting `cancel` stops the run in progress within a token and ends the comparison with CompareError.
    """
    warm = replace(req, max_new_tokens=min(warmup_tokens, req.max_new_tokens))
    for use_cache in (True, False):
        _run(lm, replace(warm, use_cache=use_cache), cancel)
    c_tokens, c_fin = _run(lm, replace(req, use_cache=True), cancel)
    u_tokens, u_fin = _run(lm, replace(req, use_cache=False), cancel)
    c_ids, u_ids = [t.token_id for t in c_tokens], [t.token_id for t in u_tokens]
    split = first_divergence(c_ids, u_ids)
    cs, us = c_fin.summary, u_fin.summary
    return Comparison(
        rows=pd.concat([token_frame(c_tokens, "cached"), token_frame(u_tokens, "uncached")], ignore_index=True),
        prediction=predict_steps(lm, cs.prompt_tokens, max(len(c_tokens), len(u_tokens))),
        cached=cs, uncached=us, cached_text=c_fin.text, uncached_text=u_fin.text,
        speedup=(us.e2e_s - us.queue_s) / (cs.e2e_s - cs.queue_s),
        decode_speedup=us.tpot_s / cs.tpot_s if cs.tpot_s and us.tpot_s and len(c_ids) > 1 else None,
        tokens_identical=c_ids == u_ids, first_divergence=split, compared_tokens=min(len(c_ids), len(u_ids)),
    )
