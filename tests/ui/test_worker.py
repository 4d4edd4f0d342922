"""The device worker process, its typed protocol, and the run record the app builds from its events."""

from __future__ import annotations

import sys
import time
import typing

import pytest

from kvviz.engine.batch import BatchRequest
from kvviz.engine.events import Finished, TokenEvent
from kvviz.engine.loading import load_model
from kvviz.engine.loop import run_to_end
from kvviz.engine.request import GenerationRequest
from kvviz.serving.load import POISSON, Load
from kvviz.serving.prompts import synthetic
from kvviz.ui.generation.live import RunRecord, Throttle
from kvviz.ui.worker import (
    KINDS,
    WAIT_PERIOD_S,
    Batch,
    Batched,
    BatchSweep,
    Compare,
    Compared,
    DeviceWorker,
    Done,
    EngineLoad,
    Failed,
    Generate,
    Job,
    Lesson,
    Loaded,
    Payload,
    Scripted,
    Served,
    Swept,
    Tick,
    Tokens,
    events,
)

pytestmark = pytest.mark.alone  # times what the machine does: run with nothing beside it (README)

TWIN = "random:smollm2-135m"  # tens of ms per token here, and no end of sequence: a long run stays long


@pytest.fixture(scope="module")
def worker():
    w = DeviceWorker()
    yield w
    w.close()


def test_generation_in_the_worker(worker, tiny_models):
    """A job streams Loaded, Tokens batches holding the engine's events, and Done last, all tagged with its id."""
    job = worker.start(str(tiny_models["qwen2"]), Generate(GenerationRequest("The kernel", max_new_tokens=6)))
    messages = job.wait()
    loaded = [m for m in messages if isinstance(m, Loaded)]
    run = events(messages)
    tokens = [e for e in run if isinstance(e, TokenEvent)]
    assert loaded and loaded[0].device == "cpu" and loaded[0].cpu_threads >= 1
    assert len(tokens) == 6 and isinstance(run[-1], Finished) and run[-1].summary.new_tokens == 6
    assert isinstance(messages[-1], Done) and sum(isinstance(m, Done) for m in messages) == 1, \
        "a job ends with exactly one Done"
    assert {m.job_id for m in messages} == {job.job_id}, "a message of another job reached this one"
    assert job.done and not worker.busy(), "the device must be free once the job's Done arrived"


def test_following_a_job_beats_while_it_runs(worker):
    """follow() yields a Tick at the end of each period while the job runs, so a page can redraw, then ends."""
    job = worker.start("tiny", Generate(GenerationRequest("What is a package?", max_new_tokens=32)))
    seen = list(job.follow(0.01))
    assert any(isinstance(m, Tick) for m in seen), "no Tick while the job ran"
    assert isinstance(seen[-1], Done), f"follow() ended on {seen[-1]!r}, not the job's Done"
    assert list(job.follow(0.01)) == [], "following a finished job yields nothing"


def test_every_payload_type_has_a_runner():
    """The dispatch table and the Payload union name the same kinds: none can be built that the worker cannot run."""
    assert set(KINDS) == set(typing.get_args(Payload)) == {Generate, Compare, Lesson, EngineLoad, Batch, BatchSweep}
    assert {kind.answer for kind in KINDS.values()} == {Tokens, Compared, Scripted, Served, Batched, Swept}, \
        "each kind of job is answered by its own message"


def test_a_payload_of_no_kind_is_an_error():
    """A job's payload is one of the kinds: a bare request, a string, None are refused, never run as some default."""
    request = GenerationRequest("hi", max_new_tokens=2)
    for payload in (request, "generate", None, Generate):
        with pytest.raises(TypeError, match=r"the worker runs no \w+ job; a job's payload is one of Generate"):
            Job(job_id=1, spec="tiny", payload=payload)
    assert Job(job_id=1, spec="tiny", payload=Compare(request)).payload.request is request


def test_a_payload_of_no_kind_never_reaches_the_worker(worker):
    """start() with a payload that is no kind of job raises at once and leaves the device free."""
    with pytest.raises(TypeError, match="runs no GenerationRequest job"):
        worker.start("tiny", GenerationRequest("hi", max_new_tokens=2))
    assert not worker.busy()


def test_bad_model_is_reported_as_bad_input(worker):
    """An unloadable model comes back as Failed(bad_input=True), and the worker keeps serving."""
    messages = worker.start("/no/such/model", Generate(GenerationRequest("hi", max_new_tokens=2))).wait()
    assert any(isinstance(m, Failed) and m.bad_input and "no such model" in m.message for m in messages)
    assert worker.alive()


def test_stop_reaches_the_worker(worker):
    """stop() ends a long generation in the worker early, with reason cancelled."""
    job = worker.start(TWIN, Generate(GenerationRequest("hi", max_new_tokens=1000)))
    seen: list = []
    for message in job.follow(0.2):
        seen.append(message)
        if any(isinstance(e, TokenEvent) for e in events(seen)):
            break
    job.stop()
    run = events(seen + job.wait())
    finished = [e for e in run if isinstance(e, Finished)]
    assert finished and finished[0].reason == "cancelled"
    assert sum(isinstance(e, TokenEvent) for e in run) < 1000


