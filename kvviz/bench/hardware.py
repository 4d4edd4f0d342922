"""Part 4, the hardware limit: decode bandwidth achieved against the measured memory bandwidth, and prefill
FLOP/s achieved against the measured matmul peak (kvviz.calc.hardware.measure_device measures both).
"""

from __future__ import annotations

import pandas as pd

from kvviz.bench.common import LONG_PROMPT
from kvviz.engine.loading import load_model
from kvviz.engine.request import GenerationRequest


def hardware_limit(specs: list[str], accel, new_tokens: int, repeats: int, device: str | None = None,
                   prompt: str = LONG_PROMPT) -> pd.DataFrame:
    """How close each model runs to the measured ceiling: decode bandwidth achieved against the measured
    memory bandwidth, and prefill FLOP/s achieved against the measured matmul peak.

    Models are MODEL or MODEL@DTYPE. Decode bytes per step are the model's weight bytes plus the KV cache
    read (the engine's figure); prefill FLOPs are the memory model's count for the prompt
    (kvviz.calc.roofline.prefill_estimate, which like the engine computes logits for the last prompt token only).
    """
    from kvviz.calc.dtypes import kv_dtype, weight_dtype
    from kvviz.calc.params import count_params
    from kvviz.calc.roofline import prefill_estimate
    from kvviz.engine.loop import run_to_end

    rows = []
    for spec in specs:
        model, _, dtype = spec.partition("@")
        lm = load_model(model, device=device, dtype=dtype or None)
        req = GenerationRequest(prompt, max_new_tokens=new_tokens, ignore_eos=True, chat_template=False)
        run_to_end(lm, GenerationRequest(prompt, max_new_tokens=2, chat_template=False))  # warm-up
        for rep in range(repeats):
            _, fin = run_to_end(lm, req)
            s = fin.summary
            flops = prefill_estimate(lm.arch, count_params(lm.arch), accel, weight_dtype(lm.dtype_name),
                                     kv_dtype(lm.dtype_name), 1, s.prompt_tokens).flops
            achieved_bw = s.bandwidth_achieved  # the one rule: kvviz.engine.metrics.decode_bandwidth
            rows.append({"model": spec, "device": str(lm.device), "dtype": lm.dtype_name, "repeat": rep,
                         "prompt_tokens": s.prompt_tokens,
                         "bytes_per_decode_step": s.bytes_per_decode_step,
                         "decode_tokens_per_s": s.decode_tokens_per_s, "decode_bandwidth": achieved_bw,
                         "decode_bandwidth_utilisation": achieved_bw / accel.bandwidth,
                         "decode_tokens_per_s_ceiling": accel.bandwidth / s.bytes_per_decode_step,
                         "prefill_s": s.prefill_s, "prefill_flops": flops, "prefill_flop_per_s": flops / s.prefill_s,
                         "prefill_utilisation": flops / s.prefill_s / accel.peak_flops})
    return pd.DataFrame(rows)


def summarize_hardware(frame: pd.DataFrame, accel) -> dict:
    """The measured ceilings and, per model, medians of what it achieved under them."""
    med = frame.groupby("model").median(numeric_only=True)
    keys = ("decode_tokens_per_s", "decode_tokens_per_s_ceiling", "decode_bandwidth_utilisation",
            "prefill_flop_per_s", "prefill_utilisation", "bytes_per_decode_step", "prompt_tokens")
    return {"measured": {"bandwidth_gb_s": accel.bandwidth / 1e9, "peak_gflop_s": accel.peak_flops / 1e9,
                         "how": accel.note},
            "models": {m: {k: float(med.loc[m, k]) for k in keys} for m in med.index}}
