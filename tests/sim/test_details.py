"""simulate(..., detail=True): who was where in each step, on a run small enough to work out by hand."""

from __future__ import annotations

from kvviz.sim.scheduler import SchedulerConfig
from kvviz.sim.simulate import simulate
from kvviz.sim.step_time import LinearStepTime
from kvviz.sim.workload import RequestSpec, Workload

# Four requests of 64 prompt and 96 output tokens, all at 0, in 16 blocks of 32 tokens, a budget of 512.
FOUR = Workload(tuple(RequestSpec(64, 96, 0.0) for _ in range(4)), closed=False)
SMALL = SchedulerConfig(num_blocks=16, block_size=32, max_num_batched_tokens=512, max_model_len=1024)
TEN_MS = LinearStepTime(0.01, 0.0, 0.0, 0.0)


def test_the_details_follow_a_preemption_worked_by_hand():
    """Step 0 admits all four (2 blocks each). Step k>=1 computes token 63+k of each, so at step 64 each holds
    128 tokens in 4 blocks: all 16 used. Step 65: r0 needs a 5th block, none is free, so the last one running
    (r3) is preempted, its 4 blocks freed; r0, r1, r2 take one each, 1 stays free. r0..r2 end at step 95 (their
    96th token); r3 comes back at step 96, where its first block (cached when freed, and put at the free queue's
    tail, so not yet evicted) is a 32-token hit, and it recomputes the other 129 - 32 = 97 tokens."""
    details = simulate(FOUR, SMALL, TEN_MS, detail=True).details
    assert [(b.index, b.start, b.tokens, len(b.blocks)) for b in details[0].running] == [(i, 0, 64, 2) for i in
                                                                                         range(4)]
    assert [len(b.blocks) for b in details[64].running] == [4] * 4
    step = details[65]
    assert [b.index for b in step.running] == [0, 1, 2], "FCFS preempts the last admitted"
    assert step.waiting == (3,) and step.preempted == (3,)
    assert [len(b.blocks) for b in step.running] == [5, 5, 5]
    assert details[66].preempted == () and details[66].waiting == (3,)
    assert details[95].finished == (0, 1, 2)
    back = details[96]
    assert details[65].cached_free_blocks == (details[64].running[3].blocks[0],), "r3's first block stays cached"
    assert back.hits == ((3, 32),)
    assert [(b.index, b.start, b.tokens) for b in back.running] == [(3, 32, 97)]


def test_details_are_only_kept_when_asked_and_match_the_trace():
    """Without detail the result carries none; with it, one per step, each step's running count the trace's
    less nothing (the trace counts the finished ones of that step too, which still ran in it)."""
    assert simulate(FOUR, SMALL, TEN_MS).details == ()
    result = simulate(FOUR, SMALL, TEN_MS, detail=True)
    assert len(result.details) == len(result.trace)
    for step, detail in zip(result.trace, result.details, strict=True):
        assert step.running == len(detail.running) and step.waiting == len(detail.waiting)
        assert step.preemptions == len(detail.preempted)
        assert step.tokens_scheduled == sum(b.tokens for b in detail.running)
        assert step.cached_tokens == sum(tokens for _, tokens in detail.hits)



# The run above as a case of tests/sim/test_against_vllm.py, which runs it through vLLM's own Scheduler class (one
# start of vLLM's interpreter for all its cases) and checks the preemption at step 65 and r3's return there.
FOUR_AS_CASE = {"block_size": 32, "num_blocks": 16, "max_num_seqs": 128, "max_num_batched_tokens": 512,
                "max_model_len": 1024, "chunked_prefill": True, "prefix_caching": True,
                "requests": [[0, 64, 96, 0] for _ in range(4)]}
