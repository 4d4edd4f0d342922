"""The Scheduler tab's pure parts: a run's phases, step lines and blocks as the player gets them (hand-built
steps), the presets' runs (each shows its effect, worked by hand), the comparison's series, the host's limits."""

from __future__ import annotations

import pytest

from kvviz.base.errors import InputError
from kvviz.engine.hosting import HostPolicy, PolicyError
from kvviz.serving.metrics_reader import Sample
from kvviz.sim.scheduler import SchedulerConfig
from kvviz.sim.simulate import InBatch, StepDetail, StepTrace
from kvviz.ui.figures import to_plotly
from kvviz.ui.scheduler import compare
from kvviz.ui.scheduler.player import Played, owners, phases, step_line, to_json
from kvviz.ui.scheduler.presets import MAX_VIEW_REQUESTS, PRESETS, calibration, run_preset, view_requests
from kvviz.ui.scheduler.real import checked_load
from kvviz.ui.scheduler.tab import request_cap, simulated
from kvviz.ui.scheduler.text import real_summary

CONFIG = SchedulerConfig(num_blocks=4, block_size=4, max_num_batched_tokens=8)


def trace(index, start_s, running, waiting, used, tokens, prefill=0, decode=0, preemptions=0, cached=0):
    return StepTrace(index, start_s, 0.1, running, waiting, used, preemptions, tokens, prefill, decode, 0, cached, 0)


# Three requests (prompts of 6, 3 and 8 tokens), four steps, written out by hand:
# step 0: r0 prefills its 6 tokens; r1 waits; r2 has not arrived.
# step 1: r0 decodes (1 token from position 6); r1 prefills its 3 and finishes; r2 waits.
# step 2: r0 is preempted and waits; r2 is admitted with a 4-token prefix hit and prefills its other 4.
# step 3: r2 runs but gets no token; r0 recomputes 4 tokens, sharing block 2 with r2.
RUN = Played(
    prompt_tokens=(6, 3, 8),
    trace=(trace(0, 0.0, 1, 1, 2, 6, prefill=6), trace(1, 0.1, 2, 1, 3, 4, prefill=3, decode=1),
           trace(2, 0.2, 1, 1, 2, 4, prefill=4, preemptions=1, cached=4), trace(3, 0.3, 2, 0, 3, 4, prefill=4)),
    details=(StepDetail((InBatch(0, 0, 6, (0, 1)),), (1,), (), (), (), ()),
             StepDetail((InBatch(0, 6, 1, (0, 1)), InBatch(1, 0, 3, (2,))), (2,), (), (), (1,), ()),
             StepDetail((InBatch(2, 4, 4, (2, 3)),), (0,), (0,), ((2, 4),), (), (0,)),
             StepDetail((InBatch(2, 8, 0, (2, 3)), InBatch(0, 0, 4, (2, 0))), (), (), (), (), (1,))),
    config=CONFIG)


def test_phases_letter_by_letter():
    """r0: prefill, decode, preempted, prefill (recompute); r1: waits, prefills, then finished; r2: not there,
    waits, prefills after its hit, runs without a token."""
    assert phases(RUN) == ["pdxp", "wpff", "_wpr"]


def test_step_lines_say_who_runs_waits_and_what_happened():
    assert step_line(RUN.trace[0], RUN.details[0], CONFIG) == \
        "step 0 (0.00 s): running r0 · waiting r1 · budget 6/8 · KV 2/4 blocks"
    assert step_line(RUN.trace[1], RUN.details[1], CONFIG) == \
        "step 1 (0.10 s): running r0 r1 · waiting r2 · budget 4/8 · KV 3/4 blocks · finished r1"
    assert step_line(RUN.trace[2], RUN.details[2], CONFIG) == \
        "step 2 (0.20 s): running r2 · waiting r0 · budget 4/8 · KV 2/4 blocks · preempted r0 · hit r2 4"
    assert step_line(RUN.trace[3], RUN.details[3], CONFIG, "zh") == \
        "第 3 步（0.30 秒）：运行 r2 r0 · 等待 无 · 预算 4/8 · KV 3/4 块"


