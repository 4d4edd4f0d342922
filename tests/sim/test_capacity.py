"""The simulated KV capacity from kvviz's memory model, against what vLLM's CPU build logged on this machine."""

from __future__ import annotations

import json
import shutil

import pytest

from kvviz.base.errors import InputError
from kvviz.sim.capacity import kv_groups, kv_pool
from kvviz.sim.scheduler import FULL_ATTENTION, SLIDING, KvGroupSpec
from tests.helpers import REPO

pytestmark = pytest.mark.usefixtures("vllm_auto_dtype")  # the figures by hand are in bf16, vLLM's own choice


def test_tiny_in_one_gib_is_the_pool_vllm_logged():
    """vLLM 0.32's CPU build logged "CPU KV cache size: 1,048,576 tokens" for tiny in 1 GiB
    (/work/shared/reference/serving.md: 4 layers × 2 × 2 KV heads × 32 × 2 bytes = 1,024 bytes a token), in blocks
    of 128 tokens: 1,048,576 / 128 = 8,192 blocks; half the space, half the blocks."""
    assert kv_pool(REPO / "assets" / "tiny", 1, 128, 1024).num_blocks == 8192
    assert kv_pool(REPO / "assets" / "tiny", 0.5, 128, 1024).num_blocks == 4096
    assert kv_pool(REPO / "assets" / "tiny", 1, 128, 1024).groups == FULL_ATTENTION


def test_tiny_in_fp32_is_half_the_pool(vllm_fp32):
    """Where kvviz asks vLLM's CPU build for fp32 (a CPU without bf16 instructions): 4 layers × 2 × 2 KV heads ×
    32 × 4 bytes = 2,048 bytes a token, 1 GiB / 2,048 = 524,288 tokens, 4,096 blocks of 128."""
    assert kv_pool(REPO / "assets" / "tiny", 1, 128, 1024).num_blocks == 4096


def test_gemma_2_is_a_full_and_a_sliding_group(tmp_path):
    """Gemma 2 2B: 26 layers alternating sliding-window (4,096 tokens, layer 0 first) and full attention, 13 of
    each: two groups of 13 layers, sliding first as vLLM orders them by first appearance. One block is a page of
    128 tokens for 13 layers, 4 KV heads × 256 × 2 (K, V) × 2 bytes (bf16: vLLM CPU runs an fp32 checkpoint in bf16) =
    4,096 bytes a token and layer: 13 × 128 × 4,096 = 6,815,744 bytes; 1 GiB holds 157 of them."""
    shutil.copy(REPO / "assets" / "presets" / "gemma-2-2b.json", tmp_path / "config.json")
    pool = kv_pool(tmp_path, 1, 128, 1024)
    assert pool.groups == (KvGroupSpec(SLIDING, 4096), KvGroupSpec())
    assert pool.num_blocks == 1024**3 // (13 * 128 * 4096) == 157
    assert kv_groups(tmp_path) == pool.groups


def test_a_model_with_chunked_local_layers_is_refused_unless_its_blocks_are_given(tmp_path):
    """Llama 4's chunked local attention is a kind of group the scheduler does not keep: refused for a pool made
    from the model; with the blocks given, counted as full attention, as the refusal says."""
    shutil.copy(REPO / "assets" / "presets" / "llama-4-scout.json", tmp_path / "config.json")
    with pytest.raises(InputError) as caught:
        kv_pool(tmp_path, 1, 128, 1024)
    assert caught.value.key == "sim.local_layers" and "chunked" in str(caught.value)
    assert kv_groups(tmp_path, lenient=True) == FULL_ATTENTION


def test_not_a_model_folder(tmp_path):
    with pytest.raises(InputError, match="is not a model folder"):
        kv_pool(tmp_path, 1, 128, 1024)


def test_a_space_too_small_for_one_block_is_refused():
    """One block of tiny is 128 × 1,024 bytes = 128 KiB; 64 KiB (1/16,384 GiB) holds none."""
    with pytest.raises(InputError) as caught:
        kv_pool(REPO / "assets" / "tiny", 1 / 16384, 128, 1024)
    assert caught.value.key == "sim.no_blocks"


def test_tiny_sliding_in_one_gib_is_the_pool_vllm_reported():
    """vLLM 0.32's CPU build served assets/tiny-sliding in 1 GiB with 32,768 blocks of 128 (its /metrics, kept in
    results/simulator/epyc-2026-12-03-groups/simulator.json): six groups of one layer, a block one layer's page,
    128 × 2 KV heads × 32 × 2 (K, V) × 2 bytes (bf16) = 32 KiB; 1 GiB / 32 KiB = 32,768."""
    served = json.loads((REPO / "results" / "simulator" / "epyc-2026-12-03-groups" / "simulator.json").read_text())
    engine = served["results"]["calibration"]["tiny-sliding"]["engine"]
    assert (engine["kv_space_gib"], engine["block_size"]) == (1, 128)
    pool = kv_pool(REPO / "assets" / "tiny-sliding", 1, 128, engine["max_model_len"])
    assert pool.num_blocks == engine["num_blocks"] == 32768
    assert pool.groups == (KvGroupSpec(SLIDING, 256),) * 5 + (KvGroupSpec(),)
