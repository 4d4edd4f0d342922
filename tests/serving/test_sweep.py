"""The sweep: its levels, and where it stops, against the test server batching (throughput grows with the
requests in flight) and not batching (one stream at a time: throughput flat from the first level)."""

from __future__ import annotations

import pytest

from kvviz.serving import overhead
from kvviz.serving.endpoint import endpoint
from kvviz.serving.prompts import synthetic
from kvviz.serving.sweep import CLIENT, LAST, levels, prompts_needed, stop_reason, sweep, sweep_frame
from tests.serving.fake_server import MODEL, fake_server

pytestmark = pytest.mark.alone  # times what the machine does: run with nothing beside it (README)


@pytest.mark.parametrize(("top", "expected"), [(1, [1]), (6, [1, 2, 4, 6]), (16, [1, 2, 4, 8, 16])])
def test_levels_double_up_to_the_last(top, expected):
    assert levels(top) == expected


def test_prompts_needed_covers_every_level():
    """Levels 1, 2, 4: 8, 8 and 16 measured requests, and a warm-up of 1, 2 and 4 before them."""
    assert prompts_needed(4, per_level=4, min_requests=8) == (8 + 1) + (8 + 2) + (16 + 4)
    assert prompts_needed(4, per_level=4, min_requests=8, warmup=False) == 8 + 8 + 16


def test_a_server_that_cannot_batch_saturates_at_once():
    """One stream at a time (0.16 s each): 2 and 4 in flight add nothing to 1's throughput but the client's own
    few milliseconds a request, far less than the 20% asked, so the sweep stops at 4 of 16."""
    with fake_server(ttft_s=0.1, itl_s=0.02, tokens=4, serial=True) as (url, _):
        results = sweep(endpoint(url, MODEL), synthetic(100, 4), max_concurrency=16, output_tokens=4,
                        per_level=1, min_requests=4, saturation_gain=0.2)
    assert [r.load.concurrency for r in results] == [1, 2, 4]


def test_a_server_that_batches_is_swept_to_the_end():
    """Streams in parallel: throughput doubles with each level, so every level runs; the trade-off columns
    are there (tokens/s per user = 1 / TPOT p50 = 1 / 0.02 s)."""
    with fake_server(ttft_s=0.02, itl_s=0.02, tokens=4) as (url, _):
        results = sweep(endpoint(url, MODEL), synthetic(100, 4), max_concurrency=4, output_tokens=4,
                        per_level=1, min_requests=4)
    frame = sweep_frame(results)
    assert list(frame["concurrency"]) == [1, 2, 4]
    assert frame["tokens_per_s_per_user"].iloc[0] == pytest.approx(50, rel=0.25)


def test_a_sweep_stops_where_the_client_limits_a_level(monkeypatch):
    """With the rule's CPU bound set below any client's (busy > -1 always), the first level is limited by the
    client: the sweep runs no further level and says why; without it, the same sweep runs to its end."""
    with fake_server(ttft_s=0.02, itl_s=0.02, tokens=4) as (url, _):
        ep = endpoint(url, MODEL)
        whole = sweep(ep, synthetic(100, 4), max_concurrency=4, output_tokens=4, per_level=1, min_requests=4)
        monkeypatch.setattr(overhead, "BUSY_LIMIT", -1.0)
        cut = sweep(ep, synthetic(100, 4), max_concurrency=4, output_tokens=4, per_level=1, min_requests=4)
    assert [r.load.concurrency for r in whole] == [1, 2, 4] and stop_reason(whole) == LAST
    assert [r.load.concurrency for r in cut] == [1] and stop_reason(cut) == CLIENT
    assert bool(sweep_frame(cut)["client_limited"].iloc[0])
