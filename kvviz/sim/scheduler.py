"""One engine step of vLLM V1's scheduler (vllm 0.32, as installed in .venv-vllm), on requests that are only
counts of tokens: which requests run, how many tokens each computes, which blocks they take, whom it preempts.

Followed (vllm/v1/core/sched/scheduler.py, Scheduler.schedule): the RUNNING requests first, in their order, each
asking num_tokens - num_computed_tokens (a decode asks 1, a prefill its remaining prompt), cut to the step's token
budget (max_num_batched_tokens); KVCacheManager.allocate_slots gives the blocks or refuses, and on a refusal the
scheduler preempts the last running request (`self.running.pop()`, the FCFS policy) and tries again, until the
request fits or it preempted itself; Scheduler._preempt_request frees the victim's blocks, sets its computed
tokens to 0 (recompute) and puts it at the head of the waiting queue. Then, only if nobody was preempted this step,
the WAITING requests in order while the budget lasts and fewer than max_num_seqs run: the prefix-cache hit
(KVCacheManager.get_computed_blocks: whole blocks, at most num_tokens - 1 tokens, so the last token is computed),
the rest as a chunk cut to the budget (or the whole prompt, or stop, without chunked prefill), blocks for it
(allocate_slots: the new blocks plus the cached blocks nobody references, which it takes off the free queue, and
the watermark, 0 by default, for a waiting request while others run; for a waiting request, with
scheduler_reserve_full_isl on by default, first the same check for all its tokens, not only the chunk) or stop.
After the step (Scheduler.update_from_output) a request whose computed tokens reach its num_tokens samples one
token; one that has all its output tokens finishes and frees its blocks (Scheduler._free_request).
Checked against vLLM's own Scheduler class, step by step, in tests/sim/test_against_vllm.py.
Defaults on a CPU (vllm/engine/arg_utils.py, EngineArgs._set_default_args, `current_platform.is_cpu()`, for the
OpenAI server): max_num_batched_tokens 2048, max_num_seqs 128; vllm/platforms/cpu.py
(CpuPlatform.check_and_update_config): block_size 128 when not given; chunked prefill and prefix caching on for a
decoder model (EngineArgs._set_default_chunked_prefill_and_prefix_caching_args; off for MLA on CPU).
Async scheduling is off on a CPU (CpuPlatform.check_and_update_config sets it False), so a step's output is in
before the next is scheduled, as here. Not modelled: async scheduling (a GPU's default), speculative decoding,
the long_prefill_token_threshold (0 by default), priority scheduling, encoder inputs, KV connectors,
chunked-local attention and Mamba layers, a request stopped early by EOS (every request produces its
output_tokens, as with ignore_eos), the time between steps (the engine core's own overhead is in whatever the
step-time model's intercept holds).

KV-cache groups (vLLM's hybrid KV-cache manager: vllm/v1/core/kv_cache_coordinator.py, HybridKVCacheCoordinator,
and single_type_kv_cache_manager.py, SlidingWindowManager). A model's layers form groups (kvviz.serving.kv_groups
says which); every group keeps its own block table per request, all drawing on the one pool, and a step's blocks
are the sum over groups. A sliding-window group of window w: before each allocation the blocks wholly before the
last w - 1 computed tokens are freed (remove_skipped_blocks, last first); a waiting request's admission counts at
most cdiv(min(w - 1 + max_num_batched_tokens, max_model_len), block) + 1 blocks for it (the admission cap); a
prefix hit there needs cdiv(w - 1, block) cached blocks in a row, found from the right (find_longest_cache_hit),
and only the blocks that can serve such a hit are cached (reachable_block_mask with vLLM's default retention
interval 0: the run of blocks ending at the prompt's last token but one, and at a shared prefix's end once a later
request found the full-attention groups hit further than the sliding ones: the "shared_prefix_boundary"). The hit
of all groups is the shortest, found full groups first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from kvviz.sim.blocks import BlockPool

CPU_MAX_NUM_BATCHED_TOKENS = 2048  # EngineArgs._set_default_args, CPU, OpenAI API server
CPU_MAX_NUM_SEQS = 128
CPU_BLOCK_SIZE = 128  # CpuPlatform.check_and_update_config, no block size given
FULL, SLIDING = "full", "sliding"  # the kinds of KV-cache group the scheduler keeps (kvviz.calc.arch's names)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KvGroupSpec:
    """One of vLLM's KV-cache groups as the scheduler sees it: full attention, or a sliding window of `window`
    tokens (the layers a group spans only size the pool's blocks, kvviz.sim.capacity)."""

    kind: str = FULL
    window: int | None = None

    def skipped(self, computed: int) -> int:
        """Tokens before the next token's window, whose blocks the group frees (get_num_skipped_tokens)."""
        return max(0, computed - self.window + 1) if self.kind == SLIDING else 0

    def hit_run(self, block_size: int) -> int:
        """Cached blocks in a row a sliding group's prefix hit needs: the window's last w - 1 tokens."""
        return _cdiv(self.window - 1, block_size)

    def admission_cap(self, block_size: int, in_flight: int, max_model_len: int) -> int | None:
        """The most blocks a waiting request's admission counts for this group (max_admission_blocks_per_request:
        the window's w - 1 tokens, the tokens in flight, one block for a window not starting on a block); None
        for full attention, which keeps every block."""
        if self.kind != SLIDING:
            return None
        return _cdiv(min(self.window - 1 + in_flight, max_model_len), block_size) + 1


FULL_ATTENTION = (KvGroupSpec(),)


@dataclass(frozen=True)
class SchedulerConfig:
    """The engine's scheduling knobs and its KV capacity, in blocks of block_size tokens."""

    num_blocks: int
    block_size: int = CPU_BLOCK_SIZE
    max_num_seqs: int = CPU_MAX_NUM_SEQS
    max_num_batched_tokens: int = CPU_MAX_NUM_BATCHED_TOKENS
    max_model_len: int = 2048
    chunked_prefill: bool = True
    prefix_caching: bool = True
    watermark_blocks: int = 0
    reserve_full_prompt: bool = True  # vLLM's scheduler_reserve_full_isl (on by default)
    groups: tuple[KvGroupSpec, ...] = FULL_ATTENTION  # the KV-cache groups, in vLLM's order


@dataclass(eq=False)
class SimRequest:
    """A request inside the engine. prefix_tokens of its prompt are shared with every request of prefix_group."""

    index: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_tokens: int = 0
    prefix_group: int = 0
    computed: int = 0
    generated: int = 0
    tables: list[list[int | None]] = field(default_factory=list)  # a block table per KV group; None: freed
    cached: list[int] = field(default_factory=list)  # per group: the blocks already hashed (num_cached_block)
    junction: int = 0  # vLLM's shared_prefix_boundary: a shared prefix's end, for a sliding group to cache
    preemptions: int = 0
    token_times_s: list[float] = field(default_factory=list)
    finished_s: float | None = None

    @property
    def blocks(self) -> list[int]:
        """The blocks it holds, group by group."""
        return [block for table in self.tables for block in table if block is not None]

    @property
    def num_tokens(self) -> int:
        """The prompt and the output so far: what a resumed request recomputes."""
        return self.prompt_tokens + self.generated

    def block_key(self, i: int, block_size: int) -> Hashable:
        """What block i holds: a block wholly inside the shared prefix is the same for the whole group; any other
        block's hash chains through this request's own tokens, so it is this request's alone."""
        if (i + 1) * block_size <= self.prefix_tokens:
            return ("prefix", self.prefix_group, i)
        return ("request", self.index, i)


@dataclass(frozen=True)
class Scheduled:
    """One request's share of a step: `tokens` computed from position `start` (its computed tokens before)."""

    request: SimRequest
    start: int
    tokens: int


@dataclass
class StepPlan:
    """What schedule() decided for one step."""

    scheduled: list[Scheduled] = field(default_factory=list)
    preempted: int = 0
    preempted_tokens: int = 0  # computed tokens thrown away by preemption, to be computed again
    cached_tokens: int = 0  # prompt tokens a prefix-cache hit spared at admission
    victims: list[int] = field(default_factory=list)  # the preempted requests' indices, in order
    hits: list[tuple[int, int]] = field(default_factory=list)  # (request index, tokens) of each prefix-cache hit


def admission_blocks(config: SchedulerConfig, tokens: int) -> int:
    """The blocks a waiting request of `tokens` tokens must find free to be admitted, over every group (a
    sliding group's at most its admission cap): what the pool must hold for it ever to run."""
    size = config.block_size
    caps = (g.admission_cap(size, config.max_num_batched_tokens, config.max_model_len) for g in config.groups)
    return sum(_cdiv(tokens, size) if cap is None else min(_cdiv(tokens, size), cap) for cap in caps)


class Scheduler:
    """The running and waiting queues over one block pool, stepped by schedule() then finish_step()."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.pool = BlockPool(config.num_blocks)
        self.running: list[SimRequest] = []
        self.waiting: deque[SimRequest] = deque()
        # The groups a prefix hit is looked up in together, those of one spec, full attention first (vLLM's
        # attention_groups): a block hits only if every group of the spec holds it.
        specs = sorted(dict.fromkeys(config.groups), key=lambda spec: spec.kind != FULL)
        self._hit_sets = [(spec, [g for g, other in enumerate(config.groups) if other == spec]) for spec in specs]

    def add(self, request: SimRequest) -> None:
        request.tables = [[] for _ in self.config.groups]
        request.cached = [0] * len(self.config.groups)
        self.waiting.append(request)

    @property
    def busy(self) -> bool:
        return bool(self.running or self.waiting)

    def schedule(self) -> StepPlan:
        plan = StepPlan()
        budget = self._schedule_running(plan, self.config.max_num_batched_tokens)
        if not plan.preempted:
            self._schedule_waiting(plan, budget)
        return plan

    def _schedule_running(self, plan: StepPlan, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            request = self.running[i]
            tokens = min(request.num_tokens - request.computed, budget)
            while not self._allocate(request, tokens):
                victim = self.running.pop()  # FCFS: the last admitted goes first
                self._preempt(victim, plan)
                if victim is request:
                    return budget
            plan.scheduled.append(Scheduled(request, request.computed, tokens))
            budget -= tokens
            i += 1
        return budget

    def _schedule_waiting(self, plan: StepPlan, budget: int) -> None:
        config = self.config
        while budget > 0 and self.waiting and len(self.running) < config.max_num_seqs:
            request = self.waiting[0]
            hit, start = self._prefix_hit(request)
            tokens = request.num_tokens - start
            if not config.chunked_prefill and tokens > budget:
                return
            tokens = min(tokens, budget)
            watermark = config.watermark_blocks if self.running else 0
            if config.reserve_full_prompt and not self._fits_whole(request, hit, start, watermark):
                return
            if not self._allocate(request, tokens, (hit, start), watermark):
                return
            self.waiting.popleft()
            self.running.append(request)
            request.computed = start
            plan.cached_tokens += start
            if start:
                plan.hits.append((request.index, start))
            plan.scheduled.append(Scheduled(request, start, tokens))
            budget -= tokens

    def _prefix_hit(self, request: SimRequest) -> tuple[list[list[int | None]], int]:
        """The cached blocks at the head of the request's tokens in each group and the tokens they hold: whole
        blocks of at most num_tokens - 1 tokens, the length every group hits (HybridKVCacheCoordinator.
        find_longest_cache_hit: each spec in turn cuts the length; again until none does, or once for one full
        and one other spec). Sets the request's junction: the longest hit of one spec, where the shortest fell
        short of it."""
        groups = self.config.groups
        request.junction = 0
        if not self.config.prefix_caching:
            return [[] for _ in groups], 0
        size = self.config.block_size
        keys = [request.block_key(i, size) for i in range((request.num_tokens - 1) // size)]
        simple = len(self._hit_sets) == 2 and self._hit_sets[0][0].kind == FULL
        found: list[list[int | None] | None] = [None] * len(groups)
        found_length = [0] * len(groups)
        length, longest = request.num_tokens - 1, 0
        while True:
            current = length
            for spec, ids in self._hit_sets:
                if spec.kind == FULL and found[ids[0]] is not None:
                    current = min(current, found_length[ids[0]])
                    continue
                tables, current = self._spec_hit(spec, ids, keys, current)
                for g, table in zip(ids, tables, strict=True):
                    found[g], found_length[g] = table, current
                longest = max(longest, current)
            if current >= length:
                break
            length = current
            if simple:
                break
        for spec, ids in self._hit_sets:
            if spec.kind == FULL:
                for g in ids:
                    del found[g][_cdiv(length, size):]
        if len(groups) > 1 and longest > length:
            request.junction = longest
        return [table or [] for table in found], length

    def _spec_hit(self, spec: KvGroupSpec, ids: list[int], keys: list[Hashable],
                  most_tokens: int) -> tuple[list[list[int | None]], int]:
        """One spec's hit of at most most_tokens: full attention, the cached blocks in a row from the first; a
        sliding window, the first run of hit_run cached blocks found from the right, the blocks before it None
        (or, with no such run, the cached blocks in a row from the first)."""
        size, most = self.config.block_size, most_tokens // self.config.block_size
        if spec.kind == FULL:
            found = []
            for key in keys[:most]:
                blocks = self._lookup(ids, key)
                if blocks is None:
                    break
                found.append(blocks)
            return [[blocks[k] for blocks in found] for k in range(len(ids))], len(found) * size
        need = spec.hit_run(size)
        tables: list[list[int | None]] = [[None] * most for _ in ids]
        run, matched = 0, False
        for i in range(most - 1, -1, -1):
            blocks = self._lookup(ids, keys[i])
            if blocks is None:
                run = 0
                continue
            for table, block in zip(tables, blocks, strict=True):
                table[i] = block
            run += 1
            if run >= need:
                for table in tables:
                    del table[i + run:]
                matched = True
                break
        if not matched:
            for table in tables:
                del table[run:]
        return tables, len(tables[0]) * size

    def _lookup(self, ids: list[int], key: Hashable) -> list[int] | None:
        """The cached block holding `key` in each of these groups, or None if one lacks it."""
        blocks = []
        for g in ids:
            block = self.pool.lookup((g, key))
            if block is None:
                return None
            blocks.append(block)
        return blocks

    def _to_allocate(self, request: SimRequest, g: int, tokens: int, hit: list[int | None], computed: int,
                     capped: bool = False) -> int:
        """get_num_blocks_to_allocate for a request not yet running, in group g: blocks for `tokens` past those
        it holds or hit and those its window skips (at most the admission cap when `capped`), and the cached hit
        blocks nobody references, which taking them takes off the free queue."""
        spec, size = self.config.groups[g], self.config.block_size
        required = _cdiv(tokens, size)
        cap = spec.admission_cap(size, self.config.max_num_batched_tokens, self.config.max_model_len)
        if capped and cap is not None:
            required = min(required, cap)
        table = request.tables[g]
        skipped = spec.skipped(computed) // size
        new = max(required - max(skipped, len(hit) + len(table)), 0)
        kept = hit[max(0, skipped - len(table)):]
        return new + self.pool.evictable([block for block in kept if block is not None])

    def _fits_whole(self, request: SimRequest, hit: list[list[int | None]], start: int, watermark: int) -> bool:
        """allocate_slots' full_sequence_must_fit: a waiting request is admitted only if blocks for all its tokens
        so far (its prompt, and the output a preempted one recomputes) are free, not just for its first chunk; a
        sliding group counts at most its admission cap."""
        whole = min(request.num_tokens, self.config.max_model_len)
        computed = min(request.computed + start, self.config.max_model_len)
        need = sum(self._to_allocate(request, g, whole, hit[g], computed, capped=True)
                   for g in range(len(self.config.groups)))
        return need + watermark <= self.pool.free

    def _allocate(self, request: SimRequest, tokens: int, hit: tuple[list[list[int | None]], int] | None = None,
                  watermark: int = 0) -> bool:
        """allocate_slots: free what the windows skip, then blocks for `tokens` more tokens past the request's
        computed tokens and its prefix hit (`hit`: the blocks per group and their tokens, for a request not yet
        running), if the free blocks (less the cached hit blocks it would take off the free queue) cover them and
        the watermark; then the full blocks are hashed."""
        size, most = self.config.block_size, self.config.max_model_len
        start = hit[1] if hit else 0
        total = min(request.computed + start, most)
        self._remove_skipped(request, total)
        slots = min(total + tokens, most)
        if hit is None:  # a running request (most calls): no cached blocks to take
            new = sum(max(_cdiv(slots, size) - len(table), 0) for table in request.tables)
        else:
            new = sum(self._to_allocate(request, g, slots, hit[0][g], request.computed + start)
                      for g in range(len(self.config.groups)))
        if new + watermark > self.pool.free:
            return False
        if hit is not None and start:
            for g, blocks in enumerate(hit[0]):
                skipped = self.config.groups[g].skipped(request.computed + start) // size
                kept = blocks[skipped:]
                self.pool.touch([block for block in kept if block is not None])
                request.tables[g] = [None] * skipped + kept
                request.cached[g] = len(request.tables[g])
        for table in request.tables:
            more = _cdiv(slots, size) - len(table)
            if more > 0:
                table += self.pool.allocate(more)
        self._cache_full_blocks(request, min(total + tokens, request.num_tokens))
        return True

    def _remove_skipped(self, request: SimRequest, computed: int) -> None:
        """A sliding group frees the blocks wholly before the window, last first, back to one already freed."""
        size = self.config.block_size
        for spec, table in zip(self.config.groups, request.tables, strict=True):
            if spec.kind != SLIDING:
                continue
            freed = []
            for i in range(min(spec.skipped(computed) // size, len(table)) - 1, -1, -1):
                if table[i] is None:
                    break
                freed.append(table[i])
                table[i] = None
            if freed:
                self.pool.release(freed[::-1])  # release frees last first: the highest block first, as vLLM

    def _reachable(self, spec: KvGroupSpec, request: SimRequest) -> set[int] | None:
        """The blocks of a sliding group worth caching (reachable_block_mask, retention interval 0): the hit_run
        blocks ending where a later request's hit could end, the prompt's last token but one and the junction."""
        if spec.kind != SLIDING:
            return None
        size, need = self.config.block_size, spec.hit_run(self.config.block_size)
        reach = set()
        for boundary in (request.prompt_tokens - 1, request.junction):
            if boundary:
                end = boundary // size
                reach.update(range(max(0, end - need), end))
        return reach

    def _cache_full_blocks(self, request: SimRequest, tokens: int) -> None:
        if not self.config.prefix_caching:
            return
        size = self.config.block_size
        full = tokens // size
        for g, (spec, table) in enumerate(zip(self.config.groups, request.tables, strict=True)):
            if request.cached[g] >= full:
                continue
            reach = self._reachable(spec, request)
            for i in range(request.cached[g], full):
                if table[i] is not None and (reach is None or i in reach):
                    self.pool.cache(table[i], (g, request.block_key(i, size)))
            request.cached[g] = full

    def _free(self, request: SimRequest) -> None:
        """Each group lets its blocks go in turn, last first (KVCacheCoordinator.free)."""
        for table in request.tables:
            self.pool.release([block for block in table if block is not None])
        request.tables = [[] for _ in self.config.groups]
        request.cached = [0] * len(self.config.groups)

    def _preempt(self, request: SimRequest, plan: StepPlan) -> None:
        self._free(request)
        plan.preempted += 1
        plan.victims.append(request.index)
        plan.preempted_tokens += request.computed
        request.computed = 0
        request.preemptions += 1
        self.waiting.appendleft(request)

    def finish_step(self, plan: StepPlan, now_s: float) -> list[SimRequest]:
        """The step ran and ended at now_s: computed tokens advance, a request that reached its end samples a
        token, and one with all its output finishes and frees its blocks. The finished ones, in order."""
        done = []
        for item in plan.scheduled:
            request = item.request
            request.computed = item.start + item.tokens
            if request.computed < request.num_tokens:
                continue  # a prefill chunk short of the prompt's end samples nothing
            request.generated += 1
            request.token_times_s.append(now_s)
            if request.generated == request.output_tokens:
                request.finished_s = now_s
                self.running.remove(request)
                self._free(request)
                done.append(request)
        return done
