"""Part 2, the cache's payoff: cached against uncached decoding to a few hundred new tokens on two prompt
lengths; per-step latency against position, total time, the fitted growth laws, and the roofline
prediction's error.
"""

from __future__ import annotations

import pandas as pd

from kvviz.engine.loading import LoadedModel
from kvviz.engine.request import GenerationRequest


def payoff(lm: LoadedModel, prompt: str, new_tokens: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cached against uncached on one prompt to `new_tokens` tokens (EOS ignored): per-token rows of both
    modes and the roofline prediction per step (kvviz.engine.compare does the warm-up and both runs)."""
    from kvviz.engine.compare import compare

    result = compare(lm, GenerationRequest(prompt, max_new_tokens=new_tokens, ignore_eos=True))
    return result.rows, result.prediction


def fit_payoff(rows: pd.DataFrame, prediction: pd.DataFrame) -> dict:
    """The growth laws the lesson claims, fitted to the measurements.

    Per decode step: latency = a + b × position (b near 0 with the cache, clearly positive without).
    Total time to n tokens: linear with the cache, quadratic without (R² of each fit). The roofline
    prediction is a lower bound far below a CPU's real step time, so it is scaled by one least-squares
    factor per mode and its shape error is the mean absolute relative error after scaling.
    """
    import numpy as np

    out = {}
    for mode, group in rows.groupby("mode"):
        decode = group[group["phase"] == "decode"]
        pos, step = decode["seq_len"].to_numpy(float), decode["dt_s"].to_numpy(float)
        slope, intercept = np.polyfit(pos, step, 1)
        n = group["index"].to_numpy(float) + 1
        total = group["t_s"].to_numpy(float)
        fits = {}
        for degree in (1, 2):
            coef = np.polyfit(n, total, degree)
            resid = total - np.polyval(coef, n)
            fits[degree] = 1 - resid.var() / total.var()
        pred = prediction.set_index("index").loc[decode["index"], f"{mode}_lower_bound_s"].to_numpy(float)
        scale = float(pred @ step / (pred @ pred))
        out[mode] = {
            "step_ms_at_start": float((intercept + slope * pos.min()) * 1e3),
            "step_ms_at_end": float((intercept + slope * pos.max()) * 1e3),
            "step_growth_ms_per_100_tokens": float(slope * 100 * 1e3),
            "new_tokens": len(group),
            "total_s": float(total[-1]),
            "total_r2_linear": float(fits[1]), "total_r2_quadratic": float(fits[2]),
            "roofline_scale": scale,
            "roofline_shape_error": float(np.mean(np.abs(scale * pred - step) / step)),
        }
    out["uncached_over_cached_total"] = out["uncached"]["total_s"] / out["cached"]["total_s"]
    return out
