"""Capacity on an accelerator and the roofline lower bounds, against hand arithmetic."""

from __future__ import annotations

import pytest

from kvviz.base.units import GIB
from kvviz.calc.arch import architecture_from_dict
from kvviz.calc.capacity import NO_CONTEXT_LIMIT, capacity
from kvviz.calc.dtypes import kv_dtype, weight_dtype
from kvviz.calc.hardware import ACCELERATORS, get_accelerator, measure_cpu
from kvviz.calc.memory import paged_bytes
from kvviz.calc.params import count_params, weight_bytes
from kvviz.calc.presets import load_preset
from kvviz.calc.roofline import causal_pairs, decode_estimate, prefill_estimate

BF16 = kv_dtype("bf16")
H100 = ACCELERATORS["h100-sxm"]


def _llama3():
    arch = load_preset("llama-3-8b")
    return arch, count_params(arch)


def test_capacity_llama3_on_h100():
    """80e9 × 0.9 − 16,060,522,496 (weights) − 1 GiB = 54,865,735,680 B for the cache (128 KiB a token)."""
    arch, c = _llama3()
    weights = weight_bytes(c, weight_dtype("bf16"))
    assert weights == 16_060_522_496
    cap = capacity(arch, H100, BF16, weights, batch=64, seq_len=8192)
    assert cap.kv_budget_bytes == 54_865_735_680
    assert cap.token_slots == 54_865_735_680 // (16 * 131072) * 16 == 418_592
    assert cap.max_batch == 51  # 54,865,735,680 // (8192 × 131,072)
    # batch 64: ⌈s/16⌉ ≤ 54,865,735,680 / (64 × 16 × 131,072) = 408.8 blocks, so s ≤ 408 × 16
    assert cap.max_seq_len == 6528 and not cap.seq_len_capped
    assert cap.fits is False


def test_capacity_is_tight():
    """The largest batch fits and one more does not; likewise the longest sequence."""
    arch, c = _llama3()
    w = weight_bytes(c, weight_dtype("bf16"))
    for accel in ACCELERATORS.values():
        cap = capacity(arch, accel, BF16, w, batch=3, seq_len=3000)
        if cap.kv_budget_bytes == 0:
            continue
        assert paged_bytes(arch, cap.max_batch, 3000, BF16, 16) <= cap.kv_budget_bytes
        assert paged_bytes(arch, cap.max_batch + 1, 3000, BF16, 16) > cap.kv_budget_bytes
        if not cap.seq_len_capped:
            assert paged_bytes(arch, 3, cap.max_seq_len, BF16, 16) <= cap.kv_budget_bytes
            assert paged_bytes(arch, 3, cap.max_seq_len + 1, BF16, 16) > cap.kv_budget_bytes


def test_capacity_capped_by_context():
    """A small model on a big GPU is bounded by its context length, and says so."""
    arch = load_preset("qwen2.5-0.5b")
    cap = capacity(arch, ACCELERATORS["h200"], BF16, 10**9, batch=1, seq_len=100)
    assert cap.max_seq_len == 32768 and cap.seq_len_capped


def test_weights_that_do_not_fit_leave_no_budget():
    """DeepSeek-V3's 1.34 TB of bf16 weights leave nothing for a cache on one 80 GB GPU."""
    arch = load_preset("deepseek-v3")
    w = weight_bytes(count_params(arch), weight_dtype("bf16"))
    cap = capacity(arch, H100, BF16, w, batch=1, seq_len=1000)
    assert (cap.kv_budget_bytes, cap.max_batch, cap.token_slots, cap.fits) == (0, 0, 0, False)


