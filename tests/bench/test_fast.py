"""`python -m kvviz.bench fast --quick`: every variant runs on the bundled tiny model and the results say what the
static mode measured: its compile apart, its tokens equal to the cached loop's, bandwidth by the one rule."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from kvviz.bench.cli import main as bench_main
from kvviz.bench.fast import VARIANTS


def test_fast_quick_writes_every_variant_and_the_static_compile(tmp_path):
    """The quick run writes rows for model.generate and the three modes, the static warm-up's compile apart, and a
    summary whose speedups and utilisations follow from the medians."""
    assert bench_main(["fast", "--quick", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "fast-quick.json").read_text())
    assert saved["command"].startswith("python -m kvviz.bench fast --quick")
    result = saved["results"]["models"]["tiny@fp32"]
    assert set(result["variants"]) == set(VARIANTS)
    assert result["compile_s"] > 0, "the static warm-up compiles the step"
    assert result["static_tokens_identical_to_cached"] is True, "fp32 greedy: the static mode changed the tokens"
    v = result["variants"]
    assert result["static_over_generate_decode"] == pytest.approx(
        v["static"]["decode_tokens_per_s"] / v["generate"]["decode_tokens_per_s"])
    rows = pd.read_csv(tmp_path / "fast-quick.csv")
    timed = rows[rows["repeat"] >= 0]
    assert sorted(timed["variant"]) == sorted(VARIANTS) and (timed["new_tokens"] == 8).all()
    assert (timed["compile_s"] == 0).all(), "timed static runs reuse the warm-up's compiled step"
    bw = saved["results"]["measured_bandwidth_gb_s"] * 1e9
    assert timed["bandwidth_utilisation"].to_numpy() == pytest.approx(
        (timed["bytes_per_decode_step"] * timed["decode_tokens_per_s"] / bw).to_numpy())
    static, cached = (timed[timed["variant"] == m].iloc[0] for m in ("static", "cached"))
    assert static["bytes_per_decode_step"] >= cached["bytes_per_decode_step"], "a static step reads its whole cache"
    stream = saved["results"]["stream_read_bandwidth_gb_s"] * 1e9  # each mode against the physical ceiling too
    assert v["static"]["share_of_stream_read"] == pytest.approx(v["static"]["bandwidth_utilisation"] * bw / stream)
    assert {"cpu_model", "isa", "load_average", "cpu_stream_read_gb_s"} <= set(saved["machine"])


def test_fast_figure_draws_the_quick_results(tmp_path):
    """The figures part draws fast-quick.csv beside the other parts' results."""
    from kvviz.bench.figures import write_figures

    rows = [{"model": "tiny", "dtype": "fp32", "variant": v, "repeat": r, "decode_tokens_per_s": 100.0 + i,
             "bandwidth_utilisation": 0.2 + i / 10} for i, v in enumerate(VARIANTS) for r in (-1, 0)]
    pd.DataFrame(rows).to_csv(tmp_path / "fast-quick.csv", index=False)
    written = write_figures(tmp_path, tmp_path / "figures", png=False, quick=True)
    assert tmp_path / "figures" / "fast.html" in written
