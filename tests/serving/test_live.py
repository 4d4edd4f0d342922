"""A serving job followed while it runs (kvviz.serving.live) against a real HTTP server on 127.0.0.1 that
streams known chunks at known times: what the progress shows mid-run, what the outcome holds, Stop, failures.
Expected values are worked out from the server's schedule."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from kvviz.serving.endpoint import endpoint
from kvviz.serving.live import ONE, PREFIX, SWEEP, LiveJob, Plan
from kvviz.serving.load import Load
from tests.serving.fake_server import MODEL, fake_server

pytestmark = pytest.mark.alone  # times what the machine does: run with nothing beside it (README)

SLACK = 0.06


def plan(url: str, kind: str = ONE, **load) -> Plan:
    return Plan(kind, endpoint(url, MODEL), Load(**{"concurrency": 2, "requests": 4, "output_tokens": 5, **load}),
                prompt_tokens=8, shared_prefix=4 if kind == PREFIX else 0, max_concurrency=2, per_level=1)


def test_progress_shows_each_chunk_and_each_finished_request_while_the_run_goes():
    """2 in flight, 4 requests of 5 tokens (TTFT 0.2 s, then 0.1 s apart: 0.6 s each): at 0.45 s the first
    wave has sent 3 chunks each and no request has ended; at the end 20 chunks, the last at about 1.2 s."""
    with fake_server(ttft_s=0.2, itl_s=0.1, tokens=5) as (url, _):
        job = LiveJob(plan(url))
        time.sleep(0.45)
        chunks, ended = len(job.progress.arrivals_s), len(job.progress.records)
        assert job.wait(10), "the job did not end"
    assert ended == 0 and 4 <= chunks <= 6, f"mid-run: {chunks} chunks, {ended} requests ended"
    assert job.error is None and job.outcome is not None and not job.outcome.cancelled
    (result,) = job.outcome.runs
    assert len(job.progress.arrivals_s) == 20 and len(job.progress.records) == 4
    assert max(job.progress.arrivals_s) == pytest.approx(1.2, abs=3 * SLACK)
    assert result.stats.output_tokens == 20 and job.progress.concurrency == 2
    assert len(job.progress.samples) >= 2, "the server's /metrics were polled during the run"


def test_stop_ends_the_job_at_once_with_the_requests_in_flight_cancelled():
    """Requests of 5 s: Stop after 0.3 s ends the job within a second, both requests recorded as cancelled."""
    with fake_server(ttft_s=0.1, itl_s=1.0, tokens=5) as (url, _):
        job = LiveJob(plan(url))
        time.sleep(0.3)
        stopped = time.perf_counter()
        job.stop()
        assert job.wait(5)
        took = time.perf_counter() - stopped
    assert took < 1.0, f"Stop took {took:.2f} s"
    assert job.outcome.cancelled and [r.error for r in job.outcome.runs[0].records] == ["cancelled"] * 2


def test_the_prefix_experiment_runs_the_load_twice_and_a_sweep_once_per_level():
    with fake_server(ttft_s=0.05, itl_s=0.01, tokens=3) as (url, _):
        prefix = LiveJob(plan(url, PREFIX))
        assert prefix.wait(20)
        sweep = LiveJob(plan(url, SWEEP, output_tokens=3))
        assert sweep.wait(30)
    assert prefix.error is None and len(prefix.outcome.runs) == 2
    assert [r.stats.completed for r in prefix.outcome.runs] == [4, 4]
    assert sweep.error is None and [r.load.concurrency for r in sweep.outcome.runs] == [1, 2]


@pytest.mark.parametrize("kind", [ONE, PREFIX, SWEEP])
def test_a_time_limit_ends_the_whole_job_and_says_so(kind):
    """Requests of about 10 s (TTFT 0.5 s, 20 tokens 0.5 s apart), a 1 s limit on the job: each kind ends within
    about a second. One load and the prefix experiment keep their first run as cancelled, the outcome marked timed
    out (the experiment runs no second load); the sweep, stopped in its first warm-up, ran no level: it fails with
    the limit's line."""
    with fake_server(ttft_s=0.5, itl_s=0.5, tokens=20) as (url, _):
        started = time.perf_counter()
        job = LiveJob(replace(plan(url, kind, output_tokens=20), time_limit_s=1.0))
        assert job.wait(10), "the job outlasted its time limit"
        took = time.perf_counter() - started
    assert took < 1.0 + 1.0, f"a {kind} took {took:.2f} s against a 1 s limit"
    if kind == SWEEP:
        assert job.outcome is None and job.error == "stopped by the time limit: this demo allows 1 s per run"
        return
    assert job.error is None and job.outcome.timed_out and job.outcome.cancelled
    assert len(job.outcome.runs) == 1 and job.outcome.runs[0].cancelled


def test_a_time_limit_before_anything_was_sent_is_the_jobs_failure():
    """A server that takes 10 s to list its models, a 0.5 s limit: the job fails at once with the limit's line."""
    with fake_server(models_delay_s=10.0) as (url, _):
        started = time.perf_counter()
        job = LiveJob(replace(plan(url), time_limit_s=0.5))
        assert job.wait(10)
        took = time.perf_counter() - started
    assert took < 0.5 + 1.0 and job.outcome is None
    assert job.error == "stopped by the time limit: this demo allows 0.5 s per run"


@pytest.mark.parametrize("behaviour,message", [
    ({"api_key": "right"}, "HTTP 401"),
    ({"mode": "plain_json"}, "not a stream"),
])
def test_a_failing_job_ends_with_one_line(behaviour, message):
    with fake_server(**behaviour) as (url, _):
        job = LiveJob(plan(url))
        assert job.wait(20)
    assert job.outcome is None and message in job.error and "\n" not in job.error


def test_an_unreachable_server_is_one_line():
    job = LiveJob(plan("http://127.0.0.1:9"))
    assert job.wait(20)
    assert job.error.startswith("cannot reach http://127.0.0.1:9")
