"""Parameter count and weight bytes, checked against the real models transformers builds."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from kvviz.calc.arch import architecture_from_dict
from kvviz.calc.dtypes import weight_dtype
from kvviz.calc.params import count_params, experts_touched, weight_bytes, weight_bytes_read_per_step
from kvviz.calc.presets import PRESET_DIR, load_preset, preset_names


def _meta_model_params(raw: dict) -> int:
    raw = dict(raw)
    config = AutoConfig.for_model(raw.pop("model_type"), **raw)
    with torch.device("meta"):  # shapes only: even DeepSeek-V3 costs no memory
        model = AutoModelForCausalLM.from_config(config)
    model.tie_weights()  # transformers 5.0 left tied embeddings untied on the meta device
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", preset_names())
def test_count_matches_transformers_on_meta_device(name):
    """The formula counts exactly the parameters transformers instantiates for every preset."""
    raw = json.loads((PRESET_DIR / f"{name}.json").read_text())
    assert count_params(load_preset(name)).total == _meta_model_params(raw)


@pytest.mark.parametrize("raw", [
    # Mixtral-style experts (no shared experts, no dense layers), small.
    {"model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
     "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "num_local_experts": 4,
     "num_experts_per_tok": 2},
    # Llama with biases everywhere and untied embeddings.
    {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
     "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 300, "attention_bias": True,
     "mlp_bias": True, "tie_word_embeddings": False},
    # DeepSeek-V3 shape with q compression, shrunk.
    {"model_type": "deepseek_v3", "num_hidden_layers": 3, "hidden_size": 64, "intermediate_size": 96,
     "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 300,
     "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
     "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16,
     "n_group": 2, "topk_group": 1},
    # Fewer layers than first_k_dense_replace (the calculator's layers slider can do this): all dense, no MoE.
    {"model_type": "deepseek_v3", "num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 96,
     "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 300,
     "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 3,
     "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16,
     "n_group": 2, "topk_group": 1},
])
def test_count_matches_transformers_for_other_shapes(raw):
    """Mixtral experts, biased projections and compressed-q MLA are counted exactly too."""
    assert count_params(architecture_from_dict(raw)).total == _meta_model_params(raw)


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
