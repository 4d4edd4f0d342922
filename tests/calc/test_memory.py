"""The KV-cache memory model: known values worked out by hand from public configs, and its properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.calc.arch import architecture_from_dims
from kvviz.calc.dtypes import KV_DTYPES, kv_dtype
from kvviz.calc.memory import (
    EXPANDED,
    bytes_per_token,
    kv_breakdown,
    kv_cache_bytes,
    paged_allocation,
    paged_bytes,
)
from kvviz.calc.presets import load_preset, preset_names

BF16 = kv_dtype("bf16")

# (preset, batch, seq_len, expected bytes, the arithmetic) -- bf16, windows applied, MLA latent.
KNOWN = [
    # The lesson's example: 32 layers, 32 KV heads, head_dim 128 (Llama-2-7B is exactly that).
    ("llama-2-7b", 16, 4096, 16 * 4096 * 32 * 2 * 32 * 128 * 2, "= 32 GiB"),
    # GQA: 8 KV heads instead of 32 cut the lesson's figure by 4.
    ("llama-3-8b", 1, 8192, 8192 * 32 * 2 * 8 * 128 * 2, "= 1 GiB"),
    ("qwen2.5-0.5b", 1, 32768, 32768 * 24 * 2 * 2 * 64 * 2, "2 KV heads of 64"),
    # Qwen3-0.6B: head_dim is 128 from the config, not hidden/heads = 1024/16 = 64.
    ("qwen3-0.6b", 1, 1000, 1000 * 28 * 2 * 8 * 128 * 2, "explicit head_dim"),
    # Mistral-7B-v0.1: every layer slides with a 4096 window, so 8192 tokens keep only 4096.
    ("mistral-7b-v0.1", 1, 8192, 4096 * 32 * 2 * 8 * 128 * 2, "window caps every layer"),
    # Gemma-2-9B: 21 sliding layers (window 4096) and 21 full ones, head_dim 256.
    ("gemma-2-9b", 1, 8192, (4096 * 21 + 8192 * 21) * 2 * 8 * 256 * 2, "half the layers capped"),
    ("gemma-2-2b", 2, 100, 2 * 100 * 26 * 2 * 4 * 256 * 2, "below the window nothing is capped"),
    # DeepSeek-V3 in a serving engine: one latent of 512 + 64 rope values per token and layer.
    ("deepseek-v3", 1, 1, 61 * (512 + 64) * 2, "latent, 70,272 B per token"),
    ("deepseek-v2-lite", 4, 1000, 4 * 1000 * 27 * (512 + 64) * 2, "latent"),
    ("gpt2", 1, 1024, 1024 * 12 * 2 * 12 * 64 * 2, "plain MHA"),
]


@pytest.mark.parametrize("name,batch,seq_len,expected,why", KNOWN)
def test_known_values(name, batch, seq_len, expected, why):
    """kv_cache_bytes matches the arithmetic done by hand from the public config."""
    got = kv_cache_bytes(load_preset(name), batch, seq_len, BF16)
    assert got == expected, f"{name}: {got:,} != {expected:,} ({why})"


def test_lesson_example_is_32_gib():
    """The lesson's estimate prints about 32 GiB for batch 16 x 4096 tokens of a 32x32x128 model."""
    arch = architecture_from_dims(layers=32, kv_heads=32, head_dim=128)
    assert kv_cache_bytes(arch, 16, 4096, BF16) == 32 * 2**30


def test_mla_expanded_is_what_transformers_keeps():
    """Expanded MLA keeps per-head keys (128 nope + 64 rope) and values (128) for all 128 heads."""
    arch = load_preset("deepseek-v3")
    assert kv_cache_bytes(arch, 1, 1, BF16, mla_mode=EXPANDED) == 61 * 128 * (192 + 128) * 2
    b = kv_breakdown(arch, 1, 10, BF16)
    assert b.mla_expanded_bytes == 10 * 61 * 128 * 320 * 2
    assert b.bytes == 10 * 61 * 576 * 2, "the headline figure must be the latent cache engines keep"
    assert "latent" in b.formula.label and "transformers" in b.mla_expanded_formula.label


