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
sliding-window and Mamba layers (one full-attention KV group), a request stopped early by EOS (every request
produces its output_tokens, as with ignore_eos), the time between steps (the engine core's own overhead is in
whatever the step-time model's intercept holds).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from kvviz.sim.blocks import BlockPool

CPU_MAX_NUM_BATCHED_TOKENS = 2048  # EngineArgs._set_default_args, CPU, OpenAI API server
CPU_MAX_NUM_SEQS = 128
CPU_BLOCK_SIZE = 128  # CpuPlatform.check_and_update_config, no block size given


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
    blocks: list[int] = field(default_factory=list)
    cached_blocks: int = 0  # of its blocks, how many are full and in the prefix cache
    preemptions: int = 0
    token_times_s: list[float] = field(default_factory=list)
    finished_s: float | None = None

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


def _blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


class Scheduler:
    """The running and waiting queues over one block pool, stepped by schedule() then finish_step()."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.pool = BlockPool(config.num_blocks)
        self.running: list[SimRequest] = []
        self.waiting: deque[SimRequest] = deque()

    def add(self, request: SimRequest) -> None:
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
            while not self._allocate(request, tokens, []):
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
            hit = self._prefix_hit(request)
            start = len(hit) * config.block_size
            tokens = request.num_tokens - start
            if not config.chunked_prefill and tokens > budget:
                return
            tokens = min(tokens, budget)
            watermark = config.watermark_blocks if self.running else 0
            if config.reserve_full_prompt and not self._fits_whole(request, hit, watermark):
                return
            if not self._allocate(request, tokens, hit, watermark):
                return
            self.waiting.popleft()
            self.running.append(request)
            request.computed = start
            plan.cached_tokens += start
            if start:
                plan.hits.append((request.index, start))
            plan.scheduled.append(Scheduled(request, start, tokens))
            budget -= tokens

    def _prefix_hit(self, request: SimRequest) -> list[int]:
        """The cached blocks at the head of the request's tokens, whole blocks of at most num_tokens - 1 tokens."""
        if not self.config.prefix_caching:
            return []
        size = self.config.block_size
        most = (request.num_tokens - 1) // size
        return self.pool.hit([request.block_key(i, size) for i in range(most)])

    def _fits_whole(self, request: SimRequest, hit: list[int], watermark: int) -> bool:
        """allocate_slots' full_sequence_must_fit: a waiting request is admitted only if blocks for all its tokens
        so far (its prompt, and the output a preempted one recomputes) are free, not just for its first chunk."""
        size = self.config.block_size
        whole = min(request.num_tokens, self.config.max_model_len)
        new = max(_blocks_for(whole, size) - len(hit), 0)
        return new + self.pool.evictable(hit) + watermark <= self.pool.free

    def _allocate(self, request: SimRequest, tokens: int, hit: list[int], watermark: int = 0) -> bool:
        """allocate_slots: blocks for `tokens` more tokens past the hit and the request's computed tokens, if the
        free blocks (less the cached hit blocks it would take off the free queue) cover them and the watermark."""
        size = self.config.block_size
        if not hit and not watermark:  # a running request's next tokens (most calls): no cached blocks to touch
            total = request.computed + tokens
            new = max(-(-total // size) - len(request.blocks), 0)
            if new > self.pool.free:
                return False
            if new:
                request.blocks += self.pool.allocate(new)
            if self.config.prefix_caching and min(total, request.num_tokens) // size > request.cached_blocks:
                self._cache_full_blocks(request, min(total, request.num_tokens))
            return True
        held = len(request.blocks) + len(hit)
        total = request.computed + len(hit) * size + tokens
        new = max(_blocks_for(total, size) - held, 0)
        if new + self.pool.evictable(hit) + watermark > self.pool.free:
            return False
        self.pool.touch(hit)
        request.blocks += hit
        request.cached_blocks = max(request.cached_blocks, len(hit))
        request.blocks += self.pool.allocate(new)
        self._cache_full_blocks(request, min(total, request.num_tokens))
        return True

    def _cache_full_blocks(self, request: SimRequest, tokens: int) -> None:
        if not self.config.prefix_caching:
            return
        size = self.config.block_size
        for i in range(request.cached_blocks, tokens // size):
            self.pool.cache(request.blocks[i], request.block_key(i, size))
        request.cached_blocks = max(request.cached_blocks, tokens // size)

    def _preempt(self, request: SimRequest, plan: StepPlan) -> None:
        self.pool.release(request.blocks)
        plan.preempted += 1
        plan.victims.append(request.index)
        plan.preempted_tokens += request.computed
        request.blocks, request.cached_blocks, request.computed = [], 0, 0
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
                self.pool.release(request.blocks)
                request.blocks = []
                done.append(request)
        return done
