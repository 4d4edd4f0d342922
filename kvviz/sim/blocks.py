"""The paged KV cache as vLLM V1's block pool keeps it: a fixed number of blocks, a free queue in eviction order,
reference counts, and the prefix cache (a block's hash to the block that holds it).

Followed: vllm/v1/core/block_pool.py (BlockPool.get_new_blocks takes blocks from the head of the free queue and
evicts a cached block it takes; touch takes a cached block with no reference off the free queue; free_blocks puts
a block whose count falls to zero at the queue's tail if it is cached, at its head if not; cache_full_blocks
hashes the full blocks) and kv_cache_manager.py (KVCacheManager.free frees a request's blocks in reverse order, so
that its tail blocks are evicted first; get_num_free_blocks counts the cached blocks nobody references as free).
What a block holds is not modelled, only which tokens it stands for: a hash is any hashable value the scheduler
gives (a shared prefix's block, or one request's own block). No null block: `capacity` is the usable blocks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable


class BlockPool:
    """`capacity` blocks, numbered 0..capacity-1, all free and uncached at the start."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(capacity))  # head: evicted first
        self._refs = [0] * capacity
        self._hash_of: dict[int, Hashable] = {}
        self._cached: dict[Hashable, dict[int, None]] = {}  # a hash to every block holding it, first cached first

    @property
    def free(self) -> int:
        """Blocks a request can take: those no request references, cached or not (vLLM's get_num_free_blocks)."""
        return len(self._free)

    def cached_free(self) -> tuple[int, ...]:
        """The free blocks that still hold cached tokens (a later request with the same tokens can hit them), in
        eviction order."""
        return tuple(block for block in self._free if block in self._hash_of)

    @property
    def used(self) -> int:
        return self.capacity - self.free

    def allocate(self, n: int) -> list[int]:
        """n blocks from the free queue's head; a cached one among them leaves the prefix cache (evicted)."""
        taken = []
        for _ in range(n):
            block, _ = self._free.popitem(last=False)
            old = self._hash_of.pop(block, None)
            if old is not None:
                del self._cached[old][block]
                if not self._cached[old]:
                    del self._cached[old]
            self._refs[block] = 1
            taken.append(block)
        return taken

    def lookup(self, key: Hashable) -> int | None:
        """The first cached block holding `key` (BlockHashToBlockMap.get_one_block), or None."""
        holders = self._cached.get(key)
        return next(iter(holders)) if holders else None

    def evictable(self, blocks: list[int]) -> int:
        """How many of these cached blocks nobody references: touching them takes them off the free queue."""
        return sum(1 for b in blocks if self._refs[b] == 0)

    def touch(self, blocks: list[int]) -> None:
        for block in blocks:
            if self._refs[block] == 0:
                del self._free[block]
            self._refs[block] += 1

    def release(self, blocks: list[int]) -> None:
        """A request lets its blocks go, last first (its tail is evicted before its head and a shared prefix). A
        freed block that holds no cached tokens goes to the queue's front, to be reused first; a cached one to its
        tail, to stay a hit as long as can be (BlockPool.free_blocks: prepend_n, then append_n)."""
        first, last = [], []
        for block in reversed(blocks):
            self._refs[block] -= 1
            if self._refs[block] == 0:
                (last if block in self._hash_of else first).append(block)
        for block in reversed(first):
            self._free[block] = None
            self._free.move_to_end(block, last=False)
        for block in last:
            self._free[block] = None

    def cache(self, block: int, key: Hashable) -> None:
        """The full block now holds the tokens `key` names. Two requests that computed the same tokens at once
        both cache their block (vLLM's BlockHashToBlockMap keeps duplicates); a hit takes the first."""
        self._cached.setdefault(key, {})[block] = None
        self._hash_of[block] = key