def test_no_window_figure_is_labelled_and_larger():
    """With sliding layers, the figure of an engine ignoring the window is reported beside the real one."""
    b = kv_breakdown(load_preset("gemma-2-9b"), 1, 8192, BF16)
    assert b.no_window_bytes == 42 * 8192 * 2 * 8 * 256 * 2
    assert b.no_window_bytes > b.bytes
    assert "ignores the sliding window" in b.no_window_formula.label
    assert kv_breakdown(load_preset("llama-3-8b"), 1, 8192, BF16).no_window_bytes is None


@pytest.mark.parametrize("name,per_token", [
    ("qwen2.5-0.5b", 24 * 2 * 2 * 64 * 2),
    ("qwen3-0.6b", 28 * 2 * 8 * 128 * 2),
    ("deepseek-v2-lite", 27 * 576 * 2),
    ("gpt2", 12 * 2 * 12 * 64 * 2),
])
def test_bytes_per_token(name, per_token):
    """Bytes one token adds across all layers."""
    assert bytes_per_token(load_preset(name), BF16) == per_token


@pytest.mark.parametrize("dtype,per_token,constant", [
    ("fp32", 24 * 2 * 2 * 64 * 4, 0),
    ("fp16", 24 * 2 * 2 * 64 * 2, 0),
    # fp8: one byte a value, plus a K and a V fp32 scale per layer (24 x 8 bytes, once).
    ("fp8", 24 * 2 * 2 * 64 * 1, 24 * 8),
    # int8: 64 bytes of values + one group of 64 -> 4 bytes of scale and zero-point, per head vector.
    ("int8", 24 * 2 * 2 * (64 + 4), 0),
    # int4: 32 bytes of packed values + 4 bytes of scale and zero-point.
    ("int4", 24 * 2 * 2 * (32 + 4), 0),
])
def test_quantised_formats_count_their_scales(dtype, per_token, constant):
    """Qwen2.5-0.5B (24 layers, 2 KV heads of 64) in each format, scale overhead included."""
    arch = load_preset("qwen2.5-0.5b")
    d = kv_dtype(dtype)
    assert bytes_per_token(arch, d) == per_token
    assert kv_cache_bytes(arch, 3, 100, d) == 3 * 100 * per_token + constant


def test_every_format_says_its_scheme():
    """The 8- and 4-bit formats name the scheme assumed, so a reader can check the overhead."""
    for name in ("fp8", "int8", "int4"):
        assert "scale" in KV_DTYPES[name].scheme


no_window_presets = [n for n in preset_names() if not load_preset(n).n_sliding]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(no_window_presets), st.integers(1, 64), st.integers(1, 200_000), st.integers(2, 9))
def test_linear_in_batch_and_seq_len_without_windows(name, batch, seq_len, k):
    """Without windows the cache is exactly linear: k times the batch or the length is k times the bytes."""
    arch = load_preset(name)
    base = kv_cache_bytes(arch, batch, seq_len, BF16)
    assert kv_cache_bytes(arch, k * batch, seq_len, BF16) == k * base
    assert kv_cache_bytes(arch, batch, k * seq_len, BF16) == k * base
    assert base == batch * seq_len * bytes_per_token(arch, BF16)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 50_000), st.integers(1, 8))
def test_window_caps_sliding_layers(seq_len, batch):
    """A sliding layer keeps min(seq_len, window) tokens: Mistral's cache stops growing at 4096."""
    arch = load_preset("mistral-7b-v0.1")
    got = kv_cache_bytes(arch, batch, seq_len, BF16)
    assert got == batch * min(seq_len, 4096) * bytes_per_token(arch, BF16)
    assert got <= kv_cache_bytes(arch, batch, seq_len, BF16, apply_window=False)


@pytest.mark.parametrize("name", preset_names())
def test_dtype_scaling(name):
    """fp32 costs twice bf16, fp16 the same as bf16, fp8 half (plus its per-layer scales)."""
    arch = load_preset(name)
    half = kv_cache_bytes(arch, 2, 3000, BF16)
    assert kv_cache_bytes(arch, 2, 3000, kv_dtype("fp32")) == 2 * half
    assert kv_cache_bytes(arch, 2, 3000, kv_dtype("fp16")) == half
    assert kv_cache_bytes(arch, 2, 3000, kv_dtype("fp8")) == half // 2 + arch.kv_layers * 8


