"""Capacity truth past one device: the KV capacity vLLM logs for a tensor, pipeline or data parallel layout
against the calculator's per-rank prediction (kvviz.calc.parallel).

Two figures are predicted for each layout, both for one rank (one worker):
- the calculator's: kvviz.calc.parallel.deploy on a device of exactly the KV space (no weights, no reserve,
  all of it usable), whose per-GPU token slots are those of the stage that fills first, each rank keeping
  max(1, kv_heads // tp) KV heads of its stage's layers, every layer keeping every token;
- vLLM's logged size, as vLLM 0.32 counts it (vllm/v1/core/kv_cache_utils.py, get_kv_cache_configs): the KV-cache
  groups are made for the whole model (kvviz.serving.kv_groups), with layers dealt to a group as
  layers[i::groups]; each worker's block is its largest group's pages on that worker (the group's layers it
  holds); each worker's pool is its KV space // that block; every worker then keeps the smallest worker's
  number of blocks, and each engine core (one per data parallel rank) logs
  int(blocks / blocks a request holds × max_model_len), the request's blocks summed over all of the model's
  groups, those of other stages included. For a model whose layers all keep every token the two figures are
  the same; for a hybrid (sliding + full) model the second is the one vLLM logs, and under pipeline
  parallelism it does not grow with the stages when a group is one layer (a block is one page on every stage).
Knows layouts and vLLM's rules; starting vLLM is vllm.py's, the single-device comparison capacity.py's.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from kvviz.base.errors import InputError
from kvviz.base.units import GIB
from kvviz.calc.arch import NONE, Architecture, architecture_from_source
from kvviz.calc.dtypes import DType, kv_dtype
from kvviz.calc.hardware import Accelerator
from kvviz.calc.memory import bytes_per_token, token_layer_bytes
from kvviz.calc.parallel import Parallelism, check_parallel, deploy, gpu_architecture, stage_ranges
from kvviz.serving.capacity import TORCH_TO_KV, attention_shape, vllm_cpu_dtype
from kvviz.serving.kv_groups import VLLM_CPU_BATCHED_TOKENS, NotModelled, group_size, kv_groups, request_blocks

VLLM_CPU_BLOCK = 128  # the CPU build's block size (vllm:cache_config_info)


# A layout is the calculator's Parallelism: tp workers per layer, pp pipeline stages, dp engines (replicas)
Layout = Parallelism


LAYOUT = re.compile(r"(?:(tp|pp|dp)(\d+))+")


def parse_layout(text: str) -> Layout:
    """A layout as the CLI takes it: "tp2", "pp2", "dp2", or sizes together ("tp2pp2dp1"), the others 1;
    InputError in one line for anything else."""
    compact = text.strip().lower()
    if not LAYOUT.fullmatch(compact):
        raise InputError("parallel_capacity.layout", text=text)
    sizes = {kind: int(n) for kind, n in re.findall(r"(tp|pp|dp)(\d+)", compact)}
    if any(n < 1 for n in sizes.values()):
        raise InputError("parallel_capacity.layout", text=text)
    return Layout(sizes.get("tp", 1), sizes.get("pp", 1), sizes.get("dp", 1))


def kv_space_device(kv_space_gib: int) -> Accelerator:
    """A device whose whole memory is the KV space vLLM's CPU build is given (VLLM_CPU_KVCACHE_SPACE, per
    worker): with no weights and no reserve, the calculator's budget is that space."""
    return Accelerator("kv-space", f"{kv_space_gib} GiB of KV space", kv_space_gib * GIB, 1.0, 1.0, "bf16", "bf16")


