"""kvviz.bench.vllm_dtype: the summary of bf16 against fp32 worked by hand, and the quick run on a real vLLM, which
must run each start in the dtype it was asked for."""

from __future__ import annotations

import pandas as pd
import pytest

from kvviz.bench.vllm_dtype import QUICK, dtype_bench, summarize


def test_the_summary_by_hand():
    """Two rounds of one load. TTFT: bf16 1.4 and 1.5 s, fp32 0.25 and 0.5 s: medians 1.45 and 0.375, ratios
    0.25 / 1.4 = 0.1786 and 0.5 / 1.5 = 0.3333, median 0.2560. Tokens/s: bf16 13 and 12, fp32 39 and 24: ratios 3
    and 2, median 2.5."""
    rows = [{"round": r, "dtype": d, "load": "closed 4, 64/32 x8", "ttft_p50_s": t, "tpot_p50_s": 0.1,
             "output_tokens_per_s": s}
            for r, d, t, s in ((0, "bfloat16", 1.4, 13.0), (0, "float32", 0.25, 39.0), (1, "bfloat16", 1.5, 12.0),
                               (1, "float32", 0.5, 24.0))]
    got = summarize(pd.DataFrame(rows))["closed 4, 64/32 x8"]
    assert got["ttft_p50_s"]["bfloat16"] == {"median": pytest.approx(1.45), "min": 1.4, "max": 1.5}
    assert got["ttft_p50_s"]["float32"]["median"] == pytest.approx(0.375)
    assert got["ttft_p50_s"]["fp32_over_bf16"] == {"median": pytest.approx((0.25 / 1.4 + 0.5 / 1.5) / 2),
                                                   "min": pytest.approx(0.25 / 1.4), "max": pytest.approx(1 / 3)}
    assert got["output_tokens_per_s"]["fp32_over_bf16"] == {"median": 2.5, "min": 2.0, "max": 3.0}
    assert got["tpot_p50_s"]["fp32_over_bf16"]["median"] == 1.0


@pytest.mark.vllm
@pytest.mark.slow
def test_the_quick_run_starts_vllm_in_each_dtype():
    """tiny (an fp32 checkpoint) asked for bf16 and for fp32: vLLM's own log states each, every request of each
    load completes, and the summary has both dtypes' figures for every load."""
    frame, summary = dtype_bench(QUICK)
    assert list(frame.dtype) == ["bfloat16"] * 2 + ["float32"] * 2
    assert list(frame.vllm_dtype) == list(frame.dtype)
    assert list(frame.completed) == [p.requests for p in QUICK.loads] * 2
    for load in summary["loads"].values():
        assert load["output_tokens_per_s"]["fp32_over_bf16"]["median"] > 0
