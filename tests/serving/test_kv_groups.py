"""vLLM's KV-cache groups, pool and per-request blocks (kvviz.serving.kv_groups) against figures worked out by hand
from vLLM 0.32's rules (vllm/v1/core/kv_cache_utils.py: _get_kv_cache_groups_uniform_page_size,
get_kv_cache_config_from_groups, get_max_concurrency_for_kv_cache_config; vllm/v1/kv_cache_interface.py:
max_memory_usage_bytes of each spec), the arithmetic in each docstring. Figures that vLLM itself logged on this
machine say so, with the command that made them; tests/serving/test_capacity.py starts vLLM to check three."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvviz.calc.arch import NONE
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.presets import load_preset
from kvviz.serving.kv_groups import (
    CHUNKED_HYBRID_ENV,
    KvGroup,
    NotModelled,
    group_size,
    held_blocks,
    hybrid_manager,
    kv_groups,
    logged_tokens,
    split,
    vllm_pool,
)
from kvviz.serving.metrics_reader import KvModel
from kvviz.serving.models import model_folder

GIB = 2**30
BF16 = kv_dtype("bf16")


def twin(spec: str, tmp_path):
    from kvviz.calc.arch import architecture_from_source

    return architecture_from_source(model_folder(spec, root=tmp_path).path)


@pytest.mark.parametrize(("sizes", "size"), [
    ([26], 26),  # one kind: one group of every layer
    ([5, 1], 1),  # Gemma 3's 6-layer twin: 5 ≥ 1.5 × 1, so groups of the smaller bucket's 1 layer
    ([22, 4], 4),  # Gemma 3 1B
    ([12, 12], 12),  # gpt-oss-20b
    ([12, 13], 13),  # vLLM's own example (gpt-oss-20b + EAGLE): 13 < 1.5 × 12, so pad to 13, 13
    ([2, 3], 2),  # 3 is not under 1.5 × 2 = 3: split the larger bucket
    ([36, 12], 12),  # Llama 4 Scout: 36 chunked, 12 full
])
def test_the_group_size_is_vllms(sizes, size):
    assert group_size(sizes) == size


def test_a_bucket_splits_as_vllm_deals_it():
    """22 layers in groups of 4: ⌈22/4⌉ = 6 groups of layers[i::6] = 4, 4, 4, 4, 3, 3 (2 padding layers, as
    vLLM warns: "Add 2 padding layers")."""
    assert split(22, 4) == [4, 4, 4, 4, 3, 3]
    assert split(12, 13) == [12] and split(5, 1) == [1] * 5


def test_gemma3_twin_at_1024_gives_the_figure_vllm_logged(tmp_path):
    """random:gemma-3-1b@6 (5 sliding layers of window 512, 1 full; 1 KV head of 256 in bf16: 2 × 256 × 2 =
    1,024 bytes a token and layer), 1 GiB, blocks of 128, max_model_len 1,024. Groups of 1 layer: 5 sliding + 1
    full; a block is 128 × 1,024 B = 128 KiB, so 1 GiB holds 8,192. A request holds 1,024 / 128 = 8 full
    blocks and in each sliding group ⌈min(511 + 2,048, 1,024) / 128⌉ + 1 = 9: 8 + 45 = 53. Logged:
    int(8,192 / 53 × 1,024) = 158,275, the figure vLLM logged for this twin (issue 23)."""
    pool = vllm_pool(twin("random:gemma-3-1b@6", tmp_path), BF16, GIB, 128, 1024)
    assert pool.groups.groups == (KvGroup("sliding", 512, 1),) * 5 + (KvGroup("full", None, 1),)
    assert (pool.num_blocks, pool.blocks_per_request, pool.logged_tokens) == (8192, 53, 158_275)


def test_gemma3_full_depth_pads_its_sliding_groups(tmp_path):
    """random:gemma-3-1b (22 sliding, 4 full; 1,024 bytes a token and layer), 1 GiB, blocks of 128,
    max_model_len 4,096. Groups of 4: the full layers make 1, the sliding 6 (two of 3 layers, padded). A block
    holds a page of 4 layers: 4 × 128 × 1,024 B = 512 KiB, so 2,048 blocks. A request holds 4,096 / 128 = 32
    full blocks and ⌈min(511 + 2,048, 4,096) / 128⌉ + 1 = ⌈2,559 / 128⌉ + 1 = 21 in each sliding group:
    32 + 6 × 21 = 158. Logged: int(2,048 / 158 × 4,096) = 53,092. vLLM logged 53,092 (and "Add 2 padding
    layers") with `python -m kvviz.serving capacity --models random:gemma-3-1b --max-model-len 4096`."""
    pool = vllm_pool(twin("random:gemma-3-1b", tmp_path), BF16, GIB, 128, 4096)
    assert [g.layers for g in pool.groups.groups] == [4, 4, 4, 4, 3, 3, 4]
    assert pool.groups.layers_per_group == 4
    assert (pool.num_blocks, pool.blocks_per_request, pool.logged_tokens) == (2048, 158, 53_092)


def test_gpt_oss_20b_alternates_sliding_and_full(tmp_path):
    """gpt-oss-20b, all 24 layers (12 sliding of window 128, 12 full; 8 KV heads of 64 in bf16: 2 × 8 × 64 × 2
    = 2,048 bytes a token and layer), 1 GiB, blocks of 128, max_model_len 4,096. Two groups of 12; a block is
    12 × 128 × 2,048 B = 3 MiB, so 1,024 / 3 → 341 blocks. A request holds 32 full blocks and ⌈min(127 +
    2,048, 4,096) / 128⌉ + 1 = 17 + 1 = 18 sliding ones: 50. Logged: int(341 / 50 × 4,096) = 27,934."""
    pool = vllm_pool(load_preset("gpt-oss-20b"), BF16, GIB, 128, 4096)
    assert pool.groups.groups == (KvGroup("sliding", 128, 12), KvGroup("full", None, 12))
    assert (pool.num_blocks, pool.blocks_per_request, pool.logged_tokens) == (341, 50, 27_934)


def test_llama4_scout_keeps_its_chunked_layers_apart():
    """Llama 4 Scout (36 chunked layers of chunk 8,192, 12 full; 8 KV heads of 128 in bf16: 4,096 bytes a
    token and layer), 1 GiB, blocks of 128, max_model_len 16,384. vLLM's hybrid manager is on for chunked local
    attention (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1): groups of 12, 3 chunked + 1
    full; a block is 12 × 128 × 4,096 B = 6 MiB: 1,024 / 6 → 170 blocks. A request holds 16,384 / 128 = 128
    full blocks and ⌈min(8,192 + 2,048, 16,384) / 128⌉ = 80 in each chunked group: 368. Logged:
    int(170 / 368 × 16,384) = 7,568. With the manager off every layer is full: one group of 48, blocks of 24
    MiB: 42, a request 128 of them: int(42 / 128 × 16,384) = 5,376."""
    scout = load_preset("llama-4-scout")
    pool = vllm_pool(scout, BF16, GIB, 128, 16384)
    assert pool.groups.groups == (KvGroup("chunked", 8192, 12),) * 3 + (KvGroup("full", None, 12),)
    assert (pool.num_blocks, pool.blocks_per_request, pool.logged_tokens) == (170, 368, 7_568)
    off = vllm_pool(scout, BF16, GIB, 128, 16384, hybrid=False)
    assert off.groups.promoted and off.groups.groups == (KvGroup("full", None, 48),)
    assert (off.num_blocks, off.blocks_per_request, off.logged_tokens) == (42, 128, 5_376)


def test_llama4_scouts_first_4_layers_give_the_figures_vllm_logged():
    """Scout's first 4 layers (3 chunked of 8,192, 1 full; 4,096 bytes a token and layer), 1 GiB, blocks of
    128, max_model_len 16,384. Groups of 1 (3 ≥ 1.5 × 1): 3 chunked + 1 full; a block 128 × 4,096 B = 512 KiB,
    2,048 blocks; a request 128 + 3 × 80 = 368 blocks: int(2,048 / 368 × 16,384) = 91,180. With the hybrid
    manager off: one group of 4, blocks of 2 MiB: 512, a request 128: int(512 / 128 × 16,384) = 65,536.
    vLLM logged exactly these (91,180 tokens, 2,048 blocks; 65,536, 512 blocks, "Hybrid KV cache manager is
    disabled for this hybrid model") for a folder holding the preset's text_config cut to 4 layers and 1 routed
    expert (experts keep no KV; 16 would not fit this machine), architectures ["Llama4ForCausalLM"], kvviz's twin
    tokenizer, served by kvviz.serving.vllm.running_vllm with --load-format dummy --max-model-len 16384 (then with
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0). The multimodal random:llama-4-scout twin does not
    start on the CPU build: "Model architectures ['Llama4ForConditionalGeneration'] failed to be inspected"
    (ModuleNotFoundError: No module named 'torchvision', which the CPU set-up removes)."""
    first4 = load_preset("llama-4-scout").sliced(0, 4)
    pool = vllm_pool(first4, BF16, GIB, 128, 16384)
    assert (pool.num_blocks, pool.blocks_per_request, pool.logged_tokens) == (2048, 368, 91_180)
    off = vllm_pool(first4, BF16, GIB, 128, 16384, hybrid=False)
    assert (off.num_blocks, off.blocks_per_request, off.logged_tokens) == (512, 128, 65_536)


def test_the_hybrid_manager_follows_vllms_environment_variable():
    """vLLM turns its hybrid manager off for a model with chunked local attention when the variable is 0, and
    only then: Gemma 3 keeps its sliding groups whatever the variable says."""
    scout, gemma = load_preset("llama-4-scout"), load_preset("gemma-3-1b")
    assert hybrid_manager(scout, {}) and hybrid_manager(scout, {CHUNKED_HYBRID_ENV: "1"})
    assert not hybrid_manager(scout, {CHUNKED_HYBRID_ENV: "0"})
    assert hybrid_manager(gemma, {CHUNKED_HYBRID_ENV: "0"})


def test_one_kind_of_layer_is_one_group_of_all():
    """llama-3.2-1b: 16 full layers, one group. A model whose layers all keep the same window (Mistral 7B v0.1
    as kvviz reads it: window 4,096 on all 32 layers) is one sliding group (vLLM's uniform-spec case), a request
    at 8,192 holding ⌈min(4,095 + 2,048, 8,192) / 128⌉ + 1 = 49 blocks instead of 64."""
    assert kv_groups(load_preset("llama-3.2-1b")).groups == (KvGroup("full", None, 16),)
    mistral = vllm_pool(load_preset("mistral-7b-v0.1"), BF16, GIB, 128, 8192)
    assert mistral.groups.groups == (KvGroup("sliding", 4096, 32),) and mistral.blocks_per_request == 49


def test_models_whose_grouping_is_not_modelled_say_why():
    """Mamba/linear-attention hybrids and a model with no per-token KV: a reason in words, no figure."""
    reason = vllm_pool(load_preset("qwen3-next-80b-a3b"), BF16, GIB, 128, 1024)
    assert isinstance(reason, NotModelled) and "gated DeltaNet layers keep a fixed-size state" in str(reason)
    assert isinstance(kv_groups(load_preset("jamba-1.5-mini")), NotModelled)
    llama = load_preset("llama-3.2-1b")
    nothing = replace(llama, layer_types=(NONE,) * llama.num_layers)
    assert str(kv_groups(nothing)) == "no layer keeps per-token KV, so vLLM makes no KV-cache group"


def test_logged_tokens_round_a_request_to_whole_blocks():
    """max_model_len 1,000 takes ⌈1000/128⌉ = 8 blocks: 8,192 blocks serve 1,024 such requests, logged as
    1,024 × 1,000 = 1,024,000 tokens, not the pool's 1,048,576."""
    assert logged_tokens(8192, 8, 1000) == 1_024_000
    assert logged_tokens(8192, 8, 1024) == 1_048_576


@pytest.mark.parametrize(("group", "tokens", "held"), [
    (KvGroup("full", None, 1), 1000, 8),  # ⌈1,000 / 128⌉
    (KvGroup("sliding", 512, 1), 1000, 5),  # 8 less (1,000 - 511) // 128 = 3 blocks wholly before the window
    (KvGroup("sliding", 512, 1), 400, 4),  # inside the window: nothing freed
    (KvGroup("chunked", 8192, 1), 10_000, 15),  # ⌈10,000 / 128⌉ = 79 less the first chunk's 64 blocks
])
def test_a_sequence_holds_the_blocks_of_its_window(group, tokens, held):
    assert held_blocks(group, tokens, 128) == held


def test_the_usage_prediction_counts_every_groups_blocks(tmp_path):
    """random:gemma-3-1b@6 with one sequence of 1,000 tokens: 8 blocks in the full group and 5 in each of the 5
    sliding ones (test above): 33 of the pool's 8,192 blocks less the null block."""
    kv = KvModel(twin("random:gemma-3-1b@6", tmp_path), BF16, block_size=128, num_blocks=8192)
    assert kv.usage([1000]) == pytest.approx(33 / 8191)
    assert KvModel(load_preset("qwen3-next-80b-a3b"), BF16, 128, 100).usage([10]) is None