def _evaluate(substituted: str) -> float:
    return eval(substituted.replace("×", "*"), {"min": min})  # noqa: S307 - our own digits and operators


@pytest.mark.parametrize("name", preset_names())
@pytest.mark.parametrize("dtype", list(KV_DTYPES))
def test_formula_shows_the_arithmetic_it_did(name, dtype):
    """The substituted formula, evaluated as written, gives the reported value: the work shown is the work done."""
    b = kv_breakdown(load_preset(name), 3, 5000, kv_dtype(dtype))
    for f in (b.formula, b.per_token_formula, b.no_window_formula, b.mla_expanded_formula):
        if f is not None:
            assert _evaluate(f.substituted) == f.value, f"{f.label}: {f.substituted} != {f.value}"


def test_formula_renders_bytes_gib_and_gb_under_their_own_labels():
    """Every byte result is shown in bytes, GiB (2^30) and GB (10^9), each labelled."""
    text = kv_breakdown(load_preset("llama-2-7b"), 16, 4096, BF16).formula.text()
    assert "batch × seq_len × layers × 2 × kv_heads × head_dim × bytes_per_elem" in text
    assert "= 16 × 4096 × 32 × 2 × 32 × 128 × 2" in text
    assert "34,359,738,368 bytes" in text
    assert "32.000 GiB (2^30 bytes)" in text
    assert "34.360 GB (10^9 bytes)" in text


def test_paged_rounds_up_to_blocks():
    """17 tokens with block size 16 take 2 blocks: 15 slots of the last one stand empty."""
    arch = load_preset("llama-3-8b")
    p = paged_allocation(arch, 4, 17, BF16, block_size=16)
    per = bytes_per_token(arch, BF16)
    assert p.blocks_per_seq == 2
    assert p.allocated_bytes == 4 * 32 * per
    assert p.wasted_bytes_per_seq == 15 * per
    assert p.wasted_bytes == 4 * 15 * per
    assert p.block_bytes == 16 * per


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(preset_names()), st.integers(1, 20_000), st.sampled_from([1, 8, 16, 32, 128]))
def test_paged_waste_is_less_than_a_block_per_layer(name, seq_len, block):
    """Paging never holds less than the cache, and wastes under one block in every layer."""
    arch = load_preset(name)
    p = paged_allocation(arch, 1, seq_len, BF16, block)
    per_layer = bytes_per_token(arch, BF16) // arch.kv_layers
    assert p.exact_bytes <= p.allocated_bytes < p.exact_bytes + arch.kv_layers * block * per_layer
    assert paged_bytes(arch, 1, seq_len, BF16, 1) == p.exact_bytes


def test_paged_sliding_layers_hold_only_their_window():
    """In Gemma-2-2B at 10,000 tokens a sliding layer needs 256 blocks of 16, a full layer 625."""
    arch = load_preset("gemma-2-2b")
    per_layer = 2 * 4 * 256 * 2
    assert paged_bytes(arch, 1, 10_000, BF16, 16) == (13 * 256 * 16 + 13 * 625 * 16) * per_layer


def test_bad_batch_is_refused():
    """A batch below one is a mistake, not a zero-byte cache."""
    with pytest.raises(ValueError, match="batch"):
        kv_breakdown(load_preset("gpt2"), 0, 10, BF16)


def test_activation_bytes_of_a_prefill():
    """Llama-3-8B, 100 tokens in bf16: (2 × 14,336 + 4 × 4,096) × 2 bytes a token, one position's fp32
    logits (128,256 × 4), and with eager attention 32 heads × 100² scores × 2 bytes."""
    from kvviz.calc.memory import activation_bytes
    from kvviz.calc.presets import load_preset

    arch = load_preset("llama-3-8b")
    assert activation_bytes(arch, 100, 2) == 100 * (2 * 14_336 + 4 * 4_096) * 2 + 128_256 * 4 == 9_524_224
    assert activation_bytes(arch, 100, 2, attention_scores=True) == 9_524_224 + 32 * 100 * 100 * 2
