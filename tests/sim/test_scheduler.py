"""The simulated V1 scheduler on small cases worked out by hand (each test's docstring shows the working), with a
step time of exactly 1 s (t = a = 1) so that a time is a step's number."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvviz.base.errors import InputError
from kvviz.sim.blocks import BlockPool
from kvviz.sim.scheduler import SLIDING, KvGroupSpec, Scheduler, SchedulerConfig, SimRequest, admission_blocks
from kvviz.sim.simulate import contents, simulate
from kvviz.sim.step_time import LinearStepTime
from kvviz.sim.workload import RequestSpec, Workload, closed_loop

ONE_SECOND = LinearStepTime(1.0, 0.0, 0.0, 0.0)


def _config(**kw) -> SchedulerConfig:
    base = {"num_blocks": 100, "block_size": 4, "max_num_seqs": 8, "max_num_batched_tokens": 100,
            "max_model_len": 64, "prefix_caching": False}
    return SchedulerConfig(**(base | kw))


def _shares(plan) -> list[tuple[int, int, int]]:
    return [(s.request.index, s.start, s.tokens) for s in plan.scheduled]


def test_a_token_budget_is_split_between_decodes_and_a_prefill_chunk():
    """Budget 10, blocks of 4. A (prompt 3) and B (prompt 20) wait.
    Step 1: A takes its 3 tokens, B a chunk of the 7 left; A ends its prompt and samples its first token.
    Step 2: running first: A decodes 1, B takes min(20 - 7, 9) = 9 (at 7). Contents: 9 prefill tokens, 1 decode,
    attention pairs: A's token over 3 + 1 = 4; B's 9 tokens over 8, 9, ..., 16 = 9 × 7 + (1 + ... + 9) = 108; 112.
    Blocks: A ceil(4/4) = 1, B ceil(16/4) = 4: 5 in use. Prompt tokens of two requests paired in one step: step 1
    3 × 7 each way, 42 (10² less 3² and 7²); step 2 none (A's token is a decode, not a prompt's).
    Step 3: A decodes 1, B its last 4 tokens (at 16) and samples its first token; blocks ceil(5/4) + 20/4 = 7."""
    scheduler = Scheduler(_config(max_num_batched_tokens=10))
    a, b = SimRequest(0, 0.0, 3, 5), SimRequest(1, 0.0, 20, 2)
    scheduler.add(a)
    scheduler.add(b)
    expected = [[(0, 0, 3), (1, 0, 7)], [(0, 3, 1), (1, 7, 9)], [(0, 4, 1), (1, 16, 4)]]
    used = [3, 5, 7]
    for step, (shares, blocks) in enumerate(zip(expected, used, strict=True), 1):
        plan = scheduler.schedule()
        assert _shares(plan) == shares, f"step {step}"
        assert scheduler.pool.used == blocks, f"step {step}: blocks in use"
        if step == 1:
            assert contents(plan).prompt_cross == 42
        if step == 2:
            held = contents(plan)
            assert (held.prefill_tokens, held.decode_seqs, held.attention_pairs, held.prompt_cross) == (9, 1, 112, 0)
        scheduler.finish_step(plan, float(step))
    assert (a.generated, b.generated) == (3, 1)
    assert a.token_times_s == [1.0, 2.0, 3.0] and b.token_times_s == [3.0]


def test_blocks_are_allocated_per_step_and_freed_at_the_end():
    """Blocks of 4; one request of prompt 4, output 2. Step 1 computes 4 tokens: 1 block. Step 2 computes the 5th
    (the first output token's KV): 2 blocks; it samples the 2nd output token, ends, and frees both: 0 in use."""
    result = simulate(closed_loop(1, 1, 4, 2), _config(), ONE_SECOND)
    assert [s.kv_blocks_used for s in result.trace] == [1, 2]
    assert [s.tokens_scheduled for s in result.trace] == [4, 1]
    assert result.records[0].arrivals_s == (1.0, 2.0)
    assert result.records[0].e2e_s == 2.0


def test_preemption_takes_the_last_running_request_and_resumes_it_first():
    """3 blocks of 4; A, B, C each prompt 4, output 3 (up to ceil(6/4) = 2 blocks each), all at 0.
    Step 1: each takes 1 block (3 used) and samples token 1.
    Step 2: A needs a 2nd block, none free: preempt running[-1] = C (1 freed), A gets it; B needs one, none free:
    running[-1] is now B itself, preempted; waiting = [B, C] (each put at the head). Only A runs (8 tokens lost).
    Step 3: A decodes (total 6: 2 blocks), samples token 3 and ends; B (num_tokens 5: 2 blocks) finds 1 free: waits.
    Steps 4-5: B recomputes its 5 tokens, then decodes and ends; C needs 2 blocks, 1 free: waits.
    Steps 6-7: C likewise. Tokens: A at 1, 2, 3; B at 1, 4, 5; C at 1, 6, 7.
    Scheduled tokens: 12 + 1 + 1 + 5 + 1 + 5 + 1 = 26 = 3 * (4 + 3 - 1) + the 8 recomputed."""
    result = simulate(closed_loop(3, 3, 4, 3), _config(num_blocks=3), ONE_SECOND)
    assert [r.arrivals_s for r in result.records] == [(1.0, 2.0, 3.0), (1.0, 4.0, 5.0), (1.0, 6.0, 7.0)]
    assert result.preemptions == (0, 1, 1)
    assert [s.preemptions for s in result.trace] == [0, 2, 0, 0, 0, 0, 0]
    assert [s.preempted_tokens for s in result.trace] == [0, 8, 0, 0, 0, 0, 0]
    assert [s.tokens_scheduled for s in result.trace] == [12, 1, 1, 5, 1, 5, 1]
    assert [(s.running, s.waiting) for s in result.trace] == [(3, 0), (1, 2), (1, 2), (1, 1), (1, 1), (1, 0),
                                                              (1, 0)]


def test_a_prefix_hit_spares_whole_blocks_but_never_the_last_token():
    """Blocks of 4, prefix caching on, one request at a time (closed loop of 1).
    Prompt 10 with a shared prefix of 8: the first request computes 10 tokens and caches its 2 full prefix blocks;
    the second hits both: it computes 10 - 8 = 2 tokens. Prompt 8, all of it shared: the hit may cover at most
    num_tokens - 1 = 7 tokens, so 1 block (4 tokens) and the second request computes 4."""
    for prompt, hit in ((10, 8), (8, 4)):
        result = simulate(closed_loop(2, 1, prompt, 2, prefix_tokens=8), _config(prefix_caching=True), ONE_SECOND)
        first_prefill, second_prefill = result.trace[0], result.trace[2]
        assert (first_prefill.tokens_scheduled, first_prefill.cached_tokens) == (prompt, 0)
        assert (second_prefill.tokens_scheduled, second_prefill.cached_tokens) == (prompt - hit, hit), prompt
        # its tokens after the hit attend over hit + 1, ..., prompt tokens: 9 + 10 = 19; 5 + 6 + 7 + 8 = 26
        assert second_prefill.attention_pairs == {10: 19, 8: 26}[prompt]


def test_no_prefix_hit_without_a_shared_prefix_or_with_caching_off():
    """The same two requests without a shared prefix, or with prefix caching off, compute all 10 tokens each."""
    for prefix, caching in ((0, True), (8, False)):
        result = simulate(closed_loop(2, 1, 10, 2, prefix_tokens=prefix), _config(prefix_caching=caching),
                          ONE_SECOND)
        assert [s.tokens_scheduled for s in result.trace] == [10, 1, 10, 1]


def test_max_num_seqs_holds_a_request_in_waiting():
    """max_num_seqs 2; three requests of prompt 4, output 2 at 0. Step 1: A and B start, C waits (2 running).
    Step 2: A and B decode and end. Step 3: C starts; its first token at 3 s (TTFT 3 s), its last at 4 s."""
    result = simulate(closed_loop(3, 3, 4, 2), _config(max_num_seqs=2), ONE_SECOND)
    assert [(s.running, s.waiting) for s in result.trace] == [(2, 1), (2, 1), (1, 0), (1, 0)]
    assert [r.ttft_s for r in result.records] == [1.0, 1.0, 3.0]
    assert result.records[2].e2e_s == 4.0


def test_without_chunked_prefill_a_prompt_waits_for_a_step_with_room():
    """Budget 16, chunked prefill off: A (prompt 12) takes 12 tokens; B (prompt 12) would need 12 of the 4 left,
    so it waits whole rather than being cut (vLLM stops the waiting loop). Step 2: A decodes (1), B takes its 12."""
    workload = Workload((RequestSpec(12, 2, 0.0), RequestSpec(12, 2, 0.0)), closed=False)
    result = simulate(workload, _config(max_num_batched_tokens=16, max_model_len=16, chunked_prefill=False),
                      ONE_SECOND)
    assert [s.tokens_scheduled for s in result.trace][:2] == [12, 13]
    assert [r.ttft_s for r in result.records] == [1.0, 2.0]


def test_an_open_loop_arrival_waits_for_the_next_step_boundary():
    """Steps of 1 s. A arrives at 0 (prompt 4, output 3: steps ending at 1, 2, 3); B arrives at 0.5, during step
    1, so it joins at 1 and gets its first token at 2: TTFT 1.5 s. C arrives at 10, after everything ended: the
    engine idles until 10, and C's first token comes at 11 (TTFT 1 s)."""
    workload = Workload(tuple(RequestSpec(4, 3, t) for t in (0.0, 0.5, 10.0)), closed=False)
    result = simulate(workload, _config(), ONE_SECOND)
    assert [r.ttft_s for r in result.records] == [1.0, 1.5, 1.0]
    assert [s.start_s for s in result.trace] == [0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0]


def test_the_block_pool_evicts_from_the_head_and_keeps_duplicate_cached_blocks():
    """Pool of 4: blocks 0 and 1 go to two requests that both computed prefix "p" (both cached, as vLLM's
    BlockHashToBlockMap keeps duplicates); a third request takes 2 and 3 and caches "x", "y" in them.
    All three end; each frees its blocks last first, so the free queue is [0, 1, 3, 2]. A hit on "p" finds the
    first cached copy, block 0. Taking 1 block evicts block 0, yet "p" still hits, in block 1. Taking 2 more
    evicts 1 (the last "p") and 3 (the third request's tail, "y", before its head "x")."""
    pool = BlockPool(4)
    first, second, third = pool.allocate(1), pool.allocate(1), pool.allocate(2)
    assert (first, second, third) == ([0], [1], [2, 3])
    pool.cache(0, "p")
    pool.cache(1, "p")
    pool.cache(2, "x")
    pool.cache(3, "y")
    for blocks in (first, second, third):
        pool.release(blocks)
    assert pool.free == 4 and pool.lookup("p") == 0
    assert pool.allocate(1) == [0]
    assert pool.lookup("p") == 1
    assert pool.allocate(2) == [1, 3]
    assert pool.lookup("p") is None and pool.lookup("x") == 2 and pool.lookup("y") is None


def test_a_closed_loops_next_request_joins_the_step_after_the_one_that_begins_as_it_is_sent():
    """Closed loop of 2; A (prompt 4, output 1), B (prompt 4, output 3), C (prompt 4, output 1).
    Step 1 [0, 1]: A and B prefill; A samples its only token and ends at 1, B its first. C is sent at 1, while
    vLLM's engine starts step 2 at once for B: step 2 [1, 2] holds B's decode alone; step 3 [2, 3] B's last
    decode and C's prefill. C: TTFT 2 s (sent at 1, token at 3), not 1 s as if it had joined step 2.
    When nothing runs, the engine takes the next request at once: a closed loop of 1 of A, then C: C is sent at 1
    and prefilled in step 2 [1, 2], TTFT 1 s."""
    a, b, c = RequestSpec(4, 1), RequestSpec(4, 3), RequestSpec(4, 1)
    result = simulate(Workload((a, b, c), closed=True, concurrency=2), _config(), ONE_SECOND)
    assert [s.tokens_scheduled for s in result.trace] == [8, 1, 5]
    assert [(s.prefill_tokens, s.decode_seqs) for s in result.trace] == [(8, 0), (0, 1), (4, 1)]
    _, second, third = result.records
    assert (third.sent_s, third.ttft_s, third.e2e_s) == (1.0, 2.0, 2.0)
    assert second.arrivals_s == (1.0, 2.0, 3.0)
    alone = simulate(Workload((a, c), closed=True, concurrency=1), _config(), ONE_SECOND)
    assert [(r.sent_s, r.ttft_s) for r in alone.records] == [(0.0, 1.0), (1.0, 1.0)]



def test_a_closed_loops_next_request_reaches_the_engine_the_return_time_after_one_ends():
    """The loop above (steps of 1 s; A prompt 4 output 1, B prompt 4 output 3, C prompt 4 output 1; 2 in flight),
    the next request reaching the engine return_s after one ends (the answer's way to the client and the request's
    back). Return 1.5 s: A ends at 1, C reaches the engine at 2.5, inside step 3 [2, 3] (B's last decode), joins
    step 4 [3, 4] alone: sent at 2.5, first token at 4, TTFT 1.5 s. Return 0.5 s: C reaches at 1.5, inside step 2,
    joins step 3 beside B's last decode: TTFT 1.5 s (3 - 1.5). A loop of 1 (A, then C), return 1.5 s: nothing runs
    when C reaches the engine at 2.5, so it is taken then: step [2.5, 3.5], TTFT 1 s."""
    a, b, c = RequestSpec(4, 1), RequestSpec(4, 3), RequestSpec(4, 1)
    loop = Workload((a, b, c), closed=True, concurrency=2)
    later = simulate(loop, _config(), ONE_SECOND, return_s=1.5)
    assert [(s.prefill_tokens, s.decode_seqs) for s in later.trace] == [(8, 0), (0, 1), (0, 1), (4, 0)]
    assert [s.start_s for s in later.trace] == [0.0, 1.0, 2.0, 3.0]
    assert (later.records[2].sent_s, later.records[2].ttft_s) == (2.5, 1.5)
    sooner = simulate(loop, _config(), ONE_SECOND, return_s=0.5)
    assert [(s.prefill_tokens, s.decode_seqs) for s in sooner.trace] == [(8, 0), (0, 1), (4, 1)]
    assert (sooner.records[2].sent_s, sooner.records[2].ttft_s) == (1.5, 1.5)
    alone = simulate(Workload((a, c), closed=True, concurrency=1), _config(), ONE_SECOND, return_s=1.5)
    assert [(r.sent_s, r.ttft_s) for r in alone.records] == [(0.0, 1.0), (2.5, 1.0)]
    assert [s.start_s for s in alone.trace] == [0.0, 2.5]

def test_a_wave_sent_at_once_reaches_the_engine_one_request_a_handoff_apart():
    """Steps of 2.5 ms, a closed loop of 3 sent at 0 (prompt 4, output 2), handed over 1 ms apart: they reach
    the engine at 0, 1 and 2 ms. Step 1 [0, 2.5] holds A alone (its first token at 2.5); B and C are there by
    2.5 and join step 2 [2.5, 5] beside A's decode (A ends at 5, B's and C's first tokens at 5); step 3 [5, 7.5]
    their decodes. TTFT 2.5, 5, 5 ms; E2E 5, 7.5, 7.5 ms. Handed over at once (0, the default), all three share
    step 1: TTFT 2.5 ms each, E2E 5 ms."""
    steps = LinearStepTime(0.0025, 0.0, 0.0, 0.0)
    wave = closed_loop(3, 3, 4, 2)
    result = simulate(wave, _config(), steps, handoff_s=0.001)
    assert [(s.prefill_tokens, s.decode_seqs) for s in result.trace] == [(4, 0), (8, 1), (0, 2)]
    assert [r.ttft_s for r in result.records] == pytest.approx([0.0025, 0.005, 0.005])
    assert [r.e2e_s for r in result.records] == pytest.approx([0.005, 0.0075, 0.0075])
    at_once = simulate(wave, _config(), steps)
    assert [(s.prefill_tokens, s.decode_seqs) for s in at_once.trace] == [(12, 0), (0, 3)]
    assert [r.ttft_s for r in at_once.records] == pytest.approx([0.0025] * 3)


def test_a_request_joined_to_the_one_before_reaches_the_engine_with_it():
    """The wave above (steps of 2.5 ms, handoff 1 ms), B joined to A (a replay of vLLM taking both into its first
    step): A and B reach the engine at 0, C 1 ms after them. Step 1 [0, 2.5] holds both prompts (8 tokens; first
    tokens at 2.5); C joins step 2 [2.5, 5] beside A's and B's decodes (they end at 5, C's first token at 5); step 3
    [5, 7.5] C's decode. TTFT 2.5, 2.5, 5 ms. A join flag past the requests, or on the first, changes nothing."""
    steps = LinearStepTime(0.0025, 0.0, 0.0, 0.0)
    result = simulate(closed_loop(3, 3, 4, 2), _config(), steps, handoff_s=0.001, joined=(False, True, False))
    assert [(s.prefill_tokens, s.decode_seqs) for s in result.trace] == [(8, 0), (4, 2), (0, 1)]
    assert [r.ttft_s for r in result.records] == pytest.approx([0.0025, 0.0025, 0.005])
    assert [r.e2e_s for r in result.records] == pytest.approx([0.005, 0.005, 0.0075])
    plain = simulate(closed_loop(3, 3, 4, 2), _config(), steps, handoff_s=0.001)
    first = simulate(closed_loop(3, 3, 4, 2), _config(), steps, handoff_s=0.001, joined=(True,))
    assert first.records == plain.records and [r.ttft_s for r in plain.records] == pytest.approx([0.0025, 0.005, 0.005])


def test_an_open_loop_request_waits_for_the_front_end_then_for_a_step_boundary():
    """Steps of 1 s, handoff 0.75 s. A arrives at 0 (prompt 4, output 3: steps ending at 1, 2, 3) and reaches
    the engine at once; B arrives at 0.5 but the front end is busy with A until 0.75, so B reaches the engine at
    0.75, during step 1, joins at 1 and has its first token at 2 (TTFT 1.5 s, as without a handoff). C arrives at
    1.2 and reaches the engine at 1.5, joins at 2: first token at 3 (TTFT 1.8 s). D arrives at 10 when all is
    done and the front end long free: TTFT 1 s. E at 10.5, handed over at 10.75, joins at 11: TTFT 1.5 s."""
    workload = Workload(tuple(RequestSpec(4, 3, t) for t in (0.0, 0.5, 1.2, 10.0, 10.5)), closed=False)
    result = simulate(workload, _config(), ONE_SECOND, handoff_s=0.75)
    assert [r.ttft_s for r in result.records] == pytest.approx([1.0, 1.5, 1.8, 1.0, 1.5])
    late = simulate(Workload((RequestSpec(4, 3, 0.0), RequestSpec(4, 3, 0.1)), closed=False), _config(),
                    ONE_SECOND, handoff_s=1.5)
    assert [r.ttft_s for r in late.records] == pytest.approx([1.0, 2.9])  # B reaches it at 1.5, joins at 2


def test_a_handoff_out_of_range_is_refused():
    with pytest.raises(InputError, match="handoff_s"):
        simulate(closed_loop(1, 1, 4, 2), _config(), ONE_SECOND, handoff_s=-0.001)


def _sliding(**kw) -> SchedulerConfig:
    return _config(**kw, groups=(KvGroupSpec(SLIDING, 6),))


def test_a_sliding_window_frees_the_blocks_wholly_before_it():
    """Window 6, blocks of 4; one request of prompt 16, output 8. Step 1 computes 16 tokens: 4 blocks. Before each
    later step, blocks wholly before the last w - 1 = 5 computed tokens go: after 16 computed, tokens 0..10 are
    skipped, 11 // 4 = 2 blocks (0 and 1) freed, and the 17th token's slot takes a 5th block: 4 - 2 + 1 = 3. Then
    computed 17, 18, 19: 12..14 skipped, 3 blocks gone, 5 allocated: 2. Computed 20: a 6th block for the 21st
    token: 3. Computed 21, 22: 16, 17 skipped: 4 gone, 6 allocated: 2. Full attention holds cdiv(slots, 4):
    4, 5, 5, 5, 5, 6, 6, 6."""
    sliding = simulate(closed_loop(1, 1, 16, 8), _sliding(), ONE_SECOND)
    full = simulate(closed_loop(1, 1, 16, 8), _config(), ONE_SECOND)
    assert [s.kv_blocks_used for s in sliding.trace] == [4, 3, 2, 2, 2, 3, 2, 2]
    assert [s.kv_blocks_used for s in full.trace] == [4, 5, 5, 5, 5, 6, 6, 6]
    assert sliding.records[0].arrivals_s == full.records[0].arrivals_s, "the window changes memory, not steps"


def test_a_sliding_groups_admission_counts_the_window_and_a_chunk_not_the_whole_prompt():
    """Window 6, blocks of 4, budget 8, a prompt of 60 tokens and 1 output token. Full attention would need
    cdiv(60, 4) = 15 blocks free to admit it; the sliding group's admission cap is cdiv(min(5 + 8, 64), 4) + 1 = 5.
    So a pool of 5 runs it, in chunks of 8, and never holds more than 4 blocks: the 2nd chunk's slots reach 16
    tokens, none skipped; from the 3rd on, two are freed (8k computed, 8k - 5 skipped) before two are taken; the
    last, 4 tokens at 56, holds cdiv(60, 4) - 51 // 4 = 3. A pool of 4 is refused."""
    config = _sliding(max_num_batched_tokens=8, num_blocks=5)
    assert admission_blocks(config, 60) == 5 and admission_blocks(_config(max_num_batched_tokens=8), 60) == 15
    result = simulate(closed_loop(1, 1, 60, 1), config, ONE_SECOND)
    assert [s.tokens_scheduled for s in result.trace] == [8] * 7 + [4]
    assert [s.kv_blocks_used for s in result.trace] == [2, 4, 4, 4, 4, 4, 4, 3]
    with pytest.raises(InputError) as caught:
        simulate(closed_loop(1, 1, 60, 1), replace(config, num_blocks=4), ONE_SECOND)
    assert caught.value.key == "sim.no_fit"


def test_a_sliding_group_hits_a_shared_prefix_only_once_a_request_found_its_junction():
    """A full and a sliding group (window 6: a hit needs cdiv(5, 4) = 2 cached blocks in a row), blocks of 4.
    A (prompt 30, its first 20 tokens a shared prefix) runs alone: the full group caches blocks 0..6, the sliding
    group only those a hit could end on, the 2 before the prompt's last token but one: 29 // 4 = 7, blocks 5, 6
    (A's own tokens). B, the same shape, then finds 5 full-group blocks (the prefix) but no sliding run in them:
    no hit, all 30 computed; its junction is 20, so its sliding group caches blocks 3, 4 (ending at 20 // 4 = 5) as
    well as 5, 6. C then hits 20 tokens in both groups and computes 10."""
    config = _config(prefix_caching=True, groups=(KvGroupSpec(), KvGroupSpec(SLIDING, 6)))
    scheduler, hits = Scheduler(config), []
    for index in range(3):
        request = SimRequest(index, 0.0, 30, 2, prefix_tokens=20)
        scheduler.add(request)
        for step in range(2):
            plan = scheduler.schedule()
            hits += plan.hits
            if step == 0:
                assert _shares(plan) == [(index, [0, 0, 20][index], [30, 30, 10][index])]
                assert request.junction == [0, 20, 0][index]
            scheduler.finish_step(plan, float(step))
    assert hits == [(2, 20)]


def test_a_sliding_layer_attends_over_its_window_only():
    """A prompt of 10 tokens in one step. Full attention: token i attends over i tokens, 1 + ... + 10 = 55 pairs;
    a window of 4: 1 + 2 + 3 + 4 + 6 × 4 = 34. A full and a sliding group: the mean, 44.5. Its decode at
    context 11: 11 pairs in the full layer, 4 in the sliding one: 7.5."""
    config = _config(groups=(KvGroupSpec(), KvGroupSpec(SLIDING, 4)))
    scheduler = Scheduler(config)
    scheduler.add(SimRequest(0, 0.0, 10, 2))
    first = scheduler.schedule()
    assert contents(first, config.groups).attention_pairs == 44.5
    assert contents(first).attention_pairs == 55
    scheduler.finish_step(first, 1.0)
    assert contents(scheduler.schedule(), config.groups).attention_pairs == 7.5
