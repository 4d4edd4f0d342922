"""vLLM's KV-cache groups (v1 engine, 0.32): how its KV-cache manager splits a model's layers into groups that
share a block table, how many blocks a KV space holds, and how many blocks a request holds.

The rules, read from vllm/v1/core/kv_cache_utils.py, vllm/v1/kv_cache_interface.py and vllm/config/vllm.py:
- Each layer that keeps per-token KV gets a spec: full attention, sliding window (its window) or chunked local
  attention (its chunk, Llama 4). Layers with the same spec form a bucket; all layers alike: one group of all.
- Several buckets (the hybrid KV-cache manager, on by default, on the CPU build too): the group size g is the
  smallest bucket's layer count, or the largest's when that is under 1.5 × the smallest; a bucket of n layers
  splits into ⌈n / g⌉ groups (layers[i::⌈n/g⌉]), the short ones padded to g layers ("Add 2 padding layers"
  in vLLM's log). Gemma 3's 22 sliding + 4 full layers make 6 + 1 groups of 4; its 6-layer twin 5 + 1 of 1.
- With the manager off (chunked local attention when VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0, or
  --disable-hybrid-kv-cache-manager) local layers are allocated as full ones: one group of every layer.
- One block of the pool is one page (block_size tokens of one layer) for each of the g layers of a group:
  num_blocks = budget // (g × block_size × bytes per token and layer); every group draws from that pool.
- A request of max_model_len L holds, in each group: full ⌈L / bs⌉ blocks; sliding ⌈min(w - 1 + T, L) / bs⌉
  + 1 (the window need not start on a block); chunked ⌈min(c + T, L) / bs⌉; T the tokens in flight, vLLM's
  max_num_batched_tokens (2,048 a rank for its OpenAI server on a CPU, one batch in flight as the CPU build
  turns async scheduling off).
- Its log prints max_concurrency = num_blocks / (blocks a request holds) and "KV cache size: N tokens" with
  N = int(max_concurrency × L).
Not modelled: layers that keep a fixed-size state (Mamba, linear attention, convolution), whose page vLLM
sizes from the state and unifies with the attention page by padding or larger attention blocks, and a model
with no layer keeping per-token KV (vLLM makes no group). Knows layers and vLLM's rules, not servers.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from kvviz.calc.arch import CHUNKED, FULL, SLIDING, Architecture
from kvviz.calc.dtypes import DType
from kvviz.calc.memory import layer_groups, token_layer_bytes
from kvviz.i18n import Said, said

VLLM_CPU_BATCHED_TOKENS = 2048  # vLLM's max_num_batched_tokens a rank for its OpenAI server on a CPU
PAD_UNDER = 1.5  # vLLM pads every bucket to the largest one's size when that is under 1.5 × the smallest
# vLLM keeps a chunked-attention model's local layers in groups of their own unless this is 0 in its environment
CHUNKED_HYBRID_ENV = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"


@dataclass(frozen=True)
class NotModelled:
    """Why kvviz does not model vLLM's grouping for a model: one line, a Said (English as text; its key renders it
    in Chinese)."""

    reason: Said

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class KvGroup:
    """One of vLLM's KV-cache groups: `layers` layers of one kind (the rest of the group size is padding)."""

    kind: str  # full, sliding or chunked
    window: int | None  # the sliding window or the chunk, in tokens; None for full attention
    layers: int


@dataclass(frozen=True)
class KvGroups:
    """A model's layers as vLLM groups them: the groups, the layers a group spans (a block holds one page for
    each) and whether its local (sliding, chunked) layers were allocated as full ones (hybrid manager off)."""

    groups: tuple[KvGroup, ...]
    layers_per_group: int
    promoted: bool = False


def hybrid_manager(arch: Architecture, environ: dict[str, str] | None = None) -> bool:
    """Whether vLLM's hybrid KV-cache manager keeps `arch`'s local layers in groups of their own: yes, unless
    the model has chunked local attention and VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE is 0 in
    `environ` (default 1; default environ: this process's, which a vLLM kvviz starts inherits)."""
    if arch.chunk_size is None:
        return True
    return bool(int((os.environ if environ is None else environ).get(CHUNKED_HYBRID_ENV) or "1"))


def not_modelled(arch: Architecture) -> NotModelled | None:
    """Why vLLM's grouping of `arch` is not modelled here, or None when it is."""
    if arch.state is not None:
        return NotModelled(said("kv_groups.state", kind=arch.state.kind))
    if arch.kv_layers == 0:
        return NotModelled(said("kv_groups.no_kv"))
    return None


