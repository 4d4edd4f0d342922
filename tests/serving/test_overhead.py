"""The client's verdict on itself (kvviz.serving.overhead): its CPU, its reads' waits and the rule that says when
it, not the server, limited a run, from figures made by hand."""

from __future__ import annotations

import pytest

from kvviz.serving.overhead import BUSY, LATE_READS, client_overhead
from kvviz.serving.record import RequestRecord
from kvviz.serving.stats import run_stats


def request(e2e_s: float = 1.0, tokens: int = 100, joined_chunks: int = 0) -> RequestRecord:
    """One request of `tokens` tokens in 20 chunks lasting e2e_s, headers after 5 ms."""
    return RequestRecord(0, 0.0, 8, tokens, accepted_s=0.005, ttft_s=0.1, e2e_s=e2e_s,
                         arrivals_s=tuple(0.1 + i * (e2e_s - 0.1) / 19 for i in range(20)), joined_chunks=joined_chunks)


def stats(e2e_s: float = 1.0, tokens: int = 100, duration_s: float = 2.0):
    """One request of `tokens` tokens lasting e2e_s, in a run of duration_s."""
    return run_stats([request(e2e_s, tokens)], duration_s)


@pytest.mark.parametrize(("cpu_s", "waits", "limits"), [
    (0.2, [0.001] * 10, ()),  # 10% busy, reads waited 1 ms: fine
    (1.6, [0.001] * 10, (BUSY,)),  # 1.6 s of CPU in 2 s: 80% > 75%
    (0.2, [0.001] * 8 + [0.03] * 2, (LATE_READS,)),  # p90 of the waits 30 ms > 2.5% of 1 s
    (1.6, [0.03] * 10, (BUSY, LATE_READS)),
    (0.2, [0.02] * 10, ()),  # 20 ms < 25 ms
])
def test_the_rule(cpu_s, waits, limits):
    got = client_overhead(stats(), [request()], cpu_s, waits)
    assert got.limits == limits and got.limited == bool(limits)
    assert got.busy == pytest.approx(cpu_s / 2.0) and got.cpu_us_per_token == pytest.approx(cpu_s / 100 * 1e6)


def test_the_floor_keeps_jitter_from_condemning_short_requests():
    """Requests of 20 ms: 2.5% is 0.5 ms, but reads that waited 1.5 ms at p90 are under the 2 ms floor; 3 ms is not."""
    assert client_overhead(stats(e2e_s=0.02), [], 0.1, [0.0015] * 10).limits == ()
    assert client_overhead(stats(e2e_s=0.02), [], 0.1, [0.003] * 10).limits == (LATE_READS,)


def test_joined_chunks_are_reported_not_judged_and_only_cpu_means_saturated():
    """20 chunks a request, two requests, 3 of the 40 read in one go with a later one: 7.5%, said but no reason to
    warn (the server may have sent them together); a client busy 80% of the run is saturated, one whose reads
    waited is limited but not saturated."""
    joined = client_overhead(stats(), [request(joined_chunks=2), request(joined_chunks=1)], 0.2, [0.001])
    assert joined.joined_chunks == pytest.approx(0.075) and joined.limits == () and not joined.saturated
    assert client_overhead(stats(), [request()], 1.6, [0.001]).saturated
    waited = client_overhead(stats(), [request()], 0.2, [0.03] * 10)
    assert waited.limited and not waited.saturated


def test_without_kernel_stamps_only_the_cpu_rule_applies():
    got = client_overhead(stats(), [request()], 0.2, None)
    assert got.read_wait is None and got.limits == () and got.flat()["client_read_wait_p90_s"] is None
    assert got.flat()["client_headers_p50_s"] == 0.005
