"""The batch part: kvviz's own batched engine swept over B = 1, 2, 4, ... per model, every batch size beside the
roofline's prediction on this machine's measured ceilings (kvviz.engine.batch_sweep does the sweep).

The prompts are distinct synthetic ones of exactly the asked length in the model's tokens (kvviz.serving.prompts,
the load generator's rule), so no row is padded and every batch decodes the same work per sequence; batch B
takes the first B of them. The machine's load average before and after is kept with the results: on a shared
machine the step times move with it.
"""

from __future__ import annotations

import os

import pandas as pd

from kvviz.calc.hardware import Accelerator
from kvviz.engine.batch_sweep import batch_sweep, summarize_sweep
from kvviz.engine.loading import LoadedModel, load_model
from kvviz.serving.prompts import synthetic


def sweep_prompts(lm: LoadedModel, count: int, tokens: int, seed: int = 0) -> list[str]:
    """`count` distinct prompts of exactly `tokens` tokens of `lm`'s tokenizer (special tokens included)."""
    return [p.text for p in synthetic(count, tokens, lm.tokenizer, seed=seed)]


def batch_bench(specs: list[str], max_batches: list[int], prompt_tokens: int, new_tokens: int, repeats: int,
                accel: Accelerator, device: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Sweep each model (MODEL or MODEL@DTYPE) to its max batch (one number for all, or one per model): every
    batch's row, and per model the sweep's summary; the load average before and after the whole part."""
    if len(max_batches) not in (1, len(specs)):
        raise ValueError(f"--max-batch takes one number or one per model ({len(specs)}), got {len(max_batches)}")
    load_before = os.getloadavg()
    frames, summary = [], {}
    caps = max_batches * len(specs) if len(max_batches) == 1 else max_batches
    for spec, max_batch in zip(specs, caps, strict=True):
        model, _, dtype = spec.partition("@")
        lm = load_model(model, device=device, dtype=dtype or None)
        frame = batch_sweep(lm, sweep_prompts(lm, max_batch, prompt_tokens), new_tokens, max_batch, accel=accel,
                            repeats=repeats,
                            progress=lambda b, what, m=model: print(f"batch: {m} {what}", flush=True))
        frames.append(frame)
        summary[spec] = summarize_sweep(frame)
    return pd.concat(frames, ignore_index=True), {
        "models": summary, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "repeats": repeats,
        "measured": {"bandwidth_gb_s": accel.bandwidth / 1e9, "peak_gflop_s": accel.peak_flops / 1e9,
                     "how": accel.note},
        "load_average_before": list(load_before), "load_average_after": list(os.getloadavg())}
