"""The roofline step time (kvviz/sim/roofline.py) on cases worked out by hand from the models' published configs
(/work/shared/reference/models.md: layers, hidden, heads, KV heads, head_dim, intermediate, vocab) and the
accelerators' published figures (H100 SXM: 3.35 TB/s, 989 dense bf16 TFLOP/s), not from the code's constants."""

from __future__ import annotations

import pytest

from kvviz.calc.hardware import ACCELERATORS
from kvviz.calc.presets import load_preset
from kvviz.sim.roofline import roofline_step_time
from kvviz.sim.scheduler import SchedulerConfig
from kvviz.sim.simulate import simulate
from kvviz.sim.step_time import StepContents
from kvviz.sim.workload import closed_loop

H100_BYTES_PER_S = 3.35e12
H100_FLOPS = 989e12

# Llama-3.1-8B by hand: 32 layers, hidden 4096, 32 heads, 8 KV heads of 128, MLP 14336, vocab 128256, untied.
HIDDEN, LAYERS, VOCAB = 4096, 32, 128_256
ATTENTION = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * (8 * 128)  # q, o: 4096², k, v: 4096 × 1024
MLP = 3 * HIDDEN * 14_336  # gate, up, down
LAYER_MATRICES = ATTENTION + MLP  # 218,103,808
NORMS = LAYERS * 2 * HIDDEN + HIDDEN  # two per layer and the final one
EMBEDDING = VOCAB * HIDDEN  # the input table; the untied lm_head is as large
TOTAL = 2 * EMBEDDING + LAYERS * LAYER_MATRICES + NORMS  # 8,030,261,248: "8B"
KV_TOKEN_BYTES = LAYERS * 2 * 8 * 128 * 2  # K and V of 8 heads of 128 in bf16, every layer: 131,072


@pytest.fixture(scope="module")
def llama():
    return load_preset("llama-3.1-8b")


def test_the_hand_count_is_llama_3_1_8b():
    """The hand count is the published size (8.03 B), so the cases below start from the right model."""
    assert TOTAL == 8_030_261_248


def test_a_batch_one_decode_on_an_h100_is_its_weights_over_the_bandwidth(llama):
    """One decode of one request after 1,024 tokens: read every weight once except the 128,255 input-embedding
    rows no token looks up, read 1,024 tokens' KV and write one: (15.01 GB + 0.134 GB) / 3.35 TB/s = 4.52 ms,
    memory-bound (its 15.5 GFLOP take 16 µs at 989 TFLOP/s). The brief's round figure, 16 GB / 3.35 TB/s = 4.8 ms,
    counts the unread rows too: the bound is below it."""
    model = roofline_step_time(llama, ACCELERATORS["h100-sxm"])
    weights_read = (TOTAL - (VOCAB - 1) * HIDDEN) * 2
    kv = (1024 + 1) * KV_TOKEN_BYTES
    bound = model.bound(StepContents(0, 1, 1025, ((1024, 1),)))
    assert bound.weight_bytes == pytest.approx(weights_read, rel=1e-9)
    assert bound.kv_bytes == kv
    assert bound.bound == "memory"
    assert bound.seconds == pytest.approx((weights_read + kv) / H100_BYTES_PER_S, rel=1e-9)
    assert 4.4e-3 < bound.seconds < 16.06e9 / H100_BYTES_PER_S


def test_a_long_prefill_on_an_h100_is_compute_bound(llama):
    """8,192 prompt tokens in one step: 2 × 6.98 G layer weights × 8,192 tokens, the lm_head once (only the last
    token's logits), and the causal attention: 8,192 × 8,193 / 2 pairs × 2 × 32 heads × (128 + 128) per layer, 32
    layers; 132 PFLOP... / 989 TFLOP/s = 133 ms, far above its 4.8 ms of reading."""
    model = roofline_step_time(llama, ACCELERATORS["h100-sxm"])
    n = 8192
    flops = 2 * LAYERS * LAYER_MATRICES * n + 2 * EMBEDDING + n * (n + 1) // 2 * 2 * 32 * 256 * LAYERS
    bound = model.bound(StepContents(n, 0, n, ((0, n),)))
    assert bound.flops == pytest.approx(flops, rel=1e-9)
    assert bound.bound == "compute"
    assert bound.seconds == pytest.approx(flops / H100_FLOPS, rel=1e-9)