def test_blocks_name_every_holder_and_the_json_carries_it_all():
    """Block 2 is held by r2 and r0 at step 3 (shared); block 1 is free but still cached."""
    assert owners(RUN.details[3]) == [[0, [0]], [2, [2, 0]], [3, [2]]]
    data = to_json(RUN)
    assert data["budget"] == 8 and data["numBlocks"] == 4 and data["requests"] == ["r0", "r1", "r2"]
    assert [s["prefill"] for s in data["steps"]] == [6, 3, 4, 4]
    assert data["steps"][3]["cached"] == [1]
    assert data["steps"][3]["held"] == "blocks held: r2 2, r0 2 · free 1, of them still cached 1"
    assert data["steps"][1]["held"] == "blocks held: r0 2, r1 1 · free 1, of them still cached 0"
    assert data["steps"][2]["line"].endswith("hit r2 4")
    assert to_json(RUN, "zh")["labels"]["play"] == "播放"
    assert to_json(RUN, "zh")["steps"][3]["held"] == "占用的块：r2 2，r0 2 · 空闲 1 块，其中仍在缓存中 1 块"


def test_each_preset_shows_its_effect():
    """fill: never more than max_num_seqs 4 running, newcomers wait; chunk: a 640-token prompt in chunks of at
    most 256 tokens less the decodes beside it, over 3 steps; preempt: one preemption, at step 65 (worked out in
    tests/sim/test_details.py); prefix: each of the 5 later requests hits the 256 shared tokens; window: the preempt
    load with a window of 64 tokens: a request holds at most the blocks of its 63 tokens before the next one and that
    one, cdiv(64, 32) + 1 = 3 (2 when the window starts on a block), the four 12 of the 16; no preemption, and the
    run is one step prefilling all four (256 tokens, within the budget of 512) then 95 decode steps."""
    fill = run_preset(PRESETS["fill"])
    assert max(s.running for s in fill.trace) == 4 and max(s.waiting for s in fill.trace) > 0
    chunk = run_preset(PRESETS["chunk"])
    assert max(s.tokens_scheduled for s in chunk.trace) == 256
    for index in range(PRESETS["chunk"].requests):  # the explanation's "three chunks over three steps", for each
        rows = [next((b for b in d.running if b.index == index), None) for d in chunk.details]
        chunks = [b.tokens for b in rows if b is not None and b.start < 640]
        assert len(chunks) == 3 and sum(chunks) == 640, (index, chunks)
    assert any(s.prefill_tokens and s.decode_seqs for s in chunk.trace), "no chunk beside a decode"
    preempt = run_preset(PRESETS["preempt"])
    assert [s.index for s in preempt.trace if s.preemptions] == [65]
    prefix = run_preset(PRESETS["prefix"])
    assert [tokens for d in prefix.details for _, tokens in d.hits] == [256] * 5
    window = run_preset(PRESETS["window"])  # the preempt load, a window of 64 tokens (2 blocks of 32)
    assert sum(s.preemptions for s in window.trace) == 0 and max(s.kv_blocks_used for s in window.trace) == 12
    assert max(len(b.blocks) for d in window.details for b in d.running) == 3
    assert len(window.trace) == 96, "one prefill step for all four, then 95 decodes"


def test_the_view_and_a_host_limit_the_simulated_requests():
    assert request_cap(HostPolicy()) == MAX_VIEW_REQUESTS
    hosted = HostPolicy(hosted=True, max_requests=8)
    assert request_cap(hosted) == 8
    with pytest.raises(InputError, match="requests"):
        view_requests(9, request_cap(hosted))
    with pytest.raises(InputError, match="requests"):
        simulated("fill", 9, hosted)
    words, page = simulated("fill", 8, hosted)
    assert "8 requests" in words and "sched-data" in page
    with pytest.raises(InputError, match="preset"):
        simulated("nothing", 4, HostPolicy())


