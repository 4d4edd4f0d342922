"""Capacity truth: the KV capacity vLLM reports for a given KV space against kvviz's token slots.

kvviz's own figure is kvviz.calc.capacity.token_slots: whole blocks of block_size tokens, each block
block_size × bytes_per_token bytes, in the budget, every layer keeping every token. vLLM (v1, 0.32) counts the
same way for models whose layers all keep every token; where it differs, this module models it:
- the cache's element type is the type vLLM runs the model in (its CPU build runs an fp32 checkpoint, or a
  config that names no type, in bf16, and fp16 or bf16 as they are);
- the block size is the server's (128 on the CPU build, 16 on most GPU backends);
- the size its start-up log prints is max_concurrency × max_model_len, max_concurrency = num_blocks / the
  blocks one request of max_model_len holds (⌈max_model_len / block_size⌉ in a full-attention group), which
  equals the pool only when max_model_len is a multiple of the block size;
- per-layer groups: a model with full and sliding-window layers in equal numbers (Gemma 2) gets one group of
  each; a block then holds block_size tokens of one group's layers (so the pool has twice the blocks), and a
  request holds ⌈min(window - 1 + in-flight tokens, max_model_len) / block_size⌉ + 1 blocks of the sliding
  group, in-flight tokens being vLLM's max_num_batched_tokens (2,048 for its CPU server). Other mixes (5
  sliding to 1 full...) are padded into groups by rules not modelled here: their rows say so.
Knows the arithmetic of both and how to ask a running vLLM; starting one is vllm.py's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.units import GIB
from kvviz.calc.arch import Architecture, architecture_from_source
from kvviz.calc.capacity import token_slots
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.memory import bytes_per_token, layer_groups, token_layer_bytes

TORCH_TO_KV = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


def attention_shape(arch: Architecture) -> str:
    """MHA (KV heads = query heads), GQA (fewer KV heads), with "explicit head_dim" where the config sets a
    head width other than hidden / heads."""
    shape = "MHA" if arch.num_kv_heads == arch.num_heads else f"GQA {arch.num_heads}/{arch.num_kv_heads}"
    if arch.hidden_size and arch.head_dim * arch.num_heads != arch.hidden_size:
        shape += f", explicit head_dim {arch.head_dim}"
    return shape


def vllm_cpu_dtype(model_dir: str | Path) -> str:
    """The type vLLM's CPU build runs a model folder in (dtype "auto"): the config's 16-bit type, else bf16
    (an fp32 checkpoint, or a config that names none, as gpt2's)."""
    raw = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    named = str(raw.get("dtype") or raw.get("torch_dtype") or "float32")
    return TORCH_TO_KV.get(named, "bf16") if named in ("float16", "bfloat16") else "bf16"


def logged_tokens(num_blocks: int, block_size: int, max_model_len: int, blocks_per_request: int | None = None) -> int:
    """The "KV cache size: N tokens" vLLM logs: max_concurrency × max_model_len, where a request of
    max_model_len takes blocks_per_request blocks (default ⌈max_model_len / block_size⌉: one full group)."""
    per_request = blocks_per_request or math.ceil(max_model_len / block_size)
    return int(num_blocks / per_request * max_model_len)


VLLM_CPU_BATCHED_TOKENS = 2048  # vLLM's max_num_batched_tokens for its OpenAI server on a CPU


@dataclass(frozen=True)
class VllmPool:
    """vLLM's block pool for a model as modelled here: blocks, the blocks a request of max_model_len holds,
    and the size its log prints; None for a mix of layers whose grouping is not modelled."""

    num_blocks: int
    blocks_per_request: int
    logged_tokens: int


def vllm_pool(arch: Architecture, dtype, budget_bytes: int, block_size: int, max_model_len: int,
              batched_tokens: int = VLLM_CPU_BATCHED_TOKENS) -> VllmPool | None:
    """vLLM's pool for `arch` in `budget_bytes`: one group of all layers, or one full and one sliding group of
    equal size (Gemma 2); None for other mixes."""
    groups = layer_groups(arch)
    if len(groups) > 1 and len({g.count for g in groups}) > 1:
        return None
    per_group_block = groups[0].count * block_size * token_layer_bytes(arch, dtype)
    num_blocks = budget_bytes // per_group_block
    per_request = sum(
        math.ceil(max_model_len / block_size) if g.window is None
        else math.ceil(min(g.window - 1 + batched_tokens, max_model_len) / block_size) + 1
        for g in groups)
    return VllmPool(num_blocks, per_request, logged_tokens(num_blocks, block_size, max_model_len, per_request))


@dataclass(frozen=True)
class CapacityRow:
    """One model's capacity, measured on vLLM and computed by kvviz, in tokens (bytes where it says)."""

    model: str
    attention: str
    kv_space_gib: int
    dtype: str  # kvviz's prediction of the type vLLM runs the model in
    vllm_dtype: str  # the type vLLM's log states
    bytes_per_token: int
    block_size: int
    max_model_len: int
    kvviz_token_slots: int  # kvviz.calc's slots, every layer keeping every token
    modelled_pool_tokens: int | None  # vLLM's pool (blocks × block_size) as modelled here
    vllm_pool_tokens: int
    kvviz_logged_tokens: int | None  # vLLM's logged size as modelled here
    vllm_logged_tokens: int | None
    layer_groups: str  # "all full", or the groups vLLM forms

    @property
    def agree(self) -> bool:
        """The modelled pool, logged size and type are vLLM's."""
        return self.modelled_pool_tokens == self.vllm_pool_tokens and self.dtype == self.vllm_dtype and \
            self.vllm_logged_tokens in (None, self.kvviz_logged_tokens)


def capacity_row(model: str, model_dir, kv_space_gib: int, torch_dtype: str, block_size: int, max_model_len: int,
                 vllm_num_blocks: int, vllm_logged: int | None) -> CapacityRow:
    """kvviz's figures for the model in `model_dir` (in the type kvviz predicts vLLM runs it in) beside what the
    server reported (torch_dtype: the type its log states)."""
    arch = architecture_from_source(model_dir)
    dtype = kv_dtype(vllm_cpu_dtype(model_dir))
    pool = vllm_pool(arch, dtype, kv_space_gib * GIB, block_size, max_model_len)
    groups = layer_groups(arch)
    return CapacityRow(
        model=model, attention=attention_shape(arch), kv_space_gib=kv_space_gib, dtype=dtype.name,
        vllm_dtype=TORCH_TO_KV.get(torch_dtype, torch_dtype),
        bytes_per_token=bytes_per_token(arch, dtype), block_size=block_size, max_model_len=max_model_len,
        kvviz_token_slots=token_slots(arch, dtype, kv_space_gib * GIB, block_size),
        modelled_pool_tokens=pool.num_blocks * block_size if pool else None,
        vllm_pool_tokens=vllm_num_blocks * block_size,
        kvviz_logged_tokens=pool.logged_tokens if pool else None, vllm_logged_tokens=vllm_logged,
        layer_groups=" + ".join(f"{g.count} {g.kind}" + (f" (window {g.window})" if g.window else "")
                                for g in groups))


def server_cache_config(base_url: str):
    """The running server's cache config from its /metrics (vllm:cache_config_info)."""
    import httpx

    from kvviz.serving.metrics_reader import cache_config, parse
    from kvviz.serving.vllm import VllmError

    found = cache_config(parse(httpx.get(base_url + "/metrics", timeout=10.0).text))
    if found is None:
        raise VllmError(f"{base_url}/metrics has no vllm:cache_config_info with num_gpu_blocks")
    return found


def measure(model: str, kv_space_gib: int = 1, max_model_len: int = 1024, port: int = 8011,
            dummy_weights: bool = False) -> CapacityRow:
    """Start vLLM for `model` (tiny, random:<preset>[@layers], a folder; with dummy_weights, random weights)
    with `kv_space_gib` of KV space, read its capacity (metrics and log), stop it, and set kvviz's figures
    beside it."""
    from kvviz.serving.models import model_folder
    from kvviz.serving.vllm import ServerSpec, running_vllm

    folder = model_folder(model, dummy_weights=dummy_weights)
    spec = ServerSpec(folder.path, folder.name, port=port, max_model_len=max_model_len, kv_space_gib=kv_space_gib,
                      dummy=folder.dummy)
    with running_vllm(spec) as server:
        cache = server_cache_config(spec.base_url)
        facts = server.facts
    return capacity_row(model, folder.path, kv_space_gib, facts.dtype or "bfloat16", cache.block_size,
                        max_model_len, cache.num_blocks, facts.kv_capacity_tokens)
