"""Parameter count and weight bytes, from the architecture alone.

The count follows the modules transformers builds for each family (projections with or without
bias, gated or plain MLP, routed and shared experts, the norms, tied or untied embeddings), and a
test checks it against the real model instantiated on the meta device. Matrices and vectors are
counted apart because quantised formats only pack matrices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvviz.calc.arch import Architecture, ConfigError
from kvviz.calc.dtypes import WEIGHT_DTYPES, DType
from kvviz.calc.formula import Formula


@dataclass(frozen=True)
class Component:
    """One kind of parameter summed over the model: matrix elements and vector elements (norms, biases)."""

    name: str
    matrix: int
    vector: int = 0

    @property
    def total(self) -> int:
        return self.matrix + self.vector


@dataclass(frozen=True)
class ParamCount:
    """The model's parameters by component.

    matmul_per_token: weight-matrix elements one token is multiplied by (attention, the MLP or the
    active experts, the output projection); a forward pass costs about 2 × this many FLOPs a token.
    """

    components: tuple[Component, ...]
    matmul_per_token: int
    routed_expert_params: int
    moe_layers: int

    @property
    def total(self) -> int:
        return sum(c.total for c in self.components)

    def get(self, name: str) -> Component:
        return next((c for c in self.components if c.name == name), Component(name, 0))

    @property
    def formula(self) -> Formula:
        parts = [c for c in self.components if c.total]
        return Formula("Parameters", " + ".join(c.name for c in parts),
                       " + ".join(f"{c.total:,}" for c in parts), self.total, "params")


def _attention(arch: Architecture) -> tuple[int, int]:
    """(matrix, vector) parameters of one attention block."""
    h, lay = arch.hidden_size, arch.layout
    if arch.mla is not None:
        m = arch.mla
        q_out = arch.num_heads * m.qk_head_dim
        if m.q_lora_rank:
            q_mat, q_vec = h * m.q_lora_rank + m.q_lora_rank * q_out, m.q_lora_rank  # q_a, q_a_layernorm, q_b
        else:
            q_mat, q_vec = h * q_out, 0
        kv_mat = h * m.latent_dim + m.kv_lora_rank * arch.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
        o_mat = arch.num_heads * m.v_head_dim * h
        return q_mat + kv_mat + o_mat, q_vec + m.kv_lora_rank  # + kv_a_layernorm
    q_out = arch.num_heads * arch.head_dim
    kv_out = arch.num_kv_heads * arch.head_dim
    matrix = h * q_out + 2 * h * kv_out + q_out * h
    vector = (q_out + 2 * kv_out) * lay.qkv_bias + h * lay.o_bias + 2 * arch.head_dim * lay.qk_norm
    return matrix, vector


def _mlp(arch: Architecture, intermediate: int) -> tuple[int, int]:
    """(matrix, vector) parameters of one dense MLP of the given width."""
    h, lay = arch.hidden_size, arch.layout
    if lay.gated_mlp:
        return 3 * h * intermediate, (2 * intermediate + h) * lay.mlp_bias
    return 2 * h * intermediate, (intermediate + h) * lay.mlp_bias


def count_params(arch: Architecture) -> ParamCount:
    """Count the parameters of `arch` component by component; ConfigError if its weights are unknown."""
    if not arch.has_weights:
        raise ConfigError("the weights are unknown for an architecture given only by KV dimensions")
    h, layers, lay = arch.hidden_size, arch.num_layers, arch.layout
    attn_m, attn_v = _attention(arch)
    norm = h * (2 if lay.norm == "layer" else 1)
    moe = arch.moe
    # The first k layers keep a dense MLP; a model cut to k layers or fewer (the calculator's slider) has no MoE layer.
    moe_layers = 0 if moe is None else max(layers - moe.first_k_dense_replace, 0)
    dense_m, dense_v = _mlp(arch, arch.intermediate_size)
    components = [
        Component("embedding", arch.vocab_size * h),
        Component("position embedding", (arch.max_position_embeddings or 0) * h * lay.learned_positions),
        Component("attention", layers * attn_m, layers * attn_v),
        Component("dense MLP", (layers - moe_layers) * dense_m, (layers - moe_layers) * dense_v),
    ]
    routed = 0
    active_mlp = (layers - moe_layers) * dense_m
    if moe is not None:
        expert_m, expert_v = _mlp(arch, moe.moe_intermediate_size)
        shared_m, shared_v = _mlp(arch, moe.moe_intermediate_size * moe.n_shared_experts) if moe.n_shared_experts \
            else (0, 0)
        routed = moe_layers * moe.n_routed_experts * expert_m
        components += [
            Component("routed experts", routed, moe_layers * moe.n_routed_experts * expert_v),
            Component("shared experts", moe_layers * shared_m, moe_layers * shared_v),
            Component("router", moe_layers * moe.n_routed_experts * h),
        ]
        active_mlp += moe_layers * (moe.num_experts_per_tok * expert_m + shared_m + moe.n_routed_experts * h)
    components += [
        Component("norms", 0, layers * lay.norms_per_layer * norm + norm),
        Component("lm_head", 0 if arch.tie_word_embeddings else arch.vocab_size * h),
    ]
    matmul = layers * attn_m + active_mlp + arch.vocab_size * h  # the output projection runs even when tied
    return ParamCount(tuple(components), matmul, routed, moe_layers)


_KEEP_16BIT = ("embedding", "position embedding", "lm_head")


def weight_bytes(count: ParamCount, dtype: DType) -> int:
    """Bytes of the weights in `dtype`.

    Float formats store every parameter at their width. The 8- and 4-bit formats pack the layer
    matrices (with group scales for int8/int4) and keep vectors, embeddings and lm_head in bf16, as
    GPTQ, AWQ and fp8 checkpoints do.
    """
    if dtype.bits >= 16:
        return math.ceil(count.total * dtype.bits / 8)
    bf16 = WEIGHT_DTYPES["bf16"]
    packed = sum(c.matrix for c in count.components if c.name not in _KEEP_16BIT)
    kept = count.total - packed
    scales = 0 if dtype.group_size is None else math.ceil(packed / dtype.group_size) * dtype.group_overhead_bytes
    return math.ceil(packed * dtype.bits / 8) + scales + math.ceil(kept * bf16.bits / 8)


def experts_touched(arch: Architecture, batch: int) -> float:
    """Expected routed experts one MoE layer reads for `batch` tokens, if routing were uniform:
    E × (1 - (1 - k/E)^batch)."""
    if arch.moe is None:
        return 0.0
    e, k = arch.moe.n_routed_experts, arch.moe.num_experts_per_tok
    return e * (1 - (1 - k / e) ** batch)


def _param_bytes(params: float, dtype: DType, packed: bool) -> float:
    """Bytes of `params` parameters stored as weight_bytes stores them (packed matrix or kept in bf16)."""
    if dtype.bits >= 16:
        return params * dtype.bits / 8
    if not packed:
        return params * 2
    scales = 0 if dtype.group_size is None else params / dtype.group_size * dtype.group_overhead_bytes
    return params * dtype.bits / 8 + scales


def weight_bytes_read_per_step(arch: Architecture, count: ParamCount, dtype: DType, batch: int) -> float:
    """Weight bytes one decode step must read for `batch` sequences.

    Everything resident is read except the rows of an untied embedding table (and position table)
    that no token looks up, and the routed experts no token is sent to (expected value, uniform routing).
    """
    unread_rows = 0.0
    if not arch.tie_word_embeddings:
        unread_rows += max(arch.vocab_size - batch, 0) * arch.hidden_size
    if arch.layout.learned_positions:
        unread_rows += max((arch.max_position_embeddings or 0) - batch, 0) * arch.hidden_size
    unread_experts = 0.0
    if arch.moe is not None:
        idle_fraction = 1 - experts_touched(arch, batch) / arch.moe.n_routed_experts
        unread_experts = count.get("routed experts").matrix * idle_fraction
    skipped = _param_bytes(unread_rows, dtype, packed=False) + _param_bytes(unread_experts, dtype, packed=True)
    return weight_bytes(count, dtype) - skipped