def test_malformed_request_is_refused_before_the_worker(worker):
    """A malformed request raises at once in the caller and leaves the worker free."""
    with pytest.raises(ValueError, match="empty"):
        worker.start("tiny", Generate(GenerationRequest("", max_new_tokens=2)))
    run = events(worker.start("tiny", Generate(GenerationRequest("The cache", max_new_tokens=2))).wait())
    assert isinstance(run[-1], Finished)


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
    remote = [e.token_id for e in events(worker.start(str(tiny_models["llama"]), Generate(req)).wait())
              if isinstance(e, TokenEvent)]
    assert local == remote


def test_worker_ends_with_its_parent(tmp_path):
    """Killing the app's process (no clean-up at all) ends its worker too: no orphan holds a model."""
    import os
    import signal
    import subprocess

    from tests.helpers import REPO

    script = ("from kvviz.ui.worker import APP_WORKER; import time; "
              "print(APP_WORKER.current().pid, flush=True); time.sleep(60)")
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
    """A job past its time limit is stopped within a token of the next check and reports timed_out; the
    worker serves on. The bounds are in this run's own time per token."""
    worker.start(TWIN, Generate(GenerationRequest("hi", max_new_tokens=2))).wait()  # loaded and warm
    limit_s = 1.0
    started = time.monotonic()
    job = worker.start(TWIN, Generate(GenerationRequest("hi", max_new_tokens=1000)), time_limit_s=limit_s)
    run = events(job.wait())
    took = time.monotonic() - started
    finished = [e for e in run if isinstance(e, Finished)]
    assert job.timed_out and finished and finished[0].reason == "cancelled"
    summary = finished[0].summary
    # wait() checks the limit every WAIT_PERIOD_S; the stop then lands before the next token, one may be in flight.
    most = (limit_s + WAIT_PERIOD_S) / summary.tpot_s + 2
    assert 1 <= summary.new_tokens <= most, \
        f"{summary.new_tokens} tokens at {summary.tpot_s * 1e3:.0f} ms each: the limit did not stop the run in time"
    bound = limit_s + WAIT_PERIOD_S + 3 * summary.tpot_s + 1.0  # 1 s for the messages and the two processes
    assert limit_s <= took <= bound, f"stopped after {took:.2f} s; the limit and a token or so allow {bound:.2f} s"
    after = events(worker.start("tiny", Generate(GenerationRequest("hi", max_new_tokens=2))).wait())
    assert worker.alive() and not after[-1].error


def test_a_job_that_ignores_its_stop_ends_with_the_worker_process(monkeypatch):
    """A model still loading cannot be interrupted: past the limit and the grace, the process is ended,
    the device freed, and the job reports it as Failed and Done."""
    import kvviz.ui.worker as worker_module

    monkeypatch.setattr(worker_module, "KILL_GRACE_S", 0.2)
    fresh = DeviceWorker()  # its process is still starting, so the load has not even begun
    job = fresh.start(TWIN, Generate(GenerationRequest("hi", max_new_tokens=2)), time_limit_s=0.1)
    started = time.monotonic()
    messages = job.wait(30)
    assert job.done and job.timed_out and time.monotonic() - started < 5
    assert any(isinstance(m, Failed) and "stopped by the time limit of 0.1 s" in m.message for m in messages)
    assert isinstance(messages[-1], Done) and messages[-1].job_id == job.job_id
    assert not fresh.alive(), "the stuck worker process must be gone"
    assert not fresh.busy(), "the device must be free for the next job"
    fresh.close()


def test_hosted_jobs_load_no_local_folder(worker, tiny_models):
    """In a hosted job the worker refuses a folder even when asked directly, and still loads the bundled model."""
    messages = worker.start(str(tiny_models["qwen2"]), Generate(GenerationRequest("hi", max_new_tokens=2)),
                            hosted=True).wait()
    assert any(isinstance(m, Failed) and m.bad_input and "local folders cannot be loaded here" in m.message
               for m in messages)
    run = events(worker.start("tiny", Generate(GenerationRequest("hi", max_new_tokens=2)), hosted=True).wait())
    assert isinstance(run[-1], Finished) and run[-1].summary.new_tokens >= 1


def test_closing_the_worker_ends_its_process(tmp_path):
    """close() lets the worker process return from its loop (its own clean-up runs), even mid-generation."""
    w = DeviceWorker()
    job = w.start(TWIN, Generate(GenerationRequest("hi", max_new_tokens=1000)))
    for message in job.follow(0.2):
        if isinstance(message, Tokens):
            break
    w.close()
    assert not w.alive() and w.exitcode == 0, f"the worker process ended with {w.exitcode}: it was killed"


PROMPTS = tuple(synthetic(4, 8))


