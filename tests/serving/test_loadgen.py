"""The load generator against a real HTTP server on 127.0.0.1 that streams known chunks at known times: every
expected figure below is worked out by hand from the server's timing, not from the code under test."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict

import pytest

from kvviz.serving.endpoint import CHAT, EndpointError, endpoint
from kvviz.serving.load import CLOSED, CONSTANT, POISSON, Load
from kvviz.serving.loadgen import run
from kvviz.serving.prompts import synthetic
from kvviz.serving.stats import Slo
from tests.serving.fake_server import MODEL, fake_server

pytestmark = pytest.mark.alone  # times what the machine does: run with nothing beside it (README)

SLACK = 0.06  # seconds a loaded 2-core machine may add to a sleep and a loopback hop
PROMPTS = synthetic(4, 8)


def _ep(url: str, **kw):
    return endpoint(url, MODEL, **kw)


@pytest.mark.parametrize("api", ["completions", CHAT])
def test_one_request_times_match_the_servers_schedule(api):
    """TTFT 0.2 s, then a token every 0.05 s: 5 tokens end at 0.4 s, TPOT 0.05 s, four ITLs of 0.05 s (a chat
    stream's opening role chunk is not an arrival)."""
    with fake_server(ttft_s=0.2, itl_s=0.05, tokens=5) as (url, _):
        result = run(_ep(url, api=api), Load(requests=1, output_tokens=5), PROMPTS)
    rec = result.records[0]
    assert rec.error is None
    assert rec.new_tokens == 5 and rec.usage_reported and len(rec.arrivals_s) == 5, "one chunk is one arrival"
    assert rec.prompt_tokens == 7, "prompt tokens come from the usage chunk"
    assert rec.ttft_s == pytest.approx(0.2, abs=SLACK)
    assert rec.e2e_s == pytest.approx(0.4, abs=SLACK)
    assert rec.tpot_s == pytest.approx(0.05, abs=SLACK / 4)
    assert all(gap == pytest.approx(0.05, abs=SLACK) for gap in rec.itl_s) and len(rec.itl_s) == 4
    assert 0 <= rec.accepted_s <= rec.ttft_s, "headers come before the first token"


def test_chunks_of_several_tokens_count_tokens_from_usage():
    """6 tokens in 3 chunks of 2: ITL is the chunk gap (0.05 s), TPOT per token = (0.3 - 0.2) / 5 = 0.02 s."""
    with fake_server(ttft_s=0.2, itl_s=0.05, tokens=6, tokens_per_chunk=2) as (url, _):
        rec = run(_ep(url), Load(requests=1, output_tokens=6), PROMPTS).records[0]
    assert len(rec.arrivals_s) == 3 and rec.new_tokens == 6
    assert rec.tpot_s == pytest.approx(0.02, abs=SLACK / 5)
    assert rec.itl_s[0] == pytest.approx(0.05, abs=SLACK)


def test_a_whole_output_in_one_chunk_has_no_tpot():
    """6 tokens in one chunk: the client saw no decode, so TPOT is unknown (not (E2E - TTFT) / 5 = 0 s), and a
    run of such requests has no TPOT distribution rather than a median of 0."""
    with fake_server(ttft_s=0.2, itl_s=0.05, tokens=6, tokens_per_chunk=6) as (url, _):
        result = run(_ep(url), Load(requests=2, output_tokens=6), PROMPTS)
    assert [len(r.arrivals_s) for r in result.records] == [1, 1] and result.records[0].new_tokens == 6
    assert [r.tpot_s for r in result.records] == [None, None]
    assert result.stats.tpot.p50 is None and result.stats.completed == 2


def test_closed_loop_keeps_the_concurrency_and_the_run_figures_follow():
    """2 in flight, 4 requests of 0.4 s: two waves, 0.8 s; 20 tokens / 0.8 s = 25 tokens/s, 5 requests/s;
    the second wave starts when the first ends."""
    with fake_server(ttft_s=0.2, itl_s=0.05, tokens=5) as (url, _):
        result = run(_ep(url), Load(concurrency=2, requests=4, output_tokens=5), PROMPTS,
                     slo=Slo(ttft_s=0.3, tpot_s=0.06))
    s = result.stats
    assert (s.completed, s.failed, s.output_tokens) == (4, 0, 20)
    assert s.duration_s == pytest.approx(0.8, abs=2 * SLACK)
    assert s.output_tokens_per_s == pytest.approx(25, rel=0.1)
    assert s.requests_per_s == pytest.approx(5, rel=0.1)
    sent = sorted(r.sent_s for r in result.records)
    assert sent[1] < SLACK and sent[2] == pytest.approx(0.4, abs=SLACK), f"not two waves of two: {sent}"
    assert s.ttft.p50 == pytest.approx(0.2, abs=SLACK) and s.tpot.p99 == pytest.approx(0.05, abs=SLACK / 4)
    assert s.goodput_requests_per_s == pytest.approx(s.requests_per_s), "every request meets TTFT<=0.3, TPOT<=0.06"


def test_goodput_counts_only_requests_within_the_slo():
    """An SLO of TTFT <= 0.1 s no request of a 0.2 s TTFT meets: goodput 0 while throughput is not."""
    with fake_server(ttft_s=0.2, itl_s=0.01, tokens=2) as (url, _):
        s = run(_ep(url), Load(requests=2, output_tokens=2), PROMPTS, slo=Slo(ttft_s=0.1, tpot_s=1.0)).stats
    assert s.requests_per_s > 0 and s.goodput_requests_per_s == 0


def test_open_loop_at_a_constant_rate_sends_on_schedule():
    """10 requests/s, 5 requests, room for all: sent at 0, 0.1, 0.2, 0.3, 0.4 s."""
    with fake_server(ttft_s=0.05, itl_s=0.01, tokens=2) as (url, _):
        result = run(_ep(url), Load(arrivals=CONSTANT, rate=10, concurrency=5, requests=5, output_tokens=2), PROMPTS)
    sent = sorted(r.sent_s for r in result.records)
    assert sent == pytest.approx([0, 0.1, 0.2, 0.3, 0.4], abs=SLACK)


def test_open_loop_waits_for_a_free_slot():
    """100 requests/s but one in flight at most: each request waits for the previous one's 0.4 s."""
    with fake_server(ttft_s=0.2, itl_s=0.05, tokens=5) as (url, _):
        result = run(_ep(url), Load(arrivals=CONSTANT, rate=100, concurrency=1, requests=3, output_tokens=5), PROMPTS)
    sent = sorted(r.sent_s for r in result.records)
    assert sent[1] - sent[0] >= 0.4 - SLACK and sent[2] - sent[1] >= 0.4 - SLACK, sent


def test_poisson_arrivals_are_seeded_and_irregular():
    """A Poisson process at 50/s: the mean gap near 1/50 s, gaps irregular (a constant rate's are equal), and
    the same seed gives the same schedule."""
    load = Load(arrivals=POISSON, rate=50, concurrency=30, requests=30, output_tokens=1, seed=7)
    with fake_server(ttft_s=0.0, itl_s=0.0, tokens=1) as (url, _):
        runs = [sorted(r.sent_s for r in run(_ep(url), load, PROMPTS).records) for _ in range(2)]
    gaps = [b - a for a, b in zip(runs[0], runs[0][1:], strict=False)]
    mean = sum(gaps) / len(gaps)
    assert 0.5 / 50 < mean < 1.7 / 50
    assert max(gaps) > 2 * min(gaps) + 0.005, "arrivals look evenly spaced, not Poisson"
    assert runs[0] == pytest.approx(runs[1], abs=SLACK), "the same seed must give the same arrival times"


def test_a_run_ends_by_itself_at_its_duration():
    """Closed loop, 1 in flight, 100 requests allowed but 0.3 s of sending: one request (0.4 s), then it ends."""
    start = time.perf_counter()
    with fake_server(ttft_s=0.2, itl_s=0.05, tokens=5) as (url, _):
        result = run(_ep(url), Load(concurrency=1, requests=100, duration_s=0.3, output_tokens=5), PROMPTS)
    assert len(result.records) == 1
    assert time.perf_counter() - start < 0.3 + 0.4 + 1.0


@pytest.mark.parametrize("arrivals", [CONSTANT, POISSON])
@pytest.mark.parametrize("rate", [0.01, 1e-320])
def test_an_open_loop_never_waits_past_its_duration_for_the_next_arrival(arrivals, rate):
    """At 0.01 requests/s the second arrival is due 100 s after the first (1e-320: never): with 0.5 s of sending,
    the first request is sent at once and the run ends once it has (its duration checked before the wait)."""
    start = time.perf_counter()
    with fake_server(ttft_s=0.05, itl_s=0.01, tokens=2) as (url, _):
        result = run(_ep(url), Load(arrivals=arrivals, rate=rate, requests=5, duration_s=0.5, output_tokens=2),
                     PROMPTS)
    assert len(result.records) == 1 and result.stats.completed == 1
    assert time.perf_counter() - start < 0.5 + 1.5


def test_a_cancel_before_the_first_request_ends_the_checks_at_once():
    """A server that takes its time to list its models (10 s here): a cancel 0.3 s in ends the run before any
    request, as a cancelled run with nothing sent, not after the check's own timeout."""
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    start = time.perf_counter()
    with fake_server(models_delay_s=10.0) as (url, _):
        result = run(_ep(url), Load(requests=2, output_tokens=2), PROMPTS, cancel=cancel)
    assert time.perf_counter() - start < 2.0
    assert result.cancelled and result.records == ()


def test_cancel_ends_a_run_and_records_the_requests_in_flight():
    """A run of 10 s streams stopped after 0.3 s: it returns at once, its requests marked cancelled."""
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    start = time.perf_counter()
    with fake_server(ttft_s=0.05, itl_s=0.05, tokens=200) as (url, _):
        result = run(_ep(url), Load(concurrency=2, requests=4, output_tokens=200), PROMPTS, cancel=cancel)
    assert time.perf_counter() - start < 1.5
    assert result.cancelled and [r.error for r in result.records] == ["cancelled", "cancelled"]


def test_request_timeout_bounds_each_request():
    """A request timeout shorter than the server's TTFT: no request completes, and the run says why."""
    with fake_server(ttft_s=0.5, itl_s=0.01, tokens=2) as (url, _), pytest.raises(EndpointError, match="timeout"):
        run(_ep(url), Load(requests=2, output_tokens=2, timeout_s=0.1), PROMPTS)


@pytest.mark.parametrize(("behaviour", "model", "message"), [
    ({"api_key": "right-key"}, MODEL, "HTTP 401"),
    ({"mode": "plain_json"}, MODEL, "not a stream"),
    ({"mode": "malformed"}, MODEL, "malformed SSE"),
    ({"mode": "no_done"}, MODEL, "before data: \\[DONE\\]"),
    ({"mode": "error_chunk"}, MODEL, "engine died"),
    ({}, "nope", "does not serve model 'nope'; it serves: fake"),
    ({"list_models": False}, "nope", "HTTP 404: The model `nope` does not exist"),
])
def test_a_bad_endpoint_is_one_clear_line(behaviour, model, message):
    """Each way a server can be unusable ends the run with one line naming it, never a traceback."""
    with fake_server(**behaviour) as (url, _), pytest.raises(EndpointError, match=message) as err:
        run(endpoint(url, model), Load(requests=1, output_tokens=5), PROMPTS)
    assert "\n" not in str(err.value)


def test_an_unreachable_endpoint_is_one_clear_line():
    with fake_server() as (url, _):
        pass  # the port is now closed
    with pytest.raises(EndpointError, match="cannot reach"):
        run(_ep(url), Load(requests=1), PROMPTS)


def test_the_api_key_is_sent_but_never_kept(monkeypatch):
    """The key from KVVIZ_API_KEY opens the server; it is in no repr and nowhere in the result."""
    monkeypatch.setenv("KVVIZ_API_KEY", "sk-very-secret")
    with fake_server(api_key="sk-very-secret", tokens=2, ttft_s=0.01) as (url, _):
        ep = _ep(url)
        result = run(ep, Load(requests=1, output_tokens=2), PROMPTS)
    assert result.stats.completed == 1
    dumped = json.dumps(asdict(result), default=str) + repr(ep) + repr(result)
    assert "sk-very-secret" not in dumped


@pytest.mark.parametrize(("field", "value", "message"), [
    ("concurrency", 0, "concurrency"), ("requests", 10**9, "requests"), ("arrivals", "burst", "arrivals"),
    ("duration_s", float("inf"), "duration"), ("output_tokens", 1.5, "output tokens")])
def test_a_load_is_checked_when_built(field, value, message):
    with pytest.raises(ValueError, match=message):
        Load(**{field: value})


def test_an_open_loop_needs_a_rate():
    with pytest.raises(ValueError, match="rate"):
        Load(arrivals=POISSON)
    assert Load(arrivals=CLOSED).rate is None