def group_layers(arch: Architecture, hybrid: bool | None = None) -> list[list[int]] | NotModelled:
    """vLLM's KV-cache groups for `arch` as layer indices: layers of one kind in model order, a bucket of n split
    into ⌈n / g⌉ groups dealt as layers[i::groups] (g as kv_groups.group_size); one group of every layer that
    keeps KV when the hybrid manager promotes local layers to full ones."""
    grouped = kv_groups(arch, hybrid)
    if isinstance(grouped, NotModelled):
        return grouped
    kept = [i for i, kind in enumerate(arch.layer_types) if kind != NONE]
    if grouped.promoted:
        return [kept]
    buckets: dict[str, list[int]] = {}
    for i in kept:
        buckets.setdefault(arch.layer_types[i], []).append(i)
    size = group_size([len(b) for b in buckets.values()])
    out = []
    for layers in buckets.values():
        groups = -(-len(layers) // size)
        out += [layers[i::groups] for i in range(groups)]
    return out


def stage_blocks(groups: list[list[int]], start: int, stop: int, page_bytes: int, budget_bytes: int) -> int:
    """Blocks one worker of the stage holding layers start .. stop - 1 fits in its KV space: a block is a page
    (block_size tokens of one layer on this worker) for each layer its largest group holds here."""
    held = max(sum(start <= i < stop for i in g) for g in groups)
    return budget_bytes // (held * page_bytes)


@dataclass(frozen=True)
class ParallelPrediction:
    """What kvviz predicts for a model under a layout, per rank: the KV heads a rank keeps, each stage's layers,
    the KV bytes a token leaves on the binding rank, the calculator's per-rank token slots, and vLLM's pool
    (blocks, the same on every worker) and logged size as modelled (None, with why, where not modelled)."""

    layout: Layout
    kv_heads: int
    kv_heads_per_rank: int
    stage_layers: tuple[int, ...]
    bytes_per_token_per_rank: int
    calc_token_slots: int
    modelled_blocks: int | None
    blocks_per_request: int | None
    modelled_logged_tokens: int | None
    not_modelled: str | None = None


def predict(arch: Architecture, dtype: DType, layout: Layout, kv_space_gib: int = 1,
            block_size: int = VLLM_CPU_BLOCK, max_model_len: int = 1024) -> ParallelPrediction:
    """kvviz's per-rank figures for `arch` laid out as `layout`; InputError (one line) for a layout the model
    cannot be split into (kvviz.calc.parallel.check_parallel, as vLLM refuses it)."""
    check_parallel(arch, layout)
    budget = kv_space_gib * GIB
    plan = deploy(arch, None, layout, kv_space_device(kv_space_gib), dtype, dtype, 1, max_model_len, mem_util=1.0,
                  reserve_bytes=0, block_size=block_size)
    ranges = stage_ranges(arch.num_layers, layout.pp)
    binding = gpu_architecture(arch, layout.tp, plan.binding.first_layer,
                               plan.binding.first_layer + plan.binding.layers)
    common = dict(layout=layout, kv_heads=arch.num_kv_heads, kv_heads_per_rank=plan.kv_heads_per_gpu or 0,
                  stage_layers=tuple(stop - start for start, stop in ranges),
                  bytes_per_token_per_rank=bytes_per_token(binding, dtype), calc_token_slots=plan.per_gpu.token_slots)
    share = gpu_architecture(arch, layout.tp, 0, arch.num_layers)  # every layer, as one tp rank keeps it
    groups, grouped = group_layers(share), kv_groups(share)
    if isinstance(groups, NotModelled):
        return ParallelPrediction(**common, modelled_blocks=None, blocks_per_request=None,
                                  modelled_logged_tokens=None, not_modelled=str(groups.reason))
    page = block_size * token_layer_bytes(share, dtype)
    blocks = min(stage_blocks(groups, start, stop, page, budget) for start, stop in ranges)
    per_request = sum(request_blocks(g, block_size, max_model_len, VLLM_CPU_BATCHED_TOKENS) for g in grouped.groups)
    return ParallelPrediction(**common, modelled_blocks=blocks, blocks_per_request=per_request,
                              modelled_logged_tokens=int(blocks / per_request * max_model_len))


@dataclass(frozen=True)
class ParallelRow:
    """One model under one layout: kvviz's prediction beside what vLLM logged and reported. vllm_logged: each
    engine core's "KV cache size" (one per data parallel rank); ranks: each rank's name and KV GiB as logged
    (vllm.StartupFacts.ranks); vllm_blocks: the pool in its /metrics (vllm:cache_config_info), which vLLM's API
    server sums over its data parallel engines (core_client.py: "Sum num_gpu_blocks from all engines")."""

    model: str
    attention: str
    dtype: str
    vllm_dtype: str
    max_model_len: int
    kv_space_gib: int
    predicted: ParallelPrediction
    vllm_blocks: int
    vllm_logged: tuple[int, ...]
    ranks: tuple[tuple[str, float], ...]
    ready_s: float | None = None

    @property
    def agree(self) -> bool | None:
        """vLLM's blocks (dp engines' worth) and every engine's logged size are the modelled ones, with one engine
        per data parallel
        rank and tp × pp × dp ranks, each given the KV space; None where the grouping is not modelled."""
        p, lay = self.predicted, self.predicted.layout
        if p.not_modelled is not None:
            return None
        return (self.vllm_blocks == p.modelled_blocks * lay.dp and len(self.vllm_logged) == lay.dp
                and all(n == p.modelled_logged_tokens for n in self.vllm_logged)
                and len(self.ranks) == lay.tp * lay.pp * lay.dp
                and all(gib == self.kv_space_gib for _, gib in self.ranks) and self.dtype == self.vllm_dtype)

    @classmethod
    def from_record(cls, record: dict) -> ParallelRow:
        """A row back from its JSON (record), so that a stored measurement is judged by today's rules."""
        fields = {k: v for k, v in record.items() if k not in ("layout", "agree")}
        predicted = dict(fields.pop("predicted"))
        predicted["layout"] = Layout(**predicted["layout"])
        predicted["stage_layers"] = tuple(predicted["stage_layers"])
        return cls(**fields | {"predicted": ParallelPrediction(**predicted),
                               "vllm_logged": tuple(fields["vllm_logged"]),
                               "ranks": tuple(tuple(r) for r in fields["ranks"])})

    def record(self) -> dict:
        """The row as JSON: its fields, the prediction's and agree."""
        return asdict(self) | {"layout": self.predicted.layout.label, "agree": self.agree}


def prediction_for(model_dir, layout: Layout, kv_space_gib: int, max_model_len: int,
                   block_size: int = VLLM_CPU_BLOCK) -> tuple[Architecture, DType, ParallelPrediction]:
    """The model folder's architecture, the type vLLM's CPU build runs it in, and kvviz's prediction."""
    arch = architecture_from_source(model_dir)
    dtype = kv_dtype(vllm_cpu_dtype(model_dir))
    return arch, dtype, predict(arch, dtype, layout, kv_space_gib, block_size, max_model_len)


def measure(model: str, layout: Layout, kv_space_gib: int = 1, max_model_len: int = 1024,
            dummy_weights: bool = False, prompt: str | None = "The KV cache") -> ParallelRow:
    """Start vLLM for `model` (tiny, random:<preset>[@layers], a folder) laid out as `layout` on a free port,
    check the layout with the calculator first (InputError before any start), answer one completion (prompt;
    None: none), read its capacity (log and metrics), stop it, and set kvviz's prediction beside it."""
    from kvviz.serving.capacity import server_cache_config
    from kvviz.serving.models import model_folder
    from kvviz.serving.vllm import ServerSpec, free_port, probe_args, running_vllm

    folder = model_folder(model, dummy_weights=dummy_weights)
    arch, dtype, predicted = prediction_for(folder.path, layout, kv_space_gib, max_model_len)
    spec = ServerSpec(folder.path, folder.name, port=free_port(), max_model_len=max_model_len,
                      kv_space_gib=kv_space_gib, dummy=folder.dummy, tensor_parallel=layout.tp,
                      pipeline_parallel=layout.pp, data_parallel=layout.dp,
                      extra_args=probe_args(layout.pp))
    with running_vllm(spec) as server:
        if prompt is not None:
            complete(server.spec.base_url, spec.name, prompt)
        cache = server_cache_config(spec.base_url)
        facts, ready_s = server.facts, server.ready_s
    return ParallelRow(model, attention_shape(arch), dtype.name, TORCH_TO_KV.get(facts.dtype or "", facts.dtype or "?"),
                       max_model_len, kv_space_gib, predicted, cache.num_blocks,
                       tuple(e.kv_capacity_tokens for e in sorted(facts.engines, key=lambda e: e.name)),
                       tuple((r.rank, r.kv_space_gib) for r in facts.ranks()), ready_s)


def complete(base_url: str, name: str, prompt: str, tokens: int = 8) -> str:
    """One completion of `tokens` tokens from the server (its text); VllmError when it does not answer one."""
    import httpx

    from kvviz.serving.vllm import VllmError

    reply = httpx.post(base_url + "/v1/completions", timeout=120.0,
                       json={"model": name, "prompt": prompt, "max_tokens": tokens, "ignore_eos": True})
    if reply.status_code != 200:
        raise VllmError("vllm.no_completion", url=base_url, code=reply.status_code)
    return reply.json()["choices"][0]["text"]



def plan_layouts(models: list[str], layouts: list[Layout], kv_space_gib: int, max_model_len: int,
                 dummy_weights: bool = False) -> list[tuple[str, str, Layout, ParallelPrediction]]:
    """(model, its served name, layout, kvviz's prediction) for every model and layout, each checked (InputError
    in one line) before anything starts."""
    from kvviz.serving.models import model_folder

    folders = {m: model_folder(m, dummy_weights=dummy_weights) for m in models}
    return [(m, folders[m].name, lay, prediction_for(folders[m].path, lay, kv_space_gib, max_model_len)[2])
            for m in models for lay in layouts]


def predicted_record(model: str, predicted: ParallelPrediction) -> dict:
    """A prediction alone as JSON, as a measured row's record names its fields."""
    return {"model": model, "layout": predicted.layout.label, "predicted": asdict(predicted), "agree": None}
