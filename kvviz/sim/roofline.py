"""A step-time model for a GPU preset: the roofline lower bound of one engine step, from what the step holds.

One step of the simulated engine runs each scheduled request's span (its tokens before the step, the tokens it
computes) through the model once. On one tensor-parallel rank the step must at least
- read that rank's weights once (kvviz.calc.params.weight_bytes_read_per_step: the embedding rows no token looks
  up and the routed experts no token is sent to are not read), its share as kvviz.calc.parallel.deploy splits them;
- read the KV of every request's context (the tokens before the step; a sliding-window layer at most its window)
  and write the KV of every token it computes, per token and layer as kvviz's memory model counts them
  (token_layer_bytes of one rank's share: its KV heads, or MLA's whole latent);
- compute 2 × matmul parameters per token for every token (the output projection only for each request's last
  token, whose logits vLLM computes), plus the attention of each computed token over its context (per (query,
  key) pair, kvviz.calc.roofline.attention_widths: MLA's absorbed form for a decode, the expanded one for a
  prefill; a window caps the keys; a chunked layer is counted as a window of its chunk, which can count more keys
  than it attends: the one term that may exceed the work), split tp ways.
time = max(bytes / bandwidth, FLOPs / peak FLOP/s) on the preset's published figures.

With pipeline parallelism the simulator keeps one batch in flight (vLLM keeps pp of them: not modelled), so a
step passes through the pp stages one after another: its bound is taken over the bytes and FLOPs of all stages
on one rank of each, which a sum of per-stage bounds can only exceed.

Not counted, so the bound holds: activations' traffic, the tensor-parallel all-reduces (the presets carry no
interconnect figure), sampling, the scheduler's and the HTTP server's time, kernel launches, attention kernels
that read the KV more than once. (vLLM's async scheduling on a GPU hides the CPU's share of a step, which is not
counted here anyway.) Every figure made with this model is labelled LABEL: real steps are slower by what these
cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.base.errors import InputError
from kvviz.calc.arch import WINDOWED, Architecture
from kvviz.calc.dtypes import DType, kv_dtype, weight_dtype
from kvviz.calc.hardware import Accelerator
from kvviz.calc.memory import cached_tokens, layer_groups, token_layer_bytes
from kvviz.calc.parallel import Parallelism, deploy, gpu_architecture
from kvviz.calc.params import ParamCount, count_params, weight_bytes, weight_bytes_read_per_step
from kvviz.calc.roofline import attention_widths, causal_pairs
from kvviz.sim.step_time import StepContents

LABEL = "roofline lower bound"


@dataclass(frozen=True)
class StepBound:
    """One step's traffic and work on one rank, and the time neither lets it beat."""

    weight_bytes: float
    kv_bytes: float
    flops: float
    memory_s: float
    compute_s: float

    @property
    def seconds(self) -> float:
        return max(self.memory_s, self.compute_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s > self.memory_s else "memory"


@dataclass(frozen=True)
class RooflineStepTime:
    """The StepTimeModel of `arch` on tp × pp GPUs of kind `accelerator` (see the module docstring)."""

    arch: Architecture
    count: ParamCount
    accelerator: Accelerator
    weights: DType
    kv: DType
    tp: int
    pp: int
    rank_share: float  # of the whole model's weight bytes, what one rank of each stage holds, summed over stages
    kv_token_layer_bytes: int  # one token in one layer on one rank
    groups: tuple[tuple[int, int | None], ...]  # (layers, window) of each group of layers that keep KV
    pair_flops: tuple[int, int]  # FLOPs per (query, key) pair and layer: a decode's, a prefill's

    def bound(self, step: StepContents) -> StepBound:
        tokens = sum(t for _, t in step.spans)
        if tokens != step.prefill_tokens + step.decode_seqs:  # sums without spans: the windows cannot be applied
            raise InputError("sim.roofline_spans", tokens=step.prefill_tokens + step.decode_seqs, spans=tokens)
        weights = weight_bytes_read_per_step(self.arch, self.count, self.weights, tokens) * self.rank_share
        kv_tokens, pairs_flops = 0, 0.0
        for start, computed in step.spans:
            per_pair = self.pair_flops[0 if computed == 1 else 1]
            for layers, window in self.groups:
                kv_tokens += (cached_tokens(start, window) + computed) * layers
                pairs = causal_pairs(start + computed, window) - causal_pairs(start, window)
                pairs_flops += per_pair * pairs * layers
        head = self.arch.vocab_size * self.arch.hidden_size
        linear = 2 * (self.count.matmul_per_token - head) * tokens + 2 * head * len(step.spans)
        flops = (linear + pairs_flops) / self.tp
        kv_bytes = kv_tokens * self.kv_token_layer_bytes
        return StepBound(weights, kv_bytes, flops, (weights + kv_bytes) / self.accelerator.bandwidth,
                         flops / self.accelerator.peak_flops)

    def seconds(self, step: StepContents) -> float:
        return self.bound(step).seconds


def roofline_step_time(arch: Architecture, accelerator: Accelerator, tp: int = 1, pp: int = 1,
                       weights: str | None = None, kv: str | None = None) -> RooflineStepTime:
    """The roofline step-time model of `arch` on `accelerator`, split tp × pp as vLLM splits it (kvviz.calc's
    parallel sizing); weights and KV in the device's 16-bit format unless named. ValueError when the model cannot
    be split so or its weights are unknown."""
    w_dtype = weight_dtype(weights or accelerator.default_dtype)
    kv_dtype_ = kv_dtype(kv or accelerator.default_dtype)
    count = count_params(arch)
    deployment = deploy(arch, count, Parallelism(tp, pp), accelerator, kv_dtype_, w_dtype, batch=1, seq_len=1)
    share = sum(s.weights_bytes for s in deployment.stages) / weight_bytes(count, w_dtype)
    rank = gpu_architecture(arch, tp, 0, arch.num_layers)
    groups = tuple((g.count, g.window if g.kind in WINDOWED else None) for g in layer_groups(arch))
    widths = (attention_widths(arch, "decode")[0], attention_widths(arch, "prefill")[0])
    return RooflineStepTime(arch, count, accelerator, w_dtype, kv_dtype_, tp, pp, share,
                            token_layer_bytes(rank, kv_dtype_), groups, widths)
