"""The KV-cache memory model: how many bytes the cache of a batch of sequences holds, layer by layer.

The lesson's estimate, batch × seq_len × layers × 2 × kv_heads × head_dim × bytes_per_elem, is
exact for plain attention. Real models bend it three ways and this module follows each:
grouped-query attention (kv_heads < heads), sliding-window and chunked layers (a layer keeps at most
`window` or `chunk` tokens), and DeepSeek's latent attention (one compressed vector per token and layer in a
serving engine and in transformers since 5.15, expanded per-head keys and values in a naive implementation).
Layers that keep no per-token KV (linear attention, Mamba, convolution, MLP-only) add nothing per token; the
fixed-size state some of them keep is counted apart, per sequence (state_bytes). Quantised formats add
their scales (dtypes.py). Paged allocation rounds each sequence up to whole blocks, as vLLM does.
This module knows architectures and formats, not devices or weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvviz.base.errors import InputError
from kvviz.calc.arch import NONE, Architecture
from kvviz.calc.dtypes import DType
from kvviz.calc.formula import Factor, Formula, product, total
from kvviz.i18n import Said, said

LATENT = "latent"  # what an engine implementing MLA keeps (vLLM, SGLang)
EXPANDED = "expanded"  # per-head K/V of an MLA model, as a naive implementation (transformers < 5.15) keeps


@dataclass(frozen=True)
class LayerGroup:
    """Consecutive or not, the layers that share an attention kind and window."""

    kind: str
    window: int | None
    count: int


@dataclass(frozen=True)
class GroupBytes:
    """One layer group's share of the cache for a given batch and length."""

    group: LayerGroup
    tokens_kept: int
    bytes: int


@dataclass(frozen=True)
class KVBreakdown:
    """The cache of `batch` sequences of `seq_len` tokens, and how it was counted.

    bytes: what an engine that supports the architecture keeps (windows applied, MLA latent).
    no_window_bytes: what an engine that ignores the sliding window would allocate (None without windows).
    state_bytes: the fixed-size state of linear-attention/Mamba/convolution layers, per sequence × batch, which
        does not grow with seq_len (0 for a model without such layers); not included in `bytes`.
    mla_expanded_bytes: the expanded per-head keys and values a naive implementation keeps, as transformers
        did before 5.15 (None without MLA).
    """

    batch: int
    seq_len: int
    dtype: DType
    bytes: int
    bytes_per_token: int
    no_window_bytes: int | None
    mla_expanded_bytes: int | None
    groups: tuple[GroupBytes, ...]
    formula: Formula
    per_token_formula: Formula
    no_window_formula: Formula | None
    mla_expanded_formula: Formula | None
    state_bytes: int = 0
    state_formula: Formula | None = None


def layer_groups(arch: Architecture) -> tuple[LayerGroup, ...]:
    """The layers that keep per-token KV, grouped by attention kind in order of first appearance (full,
    sliding, chunked), each with its window; layers that keep none are left out."""
    counts: dict[str, int] = {}
    for kind in arch.layer_types:
        if kind != NONE:
            counts[kind] = counts.get(kind, 0) + 1
    return tuple(LayerGroup(kind, arch.window_of(kind), n) for kind, n in counts.items())


def state_elem_bytes(dtype: DType) -> float:
    """Bytes of one convolution-state value: the activation precision (16 bits at least) when the KV cache is
    stored in an 8- or 4-bit format, which quantises keys and values only."""
    return max(dtype.nominal_bytes, 2.0)


RECURRENT_STATE_BYTES = 4  # transformers keeps the SSM / delta-rule state in fp32 whatever the model's dtype


def state_bytes(arch: Architecture, batch: int, conv_elem_bytes: float) -> int:
    """Bytes of the fixed-size state `batch` sequences keep: batch × state_layers × (conv values × conv_elem_bytes
    + recurrent values × 4). The convolution window is kept in the activations' dtype, the recurrent state in
    fp32 (as transformers keeps both; measured for Mamba, Mamba-2, Jamba and Qwen3-Next in fp32 and bf16). It
    does not depend on seq_len: the layer folds every token into it."""
    if arch.state is None:
        return 0
    per_layer = arch.state.conv * conv_elem_bytes + arch.state.recurrent * RECURRENT_STATE_BYTES
    return int(batch * arch.state.layers * per_layer)


def cached_tokens(seq_len: int, window: int | None) -> int:
    """Tokens one layer keeps for one sequence: all of them, or the last `window` in a sliding layer."""
    return seq_len if window is None else min(seq_len, window)


