"""Capacity: how much KV cache fits beside the weights on an accelerator, and what that allows.

The budget follows vLLM's accounting: the memory-utilisation fraction of the device, less the
weights, less a runtime reserve (activations, CUDA context, workspace), is what the block
allocator may hand out. From it: token slots, the largest batch at a length, the longest length
at a batch. This module knows devices and the memory model; it measures nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.base.errors import InputError
from kvviz.base.units import GIB
from kvviz.calc.arch import Architecture
from kvviz.calc.dtypes import DType
from kvviz.calc.formula import Formula
from kvviz.calc.hardware import Accelerator
from kvviz.calc.memory import bytes_per_token, paged_bytes, state_bytes, state_elem_bytes
from kvviz.i18n import said

NO_CONTEXT_LIMIT = 10**9  # search bound for models whose config gives no max_position_embeddings


@dataclass(frozen=True)
class Capacity:
    """What fits on one accelerator.

    token_slots: tokens the block pool holds if every layer keeps every token (vLLM's "KV cache
    size in tokens"); max_batch: sequences of seq_len that fit at once; max_seq_len: the longest
    sequence at `batch`, capped by the model's context (seq_len_capped says the cap, not memory, bound it).
    """

    accelerator: Accelerator
    mem_util: float
    usable_bytes: int
    weights_bytes: int
    reserve_bytes: int
    kv_budget_bytes: int
    token_slots: int
    batch: int
    seq_len: int
    max_batch: int
    max_seq_len: int
    seq_len_capped: bool
    fits: bool
    formula: Formula


def token_slots(arch: Architecture, dtype: DType, budget_bytes: int, block_size: int = 16) -> int:
    """Tokens a block pool of `budget_bytes` holds: whole blocks of block_size tokens, each block
    block_size × bytes_per_token bytes (every layer keeps every token), as vLLM's "KV cache size" counts.
    0 for a model whose layers keep no per-token KV at all (a pure Mamba model: its state is per sequence)."""
    per_token = bytes_per_token(arch, dtype)
    return 0 if per_token == 0 else max(budget_bytes, 0) // (block_size * per_token) * block_size


def sequence_bytes(arch: Architecture, batch: int, seq_len: int, dtype: DType, block_size: int = 16) -> int:
    """What `batch` sequences of seq_len hold in the pool: their paged KV blocks and, for a model with
    linear-attention or Mamba layers, each sequence's fixed-size state."""
    return paged_bytes(arch, batch, seq_len, dtype, block_size) + state_bytes(arch, batch, state_elem_bytes(dtype))


def _longest(arch: Architecture, batch: int, dtype: DType, block_size: int, budget: int) -> tuple[int, bool]:
    """Largest seq_len whose paged cache (and state) for `batch` sequences fits `budget`, and whether the cap
    bound it."""
    cap = arch.max_position_embeddings or NO_CONTEXT_LIMIT
    if sequence_bytes(arch, batch, cap, dtype, block_size) <= budget:
        return cap, True
    if sequence_bytes(arch, batch, 0, dtype, block_size) > budget:
        return 0, False  # the states of `batch` sequences alone do not fit
    lo, hi = 0, cap  # sequence_bytes(lo) fits, sequence_bytes(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if sequence_bytes(arch, batch, mid, dtype, block_size) <= budget else (lo, mid)
    return lo, False


def capacity(
    arch: Architecture,
    accel: Accelerator,
    dtype: DType,
    weights_bytes: int,
    batch: int,
    seq_len: int,
    mem_util: float = 0.9,
    reserve_bytes: int = GIB,
    block_size: int = 16,
) -> Capacity:
    """Answer the capacity questions for `arch` on `accel` with the cache in `dtype`."""
    if not 0 < mem_util <= 1:
        raise InputError("calc.error.mem_util")
    usable = int(accel.memory_bytes * mem_util)
    budget = usable - weights_bytes - reserve_bytes - arch.kv_layers * dtype.tensor_overhead_bytes
    formula = Formula(
        said("calc.label.budget"),
        "accelerator_memory × mem_util − weights − reserve",
        f"{accel.memory_bytes:,} × {mem_util:g} − {weights_bytes:,} − {reserve_bytes:,}",
        max(budget, 0),
    )
    if budget <= 0:
        return Capacity(accel, mem_util, usable, weights_bytes, reserve_bytes, max(budget, 0), 0, batch, seq_len,
                        0, 0, False, False, formula)
    per_seq = sequence_bytes(arch, 1, max(seq_len, 1), dtype, block_size)
    max_seq_len, capped = _longest(arch, batch, dtype, block_size, budget)
    return Capacity(
        accelerator=accel, mem_util=mem_util, usable_bytes=usable, weights_bytes=weights_bytes,
        reserve_bytes=reserve_bytes, kv_budget_bytes=budget,
        token_slots=token_slots(arch, dtype, budget, block_size),
        batch=batch, seq_len=seq_len,
        max_batch=budget // per_seq,
        max_seq_len=max_seq_len, seq_len_capped=capped,
        fits=sequence_bytes(arch, batch, seq_len, dtype, block_size) <= budget,
        formula=formula,
    )