def test_tensor_parallel_two_halves_what_a_rank_reads(llama):
    """At tp 2 a rank holds half of every matrix (vocab-parallel embedding and lm_head too), every norm whole, and
    4 of the 8 KV heads: it reads (4,015,263,744 - 262,664,192 unread embedding rows) × 2 bytes of weights and
    half the KV. (The code scales the unread rows by the rank's share of the weights: within 1e-5 of this.)"""
    model = roofline_step_time(llama, ACCELERATORS["h100-sxm"], tp=2)
    rank_params = (TOTAL - NORMS) // 2 + NORMS
    weights_read = (rank_params - (VOCAB // 2 - 1) * HIDDEN) * 2
    kv = (1024 + 1) * KV_TOKEN_BYTES // 2
    bound = model.bound(StepContents(0, 1, 1025, ((1024, 1),)))
    assert bound.weight_bytes == pytest.approx(weights_read, rel=1e-5)
    assert bound.kv_bytes == kv
    assert bound.seconds == pytest.approx((weights_read + kv) / H100_BYTES_PER_S, rel=1e-5)


def test_a_sliding_window_caps_the_kv_read():
    """Mistral-7B keeps 4,096 tokens in every layer (sliding_window 4096): a decode after 10,000 tokens reads
    4,096 tokens' KV (32 layers × 2 × 8 heads × 128 × 2 bytes each) and writes one, not 10,001."""
    model = roofline_step_time(load_preset("mistral-7b-v0.1"), ACCELERATORS["h100-sxm"])
    bound = model.bound(StepContents(0, 1, 10_001, ((10_000, 1),)))
    assert bound.kv_bytes == (4096 + 1) * 32 * 2 * 8 * 128 * 2


def test_mla_reads_its_latent_per_token():
    """DeepSeek-V2-Lite caches kv_lora_rank 512 + qk_rope 64 = 576 values a token in each of its 27 layers (bf16:
    1,152 bytes), so a decode after 1,000 tokens moves 1,001 × 27 × 1,152 bytes of KV."""
    model = roofline_step_time(load_preset("deepseek-v2-lite"), ACCELERATORS["h100-sxm"])
    assert model.bound(StepContents(0, 1, 1001, ((1000, 1),))).kv_bytes == 1001 * 27 * 576 * 2


def test_the_simulator_runs_each_step_for_its_bound(llama):
    """One request of 1,024 prompt tokens and 2 output tokens on the simulator with the roofline: its second step
    is the decode worked out above, so its TPOT is 4.52 ms, and its first step is the prefill's bound."""
    model = roofline_step_time(llama, ACCELERATORS["h100-sxm"])
    result = simulate(closed_loop(1, 1, 1024, 2), SchedulerConfig(num_blocks=1000, block_size=16,
                                                                  max_num_batched_tokens=8192), model)
    decode = ((TOTAL - (VOCAB - 1) * HIDDEN) * 2 + 1025 * KV_TOKEN_BYTES) / H100_BYTES_PER_S
    assert result.records[0].tpot_s == pytest.approx(decode, rel=1e-9)
    assert result.trace[0].duration_s == pytest.approx(model.seconds(StepContents(1024, 0, 1024, ((0, 1024),))))


def test_a_step_without_its_spans_is_refused(llama):
    """Sums alone cannot say whose context a window caps: a step of 8 decodes given without spans is refused."""
    model = roofline_step_time(llama, ACCELERATORS["h100-sxm"])
    with pytest.raises(ValueError, match="span"):
        model.seconds(StepContents(0, 8, 8000))
