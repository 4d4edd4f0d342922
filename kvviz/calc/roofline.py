"""Roofline lower bounds for the two phases of generation.

Prefill reads the weights once and multiplies them by every prompt token: many FLOPs per byte,
so it is usually bound by compute. Decode multiplies the same weights by one token per sequence
and reads the whole KV cache: few FLOPs per byte, so it is bound by memory bandwidth. Each
estimate is a lower bound: max(FLOPs / peak FLOP/s, bytes / bandwidth). Real kernels run slower;
the benchmarks measure by how much. Activations are not counted in the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.calc.arch import SLIDING, Architecture
from kvviz.calc.dtypes import DType
from kvviz.calc.formula import Formula
from kvviz.calc.hardware import Accelerator
from kvviz.calc.memory import bytes_per_token, kv_cache_bytes, layer_groups
from kvviz.calc.params import ParamCount, experts_touched, weight_bytes, weight_bytes_read_per_step
from kvviz.i18n import said


@dataclass(frozen=True)
class PhaseEstimate:
    """One phase on one device: its work, its traffic, and the time neither can beat."""

    phase: str
    batch: int
    tokens: int  # prompt length for prefill, context length for decode
    flops: float
    bytes: float
    intensity: float  # FLOPs per byte
    ridge_point: float  # the device's peak / bandwidth
    compute_s: float
    memory_s: float
    lower_bound_s: float
    bound: str  # "compute" or "memory"
    formulas: tuple[Formula, ...]


def attention_widths(arch: Architecture, phase: str) -> tuple[int, str]:
    """FLOPs per (query, key) pair per layer: 2 × heads × (QK width + V width).

    MLA decodes in the absorbed form engines use (scores and values taken in the latent space:
    kv_lora_rank + rope for QK, kv_lora_rank for V); prefill runs the expanded per-head form.
    """
    if arch.mla is not None and phase == "decode":
        m = arch.mla
        width = m.latent_dim + m.kv_lora_rank
        return 2 * arch.num_heads * width, "2 × heads × ((kv_lora_rank + qk_rope) + kv_lora_rank)"
    return 2 * arch.num_heads * (arch.head_dim + arch.v_head_dim), "2 × heads × (qk_head_dim + v_head_dim)"


def causal_pairs(seq_len: int, window: int | None) -> int:
    """(query, key) pairs in causal attention over seq_len tokens: Σ_i min(i, window) for i = 1..seq_len."""
    if window is None or seq_len <= window:
        return seq_len * (seq_len + 1) // 2
    return window * (window + 1) // 2 + (seq_len - window) * window


def _estimate(phase: str, arch: Architecture, accel: Accelerator, batch: int, tokens: int,
              flops: float, traffic: float, formulas: list[Formula]) -> PhaseEstimate:
    compute_s = flops / accel.peak_flops
    memory_s = traffic / accel.bandwidth
    bound = "compute" if compute_s >= memory_s else "memory"
    lower = max(compute_s, memory_s)
    label = said("calc.label.prefill_time") if phase == "prefill" else said("calc.label.decode_time")
    formulas.append(Formula(
        label, "max(FLOPs / peak_FLOP/s, bytes / bandwidth)",
        f"max({flops:.4g} / {accel.peak_flops:.4g}, {traffic:.4g} / {accel.bandwidth:.4g})", lower, "s"))
    return PhaseEstimate(phase, batch, tokens, flops, traffic, flops / traffic, accel.ridge_point,
                         compute_s, memory_s, lower, bound, tuple(formulas))


def prefill_estimate(arch: Architecture, count: ParamCount, accel: Accelerator, weight_dtype: DType,
                     kv_dtype: DType, batch: int, prompt_len: int) -> PhaseEstimate:
    """Lower bound on processing `batch` prompts of `prompt_len` tokens at once."""
    per_pair, pair_sym = attention_widths(arch, "prefill")
    pairs = sum(causal_pairs(prompt_len, g.window if g.kind == SLIDING else None) * g.count
                for g in layer_groups(arch))
    # Only the last prompt token of each sequence needs logits, so the output projection runs once a
    # sequence (as generate and serving engines do); everything else multiplies every prompt token.
    head = arch.vocab_size * arch.hidden_size
    body = count.matmul_per_token - head
    linear = 2 * body * batch * prompt_len + 2 * head * batch
    attention = per_pair * pairs * batch
    weights = weight_bytes(count, weight_dtype)
    if arch.moe is not None:  # experts no prompt token is routed to are never read
        idle = 1 - experts_touched(arch, batch * prompt_len) / arch.moe.n_routed_experts
        weights -= weight_bytes(count, weight_dtype) * count.routed_expert_params / count.total * idle
    written = kv_cache_bytes(arch, batch, prompt_len, kv_dtype)
    formulas = [
        Formula(said("calc.label.prefill_flops"),
                "2 × (matmul_params_per_token − lm_head) × batch × prompt_len + 2 × lm_head × batch "
                f"+ batch × Σ_layers pairs × {pair_sym}",
                f"2 × {body:,} × {batch} × {prompt_len} + 2 × {head:,} × {batch} + {batch} × {pairs:,} × {per_pair:,}",
                linear + attention, "FLOP"),
        Formula(said("calc.label.prefill_bytes"), said("calc.formula.prefill_bytes"),
                f"{weights:,.0f} + {written:,}", weights + written),
    ]
    return _estimate("prefill", arch, accel, batch, prompt_len, linear + attention, weights + written, formulas)


def decode_estimate(arch: Architecture, count: ParamCount, accel: Accelerator, weight_dtype: DType,
                    kv_dtype: DType, batch: int, context_len: int) -> PhaseEstimate:
    """Lower bound on one decode step: `batch` new tokens, each attending to `context_len` cached ones and itself."""
    per_pair, pair_sym = attention_widths(arch, "decode")
    keys = sum(min(context_len + 1, g.window or context_len + 1) * g.count for g in layer_groups(arch))
    linear = 2 * count.matmul_per_token * batch
    attention = per_pair * keys * batch
    weights = weight_bytes_read_per_step(arch, count, weight_dtype, batch)
    kv_read = kv_cache_bytes(arch, batch, context_len, kv_dtype)
    kv_written = batch * bytes_per_token(arch, kv_dtype)
    formulas = [
        Formula(said("calc.label.decode_flops"),
                f"2 × matmul_params_per_token × batch + batch × Σ_layers keys × {pair_sym}",
                f"2 × {count.matmul_per_token:,} × {batch} + {batch} × {keys:,} × {per_pair:,}",
                linear + attention, "FLOP"),
        Formula(said("calc.label.decode_bytes"), said("calc.formula.decode_bytes"),
                f"{weights:,.0f} + {kv_read:,} + {kv_written:,}", weights + kv_read + kv_written),
    ]
    return _estimate("decode", arch, accel, batch, context_len, linear + attention,
                     weights + kv_read + kv_written, formulas)
