"""Parameter count and weight bytes, checked against hand derivations and published totals."""

from __future__ import annotations

import pytest

from kvviz.calc.arch import architecture_from_dict
from kvviz.calc.dtypes import weight_dtype
from kvviz.calc.params import count_params, experts_touched, weight_bytes, weight_bytes_read_per_step
from kvviz.calc.presets import load_preset

# Llama-2-7B by hand (32 layers, hidden 4096, MLP 11008, vocab 32000, untied, RMSNorm weights only):
# embedding 32000 × 4096; attention 32 × 4 × 4096²; MLP 32 × 3 × 4096 × 11008; norms 32 × 2 × 4096 + 4096.
LLAMA2_7B = {"embedding": 131_072_000, "attention": 2_147_483_648, "dense MLP": 4_328_521_728,
             "norms": 266_240, "lm_head": 131_072_000}


def test_components_of_llama2_by_hand():
    """Llama-2-7B's parameters by component, each derived by hand, sum to the published 6,738,415,616."""
    c = count_params(load_preset("llama-2-7b"))
    assert {x.name: x.total for x in c.components} == LLAMA2_7B
    assert c.total == 6_738_415_616 == sum(LLAMA2_7B.values())


def test_mixtral_experts_by_hand():
    """Mixtral-8x7B (MixtralConfig's defaults): 32 layers × 8 experts × 3 × 4096 × 14336 routed weights, a
    4096 × 8 router per layer, 46,702,792,704 in all; a token uses 2 of the 8 experts: 12,879,925,248."""
    c = count_params(architecture_from_dict({"model_type": "mixtral"}))
    assert c.get("routed experts").total == 32 * 8 * 3 * 4096 * 14336
    assert c.get("router").total == 32 * 4096 * 8
    assert c.total == 46_702_792_704
    assert c.active == c.total - 32 * 6 * 3 * 4096 * 14336 == 12_879_925_248


def test_moe_expert_count_under_another_name():
    """Qwen3-MoE names its expert count num_experts: a 2-layer model with 8 experts of 32 counts them all
    (8 × 3 × 64 × 32 per layer), not one dense MLP."""
    raw = {"model_type": "qwen3_moe", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
           "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "vocab_size": 300, "num_experts": 8, "num_experts_per_tok": 2}
    c = count_params(architecture_from_dict(raw))
    assert c.get("routed experts").total == 2 * 8 * 3 * 64 * 32
    assert c.moe_layers == 2


def test_published_totals():
    """Well-known totals: GPT-2 124,439,808; Llama-2-7B 6,738,415,616; Qwen2.5-0.5B 494,032,768."""
    assert count_params(load_preset("gpt2")).total == 124_439_808
    assert count_params(load_preset("llama-2-7b")).total == 6_738_415_616
    assert count_params(load_preset("qwen2.5-0.5b")).total == 494_032_768


def test_active_params_of_moe():
    """DeepSeek-V3 multiplies each token by about 37B weights of its 671B (8 of 256 experts + shared)."""
    c = count_params(load_preset("deepseek-v3"))
    assert 36e9 < c.matmul_per_token < 38e9
    assert c.total > 18 * c.matmul_per_token


def test_weight_bytes_per_format():
    """Float formats cost bits/8 a parameter; 4-bit packs matrices but keeps embeddings in bf16."""
    c = count_params(load_preset("llama-3-8b"))
    assert weight_bytes(c, weight_dtype("bf16")) == 2 * c.total
    assert weight_bytes(c, weight_dtype("fp32")) == 4 * c.total
    emb = 2 * 128256 * 4096  # embedding and untied lm_head
    packed = c.total - emb - c.get("norms").total
    int4 = weight_bytes(c, weight_dtype("int4"))
    assert int4 == packed // 2 + packed // 128 * 4 + 2 * (emb + c.get("norms").total)
    assert weight_bytes(c, weight_dtype("fp8")) == packed + 2 * (emb + c.get("norms").total)


def test_decode_reads_only_touched_experts():
    """At batch 1 DeepSeek-V3 reads 8 of 256 experts per layer; a huge batch reads nearly all."""
    arch = load_preset("deepseek-v3")
    assert experts_touched(arch, 1) == pytest.approx(8)
    assert experts_touched(arch, 10_000) == pytest.approx(256)
    c, bf16 = count_params(arch), weight_dtype("bf16")
    assert weight_bytes_read_per_step(arch, c, bf16, 1) < 0.1 * weight_bytes(c, bf16)


def test_decode_skips_unread_embedding_rows():
    """An untied embedding table is looked up, not read whole: one row per sequence in the batch."""
    arch = load_preset("llama-3-8b")
    c, bf16 = count_params(arch), weight_dtype("bf16")
    assert weight_bytes(c, bf16) - weight_bytes_read_per_step(arch, c, bf16, 1) == (128256 - 1) * 4096 * 2
