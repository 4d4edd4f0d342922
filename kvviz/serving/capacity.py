"""Capacity truth: the KV capacity vLLM reports for a given KV space against kvviz's token slots.

kvviz's figure is kvviz.calc.capacity.token_slots: whole blocks of block_size tokens, each block
block_size × bytes_per_token bytes, in the budget. vLLM (v1, 0.32) counts the same way for models whose
layers all keep every token (one KV-cache group): num_blocks = KV space // (block_size × Σ_layers page
bytes), its pool of num_blocks × block_size tokens (vllm:cache_config_info). Three differences are modelled
here: the cache's element type is the type vLLM runs the model in (its CPU build runs an fp32 checkpoint, or
a config that names no type, in bf16, and fp16 or bf16 as they are), the block size is the server's (128 on
the CPU build, 16 on most GPU backends), and the number its start-up log prints is max_concurrency ×
max_model_len with max_concurrency = num_blocks / ⌈max_model_len / block_size⌉, which equals the pool only
when max_model_len is a multiple of the block size.
Models with sliding-window or mixed layers form several groups in vLLM and are not modelled here. Knows the
arithmetic of both and how to ask a running vLLM; starting one is vllm.py's.
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
from kvviz.calc.memory import bytes_per_token

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


def logged_tokens(num_blocks: int, block_size: int, max_model_len: int) -> int:
    """The "KV cache size: N tokens" vLLM logs: max_concurrency × max_model_len, where a request of
    max_model_len takes ⌈max_model_len / block_size⌉ blocks (one KV-cache group)."""
    return int(num_blocks / math.ceil(max_model_len / block_size) * max_model_len)


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
    kvviz_token_slots: int
    vllm_pool_tokens: int
    kvviz_logged_tokens: int
    vllm_logged_tokens: int | None

    @property
    def agree(self) -> bool:
        return self.kvviz_token_slots == self.vllm_pool_tokens and self.dtype == self.vllm_dtype and \
            self.vllm_logged_tokens in (None, self.kvviz_logged_tokens)


def capacity_row(model: str, model_dir, kv_space_gib: int, torch_dtype: str, block_size: int, max_model_len: int,
                 vllm_num_blocks: int, vllm_logged: int | None) -> CapacityRow:
    """kvviz's figures for the model in `model_dir` (in the type kvviz predicts vLLM runs it in) beside what the
    server reported (torch_dtype: the type its log states)."""
    arch = architecture_from_source(model_dir)
    dtype = kv_dtype(vllm_cpu_dtype(model_dir))
    slots = token_slots(arch, dtype, kv_space_gib * GIB, block_size)
    return CapacityRow(
        model=model, attention=attention_shape(arch), kv_space_gib=kv_space_gib, dtype=dtype.name,
        vllm_dtype=TORCH_TO_KV.get(torch_dtype, torch_dtype),
        bytes_per_token=bytes_per_token(arch, dtype), block_size=block_size, max_model_len=max_model_len,
        kvviz_token_slots=slots, vllm_pool_tokens=vllm_num_blocks * block_size,
        kvviz_logged_tokens=logged_tokens(slots // block_size, block_size, max_model_len),
        vllm_logged_tokens=vllm_logged)


def server_cache_config(base_url: str):
    """The running server's cache config from its /metrics (vllm:cache_config_info)."""
    import httpx

    from kvviz.serving.metrics_reader import cache_config, parse
    from kvviz.serving.vllm import VllmError

    found = cache_config(parse(httpx.get(base_url + "/metrics", timeout=10.0).text))
    if found is None:
        raise VllmError(f"{base_url}/metrics has no vllm:cache_config_info with num_gpu_blocks")
    return found


def measure(model: str, kv_space_gib: int = 1, max_model_len: int = 1024, port: int = 8011) -> CapacityRow:
    """Start vLLM for `model` (tiny, random:<preset>[@layers], a folder) with `kv_space_gib` of KV space, read
    its capacity (metrics and log), stop it, and set kvviz's figures beside it."""
    from kvviz.serving.models import model_folder
    from kvviz.serving.vllm import ServerSpec, running_vllm

    folder = model_folder(model)
    spec = ServerSpec(folder.path, folder.name, port=port, max_model_len=max_model_len, kv_space_gib=kv_space_gib,
                      dummy=folder.dummy)
    with running_vllm(spec) as server:
        cache = server_cache_config(spec.base_url)
        facts = server.facts
    return capacity_row(model, folder.path, kv_space_gib, facts.dtype or "bfloat16", cache.block_size,
                        max_model_len, cache.num_blocks, facts.kv_capacity_tokens)
