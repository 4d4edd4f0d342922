"""The discrete-event loop: a workload through the scheduler, step after step, each step as long as the step-time
model says; out come the same per-request records and run statistics the load generator gives
(kvviz.serving.record, kvviz.serving.stats), and the trace of every step.

Time is simulated seconds from the first arrival's 0. A request enters the waiting queue at the first step boundary
at or after it reaches the engine (vLLM's engine core takes new requests between steps); its tokens come at the end
of the step that samples them; a closed loop's next request reaches the engine return_s after one ends (the last
token's way to the client and the next request's way back through the API server: the request overhead,
kvviz.sim.calibrate), and never in the step that begins as one ends, as on vLLM, whose engine starts its next step at
once while the answer travels (when nothing else runs, the engine is idle and takes it as it comes, and begins a step
with what it holds). Requests reach the engine one at a time, handoff_s apart at the closest (vLLM's API server
takes them in turn: a wave of requests sent at once reaches the engine spread out, the first step holding the first
of them); 0 hands every request over the moment it is sent. A replay of a measured load may say which requests
reached the engine together with the one sent before them (joined: the first step of a wave held two of them on
vLLM, a race the handoff cannot predict; kvviz.sim.calibrate.engine_order reads it off the measured first tokens).
No network, tokenizer, detokenizer or HTTP time beyond those: the records are the engine's view of each request,
timed from its sending. The run is bounded: at most max_requests requests (the rest are not sent), max_steps steps
and max_wall_s seconds of real time; a run cut short says why, and the requests it left unfinished count as failed.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, replace

from kvviz.base.errors import InputError, StateError
from kvviz.base.inputs import number, whole_number
from kvviz.calc.roofline import causal_pairs
from kvviz.i18n import Said, said
from kvviz.serving.record import RequestRecord
from kvviz.serving.stats import RunStats, Slo, run_stats
from kvviz.sim.scheduler import (
    FULL_ATTENTION,
    SLIDING,
    KvGroupSpec,
    Scheduler,
    SchedulerConfig,
    SimRequest,
    StepPlan,
    admission_blocks,
)
from kvviz.sim.step_time import StepContents, StepTimeModel
from kvviz.sim.workload import Workload


@dataclass(frozen=True)
class Limits:
    """Where a simulation stops: requests sent, engine steps, real seconds spent simulating."""

    max_requests: int = 100_000
    max_steps: int = 5_000_000
    max_wall_s: float = 60.0


@dataclass(frozen=True)
class StepTrace:
    """One step: when it ran, what the queues held once it was scheduled, what it computed, the KV blocks in use
    (cached blocks nobody references count as free, as vLLM's kv_cache_usage_perc counts them)."""

    index: int
    start_s: float
    duration_s: float
    running: int
    waiting: int
    kv_blocks_used: int
    preemptions: int
    tokens_scheduled: int
    prefill_tokens: int
    decode_seqs: int
    attention_pairs: int
    cached_tokens: int
    preempted_tokens: int
    prompt_cross: int = 0  # StepContents.prompt_cross


@dataclass(frozen=True)
class InBatch:
    """A running request in one step, once the step is scheduled: the tokens it had computed before, the tokens
    it computes now (0: it runs but the budget ran out before it), and the KV blocks it holds (by number; a
    shared-prefix block is held by every request that hit it)."""

    index: int
    start: int
    tokens: int
    blocks: tuple[int, ...]


@dataclass(frozen=True)
class StepDetail:
    """Who was where in one step, for a view that plays the run (simulate(..., detail=True)): the running
    requests in the scheduler's order, the waiting ones in queue order, those preempted in it, the prefix-cache
    hits at admission (request, tokens), those that finished at its end, and the free blocks that still hold
    cached tokens (by number). Request numbers are the records' indices."""

    running: tuple[InBatch, ...]
    waiting: tuple[int, ...]
    preempted: tuple[int, ...]
    hits: tuple[tuple[int, int], ...]
    finished: tuple[int, ...]
    cached_free_blocks: tuple[int, ...]


@dataclass(frozen=True)
class SimResult:
    """The records (one per request sent, in sending order), the statistics over them, the steps, and why the
    run stopped early (None: it ran every request to its end)."""

    records: tuple[RequestRecord, ...]
    preemptions: tuple[int, ...]  # per record: how many times the request was preempted
    stats: RunStats
    trace: tuple[StepTrace, ...]
    stopped: Said | None
    kv_blocks: int
    details: tuple[StepDetail, ...] = ()  # one per step of trace, when asked for (detail=True)


def contents(plan: StepPlan, groups: tuple[KvGroupSpec, ...] = FULL_ATTENTION) -> StepContents:
    """A decode computes one token past the prompt; every other scheduled token is prefill (recompute included).
    Each token computed attends over those before it and itself: k tokens after s computed make k*s + k(k+1)/2
    attention pairs (a decode at context s + 1, s + 1: the KV tokens it reads); in a sliding-window layer over at
    most its window. With several KV-cache groups, the mean over the groups (each spans as many layers). The pairs
    of prompt tokens of two requests (prompt_cross): the step's prompt tokens squared less each request's chunk
    squared."""
    decodes, chunks = 0, []  # prompt chunks (recompute included): their token counts
    for s in plan.scheduled:
        if s.tokens == 1 and s.start >= s.request.prompt_tokens:
            decodes += 1
        else:
            chunks.append(s.tokens)
    prefill = sum(chunks)
    windows = [g.window if g.kind == SLIDING else None for g in groups]
    pairs = sum(causal_pairs(s.start + s.tokens, w) - causal_pairs(s.start, w)
                for s in plan.scheduled for w in windows) / len(windows)
    if len(set(windows)) == 1:
        pairs = round(pairs)  # whole pairs when every group attends alike
    return StepContents(prefill, decodes, pairs, tuple((s.start, s.tokens) for s in plan.scheduled),
                        prefill ** 2 - sum(k * k for k in chunks))


def check(workload: Workload, config: SchedulerConfig) -> None:
    """Refuse what vLLM refuses, or what could never run: a request past max_model_len or larger than the whole
    KV cache, a prompt no step could take without chunked prefill (vLLM's SchedulerConfig refuses
    max_num_batched_tokens below max_model_len then)."""
    for name in ("num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len"):
        whole_number(getattr(config, name), name, 1, 10**9)
    whole_number(config.watermark_blocks, "watermark_blocks", 0, config.num_blocks - 1)
    for group in config.groups:
        if group.kind == SLIDING:
            whole_number(group.window, "sliding window", 1, 10**9)
    if not config.chunked_prefill and config.max_num_batched_tokens < config.max_model_len:
        raise InputError("sim.budget_below_len", budget=config.max_num_batched_tokens, most=config.max_model_len)
    for i, spec in enumerate(workload.requests):
        tokens = spec.prompt_tokens + spec.output_tokens
        if tokens > config.max_model_len:
            raise InputError("sim.too_long", i=i, tokens=tokens, most=config.max_model_len)
        blocks = admission_blocks(config, tokens - 1)  # the last token sampled is never stored
        if blocks > config.num_blocks:
            raise InputError("sim.no_fit", i=i, blocks=blocks, most=config.num_blocks)


@dataclass
class _Sent:
    """A request sent and not yet with the engine: when it reaches it, and whether just after that instant (a
    closed loop's next request, sent as a step ends, misses the step that begins then)."""

    at_s: float
    late: bool
    request: SimRequest


class _Run:
    """One simulation's state: the scheduler, the clock, the requests on their way to the engine and those still to
    send."""

    def __init__(self, workload: Workload, config: SchedulerConfig, model: StepTimeModel, limits: Limits,
                 detail: bool = False, handoff_s: float = 0.0, joined: tuple[bool, ...] = (),
                 return_s: float = 0.0) -> None:
        self.workload, self.model, self.limits, self.handoff_s = workload, model, limits, handoff_s
        self.return_s = return_s
        self.joined = joined
        self.details: list[StepDetail] | None = [] if detail else None
        self.scheduler = Scheduler(config)
        self.todo = deque(workload.requests[:limits.max_requests])
        self.sent: list[SimRequest] = []
        self.trace: list[StepTrace] = []
        self.on_way: deque[_Sent] = deque()  # sent, not yet with the engine, in the order they reach it
        self.front_free_s = float("-inf")  # when the front end can hand over the next request
        self.last_reach_s = float("-inf")  # when the request sent last reaches the engine
        self.now = 0.0
        self.stopped: Said | None = None
        if len(workload.requests) > limits.max_requests:
            self.stopped = said("sim.stopped_requests", sent=limits.max_requests, of=len(workload.requests))
        if workload.closed:
            for _ in range(min(workload.concurrency, len(self.todo))):
                self.send(0.0)

    def send(self, at_s: float, late: bool = False) -> None:
        """Send the next request at at_s: it reaches the engine then, or handoff_s after the one before it (with
        that one, if joined says so)."""
        spec = self.todo.popleft()
        index = len(self.sent)
        request = SimRequest(index, at_s, spec.prompt_tokens, spec.output_tokens, spec.prefix_tokens)
        self.sent.append(request)
        together = index < len(self.joined) and self.joined[index]
        reach = max(at_s, self.last_reach_s if together else self.front_free_s)
        self.last_reach_s = reach
        self.front_free_s = reach + self.handoff_s
        self.on_way.append(_Sent(reach, late and reach == at_s, request))

    def arrive(self) -> None:
        """An open loop's requests due by now are sent."""
        while not self.workload.closed and self.todo and self.todo[0].arrival_s <= self.now:
            self.send(self.todo[0].arrival_s)

    def admit(self, idle: bool) -> None:
        """The requests that reached the engine by now join the waiting queue (idle: those just after now too)."""
        while self.on_way and self._reached(self.on_way[0], idle):
            self.scheduler.add(self.on_way.popleft().request)

    def _reached(self, sent: _Sent, idle: bool) -> bool:
        return sent.at_s < self.now or (sent.at_s == self.now and (idle or not sent.late))

    def over(self, started: float) -> bool:
        if len(self.trace) >= self.limits.max_steps:
            self.stopped = said("sim.stopped_steps", steps=self.limits.max_steps)
        elif time.monotonic() - started > self.limits.max_wall_s:
            self.stopped = said("sim.stopped_wall", seconds=self.limits.max_wall_s, steps=len(self.trace))
        else:
            return False
        return True

    def step(self) -> None:
        plan = self.scheduler.schedule()
        if not plan.scheduled:
            raise StateError("sim.stalled", step=len(self.trace))
        held = contents(plan, self.scheduler.config.groups)
        seconds = self.model.seconds(held)
        if not seconds > 0:
            raise InputError("sim.step_time", seconds=seconds, step=str(held))
        used, start = self.scheduler.pool.used, self.now
        seen = self._seen(plan) if self.details is not None else None
        self.now += seconds
        done = self.scheduler.finish_step(plan, self.now)
        self.trace.append(StepTrace(
            len(self.trace), start, seconds, len(self.scheduler.running) + len(done), len(self.scheduler.waiting),
            used, plan.preempted, sum(s.tokens for s in plan.scheduled), held.prefill_tokens, held.decode_seqs,
            held.attention_pairs, plan.cached_tokens, plan.preempted_tokens, held.prompt_cross))
        if seen is not None:
            self.details.append(replace(seen, finished=tuple(r.index for r in done)))
        for _ in done:
            if self.workload.closed and self.todo:
                self.send(self.now + self.return_s, late=True)

    def _seen(self, plan: StepPlan) -> StepDetail:
        """The queues and blocks as scheduled, before the step runs (finished: filled in after it)."""
        tokens = {s.request.index: (s.start, s.tokens) for s in plan.scheduled}
        running = tuple(InBatch(r.index, *tokens.get(r.index, (r.computed, 0)), tuple(r.blocks))
                        for r in self.scheduler.running)
        return StepDetail(running, tuple(r.index for r in self.scheduler.waiting), tuple(plan.victims),
                          tuple(plan.hits), (), self.scheduler.pool.cached_free())

    def run(self) -> None:
        started = time.monotonic()
        while True:
            self.arrive()
            self.admit(idle=False)
            if not self.scheduler.busy:
                coming = ([self.on_way[0].at_s] if self.on_way else []) + (
                    [self.todo[0].arrival_s] if not self.workload.closed and self.todo else [])
                if not coming:
                    return
                if min(coming) > self.now:  # idle until the next request reaches the engine
                    self.now = min(coming)
                else:  # idle: the engine takes it as it comes
                    self.admit(idle=True)
                continue
            if self.over(started):
                return
            self.step()


def record(request: SimRequest, closed: bool) -> RequestRecord:
    """A simulated request as the load generator records one; unfinished ones carry the reason as their error."""
    times = tuple(t - request.arrival_s for t in request.token_times_s)
    done = request.finished_s is not None
    return RequestRecord(
        index=request.index, sent_s=request.arrival_s, prompt_tokens=request.prompt_tokens,
        new_tokens=request.generated, accepted_s=0.0, ttft_s=times[0] if times else None,
        e2e_s=request.finished_s - request.arrival_s if done else None, arrivals_s=times, usage_reported=True,
        error=None if done else said("sim.unfinished"), due_s=None if closed else request.arrival_s)


def simulate(workload: Workload, config: SchedulerConfig, model: StepTimeModel, limits: Limits = Limits(),
             slo: Slo | None = None, detail: bool = False, handoff_s: float = 0.0,
             joined: tuple[bool, ...] = (), return_s: float = 0.0) -> SimResult:
    """Run the workload to its end (or a limit) and gather what it measured; with detail, who was where in every
    step too (SimResult.details: for a run small enough to watch, it holds every running request's blocks).
    handoff_s: the front end's seconds per request handed to the engine (kvviz.sim.calibrate fits it). joined[i]:
    request i reaches the engine when request i-1 does, not handoff_s after it (a replay of a measured load).
    return_s: from a closed loop's request ending on the engine to its next one reaching it (0: as it ends, in the
    next step)."""
    check(workload, config)
    whole_number(limits.max_requests, "max_requests", 1, 10**9)
    number(limits.max_wall_s, "max_wall_s", 0.0, 1e6, low_open=True)
    number(handoff_s, "handoff_s", 0.0, 10.0)
    number(return_s, "return_s", 0.0, 60.0)
    run = _Run(workload, config, model, limits, detail, handoff_s, joined, return_s)
    run.run()
    records = tuple(record(r, workload.closed) for r in run.sent)
    ends = [r.finished_s for r in run.sent if r.finished_s is not None]
    duration = (run.now if run.stopped else max(ends, default=0.0)) - min((r.arrival_s for r in run.sent),
                                                                          default=0.0)
    stats = run_stats(list(records), duration, slo, rate=workload.rate)
    return SimResult(records, tuple(r.preemptions for r in run.sent), stats, tuple(run.trace), run.stopped,
                     config.num_blocks, tuple(run.details or ()))
