"""`python -m kvviz memory --config` on the families issue 15 named, each answer derived by hand from the
published config (assets/presets/, sources in its README), not from kvviz's formulas."""

from __future__ import annotations

import json

import pytest

from kvviz.calc.presets import PRESET_DIR
from kvviz.cli import main

# name: (seq_len, KV bytes at batch 1 in bf16, state bytes at batch 1 in bf16), each worked out below.
HAND = {
    # Llama-4-Scout: 48 layers, 8 KV heads × 128; every 4th layer full, the other 36 chunked (chunk 8192).
    # Per token and layer 2 × 8 × 128 × 2 = 4,096 B. At 16,384 tokens: 12 × 16,384 × 4,096 + 36 × 8,192 × 4,096.
    "llama-4-scout": (16_384, 12 * 16_384 * 4_096 + 36 * 8_192 * 4_096, 0),
    # Gemma-3-27B (text_config): 62 layers, 16 KV heads × 128 = 8,192 B per token and layer; 10 full, 52 sliding
    # (window 1024). At 4,096 tokens: 10 × 4,096 × 8,192 + 52 × 1,024 × 8,192.
    "gemma-3-27b": (4_096, 10 * 4_096 * 8_192 + 52 * 1_024 * 8_192, 0),
    # Falcon-7B: multi_query, so 1 KV head × 64: 2 × 64 × 2 = 256 B per token and layer, 32 layers.
    "falcon-7b": (4_096, 32 * 4_096 * 256, 0),
    # gpt-oss-20b: 24 layers alternating sliding (window 128) and full, 8 KV heads × 64 = 2,048 B per token and layer.
    "gpt-oss-20b": (4_096, 12 * 4_096 * 2_048 + 12 * 128 * 2_048, 0),
    # Qwen3-Next-80B-A3B: 12 full layers of 2 KV heads × 256 = 2,048 B per token and layer; 36 gated-DeltaNet
    # layers keep conv (2 × 16 × 128 + 32 × 128 = 8,192 channels × kernel 4) + memory (32 × 128 × 128) values.
    # The convolution window is kept in bf16 (2 bytes), the recurrent memory in fp32 (4 bytes), as transformers does.
    "qwen3-next-80b-a3b": (4_096, 12 * 4_096 * 2_048, 36 * (8_192 * 4 * 2 + 32 * 128 * 128 * 4)),
    # Jamba-1.5-Mini: 4 attention layers of 8 KV heads × 128 = 4,096 B per token and layer; 28 Mamba layers keep
    # conv (inner 2 × 4096 = 8,192 channels × 4) + SSM (8,192 × d_state 16) values.
    "jamba-1.5-mini": (4_096, 4 * 4_096 * 4_096, 28 * (8_192 * 4 * 2 + 8_192 * 16 * 4)),
    # Qwen3-30B-A3B: 48 layers of 4 KV heads × 128 = 2,048 B per token and layer.
    "qwen3-30b-a3b": (4_096, 48 * 4_096 * 2_048, 0),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_memory_from_config_matches_hand_derivation(name, capsys):
    """The CLI's KV bytes and state bytes for a real config equal the hand-derived figures."""
    seq_len, kv, state = HAND[name]
    path = PRESET_DIR / f"{name}.json"
    assert main(["memory", "--config", str(path), "--seq-len", str(seq_len), "--kv-dtype", "bf16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_cache_bytes"] == kv, "per-token KV: wrong layer kinds, window/chunk, or KV heads"
    got_state = out["state"]["bytes"] if out["state"] else 0
    assert got_state == state, "fixed-size state of linear/Mamba layers"


# Published totals (the model cards): parameters as transformers builds them on the meta device.
PUBLISHED = {
    "qwen3-30b-a3b": (30.5e9, 3.3e9),  # Qwen3 blog/model card: 30.5B total, 3.3B activated
    "gpt-oss-20b": (20.91e9, None),  # OpenAI gpt-oss model card: 20.91B total
    "gpt-oss-120b": (116.83e9, None),  # OpenAI gpt-oss model card: 116.83B total
    "mixtral-8x7b": (46.7e9, 12.9e9),  # Mistral AI: 46.7B total, 12.9B used per token
    "llama-3.2-1b": (1.23e9, None),  # Meta model card: 1.23B
    "llama-3.2-3b": (3.21e9, None),  # Meta model card: 3.21B
    "jamba-1.5-mini": (51.6e9, 12e9),  # AI21: 52B total (51.6B), 12B active
    # Meta's 109B for Llama-4-Scout includes its vision encoder; transformers registers the text model as the
    # causal LM (107.8B), which is what kvviz counts.
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_totals_match_the_published_figures(name, capsys):
    """Total (and active, for MoE) parameters agree with the publishers' figures to their stated precision."""
    total, active = PUBLISHED[name]
    assert main(["memory", "--config", str(PRESET_DIR / f"{name}.json"), "--json"]) == 0
    weights = json.loads(capsys.readouterr().out)["weights"]
    assert weights["params"] == pytest.approx(total, rel=0.01)
    if active is not None:
        assert weights["active_params_per_token"] == pytest.approx(active, rel=0.05)
