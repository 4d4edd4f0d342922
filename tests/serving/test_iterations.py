"""vLLM's per-step log lines (--enable-logging-iteration-details), read as vLLM 0.32 writes them.

The lines are copied from a real vLLM 0.32.0 server's log on this machine (tiny, CPU build); the expected fields are
read off them by eye. Whether a real server's steps add up to its requests' tokens is checked against vLLM in
tests/sim/test_validate.py.
"""

from __future__ import annotations

from dataclasses import astuple

import pytest

from kvviz.serving.iterations import STALL_FACTOR, EngineStep, LogCursor, parse, summary

LOG = """\
(APIServer pid=26087) INFO 12-03 05:31:56 [loggers.py:199] Engine 000: Iteration(0): 1 context requests, \
32 context tokens, 0 generation requests, 0 generation tokens, iteration elapsed time: 15.34 ms, CPU KV cache \
usage: 0.0%
(APIServer pid=26087) INFO 12-03 05:31:56 [api_server.py:512] 127.0.0.1:40112 - "POST /v1/completions HTTP/1.1" 200
(APIServer pid=26087) INFO 12-03 05:31:56 [loggers.py:199] Engine 000: Iteration(1): 1 context requests, \
32 context tokens, 1 generation requests, 1 generation tokens, iteration elapsed time: 16.49 ms, CPU KV cache \
usage: 0.0%
(APIServer pid=26087) INFO 12-03 05:31:57 [loggers.py:199] Engine 001: Iteration(7): 0 context requests, \
0 context tokens, 0 generation requests, 0 generation tokens, iteration elapsed time: 0.00 ms (dummy), CPU KV \
cache usage: 0.0%
(APIServer pid=26087) INFO 12-03 05:31:57 [loggers.py:199] Engine 000: Iteration(2): 0 context requests, \
0 context tokens, 12 generation requests, 12 generation tokens, iteration elapsed time: 103.00 ms, CPU KV cache \
usage: 12.5%
"""


def test_each_real_step_is_read_with_its_fields_and_the_dummy_left_out():
    steps = parse(LOG)
    assert [astuple(s) for s in steps] == [pytest.approx(t) for t in ((0, 1, 32, 0, 0, 0.01534, 0.0, 0),
                                                                      (1, 1, 32, 1, 1, 0.01649, 0.0, 0),
                                                                      (2, 0, 0, 12, 12, 0.103, 0.125, 0))]
    assert [s.tokens for s in steps] == [32, 33, 12]


def test_a_line_without_the_engine_prefix_is_engine_0():
    """A single engine's logger may leave out the "Engine 000: " prefix."""
    (step,) = parse("INFO [loggers.py:199] Iteration(5): 2 context requests, 70 context tokens, 3 generation "
                    "requests, 3 generation tokens, iteration elapsed time: 4.50 ms, CPU KV cache usage: 1.5%")
    assert (step.index, step.context_tokens, step.generation_requests, step.elapsed_s, step.engine) == \
        (5, 70, 3, 0.0045, 0)


def test_the_cursor_gives_each_load_only_its_own_steps_and_waits_for_a_whole_line(tmp_path):
    log = tmp_path / "vllm.log"
    lines = LOG.splitlines(keepends=True)
    log.write_text(lines[0], encoding="utf-8")
    cursor = LogCursor(log)  # what was there before the load is not the load's
    assert cursor.steps() == []
    with open(log, "a", encoding="utf-8") as f:
        f.write(lines[1] + lines[2][:40])  # a step line half written
    assert cursor.steps() == []
    with open(log, "a", encoding="utf-8") as f:
        f.write(lines[2][40:] + lines[3] + lines[4])
    assert [s.index for s in cursor.steps()] == [1, 2]
    assert cursor.steps() == []
    assert LogCursor(tmp_path / "none.log").steps() == []


def test_the_summary_counts_tokens_and_the_time_in_stalls_of_decode_steps():
    """A 64-token prefill of 300 ms, then decode steps of 10, 10, 12 and 100 ms: the median step is 12 ms (of 10, 10,
    12, 100, 300), the median decode step 11 ms (of 10, 10, 12, 100); the 100 ms decode is over 4 x 11 = 44 ms, a stall:
    100 of the decodes' 132 ms. The prefill, long by its work, is no stall."""
    assert STALL_FACTOR == 4.0
    steps = [EngineStep(0, 1, 64, 0, 0, 0.3, 0.0)] + [EngineStep(i + 1, 0, 0, 4, 4, ms / 1e3, 0.0)
                                                       for i, ms in enumerate((10, 10, 12, 100))]
    got = summary(steps)
    assert got["steps"] == 5 and got["context_tokens"] == 64 and got["generation_tokens"] == 16
    assert got["elapsed_s"] == pytest.approx(0.432) and got["median_s"] == pytest.approx(0.012)
    assert got["decode_median_s"] == pytest.approx(0.011)
    assert got["stall_share"] == pytest.approx(100 / 132)
    assert summary([]) == {"steps": 0, "context_tokens": 0, "generation_tokens": 0, "elapsed_s": 0, "median_s": None,
                           "decode_median_s": None, "stall_share": None}
