"""The running app under many clients at once and over many runs: nothing lost, mixed up or leaked."""

from __future__ import annotations

import pytest

from kvviz.bench.concurrency import load_test, summarize_load
from kvviz.bench.leaks import app_generations, summarize_leaks
from kvviz.ui.serve import running_app


@pytest.mark.slow
def test_eight_clients_at_once_each_get_their_own_text():
    """8 clients mixing generations and comparisons, and a calculator client, all at once: every job
    finishes with exactly the text it gets alone, its stream never shows another's tokens, jobs queue."""
    with running_app() as app:
        jobs, calc = load_test(app.url, 8, "tiny", 16)
    s = summarize_load(jobs, calc)
    assert s["finished"] == 8, jobs.to_dict(orient="records")
    assert s["all_own_text"], "a client received text that is not its own: sessions are mixed up"
    assert s["all_stream_prefixes"], "a streamed update was not a prefix of the client's final text"
    assert set(jobs["kind"]) == {"generate", "compare"}
    # One device: jobs run one after another, so the last to start waited about as long as the others ran.
    service = jobs["wall_s"] - jobs["queue_s"]
    last = jobs["queue_s"].idxmax()
    assert jobs.loc[last, "queue_s"] > 0.5 * service.drop(last).sum(), jobs[["kind", "queue_s", "wall_s"]]
    assert s["calculator_calls"] >= 1, "the calculator never answered while the device was busy"


@pytest.mark.slow
def test_two_hundred_generations_leave_memory_flat():
    """200 consecutive generations through the app: the app's and the worker's resident memory grow by
    less than 16 MiB after the first 20 (measured: about 1 MiB and 0.3 MiB)."""
    with running_app() as app:
        frame = app_generations(app.url, app.pid, 200, "tiny", new_tokens=4, every=20)
    s = summarize_leaks(frame, warm_up=20)
    assert frame["workers"].eq(1).all(), "the app should run exactly one device worker"
    assert s["runs"] == 200
    assert s["app_rss_growth_mib"] < 16, s
    assert s["worker_rss_growth_mib"] < 16, s

