"""Capacity truth: the KV capacity vLLM reports for a given KV space against kvviz's token slots.

kvviz's own figure is kvviz.calc.capacity.token_slots: whole blocks of block_size tokens, each block
block_size × bytes_per_token bytes, in the budget, every layer keeping every token. vLLM (v1, 0.32) counts the
same way for models whose layers all keep every token; where it differs, kvviz.serving.kv_groups models it
(its KV-cache groups: Gemma 2 and 3, gpt-oss, Llama 4's chunked layers), and a row says in words when a
model's grouping is not modelled. Also modelled here:
- the cache's element type is the type vLLM runs the model in (its CPU build runs an fp32 checkpoint, or a
  config that names no type, in bf16, and fp16 or bf16 as they are);
- the block size is the server's (128 on the CPU build, 16 on most GPU backends).
Knows the comparison and how to ask a running vLLM; starting one is vllm.py's, vLLM's rules kv_groups.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.units import GIB
from kvviz.calc.arch import Architecture, architecture_from_source
from kvviz.calc.capacity import token_slots
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.memory import bytes_per_token, layer_groups
from kvviz.serving.kv_groups import KvGroup, NotModelled, vllm_pool

TORCH_TO_KV = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


def attention_shape(arch: Architecture) -> str:
    """The attention's kind as `python -m kvviz presets` names it (Architecture.attention_kind: MHA, GQA, MQA,
    MLA), with query/KV heads where they differ, and "explicit head_dim" where the config sets a head width
    other than hidden / heads."""
    kind = arch.attention_kind
    shape = f"{kind} {arch.num_heads}/{arch.num_kv_heads}" if kind in ("GQA", "MQA") else kind
    if arch.hidden_size and arch.mla is None and arch.head_dim * arch.num_heads != arch.hidden_size:
        shape += f", explicit head_dim {arch.head_dim}"
    return shape


def vllm_cpu_dtype(model_dir: str | Path) -> str:
    """The type vLLM's CPU build runs a model folder in as kvviz starts it: fp32 where kvviz asks for it
    (kvviz.serving.vllm.cpu_fp32: a CPU without bf16 instructions), else vLLM's "auto": the config's 16-bit
    type, else bf16 (an fp32 checkpoint, or a config that names none, as gpt2's)."""
    from kvviz.serving.vllm import cpu_fp32

    if cpu_fp32():
        return "fp32"
    raw = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    named = str(raw.get("dtype") or raw.get("torch_dtype") or "float32")
    return TORCH_TO_KV.get(named, "bf16") if named in ("float16", "bfloat16") else "bf16"


@dataclass(frozen=True)
class CapacityRow:
    """One model's capacity, measured on vLLM and computed by kvviz, in tokens (bytes where it says).

    The modelled_* and kvviz_logged_tokens figures are None, and not_modelled says why, where kvviz does not
    model how vLLM groups the model's layers."""

    model: str
    attention: str
    kv_space_gib: int
    dtype: str  # kvviz's prediction of the type vLLM runs the model in
    vllm_dtype: str  # the type vLLM's log states
    bytes_per_token: int
    block_size: int
    max_model_len: int
    kvviz_token_slots: int  # kvviz.calc's slots, every layer keeping every token
    vllm_num_blocks: int  # vLLM's num_gpu_blocks (vllm:cache_config_info)
    modelled_num_blocks: int | None
    modelled_pool_tokens: int | None  # vLLM's pool (blocks × block_size) as modelled here
    vllm_pool_tokens: int
    kvviz_logged_tokens: int | None  # vLLM's logged size as modelled here
    vllm_logged_tokens: int | None
    layer_groups: str  # kvviz's layer kinds: "26 full", "22 sliding (window 512) + 4 full"
    kv_cache_groups: tuple[KvGroup, ...] = ()  # vLLM's groups as modelled here
    layers_per_group: int | None = None  # a block holds one page for each
    blocks_per_request: int | None = None  # a request of max_model_len, all groups
    not_modelled: str | None = None

    @property
    def agree(self) -> bool | None:
        """The modelled pool, logged size and type are vLLM's; None where the grouping is not modelled."""
        if self.not_modelled is not None:
            return None
        return self.modelled_pool_tokens == self.vllm_pool_tokens and self.dtype == self.vllm_dtype and \
            self.vllm_logged_tokens in (None, self.kvviz_logged_tokens)


def capacity_row(model: str, model_dir, kv_space_gib: int, torch_dtype: str, block_size: int, max_model_len: int,
                 vllm_num_blocks: int, vllm_logged: int | None, hybrid: bool | None = None) -> CapacityRow:
    """kvviz's figures for the model in `model_dir` (in the type kvviz predicts vLLM runs it in) beside what the
    server reported (torch_dtype: the type its log states; hybrid: whether vLLM's hybrid KV-cache manager was
    on, None: as kvviz.serving.kv_groups.hybrid_manager reads this process's environment)."""
    arch = architecture_from_source(model_dir)
    dtype = kv_dtype(vllm_cpu_dtype(model_dir))
    pool = vllm_pool(arch, dtype, kv_space_gib * GIB, block_size, max_model_len, hybrid=hybrid)
    modelled = not isinstance(pool, NotModelled)
    return CapacityRow(
        model=model, attention=attention_shape(arch), kv_space_gib=kv_space_gib, dtype=dtype.name,
        vllm_dtype=TORCH_TO_KV.get(torch_dtype, torch_dtype),
        bytes_per_token=bytes_per_token(arch, dtype), block_size=block_size, max_model_len=max_model_len,
        kvviz_token_slots=token_slots(arch, dtype, kv_space_gib * GIB, block_size),
        vllm_num_blocks=vllm_num_blocks, modelled_num_blocks=pool.num_blocks if modelled else None,
        modelled_pool_tokens=pool.num_blocks * block_size if modelled else None,
        vllm_pool_tokens=vllm_num_blocks * block_size,
        kvviz_logged_tokens=pool.logged_tokens if modelled else None, vllm_logged_tokens=vllm_logged,
        layer_groups=" + ".join(f"{g.count} {g.kind}" + (f" (window {g.window})" if g.window else "")
                                for g in layer_groups(arch)),
        kv_cache_groups=pool.groups.groups if modelled else (),
        layers_per_group=pool.groups.layers_per_group if modelled else None,
        blocks_per_request=pool.blocks_per_request if modelled else None,
        not_modelled=None if modelled else pool.reason)


def server_cache_config(base_url: str):
    """The running server's cache config from its /metrics (vllm:cache_config_info)."""
    import httpx

    from kvviz.serving.metrics_reader import cache_config, parse
    from kvviz.serving.vllm import VllmError

    found = cache_config(parse(httpx.get(base_url + "/metrics", timeout=10.0).text))
    if found is None:
        raise VllmError("vllm.no_cache_info", url=base_url)
    return found


def measure(model: str, kv_space_gib: int = 1, max_model_len: int = 1024, port: int | None = None,
            dummy_weights: bool = False) -> CapacityRow:
    """Start vLLM for `model` (tiny, random:<preset>[@layers], a folder; with dummy_weights, random weights)
    with `kv_space_gib` of KV space on `port` (default: a free one), read its capacity (metrics and log), stop
    it, and set kvviz's figures beside it."""
    from kvviz.serving.models import model_folder
    from kvviz.serving.vllm import ServerSpec, free_port, probe_args, running_vllm

    folder = model_folder(model, dummy_weights=dummy_weights)
    spec = ServerSpec(folder.path, folder.name, port=port or free_port(), max_model_len=max_model_len,
                      kv_space_gib=kv_space_gib, dummy=folder.dummy, extra_args=probe_args())
    with running_vllm(spec) as server:
        cache = server_cache_config(spec.base_url)
        facts = server.facts
    return capacity_row(model, folder.path, kv_space_gib, facts.dtype or "bfloat16", cache.block_size,
                        max_model_len, cache.num_blocks, facts.kv_capacity_tokens)