def transformers_cache_bytes(arch: Architecture, batch: int, seq_len: int, dtype: DType,
                             mla_latent: bool = True) -> int:
    """Bytes transformers' DynamicCache holds between forward passes after `seq_len` tokens: its per-token KV
    (transformers_kv_bytes) and any linear-attention/Mamba/convolution state (conv in `dtype`, recurrent fp32)."""
    kv = transformers_kv_bytes(arch, batch, seq_len, dtype, mla_latent)
    return kv + state_bytes(arch, batch, dtype.nominal_bytes)


def transformers_kv_bytes(arch: Architecture, batch: int, seq_len: int, dtype: DType, mla_latent: bool = True) -> int:
    """Bytes of the per-token keys and values transformers' DynamicCache holds after `seq_len` tokens.

    A sliding or chunked layer keeps the last window - 1 tokens there (the next token brings the span
    back to `window`). An MLA model keeps the latent since transformers 5.15 and the expanded per-head
    keys and values before it: mla_latent says which. Falcon-40B's layout is cached broadcast to every
    query head (expanded_kv_heads).
    """
    per = transformers_token_layer_bytes(arch, dtype, mla_latent)
    tokens = sum(cached_tokens(seq_len, None if g.window is None else g.window - 1) * g.count
                 for g in layer_groups(arch))
    return batch * tokens * per


def transformers_token_layer_bytes(arch: Architecture, dtype: DType, mla_latent: bool = True) -> int:
    """Bytes one token leaves in one layer of a transformers cache: token_layer_bytes, with MLA's latent (since
    transformers 5.15) or expanded heads, and Falcon-40B's heads broadcast to every query head."""
    per = token_layer_bytes(arch, dtype, LATENT if mla_latent else EXPANDED)
    if arch.expanded_kv_heads:
        per = per // arch.num_kv_heads * arch.expanded_kv_heads
    return per


def activation_bytes(arch: Architecture, tokens: int, elem_bytes: int, attention_scores: bool = False) -> int:
    """Bytes of activations one forward pass over `tokens` tokens holds at its peak beside the weights and the
    cache, an estimate: per token the MLP's two intermediate tensors (gate and up) and four hidden-size ones
    (residual stream, normed input, attention output, a projection), each `elem_bytes` wide; one position's
    logits in fp32; and, where the attention materialises them (eager), one layer's scores, heads × tokens².
    """
    per_token = (2 * (arch.intermediate_size or 0) + 4 * (arch.hidden_size or 0)) * elem_bytes
    scores = arch.num_heads * tokens * tokens * elem_bytes if attention_scores else 0
    return tokens * per_token + scores + (arch.vocab_size or 0) * 4


def token_layer_bytes(arch: Architecture, dtype: DType, mla_mode: str = LATENT) -> int:
    """Bytes one token leaves in one layer's cache: keys and values of every KV head, or MLA's vector."""
    if arch.mla is not None and mla_mode == LATENT:
        return dtype.vector_bytes(arch.mla.latent_dim)
    heads = arch.num_heads if arch.mla is not None else arch.num_kv_heads
    return heads * (dtype.vector_bytes(arch.head_dim) + dtype.vector_bytes(arch.v_head_dim))


def bytes_per_token(arch: Architecture, dtype: DType, mla_mode: str = LATENT) -> int:
    """Bytes one token adds to one sequence's cache across the layers that keep KV, before any window caps it."""
    return arch.kv_layers * token_layer_bytes(arch, dtype, mla_mode)


def kv_cache_bytes(
    arch: Architecture,
    batch: int,
    seq_len: int,
    dtype: DType,
    *,
    apply_window: bool = True,
    mla_mode: str = LATENT,
) -> int:
    """Bytes of the KV cache for `batch` sequences of `seq_len` tokens, summed layer by layer.

    Sliding layers keep min(seq_len, window) tokens unless apply_window is False. Per-layer
    constants of the format (fp8's per-tensor scales) are added once per layer.
    """
    per = token_layer_bytes(arch, dtype, mla_mode)
    tokens = sum(
        cached_tokens(seq_len, g.window if apply_window else None) * g.count for g in layer_groups(arch)
    )
    return batch * tokens * per + arch.kv_layers * dtype.tensor_overhead_bytes


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _vector(symbol: str, dim: int, dtype: DType) -> list[Factor]:
    """Factors for the bytes of one stored vector of `dim` values in `dtype`."""
    if dtype.group_size is None:
        return [Factor(symbol, str(dim)), Factor("bytes_per_elem", _fmt_num(dtype.nominal_bytes))]
    groups = math.ceil(dim / dtype.group_size)
    sym = f"({symbol} × {dtype.bits}/8 + ⌈{symbol}/{dtype.group_size}⌉ × {dtype.group_overhead_bytes})"
    val = f"({dim} × {dtype.bits}/8 + {groups} × {dtype.group_overhead_bytes})"
    return [Factor(sym, val)]


