"""Part 3, memory truth: the KV bytes a real cache holds against kvviz's prediction, at several lengths, for a
twin of each attention family.

Each twin is built from a preset's config (random weights, shrunk to its first few layers where a large
model would not fit: every layer keeps the model's attention shape). kvviz's engine prefills a prompt of
the chosen length and decodes a few tokens; at every step it reads the bytes of the cache's tensors and
the memory model's prediction for that length (kvviz.calc.memory.transformers_cache_bytes, which follows what
the installed transformers keeps: window - 1 tokens in sliding layers between steps, MLA's latent since
5.15). They must be equal. On CUDA the allocator's growth over the run is reported beside them: it also
holds the step's activations and the allocator's rounding, which the cache's tensors do not.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.memory import kv_cache_bytes
from kvviz.engine.loading import build_twin, load_model
from kvviz.engine.loop import run_to_end
from kvviz.engine.request import GenerationRequest


@dataclass(frozen=True)
class Family:
    """One attention family and the twin that stands for it; layers=None keeps the whole model.

    model: a real model to load instead of the preset's twin (each row records the tokens the model really read)."""

    family: str
    preset: str
    layers: int | None
    lengths: tuple[int, ...]
    model: str | None = None


WINDOW_LENGTHS = (16, 1024, 4094, 4095, 4096, 4097, 5000)  # both sides of a 4,096-token window
FULL = (
    Family("multi-head (32 q = 32 kv heads)", "llama-2-7b", 2, (16, 512, 2048, 4000)),
    Family("grouped-query (14 q / 2 kv heads)", "qwen2.5-0.5b", None, (16, 512, 2048, 4096)),
    Family("grouped-query (32 q / 8 kv heads)", "llama-3-8b", 2, (16, 512, 2048, 4096)),
    Family("explicit head_dim (128, not 1024 / 16)", "qwen3-0.6b", None, (16, 512, 2048, 4096)),
    Family("sliding window (4,096, every layer)", "mistral-7b-v0.1", 2, WINDOW_LENGTHS),
    Family("sliding + full alternating, head_dim 256", "gemma-2-2b", 2, WINDOW_LENGTHS),
    Family("multi-head latent (MLA)", "deepseek-v2-lite", 2, (16, 512, 2048)),
    Family("grouped-query (9 q / 3 kv heads), real weights", "smollm2-135m", None, (16, 2048, 8000),
           model="smollm2-135m-instruct"),
)
# Quick mode: the same families on one or two layers and short prompts (no window is crossed).
QUICK = (
    Family("multi-head (12 q = 12 kv heads)", "gpt2", 1, (5, 33)),
    Family("grouped-query (9 q / 3 kv heads)", "smollm2-135m", 1, (5, 33)),
    Family("explicit head_dim (128, not 1024 / 16)", "qwen3-0.6b", 1, (5, 33)),
    Family("sliding window (4,096, every layer)", "mistral-7b-v0.1", 1, (5, 33)),
    Family("sliding + full alternating, head_dim 256", "gemma-2-2b", 2, (5, 33)),
    Family("multi-head latent (MLA)", "deepseek-v2-lite", 1, (5, 33)),
)
DECODE_STEPS = 3  # tokens generated after each prefill: the prefill's cache and two decode steps


def measure_family(fam: Family, device: str | None = None, dtype: str | None = None) -> pd.DataFrame:
    """Measured against predicted cache bytes after the prefill and each decode step, every length."""
    lm = load_model(fam.model, device, dtype) if fam.model else build_twin(fam.preset, fam.layers, device, dtype)
    kvd = kv_dtype(lm.dtype_name)
    rows = []
    for length in fam.lengths:
        # The twin's tokenizer makes one token per ASCII byte, so `length` letters are `length` tokens; a real
        # BPE tokenizer merges runs of letters but keeps " a" one token, so `length` of those are `length` tokens.
        prompt = (" a" if fam.model else "a") * length
        req = GenerationRequest(prompt, max_new_tokens=DECODE_STEPS, ignore_eos=True, chat_template=False)
        tokens, finished = run_to_end(lm, req)
        if finished.error:
            raise RuntimeError(f"{fam.preset} at {length} tokens: {finished.error}")
        for t in tokens:
            rows.append({
                "family": fam.family, "preset": fam.preset, "layers": lm.arch.num_layers, "device": str(lm.device),
                "dtype": lm.dtype_name, "prompt_tokens": tokens[0].seq_len, "phase": t.phase, "seq_len": t.seq_len,
                "measured_bytes": t.kv_bytes, "predicted_bytes": t.kv_bytes_predicted,
                "no_window_bytes": kv_cache_bytes(lm.arch, 1, t.seq_len, kvd, apply_window=False),
                "cuda_allocated_growth_bytes": t.cuda_allocated_bytes,
            })
    del lm
    return pd.DataFrame(rows)


def memory_truth(families: tuple[Family, ...], device: str | None = None, dtype: str | None = None) -> pd.DataFrame:
    """Every family's rows, with `exact` true where the measured bytes equal the prediction."""
    frame = pd.concat([measure_family(f, device, dtype) for f in families], ignore_index=True)
    return frame.assign(exact=frame["measured_bytes"] == frame["predicted_bytes"])


def summarize_memory(frame: pd.DataFrame) -> dict:
    """Per family: steps checked, how many matched exactly, the largest mismatch, the lengths checked."""
    out = {}
    for (family, preset), g in frame.groupby(["family", "preset"], sort=False):
        out[f"{preset}: {family}"] = {
            "layers": int(g["layers"].iloc[0]), "steps_checked": len(g), "exact": int(g["exact"].sum()),
            "largest_mismatch_bytes": int((g["measured_bytes"] - g["predicted_bytes"]).abs().max()),
            "lengths": sorted(int(x) for x in g["seq_len"].unique()),
            "bytes_at_longest": int(g["measured_bytes"].iloc[-1]),
            "no_window_bytes_at_longest": int(g["no_window_bytes"].iloc[-1]),
        }
    out["all_exact"] = bool(frame["exact"].all())
    return out
