"""The device worker process and the run record the app builds from its events."""

from __future__ import annotations

import time

import pytest

from kvviz.engine.events import Finished, TokenEvent
from kvviz.engine.loading import load_model
from kvviz.engine.loop import run_to_end
from kvviz.engine.request import GenerationRequest
from kvviz.engine.threads import choose_cpu_threads
from kvviz.ui.live import RunRecord, Throttle
from kvviz.ui.worker import DeviceWorker, Failed, Loaded


@pytest.fixture(scope="module")
def worker():
    w = DeviceWorker()
    yield w
    w.close()


def test_generation_in_the_worker(worker, tiny_models):
    """A job streams Loaded, the engine's events and Finished back from the other process."""
    job = worker.start("generate", str(tiny_models["qwen2"]), GenerationRequest("The kernel", max_new_tokens=6))
    items = job.wait()
    loaded = [i for i in items if isinstance(i, Loaded)]
    tokens = [i for i in items if isinstance(i, TokenEvent)]
    assert loaded and loaded[0].device == "cpu" and loaded[0].cpu_threads >= 1
    assert len(tokens) == 6 and isinstance(items[-1], Finished) and items[-1].summary.new_tokens == 6


def test_bad_model_is_reported_as_bad_input(worker):
    """An unloadable model comes back as Failed(bad_input=True), and the worker keeps serving."""
    items = worker.start("generate", "/no/such/model", GenerationRequest("hi", max_new_tokens=2)).wait()
    assert any(isinstance(i, Failed) and i.bad_input and "no such model" in i.message for i in items)
    assert worker.alive()


def test_stop_reaches_the_worker(worker):
    """stop() ends a long generation in the worker early, with reason cancelled."""
    job = worker.start("generate", "random:smollm2-135m", GenerationRequest("hi", max_new_tokens=1000))
    seen: list = []
    deadline = time.monotonic() + 120
    while not any(isinstance(i, TokenEvent) for i in seen) and time.monotonic() < deadline:
        seen += job.drain(0.2)
    job.stop()
    seen += job.wait()
    finished = [i for i in seen if isinstance(i, Finished)]
    assert finished and finished[0].reason == "cancelled"
    assert sum(isinstance(i, TokenEvent) for i in seen) < 1000


def test_malformed_request_is_refused_before_the_worker(worker):
    """A malformed request raises at once in the caller and leaves the worker free."""
    with pytest.raises(ValueError, match="empty"):
        worker.start("generate", "tiny", GenerationRequest("", max_new_tokens=2))
    items = worker.start("generate", "tiny", GenerationRequest("The cache", max_new_tokens=2)).wait()
    assert isinstance(items[-1], Finished)


def test_thread_choice_is_one_of_two(tiny_models):
    """The worker uses all cores or leaves one free, never anything else."""
    lm = load_model(str(tiny_models["llama"]))
    assert choose_cpu_threads(lm, 2) in (1, 2)
    assert choose_cpu_threads(lm, 1) == 1


def test_run_record_rebuilds_the_run(tiny_models):
    """Fed the engine's events, a RunRecord has the text, a row per token and a history line."""
    from kvviz.engine.loop import generate

    lm = load_model(str(tiny_models["qwen2"]))
    record = RunRecord(model="m", mode="cached", prompt="The kernel")
    for event in generate(lm, GenerationRequest("The kernel", max_new_tokens=5)):
        record.add(event)
    assert len(record.frame) == 5 and record.summary.new_tokens == 5
    assert record.text == record.finish.text
    assert {"device acquired", "tokenized", "prefill done", "finished"} <= set(record.phases)
    row = record.history_row()
    assert row["finish"] == "max_new_tokens" and row["new_tokens"] == 5 and "ttft_s" in row


def test_throttle():
    """Due at once, then not again until the interval has passed."""
    t = Throttle(0.2)
    assert t.due() and not t.due()
    time.sleep(0.25)
    assert t.due()


def test_direct_and_worker_agree(worker, tiny_models):
    """The worker runs the same loop: greedy tokens equal a run in this process."""
    req = GenerationRequest("The kernel", max_new_tokens=8)
    local = [t.token_id for t in run_to_end(load_model(str(tiny_models["llama"])), req)[0]]
    remote = [i.token_id for i in worker.start("generate", str(tiny_models["llama"]), req).wait()
              if isinstance(i, TokenEvent)]
    assert local == remote


def test_worker_ends_with_its_parent(tmp_path):
    """Killing the app's process (no clean-up at all) ends its worker too: no orphan holds a model."""
    import os
    import signal
    import subprocess
    import sys

    from tests.helpers import REPO

    script = ("from kvviz.ui.worker import device_worker; import time; "
              "w = device_worker(); print(w._process.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the worker outlived its parent")


def test_time_limit_stops_a_job(worker):
    """A job past its time limit is stopped within a token and reports timed_out; the worker serves on."""
    worker.start("generate", "random:smollm2-135m", GenerationRequest("hi", max_new_tokens=2)).wait()  # loaded
    started = time.monotonic()
    job = worker.start("generate", "random:smollm2-135m", GenerationRequest("hi", max_new_tokens=1000),
                       time_limit_s=1.0)
    items = job.wait()
    took = time.monotonic() - started
    finished = [i for i in items if isinstance(i, Finished)]
    assert job.timed_out and finished and finished[0].reason == "cancelled"
    assert 1 <= sum(isinstance(i, TokenEvent) for i in items) < 1000
    assert 1.0 <= took < 5, f"stopped after {took:.1f} s with a 1 s limit"
    assert worker.alive() and not worker.start("generate", "tiny", GenerationRequest("hi", max_new_tokens=2)) \
        .wait()[-1].error


def test_a_job_that_ignores_its_stop_ends_with_the_worker_process(monkeypatch):
    """A model still loading cannot be interrupted: past the limit and the grace, the process is ended,
    the device freed, and the next job gets a fresh worker."""
    import kvviz.ui.worker as worker_module

    monkeypatch.setattr(worker_module, "KILL_GRACE_S", 0.2)
    fresh = DeviceWorker()  # its process is still starting, so the load has not even begun
    job = fresh.start("generate", "random:smollm2-135m", GenerationRequest("hi", max_new_tokens=2), time_limit_s=0.1)
    started = time.monotonic()
    items = job.wait(30)
    assert job.done and job.timed_out and time.monotonic() - started < 5
    assert any(isinstance(i, Failed) and "stopped by the time limit of 0.1 s" in i.message for i in items)
    assert not fresh.alive(), "the stuck worker process must be gone"
    assert fresh._busy.acquire(blocking=False), "the device must be free for the next job"


def test_hosted_jobs_load_no_local_folder(worker, tiny_models):
    """In a hosted job the worker refuses a folder even when asked directly, and still loads the bundled model."""
    items = worker.start("generate", str(tiny_models["qwen2"]), GenerationRequest("hi", max_new_tokens=2),
                         hosted=True).wait()
    assert any(isinstance(i, Failed) and i.bad_input and "local folders cannot be loaded here" in i.message
               for i in items)
    items = worker.start("generate", "tiny", GenerationRequest("hi", max_new_tokens=2), hosted=True).wait()
    assert isinstance(items[-1], Finished) and items[-1].summary.new_tokens >= 1