def _per_token_layer(arch: Architecture, dtype: DType, mla_mode: str) -> list[Factor]:
    """Factors for token_layer_bytes, matching its arithmetic."""
    if arch.mla is not None and mla_mode == LATENT:
        return _vector("(kv_lora_rank + qk_rope_head_dim)", arch.mla.latent_dim, dtype)
    if arch.mla is not None:
        heads = Factor("heads", str(arch.num_heads))
        if dtype.group_size is None:
            width = Factor("(qk_head_dim + v_head_dim)", f"({arch.head_dim} + {arch.v_head_dim})")
            return [heads, width, Factor("bytes_per_elem", _fmt_num(dtype.nominal_bytes))]
        k = product(*_vector("qk_head_dim", arch.head_dim, dtype))
        v = product(*_vector("v_head_dim", arch.v_head_dim, dtype))
        return [heads, Factor(f"({k[0]} + {v[0]})", f"({k[1]} + {v[1]})")]
    return [Factor("2", "2"), Factor("kv_heads", str(arch.num_kv_heads)), *_vector("head_dim", arch.head_dim, dtype)]


def _kv_formula(arch: Architecture, batch: int, seq_len: int, dtype: DType, label: Said, *,
                apply_window: bool, mla_mode: str) -> Formula:
    groups = layer_groups(arch)
    if not apply_window:
        groups = (LayerGroup("all", None, arch.kv_layers),)
    terms = []
    for g in groups:
        if g.window is None:
            tokens = Factor("seq_len", str(seq_len))
        else:
            span = "chunk" if g.kind == "chunked" else "window"
            tokens = Factor(f"min(seq_len, {span})", f"min({seq_len}, {g.window})")
        layers_sym = "layers" if len(groups) == 1 and g.count == arch.num_layers else f"{g.kind}_layers"
        terms.append(product(Factor("batch", str(batch)), tokens, Factor(layers_sym, str(g.count)),
                             *_per_token_layer(arch, dtype, mla_mode)))
    if dtype.tensor_overhead_bytes:
        terms.append(product(Factor("kv_layers", str(arch.kv_layers)),
                             Factor("scale_bytes_per_layer", str(dtype.tensor_overhead_bytes))))
    symbolic, substituted = total(*terms) if terms else (said("calc.formula.no_kv"), "0")
    value = kv_cache_bytes(arch, batch, seq_len, dtype, apply_window=apply_window, mla_mode=mla_mode)
    return Formula(label, symbolic, substituted, value)


def kv_breakdown(arch: Architecture, batch: int, seq_len: int, dtype: DType) -> KVBreakdown:
    """The KV cache of `batch` sequences of `seq_len` tokens with every labelled variant and formula."""
    if batch < 1 or seq_len < 0:
        raise InputError("calc.error.batch_seq")
    formula = _kv_formula(arch, batch, seq_len, dtype, _kept_label(arch), apply_window=True, mla_mode=LATENT)
    per_token = product(Factor("kv_layers", str(arch.kv_layers)), *_per_token_layer(arch, dtype, LATENT))
    per_token_formula = Formula(said("calc.label.per_token"), *per_token, bytes_per_token(arch, dtype))
    no_window = None
    if arch.n_sliding:
        no_window = _kv_formula(arch, batch, seq_len, dtype, said("calc.label.kv_no_window"), apply_window=False,
                                mla_mode=LATENT)
    expanded = None
    if arch.mla is not None:
        expanded = _kv_formula(arch, batch, seq_len, dtype, said("calc.label.kv_mla_expanded"), apply_window=True,
                               mla_mode=EXPANDED)
    per_layer = token_layer_bytes(arch, dtype)
    groups = tuple(
        GroupBytes(g, cached_tokens(seq_len, g.window), batch * cached_tokens(seq_len, g.window) * g.count * per_layer)
        for g in layer_groups(arch)
    )
    return KVBreakdown(
        batch=batch, seq_len=seq_len, dtype=dtype, bytes=int(formula.value),
        state_bytes=state_bytes(arch, batch, state_elem_bytes(dtype)), state_formula=state_formula(arch, batch, dtype),
        bytes_per_token=bytes_per_token(arch, dtype),
        no_window_bytes=int(no_window.value) if no_window else None,
        mla_expanded_bytes=int(expanded.value) if expanded else None,
        groups=groups, formula=formula, per_token_formula=per_token_formula,
        no_window_formula=no_window, mla_expanded_formula=expanded,
    )


