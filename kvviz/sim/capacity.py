"""The simulated engine's KV capacity in blocks, from kvviz's own memory model rather than a number given.

A model folder and vLLM's KV space (VLLM_CPU_KVCACHE_SPACE, GiB; whole GiB on vLLM's side) give vLLM's block
pool as kvviz.serving.kv_groups.vllm_pool models it, in the type vLLM's CPU build runs the model in
(kvviz.serving.capacity.vllm_cpu_dtype): num_blocks = space // (layers per group × block_size × bytes per token
and layer). The simulator keeps one group of full-attention layers: a model with sliding-window, chunked or state
layers in groups of their own is refused here, not simulated wrongly (the next part of issue 27).
"""

from __future__ import annotations

from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.units import GIB


def kv_blocks(model_dir: Path, kv_space_gib: float, block_size: int, max_model_len: int) -> int:
    """The blocks vLLM's CPU build makes of kv_space_gib GiB for the model in model_dir."""
    # Imported here: the memory model loads torch (dtypes), which a simulation given --num-blocks never needs.
    from kvviz.calc.arch import architecture_from_source
    from kvviz.calc.dtypes import kv_dtype
    from kvviz.serving.capacity import vllm_cpu_dtype
    from kvviz.serving.kv_groups import NotModelled, vllm_pool

    if not (Path(model_dir) / "config.json").is_file():
        raise InputError("sim.no_model", path=str(model_dir))
    arch = architecture_from_source(model_dir)
    pool = vllm_pool(arch, kv_dtype(vllm_cpu_dtype(model_dir)), int(kv_space_gib * GIB), block_size, max_model_len)
    if isinstance(pool, NotModelled):
        raise InputError("sim.pool_not_modelled", why=pool.reason)
    kinds = sorted({g.kind for g in pool.groups.groups})
    if kinds != ["full"]:
        raise InputError("sim.local_layers", kinds=", ".join(kinds))
    if pool.num_blocks < 1:
        raise InputError("sim.no_blocks", space=kv_space_gib)
    return pool.num_blocks
