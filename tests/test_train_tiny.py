"""The training script end to end in quick mode, and its restart from a checkpoint."""

from __future__ import annotations

import json

from kvviz import train_tiny
from kvviz.engine.loading import load_model
from kvviz.engine.loop import run_to_end
from kvviz.engine.request import GenerationRequest


def test_quick_training_writes_a_loadable_model(tmp_path):
    """--quick builds tokenizer and model from the committed sample and writes a folder kvviz loads like a hub model."""
    out = tmp_path / "model"
    assert train_tiny.main(["--quick", "--out", str(out), "--work", str(tmp_path / "work")]) == 0
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json", "loss.csv",
                 "samples.md", "metrics.json"):
        assert (out / name).is_file(), name
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "the loss curve must be a real PNG"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == train_tiny.QUICK.steps
    assert 0 < metrics["val_loss"] < 7, "a few steps must already beat the uniform guess (ln 400 = 6.0 + margin)"
    lm = load_model(str(out))
    assert lm.tokenizer.chat_template and lm.arch.num_kv_heads < lm.arch.num_heads
    _, fin = run_to_end(lm, GenerationRequest("缓存", max_new_tokens=8))
    assert fin.summary.new_tokens >= 1
    assert "## 缓存" in (out / "samples.md").read_text(encoding="utf-8")


def test_training_resumes_where_it_stopped(tmp_path):
    """A run stopped by its time budget and resumed ends exactly where an uninterrupted run ends."""
    whole = tmp_path / "whole"
    train_tiny.main(["--quick", "--out", str(whole), "--work", str(tmp_path / "w1")])
    cut = tmp_path / "cut"
    train_tiny.main(["--quick", "--out", str(cut), "--work", str(tmp_path / "w2"), "--max-minutes", "0.000001"])
    assert json.loads((cut / "metrics.json").read_text())["steps"] < train_tiny.QUICK.steps
    train_tiny.main(["--quick", "--out", str(cut), "--work", str(tmp_path / "w2"), "--resume"])
    a = json.loads((whole / "metrics.json").read_text())
    b = json.loads((cut / "metrics.json").read_text())
    assert b["steps"] == a["steps"] == train_tiny.QUICK.steps
    assert b["val_loss"] == a["val_loss"], "resuming must continue the same seeded run"
    assert (whole / "loss.csv").read_text() == (cut / "loss.csv").read_text()


def test_reference_text_paragraphs():
    """The Debian Reference's text edition: tables and headings go, wrapped lines join (no space in Chinese)."""
    text = "1.2. Heading\n\nThe cache keeps keys\nand values.\n\n|---+---|\n|a |b |\n\n缓存用显存\n换速度。\n"
    assert train_tiny.reference_paragraphs(text) == ["The cache keeps keys and values.", "缓存用显存换速度。"]
