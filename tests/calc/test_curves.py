"""The calculator's sweeps agree with the memory model point for point."""

from __future__ import annotations

from kvviz.calc.curves import attention_variants, kv_vs_seq_len, seq_len_grid, window_effect
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.memory import kv_cache_bytes
from kvviz.calc.presets import load_preset

BF16 = kv_dtype("bf16")


def test_grid_spans_one_to_max():
    """The seq_len grid starts at 1, ends at the maximum and never repeats."""
    grid = seq_len_grid(8192)
    assert grid[0] == 1 and grid[-1] == 8192 and grid == sorted(set(grid))


def test_kv_vs_seq_len_matches_the_model():
    """Every point of the sweep is kv_cache_bytes at that batch and length."""
    arch = load_preset("llama-3-8b")
    frame = kv_vs_seq_len(arch, BF16, [1, 8], 8192)
    assert set(frame["batch"]) == {1, 8}
    for row in frame.sample(10, random_state=0).itertuples():
        assert row.kv_bytes == kv_cache_bytes(arch, row.batch, row.seq_len, BF16)


def test_window_effect_parts_after_the_window():
    """Gemma-2: the two curves agree up to the window (4096) and part after it."""
    frame = window_effect(load_preset("gemma-2-2b"), BF16, 1, 8192).pivot(index="seq_len", columns="variant",
                                                                          values="kv_bytes")
    applied, ignored = frame.iloc[:, 0], frame.iloc[:, 1]
    assert (applied[applied.index <= 4096] == ignored[ignored.index <= 4096]).all()
    assert applied.loc[8192] < ignored.loc[8192]


def test_attention_variants_llama3():
    """Llama-3-8B: MHA (32 KV heads) is 4x its GQA (8) and 32x MQA (1)."""
    frame = attention_variants(load_preset("llama-3-8b"), BF16, 1, 4096).set_index("attention")
    assert list(frame.index) == ["MHA", "GQA (this model)", "MQA"]
    assert frame.loc["MHA", "kv_bytes"] == 4 * frame.loc["GQA (this model)", "kv_bytes"] == \
        32 * frame.loc["MQA", "kv_bytes"]


def test_attention_variants_mla():
    """DeepSeek-V3: MLA's latent against the expanded per-head MHA cache (128 × 320 vs 576 values a layer)."""
    frame = attention_variants(load_preset("deepseek-v3"), BF16, 1, 1000).set_index("attention")
    assert frame.loc["MHA", "kv_bytes"] == 1000 * 61 * 128 * (192 + 128) * 2
    assert frame.loc["MLA (this model)", "kv_bytes"] == 1000 * 61 * 576 * 2
