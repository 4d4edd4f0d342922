"""Deployments past one GPU: what each GPU holds under tensor, pipeline and data parallelism.

This module owns the rules that split one model over tp × pp × dp GPUs, as vLLM lays it out:

- Tensor parallelism (tp) splits every layer across tp GPUs (Megatron-LM's scheme): each GPU holds
  heads / tp query heads and a tp-th of the attention, MLP, expert and state-mixer matrices; the
  embedding and lm_head are split by vocabulary rows (vLLM's VocabParallelEmbedding, ParallelLMHead);
  norms, the router, the position table and small vectors are held whole by every GPU. KV heads are
  split as whole heads, kv_heads / tp per GPU, and when tp exceeds kv_heads each GPU keeps one head,
  copied tp / kv_heads times (vLLM: max(1, kv_heads // tp)). An MLA latent is not split at all: every
  GPU caches the whole latent of its layers.
- Pipeline parallelism (pp) gives each of pp stages a run of consecutive layers, split as vLLM's
  get_pp_indices splits them; the first stage also holds the embeddings, the last the final norm
  and lm_head (and, with tied embeddings, its own copy of the embedding). Every sequence has a share
  in every stage, so the stage that fills first bounds the whole pipeline.
- Data parallelism (dp) runs dp copies of that tp × pp pipeline side by side: each GPU's share is
  unchanged and the deployment holds dp times the sequences.

Each GPU's weights and KV cache follow; its capacity is capacity.py's accounting applied to the share
one GPU holds (gpu_architecture), so nothing about budgets, reserves or paged blocks is repeated here.
It knows architectures, parameter components by name and the memory model; it does not count
parameters itself (params.py) and knows no device beyond the Accelerator it is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import accumulate

from kvviz.base.errors import InputError
from kvviz.base.units import GIB
from kvviz.calc.arch import Architecture
from kvviz.calc.capacity import Capacity, capacity
from kvviz.calc.dtypes import DType
from kvviz.calc.formula import Formula
from kvviz.calc.hardware import Accelerator
from kvviz.calc.memory import KVBreakdown, kv_breakdown
from kvviz.calc.params import Component, ParamCount, count_params, weight_bytes
from kvviz.i18n import Said, said

# Components (as params.count_params names them) whose matrices tensor parallelism splits tp ways: the column-
# and row-parallel projections of attention, MLP, experts and state mixers, and the vocab-parallel embedding and
# lm_head. Their vectors (biases), and every other component, known or not, are held whole by every GPU.
SPLIT_BY_TP = frozenset({"attention", "dense MLP", "routed experts", "shared experts", "state mixer",
                         "embedding", "lm_head"})
# Where pipeline parallelism puts what no layer holds: the input side on the first stage, the output side on the
# last. Anything else outside the layers is counted on every stage.
FIRST_STAGE = frozenset({"embedding", "position embedding"})
LAST_STAGE = frozenset({"norms", "lm_head"})  # the final norm, then the output projection


@dataclass(frozen=True)
class Parallelism:
    """How many ways the model is split: tp GPUs per layer, pp pipeline stages, dp replicas."""

    tp: int = 1
    pp: int = 1
    dp: int = 1

    @property
    def label(self) -> str:
        """"tp2 pp1 dp1": the layout in words that need no translation (vLLM's own abbreviations)."""
        return f"tp{self.tp} pp{self.pp} dp{self.dp}"

    @property
    def gpus(self) -> int:
        """GPUs in the whole deployment: tp × pp × dp."""
        return self.tp * self.pp * self.dp


@dataclass(frozen=True)
class Stage:
    """One pipeline stage, as each of its tp GPUs holds it: layers first_layer .. first_layer + layers - 1.

    params and weights_bytes: on one GPU; kv: the query's batch × seq_len cached on one GPU (its layers, its KV
    heads); capacity: one GPU's budget and what fits in it, as capacity.py counts it.
    """

    index: int
    first_layer: int
    layers: int
    params: int
    weights_bytes: int
    kv: KVBreakdown
    capacity: Capacity


@dataclass(frozen=True)
class Deployment:
    """The model on tp × pp × dp GPUs.

    kv_heads_per_gpu: KV heads each GPU caches (None for MLA, whose latent is whole on every GPU). binding: the
    stage whose GPUs fill first, the one GPU the memory plot shows. per_gpu: that GPU's budget, with the capacity
    figures of a whole pipeline (the least over its stages: every sequence has a share in each), which one GPU's
    share stands for; the deployment holds dp times the sequences and tokens.
    """

    parallel: Parallelism
    kv_heads_per_gpu: int | None
    stages: tuple[Stage, ...]
    binding: Stage
    per_gpu: Capacity
    formulas: tuple[Formula, ...]

    @property
    def gpus(self) -> int:
        return self.parallel.gpus

    @property
    def token_slots(self) -> int:
        """Token slots of the whole deployment: one pipeline's × dp."""
        return self.per_gpu.token_slots * self.parallel.dp

    @property
    def max_batch(self) -> int:
        """Sequences of seq_len the whole deployment holds at once: one pipeline's × dp."""
        return self.per_gpu.max_batch * self.parallel.dp

    @property
    def weights_bytes_all(self) -> int:
        """Weight bytes over every GPU: each stage's per-GPU bytes × tp × dp (what tensor parallelism keeps whole
        is counted once per GPU)."""
        return sum(s.weights_bytes for s in self.stages) * self.parallel.tp * self.parallel.dp


def kv_heads_per_gpu(kv_heads: int, tp: int) -> int:
    """KV heads one tensor-parallel GPU caches: max(1, kv_heads // tp), vLLM's rule; past kv_heads GPUs each
    keeps one head, copied tp / kv_heads times."""
    return max(1, kv_heads // tp)


def tp_fits(arch: Architecture, tp: int) -> Said | None:
    """Why `arch` cannot be split tp ways (vLLM refuses the same), or None when it can: tp must divide the query
    heads, and the KV heads must split evenly (tp divides them) or copy evenly (tp a multiple of them)."""
    heads, kv = arch.num_heads, arch.num_kv_heads
    if heads % tp:
        return said("parallel.tp_heads", tp=tp, heads=heads)
    if arch.mla is None and tp <= kv and kv % tp:
        return said("parallel.tp_kv_heads", tp=tp, kv=kv)
    if arch.mla is None and tp > kv and tp % kv:
        return said("parallel.tp_kv_copies", tp=tp, kv=kv)
    return None


def tp_choices(arch: Architecture) -> list[int]:
    """Every tp `arch` can be split by (all divide its query heads)."""
    return [tp for tp in range(1, arch.num_heads + 1) if tp_fits(arch, tp) is None]


def check_parallel(arch: Architecture, par: Parallelism) -> None:
    """InputError (a ValueError) in one sentence when `arch` cannot be deployed as `par` says."""
    reason = tp_fits(arch, par.tp)
    if reason:
        choices = [str(t) for t in tp_choices(arch)]
        if len(choices) == 1:
            raise InputError("parallel.tp_only", reason=reason, choice=choices[0])
        raise InputError("parallel.tp_choices", reason=reason, choices=", ".join(choices[:-1]), last=choices[-1])
    if par.pp > arch.num_layers:
        raise InputError("parallel.pp", pp=par.pp, layers=arch.num_layers)


def stage_layers(num_layers: int, pp: int) -> tuple[int, ...]:
    """Layers of each pipeline stage as vLLM splits them (get_pp_indices): num_layers // pp each, and the remainder
    one apiece to the stages before the last, from the last but one backwards. None holds more than
    ⌈num_layers / pp⌉."""
    counts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        counts[-i] += 1
    return tuple(counts)


def stage_ranges(num_layers: int, pp: int) -> tuple[tuple[int, int], ...]:
    """(first layer, one past the last) of each stage."""
    ends = tuple(accumulate(stage_layers(num_layers, pp)))
    return tuple(zip((0, *ends[:-1]), ends, strict=True))


def gpu_architecture(arch: Architecture, tp: int, start: int, stop: int) -> Architecture:
    """What one GPU of the stage holding layers start .. stop - 1 caches: those layers (and the state of those that
    keep one), with heads / tp query heads and kv_heads_per_gpu KV heads. An MLA model caches its latent whole,
    which these fields do not touch; a Mamba or linear-attention state is not split by tp here."""
    return replace(arch.sliced(start, stop), num_heads=arch.num_heads // tp,
                   num_kv_heads=kv_heads_per_gpu(arch.num_kv_heads, tp))


def attention_kept_whole(arch: Architecture, tp: int, layers: int) -> tuple[int, int]:
    """Attention matrix elements of `layers` layers that tensor parallelism does not split: (in the model, on each
    GPU). vLLM replicates MLA's down-projections (q_a_proj, kv_a_proj_with_mqa: hidden × (q_lora_rank +
    kv_lora_rank + qk_rope_head_dim)) on every GPU; past kv_heads GPUs each keeps the K and V projections of its
    one KV head (2 × hidden × head_dim)."""
    hidden = arch.hidden_size
    if hidden is None or tp == 1:
        return 0, 0
    if arch.mla is not None:
        whole = layers * hidden * ((arch.mla.q_lora_rank or 0) + arch.mla.latent_dim)
        return whole, whole
    if tp > arch.num_kv_heads:
        one_head = layers * 2 * hidden * arch.head_dim
        return one_head * arch.num_kv_heads, one_head
    return 0, 0


def stage_components(arch: Architecture, counts: dict[int, ParamCount], par: Parallelism, index: int,
                     start: int, stop: int) -> tuple[Component, ...]:
    """The parameters stage `index` (layers start .. stop - 1) holds before tensor parallelism splits them.

    counts[n] is the model cut after n layers. A component's layers are counts[stop] − counts[start], exact where
    layers differ (DeepSeek's dense first layers); what no layer holds (counts[0]) goes to the first stage, the
    last (with tied embeddings the last builds its own embedding too, as vLLM does), or, for a component kvviz
    does not place, to every stage.
    """
    first, last = index == 0, index == par.pp - 1
    tied_copy = arch.tie_word_embeddings and last and par.pp > 1
    parts = []
    for c in counts[arch.num_layers].components:
        fixed, upto, before = counts[0].get(c.name), counts[stop].get(c.name), counts[start].get(c.name)
        held = first if c.name in FIRST_STAGE else last if c.name in LAST_STAGE else True
        held = held or (c.name == "embedding" and tied_copy)
        parts.append(Component(c.name, upto.matrix - before.matrix + fixed.matrix * held,
                               upto.vector - before.vector + fixed.vector * held))
    return tuple(parts)


def gpu_components(arch: Architecture, components: tuple[Component, ...], tp: int,
                   layers: int) -> tuple[Component, ...]:
    """One tensor-parallel GPU's share of a stage's components (the stage has `layers` layers): split matrices
    ⌈matrix / tp⌉ (attention less what it keeps whole, which each GPU holds in full), everything else whole."""
    whole_in_model, whole_per_gpu = attention_kept_whole(arch, tp, layers)
    shares = []
    for c in components:
        if c.name == "attention":
            c = Component(c.name, math.ceil((c.matrix - whole_in_model) / tp) + whole_per_gpu, c.vector)
        elif c.name in SPLIT_BY_TP:
            c = Component(c.name, math.ceil(c.matrix / tp), c.vector)
        shares.append(c)
    return tuple(shares)


def _prefix_counts(arch: Architecture, count: ParamCount, par: Parallelism) -> dict[int, ParamCount]:
    """The parameter count of the model cut after each stage boundary (and after 0 layers)."""
    cuts = {0, *(stop for _, stop in stage_ranges(arch.num_layers, par.pp))}
    return {n: count if n == arch.num_layers else count_params(arch.sliced(0, n)) for n in sorted(cuts)}


def formulas(arch: Architecture, par: Parallelism, binding: Stage) -> tuple[Formula, ...]:
    """The deployment's rules with its numbers: GPUs in all, KV heads (or the latent) and layers on one GPU, and
    the KV bytes one token leaves on one GPU."""
    tp, pp, dp = par.tp, par.pp, par.dp
    if arch.mla is None:
        heads = Formula(said("calc.label.kv_heads_gpu"), "max(1, ⌊kv_heads / tp⌋)",
                        f"max(1, ⌊{arch.num_kv_heads} / {tp}⌋)", kv_heads_per_gpu(arch.num_kv_heads, tp),
                        said("calc.unit.kv_heads"))
    else:
        heads = Formula(said("calc.label.mla_gpu"), "kv_lora_rank + qk_rope_head_dim",
                        f"{arch.mla.kv_lora_rank} + {arch.mla.qk_rope_head_dim}", arch.mla.latent_dim,
                        said("calc.unit.latent"))
    per_token = binding.kv.per_token_formula
    return (
        Formula(said("calc.label.gpus"), "tp × pp × dp", f"{tp} × {pp} × {dp}", par.gpus, said("calc.unit.gpus")),
        heads,
        Formula(said("calc.label.layers_gpu"), "⌈layers / pp⌉", f"⌈{arch.num_layers} / {pp}⌉",
                max(stage_layers(arch.num_layers, pp)), said("calc.unit.layers")),
        replace(per_token, label=said("calc.label.per_token_gpu", stage=binding.index, layers=binding.layers)),
    )


def _pipeline_capacity(stages: tuple[Stage, ...], binding: Stage, gpus: int) -> Capacity:
    """The binding stage's budget with a whole pipeline's figures: the least of every stage's."""
    caps = [s.capacity for s in stages]
    formula = binding.capacity.formula
    if gpus > 1:
        formula = replace(formula, label=said("calc.label.budget_gpu"),
                          symbolic=formula.symbolic.replace("weights", "weights_on_one_GPU"))
    return replace(binding.capacity, token_slots=min(c.token_slots for c in caps),
                   max_batch=min(c.max_batch for c in caps), max_seq_len=min(c.max_seq_len for c in caps),
                   seq_len_capped=all(c.seq_len_capped for c in caps), fits=all(c.fits for c in caps),
                   formula=formula)


def deploy(arch: Architecture, count: ParamCount | None, par: Parallelism, accel: Accelerator, kv_dtype: DType,
           weight_dtype: DType, batch: int, seq_len: int, mem_util: float = 0.9, reserve_bytes: int = GIB,
           block_size: int = 16) -> Deployment:
    """`arch` on tp × pp × dp GPUs of kind `accel`: each stage's per-GPU weights, KV cache and capacity (count None:
    weights unknown, counted as none). ValueError in one sentence when the model cannot be split so."""
    check_parallel(arch, par)
    counts = _prefix_counts(arch, count, par) if count is not None else None
    stages = []
    for index, (start, stop) in enumerate(stage_ranges(arch.num_layers, par.pp)):
        params, weights = 0, 0
        if counts is not None:
            shares = gpu_components(arch, stage_components(arch, counts, par, index, start, stop), par.tp,
                                    stop - start)
            params, weights = sum(c.total for c in shares), weight_bytes(replace(count, components=shares),
                                                                          weight_dtype)
        share = gpu_architecture(arch, par.tp, start, stop)
        stages.append(Stage(index, start, stop - start, params, weights, kv_breakdown(share, batch, seq_len, kv_dtype),
                            capacity(share, accel, kv_dtype, weights, batch, seq_len, mem_util, reserve_bytes,
                                     block_size)))
    stages = tuple(stages)
    # The stage that fills first; among equals (nothing fits anywhere), the one holding the most.
    binding = min(stages, key=lambda s: (s.capacity.max_batch, s.capacity.token_slots, s.capacity.max_seq_len,
                                         -s.weights_bytes - s.kv.bytes))
    heads = None if arch.mla is not None else kv_heads_per_gpu(arch.num_kv_heads, par.tp)
    return Deployment(par, heads, stages, binding, _pipeline_capacity(stages, binding, par.gpus),
                      formulas(arch, par, binding))
