"""Laws every simulated run keeps, on random workloads and engines (hypothesis): Little's law between the step
trace's queues and the records' times, the conservation of tokens, and the scheduler's limits at every step."""

from __future__ import annotations

from bisect import bisect_left

from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.sim.scheduler import SchedulerConfig
from kvviz.sim.simulate import simulate
from kvviz.sim.step_time import LinearStepTime
from kvviz.sim.workload import RequestSpec, Workload, arrivals

MODEL = LinearStepTime(0.01, 0.0002, 0.001, 0.00001)


@st.composite
def runs(draw) -> tuple[Workload, SchedulerConfig]:
    """A random open loop (Poisson from a seed, or constant) of short requests, maybe sharing a prefix, and an
    engine small enough to fill its KV cache and preempt, but large enough to hold any one request."""
    n = draw(st.integers(1, 25))
    times = arrivals(n, draw(st.floats(0.5, 200.0)), draw(st.booleans()), draw(st.integers(0, 10**6)))
    prefix = draw(st.integers(0, 12))
    specs = tuple(RequestSpec(p, draw(st.integers(1, 20)), t, min(prefix, p))
                  for t, p in zip(times, draw(st.lists(st.integers(1, 40), min_size=n, max_size=n)), strict=True))
    block = draw(st.integers(1, 8))
    longest = max(s.prompt_tokens + s.output_tokens for s in specs)
    chunked = draw(st.booleans())
    config = SchedulerConfig(
        num_blocks=-(-longest // block) + draw(st.integers(0, 20)), block_size=block,
        max_num_seqs=draw(st.integers(1, 8)), max_model_len=64,
        max_num_batched_tokens=draw(st.integers(1, 100)) if chunked else draw(st.integers(64, 120)),
        chunked_prefill=chunked, prefix_caching=draw(st.booleans()))
    return Workload(specs, closed=False), config


@settings(max_examples=150, deadline=None)
@given(runs())
def test_littles_law_holds_between_the_trace_and_the_records(run):
    """L = λW over the run: the time-integral of the requests in the system (running + waiting of each step,
    times its length, plus each request's wait from arrival to the next step boundary, when it joins the queue)
    equals the sum of the records' end-to-end times (so L = n/T × mean E2E over any window T holding the run)."""
    workload, config = run
    result = simulate(workload, config, MODEL)
    starts = [s.start_s for s in result.trace]
    integral = sum((s.running + s.waiting) * s.duration_s for s in result.trace)
    joining = sum(starts[bisect_left(starts, r.sent_s)] - r.sent_s for r in result.records)
    total = sum(r.e2e_s for r in result.records)
    assert abs(integral + joining - total) <= 1e-9 * max(total, 1.0), (integral, joining, total)
    assert result.stats.completed == len(workload.requests) and result.stopped is None


@settings(max_examples=150, deadline=None)
@given(runs())
def test_tokens_are_conserved(run):
    """Every token scheduled is a prompt token or the KV of an output token (each output but the last), less the
    tokens a prefix hit spared, plus the tokens preemption threw away and computed again; every request gets all
    its output tokens, each at a step's end."""
    workload, config = run
    result = simulate(workload, config, MODEL)
    scheduled = sum(s.tokens_scheduled for s in result.trace)
    needed = sum(r.prompt_tokens + r.output_tokens - 1 for r in workload.requests)
    spared = sum(s.cached_tokens for s in result.trace)
    redone = sum(s.preempted_tokens for s in result.trace)
    assert scheduled == needed - spared + redone
    ends = {round(s.start_s + s.duration_s, 9) for s in result.trace}
    for spec, rec in zip(workload.requests, result.records, strict=True):
        assert rec.new_tokens == spec.output_tokens == len(rec.arrivals_s)
        assert {round(rec.sent_s + a, 9) for a in rec.arrivals_s} <= ends
    if not config.prefix_caching:
        assert spared == 0


@settings(max_examples=150, deadline=None)
@given(runs())
def test_every_step_keeps_the_engines_limits(run):
    """No step schedules past its token budget, runs more than max_num_seqs, or uses more blocks than exist; a
    step with a preemption admits nobody from the waiting queue (its running count cannot grow)."""
    workload, config = run
    result = simulate(workload, config, MODEL)
    for before, step in zip((None, *result.trace[:-1]), result.trace, strict=True):
        assert 0 < step.tokens_scheduled <= config.max_num_batched_tokens
        assert step.running <= config.max_num_seqs
        assert step.kv_blocks_used <= config.num_blocks
        if step.preemptions and before is not None:
            assert step.running < before.running


def test_no_preemption_when_the_cache_holds_everyone():
    """With blocks for every request at once and no prefix cache, nothing is preempted or spared: the tokens
    scheduled are exactly the prompts plus all outputs but their last tokens."""
    specs = tuple(RequestSpec(30 + i, 10 + i, 0.01 * i) for i in range(20))
    config = SchedulerConfig(num_blocks=20 * 70 // 4, block_size=4, max_num_seqs=20, max_num_batched_tokens=64,
                             max_model_len=128, prefix_caching=False)
    result = simulate(Workload(specs, closed=False), config, MODEL)
    assert sum(s.preemptions for s in result.trace) == 0
    assert sum(s.tokens_scheduled for s in result.trace) == sum(s.prompt_tokens + s.output_tokens - 1
                                                                for s in specs)