def test_the_real_run_keeps_to_the_host():
    """Hosted: the load within the host's sizes, and an open loop that can send all its requests within the time
    limit (fill: 12 at 6/s need 2 s); unhosted, any preset's load as it is."""
    fill = PRESETS["fill"]
    assert checked_load(fill, 12, HostPolicy()).duration_s == 600.0
    assert checked_load(fill, 12, HostPolicy(hosted=True, time_limit_s=30)).duration_s == 30
    with pytest.raises(PolicyError, match="rate"):
        checked_load(fill, 12, HostPolicy(hosted=True, time_limit_s=1.5))
    with pytest.raises(PolicyError, match="prompt tokens"):
        checked_load(PRESETS["chunk"], 5, HostPolicy(hosted=True, max_prompt_tokens=512))


def test_the_server_and_simulator_series_on_one_clock():
    """The server's samples move back by the first scrape's 20 ms; one without all three series is dropped. The
    simulator's steps at their starts, then all 0 at the last one's end; KV usage over the pool's 10 blocks. An
    idle gap between two steps reads 0."""
    samples = [Sample(0.0, kv_usage=0.0, running=0, waiting=0, scrape_s=0.02),
               Sample(0.27, kv_usage=0.1, running=2, waiting=1, scrape_s=0.01), Sample(0.52, running=1)]
    steps = [StepTrace(0, 0.0, 0.1, 2, 0, 3, 0, 2, 2, 0, 0, 0, 0), StepTrace(1, 0.1, 0.2, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0)]
    frame = compare.merged(samples, steps, 10)
    vllm = frame[frame.source == "vllm"]
    assert vllm.t_s.round(6).tolist() == [-0.02, 0.25] and vllm.running.tolist() == [0, 2]
    sim = frame[frame.source == "sim"]
    assert sim.t_s.round(6).tolist() == [0.0, 0.1, 0.3]
    assert sim.kv_usage.round(6).tolist() == [0.3, 0.1, 0.0] and sim.running.tolist() == [2, 1, 0]
    assert compare.peaks(frame) == {"sim": {"running": 2, "waiting": 0, "kv_usage": 0.3},
                                    "vllm": {"running": 2, "waiting": 1, "kv_usage": 0.1}}
    fig = compare.comparison_figure(frame, "zh")
    to_plotly(fig)
    assert len(fig["data"]) == 6 and {d["name"] for d in fig["data"]} == {"vLLM（/metrics）", "模拟器"}
    assert fig["data"][5]["y"] == [30.0, 10.0, 0.0], "KV usage drawn in %"
    assert compare.comparison_figure(compare.merged([], [], 10))["data"] == []
    gap = [*steps, StepTrace(2, 0.5, 0.1, 1, 0, 2, 0, 1, 0, 1, 0, 0, 0)]  # idle from 0.3 s to 0.5 s
    idle = compare.sim_series(gap, 10)
    assert idle.t_s.round(6).tolist() == [0.0, 0.1, 0.3, 0.5, 0.6] and idle.running.tolist() == [2, 1, 0, 1, 0]


def test_the_comparison_summary_reads_both_peaks_or_says_unknown():
    """The peaks of the hand-built series above, the preemption preset's one preemption, and "unknown" for what
    the server did not say (no samples, no preemption counter)."""
    samples = [Sample(0.0, kv_usage=0.0, running=0, waiting=0), Sample(0.25, kv_usage=0.1, running=2, waiting=1)]
    steps = [StepTrace(0, 0.0, 0.1, 2, 0, 3, 0, 2, 2, 0, 0, 0, 0)]
    sim = run_preset(PRESETS["preempt"])
    words = real_summary(compare.merged(samples, steps, 10), 4, "tiny", 8192, 128, 1.5, sim, 0, calibration(), 2.0)
    assert "Peak running 2 on vLLM, 2 simulated; peak waiting 1 and 0; peak KV usage 10.00% and 30.00%" in words
    assert "preemptions 0 and 1" in words and "load average was 2 " in words
    words = real_summary(compare.merged([], steps, 10), 4, "tiny", 8192, 128, 1.5, sim, None, calibration(), 2.0)
    assert "Peak running unknown on vLLM" in words and "preemptions unknown and 1" in words
