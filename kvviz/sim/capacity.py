"""The simulated engine's KV pool, from kvviz's own memory model rather than a number given: its blocks and the
KV-cache groups that draw on them.

A model folder and vLLM's KV space (VLLM_CPU_KVCACHE_SPACE, GiB; whole GiB on vLLM's side) give vLLM's block
pool as kvviz.serving.kv_groups.vllm_pool models it, in the type vLLM's CPU build runs the model in
(kvviz.serving.capacity.vllm_cpu_dtype): num_blocks = space // (layers per group × block_size × bytes per token
and layer), and the groups in vLLM's order, full attention or a sliding window each (the scheduler keeps a block
table per group). Chunked-local attention groups and state layers are refused here, not simulated wrongly.

On GPU presets (gpu_pool), a deployment's stages give it: vLLM makes the groups of the whole model, projects them
onto each pipeline stage's layers, sizes a stage's block as its largest group's pages there (that group's layers
on the stage × block_size × the bytes a token leaves in one layer on one of its GPUs, its KV heads split by tp),
and keeps the fewest blocks any stage's budget holds (vllm/v1/core/kv_cache_utils.py, get_kv_cache_configs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.units import GIB
from kvviz.i18n import t
from kvviz.sim.scheduler import FULL, FULL_ATTENTION, SLIDING, KvGroupSpec


@dataclass(frozen=True)
class SimPool:
    """The blocks vLLM makes of a KV space, and its KV-cache groups as the scheduler keeps them."""

    num_blocks: int
    groups: tuple[KvGroupSpec, ...]


def _pool(model_dir: Path, kv_space_gib: float, block_size: int, max_model_len: int):
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
    kinds = sorted({g.kind for g in pool.groups.groups} - {FULL, SLIDING})
    if kinds:
        raise InputError("sim.local_layers", kinds=", ".join(kinds))
    return pool


def kv_pool(model_dir: Path, kv_space_gib: float, block_size: int, max_model_len: int) -> SimPool:
    """The pool vLLM's CPU build makes of kv_space_gib GiB for the model in model_dir."""
    pool = _pool(model_dir, kv_space_gib, block_size, max_model_len)
    if pool.num_blocks < 1:
        raise InputError("sim.no_blocks", space=kv_space_gib)
    return SimPool(pool.num_blocks, tuple(KvGroupSpec(g.kind, g.window) for g in pool.groups.groups))


def kv_groups(model_dir: Path | None, lenient: bool = False) -> tuple[KvGroupSpec, ...]:
    """The model's KV-cache groups alone (for a pool whose blocks are given), in vLLM's order. lenient: a model
    whose layers the simulator does not group (or no model) counts as full attention, as sim.local_layers says,
    rather than being refused."""
    if model_dir is None and lenient:
        return FULL_ATTENTION
    try:
        pool = _pool(model_dir, 1, 16, 16)
    except InputError as error:
        if lenient and error.key in ("sim.local_layers", "sim.pool_not_modelled"):
            return FULL_ATTENTION
        raise
    return tuple(KvGroupSpec(g.kind, g.window) for g in pool.groups.groups)


def group_layers(arch) -> tuple[tuple[KvGroupSpec, tuple[int, ...]], ...] | None:
    """vLLM's KV-cache groups of `arch` with the layers of each (indices in the model): a bucket of one kind, its
    layers in model order, dealt to its ⌈n / g⌉ groups as layers[i::⌈n / g⌉] (kvviz.serving.kv_groups). None for
    a model whose groups the scheduler does not keep (state layers, chunked local attention, no KV)."""
    from kvviz.calc.arch import NONE
    from kvviz.serving.kv_groups import NotModelled
    from kvviz.serving.kv_groups import kv_groups as vllm_groups

    grouped = vllm_groups(arch, hybrid=True)
    if isinstance(grouped, NotModelled) or {g.kind for g in grouped.groups} - {FULL, SLIDING}:
        return None
    out = []
    for kind in dict.fromkeys(k for k in arch.layer_types if k != NONE):
        layers = [i for i, k in enumerate(arch.layer_types) if k == kind]
        n = -(-len(layers) // grouped.layers_per_group)
        out += [(KvGroupSpec(kind, arch.window_of(kind)), tuple(layers[i::n])) for i in range(n)]
    return tuple(out)


def gpu_pool(arch, dtype, deployment, block_size: int) -> SimPool | None:
    """The block pool vLLM makes of a deployment on GPU presets (kvviz.calc.parallel.deploy): per stage, its KV
    budget on one GPU over one block of its largest group there (that group's layers on the stage × block_size ×
    the bytes a token leaves in one layer on one GPU); the fewest of the stages'. None where group_layers is None
    or no stage holds a block (the caller says why)."""
    from kvviz.calc.memory import token_layer_bytes
    from kvviz.calc.parallel import gpu_architecture

    grouped = group_layers(arch)
    if grouped is None:
        return None
    tp = deployment.parallel.tp
    blocks = []
    for stage in deployment.stages:
        start, stop = stage.first_layer, stage.first_layer + stage.layers
        largest = max(sum(start <= i < stop for i in layers) for _, layers in grouped)
        if largest:
            page = token_layer_bytes(gpu_architecture(arch, tp, start, stop), dtype)
            blocks.append(max(stage.capacity.kv_budget_bytes, 0) // (largest * block_size * page))
    if not blocks or min(blocks) < 1:
        return None
    return SimPool(min(blocks), tuple(spec for spec, _ in grouped))


def groups_text(groups: tuple[KvGroupSpec, ...], lang: str = "en") -> str:
    """The groups as counts of each kind, in order of first appearance: "5 sliding (window 256), 1 full"."""
    counts = {spec: sum(1 for g in groups if g == spec) for spec in dict.fromkeys(groups)}
    return t("scheduler.sep", lang).join(
        t("sim_cli.group_sliding" if spec.kind == SLIDING else "sim_cli.group_full", lang, n=n, window=spec.window)
        for spec, n in counts.items())