def _kept_label(arch: Architecture) -> Said:
    """The label of the cache an engine keeps: MLA's latent, or the KV cache with its windows applied and, beside
    a linear layer's state, how many layers keep per-token KV."""
    if arch.mla is not None:
        return said("calc.label.kv_mla")
    if arch.state is not None and arch.n_sliding:
        return said("calc.label.kv_window_state", kv=arch.kv_layers, n=arch.num_layers)
    if arch.state is not None:
        return said("calc.label.kv_state", kv=arch.kv_layers, n=arch.num_layers)
    return said("calc.label.kv_window") if arch.n_sliding else said("calc.label.kv")


def state_formula(arch: Architecture, batch: int, dtype: DType) -> Formula | None:
    """The state of the linear layers as a formula (None for a model without one)."""
    st = arch.state
    if st is None:
        return None
    elem = state_elem_bytes(dtype)
    return Formula(said("calc.label.state", kind=st.kind),
                   "batch × state_layers × (conv_values × bytes_per_elem + recurrent_values × 4 (fp32))",
                   f"{batch} × {st.layers} × ({st.conv:,} × {_fmt_num(elem)} + {st.recurrent:,} × "
                   f"{RECURRENT_STATE_BYTES})", state_bytes(arch, batch, elem))


@dataclass(frozen=True)
class PagedAllocation:
    """The cache as a paged allocator holds it: each layer's tokens rounded up to whole blocks.

    blocks_per_seq counts the blocks of one full-attention layer (a sliding layer needs at most
    the blocks covering its window); wasted bytes are the unused slots of each last block.
    """

    block_size: int
    blocks_per_seq: int
    block_bytes: int
    allocated_bytes: int
    exact_bytes: int
    wasted_bytes_per_seq: int
    wasted_bytes: int
    formula: Formula
    scale_bytes: int = 0  # the format's per-layer constants (fp8's scales): layer parameters, outside the blocks


def paged_bytes(arch: Architecture, batch: int, seq_len: int, dtype: DType, block_size: int = 16) -> int:
    """Bytes a block allocator holds: each layer's kept tokens rounded up to whole blocks of block_size."""
    slots = sum(math.ceil(cached_tokens(seq_len, g.window) / block_size) * block_size * g.count
                for g in layer_groups(arch))
    return batch * slots * token_layer_bytes(arch, dtype)


def paged_allocation(
    arch: Architecture, batch: int, seq_len: int, dtype: DType, block_size: int = 16
) -> PagedAllocation:
    """How a vLLM-style block allocator stores the cache, and how much of its last blocks stands empty."""
    if block_size < 1:
        raise InputError("calc.error.block_size")
    per = token_layer_bytes(arch, dtype)
    allocated = paged_bytes(arch, batch, seq_len, dtype, block_size)
    exact = kv_cache_bytes(arch, batch, seq_len, dtype) - arch.kv_layers * dtype.tensor_overhead_bytes
    formula = Formula(
        said("calc.label.paged"),
        "batch × Σ_layers ⌈tokens_kept / block_size⌉ × block_size × bytes_per_token_per_layer",
        said("calc.formula.paged", batch=batch, blocks=allocated // (batch * per * block_size), block=block_size,
             per=per),
        allocated,
    )
    return PagedAllocation(
        block_size=block_size,
        blocks_per_seq=math.ceil(seq_len / block_size),
        block_bytes=block_size * bytes_per_token(arch, dtype),
        allocated_bytes=allocated,
        exact_bytes=exact,
        wasted_bytes_per_seq=(allocated - exact) // batch,
        wasted_bytes=allocated - exact,
        formula=formula,
        scale_bytes=arch.kv_layers * dtype.tensor_overhead_bytes,
    )


def static_cache_bytes(arch: Architecture, batch: int, max_cache_len: int, dtype: DType,
                       mla_latent: bool = True) -> int:
    """Bytes transformers' StaticCache allocates for `batch` sequences of up to max_cache_len tokens, with any
    linear-attention/Mamba/convolution state (held in the model's dtype, `dtype` here).

    All of it is allocated at the first forward pass, however few tokens the run then writes: a full-attention
    layer holds max_cache_len tokens, a sliding or chunked one min(window, max_cache_len) (StaticSlidingWindowLayer
    keeps the whole window, where DynamicCache keeps window - 1). Per token and layer as transformers_cache_bytes
    counts it (MLA's latent since transformers 5.15, Falcon-40B's broadcast heads).
    """
    per = transformers_token_layer_bytes(arch, dtype, mla_latent)
    tokens = sum(cached_tokens(max_cache_len, g.window) * g.count for g in layer_groups(arch))
    return batch * tokens * per + state_bytes(arch, batch, dtype.nominal_bytes)
