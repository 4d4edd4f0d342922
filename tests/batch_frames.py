"""A batch sweep's frame built by hand (no model runs): tiny's architecture on a made-up device, with measured
numbers chosen so every derived column has a known value. Shared by the sweep's, the figures' and the text's
tests."""

from __future__ import annotations

import pandas as pd

from kvviz.calc.arch import architecture_from_source
from kvviz.calc.hardware import Accelerator
from kvviz.engine.batch_sweep import STOP_MAX_BATCH, BatchMeasurement, sweep_frame, sweep_limits
from tests.helpers import REPO

TINY = architecture_from_source(REPO / "assets" / "tiny")
# 20 GB/s and 200 GFLOP/s: a ridge point of 10 FLOP/B, as a 2-core CPU measures about.
DEVICE = Accelerator("cpu", "a made-up CPU", 24 * 10**9, 20e9, 200e9, "fp32", "fp32", measured=True)
PROMPT, NEW = 32, 16
BYTES_PER_TOKEN = 4 * 2 * 2 * 32 * 4  # tiny: 4 layers × (K, V) × 2 KV heads × head_dim 32 × fp32


def measurement(batch: int, step_s: float, prefill_s: float, kv_off: int = 0) -> BatchMeasurement:
    """One batch: the cache holds prompt + new - 1 tokens per row at the end (the last token is never fed)."""
    kv = batch * (PROMPT + NEW - 1) * BYTES_PER_TOKEN
    return BatchMeasurement(batch=batch, prompt_tokens=PROMPT, new_tokens=NEW, prefill_s=prefill_s,
                            ttft_s=prefill_s + 1e-3, step_s=step_s, step_min_s=step_s * 0.9, step_max_s=step_s * 1.2,
                            kv_bytes=kv + kv_off, kv_bytes_predicted=kv, padding_tokens=0,
                            decode_tokens_per_s_loop=batch / (step_s * 1.1))


# A small model on a CPU: 3.0 ms of fixed cost per step, then the compute term shows past B = 16.
STEPS = {1: 3.0e-3, 2: 3.1e-3, 4: 3.2e-3, 8: 3.4e-3, 16: 3.9e-3, 32: 5.2e-3, 64: 8.0e-3}
PREFILLS = {b: 2e-3 * b for b in STEPS}


def hand_frame(batches: tuple[int, ...] = tuple(STEPS), model: str = "tiny", kv_off: int = 0,
               stop: str = STOP_MAX_BATCH) -> pd.DataFrame:
    limits = sweep_limits(TINY, DEVICE, "fp32", PROMPT, NEW)
    ms = [measurement(b, STEPS[b], PREFILLS[b], kv_off if b == batches[-1] else 0) for b in batches]
    return sweep_frame(model, "cpu", "fp32", TINY, DEVICE, ms, limits, stop)
