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