def test_decode_lower_bound_llama3():
    """Batch 1 at 1024 cached tokens: bytes = 15,009,857,536 weights (all but 128,255 unread embedding
    rows) + 134,217,728 KV read + 131,072 written; FLOPs = 2 × 7,504,658,432 + 32 × 1025 × 2 × 32 × 256."""
    arch, c = _llama3()
    d = decode_estimate(arch, c, H100, weight_dtype("bf16"), BF16, batch=1, context_len=1024)
    assert d.bytes == 15_009_857_536 + 134_217_728 + 131_072
    assert d.flops == 2 * 7_504_658_432 + 32 * 1025 * 2 * 32 * 256
    assert d.bound == "memory"
    assert d.lower_bound_s == pytest.approx(d.bytes / 3.35e12)
    assert d.intensity < H100.ridge_point


def test_prefill_is_compute_bound_and_decode_is_not():
    """A 4096-token prompt lands right of the ridge point; one decode step far left of it."""
    arch, c = _llama3()
    p = prefill_estimate(arch, c, H100, weight_dtype("bf16"), BF16, batch=1, prompt_len=4096)
    d = decode_estimate(arch, c, H100, weight_dtype("bf16"), BF16, batch=1, context_len=4096)
    assert p.bound == "compute" and d.bound == "memory"
    assert p.intensity > H100.ridge_point > d.intensity
    assert p.lower_bound_s == max(p.compute_s, p.memory_s)
    head = 128256 * 4096  # logits for the last prompt token only
    assert p.flops == 2 * (c.matmul_per_token - head) * 4096 + 2 * head + 32 * (4096 * 4097 // 2) * 2 * 32 * 256


@pytest.mark.parametrize("seq_len,window", [(1, None), (10, None), (10, 4), (4, 4), (3, 4), (1000, 37)])
def testcausal_pairs(seq_len, window):
    """Closed form of Σ_i min(i, window) equals the sum done the long way."""
    assert causal_pairs(seq_len, window) == sum(min(i, window or i) for i in range(1, seq_len + 1))


def test_every_estimate_is_labelled_a_lower_bound():
    """Each phase shows its formulas and calls its time a lower bound."""
    arch, c = _llama3()
    p = prefill_estimate(arch, c, H100, weight_dtype("bf16"), BF16, 1, 100)
    assert any("lower bound" in f.label for f in p.formulas)


def test_t4_defaults_to_fp16():
    """T4 has no bf16: its default format is fp16."""
    assert ACCELERATORS["t4"].default_dtype == "fp16"
    assert ACCELERATORS["h100-sxm"].memory_bytes == 80 * 10**9


def test_cpu_is_measured():
    """The CPU preset is measured on the spot (small sizes here) and says so."""
    cpu = measure_cpu(matvec_mib=16, matmul_n=256, repeats=2)
    assert cpu.measured and "measured" in cpu.note
    assert cpu.bandwidth > 1e8 and cpu.peak_flops > 1e8 and cpu.memory_bytes > GIB


def test_unknown_accelerator():
    """An unknown accelerator is refused with the list of choices."""
    with pytest.raises(ValueError, match="h100-sxm"):
        get_accelerator("tpu-v9")


def test_a_pure_mamba_model_is_bounded_by_its_state_per_sequence():
    """MambaConfig's defaults (32 layers, inner 1536, d_state 16, conv 4) keep no per-token KV: no token slots, any
    length fits, and a sequence costs its state, 32 × (1536 × 4 × 2 + 1536 × 16 × 4) = 3,538,944 bytes in bf16.
    On 80 GB × 0.9 with no weights or reserve: 72e9 // 3,538,944 = 20,345 sequences (20,346 would need
    72,003,354,624 bytes)."""
    arch = architecture_from_dict({"model_type": "mamba"})
    cap = capacity(arch, get_accelerator("h100-sxm"), kv_dtype("bf16"), weights_bytes=0, batch=1, seq_len=100_000,
                   mem_util=0.9, reserve_bytes=0)
    assert arch.kv_layers == 0 and cap.token_slots == 0
    assert cap.max_batch == 20_345
    assert cap.max_seq_len == (arch.max_position_embeddings or NO_CONTEXT_LIMIT) and cap.fits