def test_a_load_job_in_the_worker(worker):
    """A load job (EngineLoad) runs the load on the engine in the worker and answers with one Served holding every
    request's record (4 requests of 6 tokens: 24 tokens), then Done."""
    messages = worker.start("tiny", EngineLoad(Load(concurrency=2, requests=4, output_tokens=6), PROMPTS)).wait()
    served = [m for m in messages if isinstance(m, Served)]
    assert len(served) == 1 and any(isinstance(m, Loaded) for m in messages), messages
    result = served[0].result
    assert [r.index for r in result.records] == [0, 1, 2, 3] and not result.cancelled
    assert all(r.ok and r.new_tokens == 6 and len(r.arrivals_s) == 6 for r in result.records)
    assert result.stats.output_tokens == 24 and result.endpoint["api"] == "engine"
    assert isinstance(messages[-1], Done) and {m.job_id for m in messages} == {served[0].job_id}
    assert not worker.busy()


def test_stop_ends_a_load_job(worker):
    """stop() ends a long load soon: Served with a cancelled result and few of its requests, then Done."""
    job = worker.start("tiny", EngineLoad(Load(concurrency=2, requests=1000, output_tokens=500), PROMPTS))
    for message in job.follow(0.1):
        if isinstance(message, Loaded):
            break
    time.sleep(0.5)
    stopped = time.monotonic()
    job.stop()
    messages = job.wait(30)
    took = time.monotonic() - stopped
    served = [m for m in messages if isinstance(m, Served)]
    assert served and served[0].result.cancelled and len(served[0].result.records) < 1000
    assert sum(r.error == "cancelled" for r in served[0].result.records) == 2, "both requests in flight end"
    assert isinstance(messages[-1], Done) and took < 5, f"the load ended {took:.1f} s after its stop"
    assert worker.alive() and not worker.busy()


def test_a_load_job_is_checked_before_the_worker(worker):
    """A load job carries a Load and a tuple of Prompt, and the engine must be able to take its load; a request
    job carries a GenerationRequest. Refused at once, the device left free."""
    request = GenerationRequest("hi", max_new_tokens=2)
    with pytest.raises(ValueError, match="only a closed-loop load"):
        worker.start("tiny", EngineLoad(Load(arrivals=POISSON, rate=1.0), PROMPTS))
    with pytest.raises(ValueError, match="no prompts"):
        worker.start("tiny", EngineLoad(Load(), ()))
    for load, prompts in ((request, PROMPTS), (None, PROMPTS), (Load(), list(PROMPTS)), (Load(), ("a prompt",))):
        with pytest.raises(TypeError):
            EngineLoad(load, prompts)
    for kind in (Generate, Compare, Lesson):
        with pytest.raises(TypeError, match=f"a {kind.__name__} job's request is a GenerationRequest, not Load"):
            kind(Load())
    assert not worker.busy()


def test_a_batch_job_in_the_worker(worker):
    """A Batch job decodes the prompts together in the worker: one Batched with a row per prompt, each with the
    tokens asked for (EOS ignored), then Done."""
    req = BatchRequest(("The kernel", "What is a package?", "A"), max_new_tokens=5, ignore_eos=True)
    messages = worker.start("tiny", Batch(req)).wait()
    batched = [m for m in messages if isinstance(m, Batched)]
    assert len(batched) == 1 and isinstance(messages[-1], Done), messages
    result = batched[0].result
    assert [r.row for r in result.rows] == [0, 1, 2] and all(r.new_tokens == 5 for r in result.rows)
    assert result.summary.batch_size == 3 and len(result.tokens) == 15
    assert (result.steps["kv_bytes"] == result.steps["kv_bytes_predicted"]).all()


def test_a_batch_sweep_job_in_the_worker(worker):
    """A BatchSweep to B=2 measures B = 1 and 2 on prompts of the asked length: one Swept, progress on the way."""
    messages = worker.start("tiny", BatchSweep(max_batch=2, prompt_tokens=8, new_tokens=3)).wait()
    swept = [m for m in messages if isinstance(m, Swept)]
    assert len(swept) == 1 and isinstance(messages[-1], Done), messages
    frame = swept[0].frame
    assert frame["batch"].tolist() == [1, 2] and (frame["prompt_tokens"] == 8).all()
    assert (frame["kv_bytes"] == frame["kv_bytes_predicted"]).all()


def test_batch_jobs_are_checked_before_the_worker(worker):
    """A Batch job carries a BatchRequest, a request job no BatchRequest, and a BatchSweep checks its sizes."""
    req = BatchRequest(("a",), max_new_tokens=2)
    with pytest.raises(TypeError, match="a Batch job's request is a BatchRequest, not GenerationRequest"):
        Batch(GenerationRequest("hi", max_new_tokens=2))
    with pytest.raises(TypeError, match="a Generate job's request is a GenerationRequest, not BatchRequest"):
        Generate(req)
    for bad in ((0, 8, 3), (2, 0, 3), (2, 8, 1)):
        with pytest.raises(ValueError):
            BatchSweep(*bad)
    assert not worker.busy()