def group_size(bucket_sizes: list[int]) -> int:
    """Layers in each group: the smallest bucket's count, or the largest's when that is under 1.5 × the smallest
    (vLLM then pads the smaller buckets instead of splitting the larger ones)."""
    small, large = min(bucket_sizes), max(bucket_sizes)
    return large if large < small * PAD_UNDER else small


def split(count: int, size: int) -> list[int]:
    """The layer counts of the ⌈count / size⌉ groups a bucket of `count` layers splits into, as vLLM deals them
    (layers[i::groups]): the first count % groups groups get one layer more."""
    groups = math.ceil(count / size)
    return [count // groups + (i < count % groups) for i in range(groups)]


def kv_groups(arch: Architecture, hybrid: bool | None = None) -> KvGroups | NotModelled:
    """vLLM's KV-cache groups for `arch`; hybrid: whether vLLM's hybrid manager is on (off: local layers are
    allocated as full ones; None: as hybrid_manager says for this process's environment)."""
    unmodelled = not_modelled(arch)
    if unmodelled is not None:
        return unmodelled
    buckets = layer_groups(arch)
    if hybrid is None:
        hybrid = hybrid_manager(arch)
    if not hybrid and len(buckets) > 1 and any(b.kind == FULL for b in buckets):
        return KvGroups((KvGroup(FULL, None, arch.kv_layers),), arch.kv_layers, promoted=True)
    size = group_size([b.count for b in buckets])
    return KvGroups(tuple(KvGroup(b.kind, b.window, n) for b in buckets for n in split(b.count, size)), size)


def request_blocks(group: KvGroup, block_size: int, max_model_len: int, in_flight: int) -> int:
    """Blocks a request of max_model_len tokens holds in `group` at most, as vLLM sizes it: every token's
    (full), the window's last w - 1 tokens and the tokens in flight plus one block for a window that does not
    start on a block (sliding), the chunk and the tokens in flight (chunked)."""
    if group.kind == SLIDING:
        return math.ceil(min(group.window - 1 + in_flight, max_model_len) / block_size) + 1
    if group.kind == CHUNKED:
        return math.ceil(min(group.window + in_flight, max_model_len) / block_size)
    return math.ceil(max_model_len / block_size)


def held_blocks(group: KvGroup, tokens: int, block_size: int) -> int:
    """Blocks a sequence of `tokens` computed tokens holds in `group` now: its blocks less those wholly before
    its window (sliding: the tokens before the last w - 1; chunked: the whole chunks before the current one),
    which vLLM frees."""
    skipped = 0
    if group.kind == SLIDING:
        skipped = max(0, tokens - group.window + 1)
    elif group.kind == CHUNKED:
        skipped = tokens // group.window * group.window
    return math.ceil(tokens / block_size) - skipped // block_size


def logged_tokens(num_blocks: int, blocks_per_request: int, max_model_len: int) -> int:
    """The "KV cache size: N tokens" vLLM logs: int(max_concurrency × max_model_len), max_concurrency being
    num_blocks / the blocks a request of max_model_len holds."""
    return int(num_blocks / blocks_per_request * max_model_len)


@dataclass(frozen=True)
class VllmPool:
    """vLLM's block pool for a model: its groups, the blocks a KV space holds, the blocks a request of
    max_model_len holds across the groups, and the size vLLM's log prints."""

    groups: KvGroups
    num_blocks: int
    blocks_per_request: int
    logged_tokens: int


def vllm_pool(arch: Architecture, dtype: DType, budget_bytes: int, block_size: int, max_model_len: int,
              in_flight: int = VLLM_CPU_BATCHED_TOKENS, hybrid: bool | None = None) -> VllmPool | NotModelled:
    """vLLM's pool for `arch` in `budget_bytes` of KV space, or why it is not modelled."""
    grouped = kv_groups(arch, hybrid)
    if isinstance(grouped, NotModelled):
        return grouped
    block_bytes = grouped.layers_per_group * block_size * token_layer_bytes(arch, dtype)
    num_blocks = budget_bytes // block_bytes
    per_request = sum(request_blocks(g, block_size, max_model_len, in_flight) for g in grouped.groups)
    return VllmPool(grouped, num_blocks, per_request, logged_tokens(num_blocks, per_request, max_model_len))
