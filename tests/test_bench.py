"""The benchmark harness runs end to end on a tiny model and records what it measured."""

from __future__ import annotations

import json

from kvviz import bench
from kvviz.loading import load_model


def test_overhead_variants_produce_the_same_token_count(tiny_models):
    """kvviz's loop, model.generate and the plain loop each make exactly the asked number of tokens."""
    lm = load_model(str(tiny_models["llama"]))
    frame = bench.overhead(lm, "The KV cache", new_tokens=5, repeats=2)
    assert sorted(frame["variant"].unique()) == ["generate", "kvviz", "plain"]
    assert len(frame) == 6 and (frame["new_tokens"] == 5).all()
    summary = bench.summarize_overhead(frame)
    assert summary["kvviz_vs_generate"] > 0 and summary["repeats"] == 2


def test_overhead_cli_writes_results(tiny_models, tmp_path):
    """`python -m kvviz.bench overhead` writes a CSV of every run and a JSON with the machine and command."""
    assert bench.main(["overhead", "--models", f"{tiny_models['qwen2']}@fp32", "--new-tokens", "3",
                       "--repeats", "1", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "overhead.json").read_text())
    assert "torch" in saved["machine"] and saved["command"].startswith("python -m kvviz.bench overhead")
    assert (tmp_path / "overhead.csv").read_text().count("\n") == 4  # header + 3 variants


def test_payoff_fits_flat_and_growing_steps(tiny_models):
    """Cached steps stay flat and uncached ones grow; the fit reports both, and the totals' shapes."""
    lm = load_model(str(tiny_models["qwen2"]))
    # 150 tokens: over 40 the uncached growth on a model this small is within the timing noise
    rows, prediction = bench.payoff(lm, "The KV cache", new_tokens=150)
    fit = bench.fit_payoff(rows, prediction)
    assert fit["cached"]["new_tokens"] == fit["uncached"]["new_tokens"] == 150
    assert fit["uncached"]["step_growth_ms_per_100_tokens"] > fit["cached"]["step_growth_ms_per_100_tokens"]
    assert fit["uncached_over_cached_total"] > 1
    for mode in ("cached", "uncached"):
        assert 0 < fit[mode]["roofline_scale"] and fit[mode]["roofline_shape_error"] >= 0
        assert fit[mode]["total_r2_quadratic"] >= fit[mode]["total_r2_linear"] - 1e-9


def test_payoff_quick_cli(tmp_path):
    """`python -m kvviz.bench payoff --quick` runs on the bundled model and writes its results."""
    assert bench.main(["payoff", "--quick", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "payoff-quick.json").read_text())
    assert saved["results"]["short"]["cached"]["new_tokens"] == 32


def test_hardware_quick_cli(tmp_path):
    """`python -m kvviz.bench hardware --quick` measures the CPU and places the bundled model under it."""
    assert bench.main(["hardware", "--quick", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "hardware-quick.json").read_text())["results"]
    assert saved["measured"]["bandwidth_gb_s"] > 0 and saved["measured"]["peak_gflop_s"] > 0
    tiny = saved["models"]["tiny"]
    assert 0 < tiny["decode_bandwidth_utilisation"] and 0 < tiny["prefill_utilisation"]
    assert tiny["decode_tokens_per_s"] < tiny["decode_tokens_per_s_ceiling"] * 1.5
