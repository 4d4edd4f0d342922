"""The device worker: a separate process that owns the models and runs them for the web app.

A model's Python-heavy forward pass and a web server in one process share one interpreter lock, and
the server's threads slowed a small model's decode by 10-15% even while idle. So the app runs every
device job (a generation, a comparison, a load of requests, a batch, a batch sweep, the lesson's script) in this
worker process, which loads and keeps the models.

The protocol is typed. A job's payload says what to run, one dataclass per kind of job: Generate, Compare,
EngineLoad, Batch, BatchSweep, Lesson; KINDS maps each to the function that runs it in the worker and the
message that answers it, so a payload of any other type cannot be built into a Job. The app starts a job with
start(spec, payload) on a DeviceWorker, a WorkerSlot or the app's own (start_job); the worker answers with
messages tagged with the job's id: Progress while loading, Loaded, then the answer: Tokens (batches of
kvviz.engine.loop's events), Compared, Served (a load's RunResult, kvviz.serving.engine_load), Batched (a batch's
BatchResult, kvviz.engine.batch), Swept (a batch sweep's table) or Scripted (the lesson script's run beside
kvviz's, kvviz.engine.lesson_script); Failed when something went wrong, and always Done last.
WorkerJob.follow() is the one loop that reads them, for every caller (the tabs read them through
kvviz.ui.common.follow). Stop sets an event the generation loop checks before every token (every
request of a load checks it, and the load sends no more; a batch checks it before every step); a job that has
not ended KILL_GRACE_S after its stop (a model still loading, a compile, cannot be interrupted) ends with the
worker process, so a stop always frees the device and a hosted run ends within its time limit and that grace. A
fresh worker process's own start-up (importing torch and transformers) is no job's: a job's clock starts once the
process is ready, so a worker ended to free the device does not make the next visitor's run fail its limit too.
Nothing here imports gradio; the worker process never imports it either.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pandas as pd

from kvviz.base.errors import KvvizError
from kvviz.base.inputs import whole_number
from kvviz.engine.batch import BatchRequest, BatchResult
from kvviz.engine.compare import Comparison
from kvviz.engine.events import Event, Finished
from kvviz.engine.lesson_script import LessonRun
from kvviz.engine.request import MAX_NEW_TOKENS, GenerationRequest
from kvviz.engine.threads import choose_cpu_threads
from kvviz.i18n import said
from kvviz.serving.engine_load import engine_requests
from kvviz.serving.load import Load
from kvviz.serving.loadgen import RunResult
from kvviz.serving.prompts import Prompt

# The payloads: what a job runs, one type per kind of job, each checked when built (a bad one never reaches
# the worker process).


@dataclass(frozen=True)
class RequestJob:
    """A job that runs one GenerationRequest (the base of Generate, Compare and Lesson)."""

    request: GenerationRequest

    def __post_init__(self) -> None:
        if not isinstance(self.request, GenerationRequest):
            raise TypeError(f"a {type(self).__name__} job's request is a GenerationRequest, "
                            f"not {type(self.request).__name__}")


@dataclass(frozen=True)
class Generate(RequestJob):
    """One generation (kvviz.engine.loop), streamed as Tokens."""


@dataclass(frozen=True)
class Compare(RequestJob):
    """Cached against uncached, and on a static cache too when the request asks (kvviz.engine.compare); one
    Compared."""


@dataclass(frozen=True)
class Lesson(RequestJob):
    """The lesson's script, then kvviz's loop, on the request (kvviz.engine.lesson_script); one Scripted."""


@dataclass(frozen=True)
class EngineLoad:
    """A load of requests on kvviz's own engine (kvviz.serving.engine_load): `load` with `prompts` (cycled), a
    closed loop the engine can take (ValueError here for one it cannot); one Served."""

    load: Load
    prompts: tuple[Prompt, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.load, Load):
            raise TypeError(f"a load job's load is a Load, not {type(self.load).__name__}")
        if not isinstance(self.prompts, tuple) or not all(isinstance(p, Prompt) for p in self.prompts):
            raise TypeError("a load job's prompts are a tuple of Prompt")
        engine_requests(self.load, self.prompts)


@dataclass(frozen=True)
class Batch:
    """Prompts decoded together (kvviz.engine.batch.run_batch); one Batched."""

    request: BatchRequest

    def __post_init__(self) -> None:
        if not isinstance(self.request, BatchRequest):
            raise TypeError(f"a Batch job's request is a BatchRequest, not {type(self.request).__name__}")


@dataclass(frozen=True)
class BatchSweep:
    """A batch sweep (kvviz.engine.batch_sweep): B = 1, 2, 4, ... up to max_batch, on distinct synthetic prompts of
    prompt_tokens tokens (counted with the model's tokenizer, in the worker), new_tokens each; one Swept."""

    max_batch: int
    prompt_tokens: int
    new_tokens: int

    def __post_init__(self) -> None:
        whole_number(self.max_batch, "largest batch", 1, 1_024)
        whole_number(self.prompt_tokens, "prompt tokens", 1, 100_000)
        whole_number(self.new_tokens, "new tokens", 2, MAX_NEW_TOKENS)


Payload = Generate | Compare | Lesson | EngineLoad | Batch | BatchSweep


@dataclass(frozen=True, kw_only=True)
class Job:
    """What the app asks of the worker process: run `payload` on model `spec`.

    hosted: the worker loads no local folders and only safetensors weights for this job.
    """

    job_id: int
    spec: str
    payload: Payload
    hosted: bool = False

    def __post_init__(self) -> None:
        if type(self.payload) not in KINDS:
            raise TypeError(f"the worker runs no {type(self.payload).__name__} job; a job's payload is one of "
                            f"{', '.join(kind.__name__ for kind in KINDS)}")


@dataclass(frozen=True)
class Quit:
    """Tells the worker process to return once the job in hand is done."""


@dataclass(frozen=True, kw_only=True)
class Progress:
    job_id: int
    fraction: float
    message: str


@dataclass(frozen=True, kw_only=True)
class Loaded:
    """What the page needs to know about the model the worker is running."""

    job_id: int
    spec: str
    random_weights: bool
    tokenizer_note: str
    device: str
    dtype: str
    cpu_threads: int | None  # torch threads the worker runs this model with on a CPU
    load_s: float = 0.0  # wall time of getting the model ready (loading, choosing threads); ~0 when it was kept


@dataclass(frozen=True, kw_only=True)
class Tokens:
    """A batch of the generation's events (kvviz.engine.loop), in order."""

    job_id: int
    events: tuple[Event, ...]


@dataclass(frozen=True, kw_only=True)
class Compared:
    job_id: int
    comparison: Comparison


@dataclass(frozen=True, kw_only=True)
class Served:
    """An EngineLoad job's answer: every request's record and the run's figures (cancelled when the job was stopped)."""

    job_id: int
    result: RunResult


@dataclass(frozen=True, kw_only=True)
class Batched:
    """A Batch job's answer: every row's tokens, the per-step table, the summary (kvviz.engine.batch)."""

    job_id: int
    result: BatchResult


@dataclass(frozen=True, kw_only=True)
class Swept:
    """A BatchSweep job's answer: one row per batch size, measured beside predicted (kvviz.engine.batch_sweep)."""

    job_id: int
    frame: pd.DataFrame


@dataclass(frozen=True, kw_only=True)
class Scripted:
    """A Lesson job's answer: the lesson script's run beside kvviz's on the same prompt (kvviz.engine.lesson_script)."""

    job_id: int
    result: LessonRun


@dataclass(frozen=True, kw_only=True)
class Failed:
    job_id: int
    message: str
    bad_input: bool  # the request or the model asked for was wrong (not a fault of the worker)


@dataclass(frozen=True, kw_only=True)
class Done:
    """The job's last message: the device is free for the next job."""

    job_id: int


@dataclass(frozen=True)
class Tick:
    """Not from the worker: WorkerJob.follow's beat, once every period, for a caller that redraws."""


Message = Progress | Loaded | Tokens | Compared | Served | Batched | Swept | Scripted | Failed | Done


def events(messages: list) -> list[Event]:
    """The engine's events inside a job's messages, in order (for callers that want the run, not the protocol)."""
    return [event for m in messages if isinstance(m, Tokens) for event in m.events]


BATCH_S = 0.05
KILL_GRACE_S = 10.0  # how long a stopped job may keep running before its worker process is ended
READY_TIMEOUT_S = 300.0  # a fresh worker process that has not imported torch by then is taken for dead
WAIT_PERIOD_S = 0.5  # how often wait() and abandon() check a job's limits


def _exit_with_parent() -> None:
    """End this process as soon as the app's process is gone (killed, crashed), so no orphan keeps a model."""
    import os
    from multiprocessing.connection import wait

    parent = mp.parent_process()
    if parent is not None:
        wait([parent.sentinel])
        os._exit(0)


def _serve(jobs, results, cancel, ready) -> None:
    """The worker process's loop: one Job at a time until Quit; anything else on the queue is a bug. `ready` is
    set once the heavy imports are done, so that they are not counted against the first job's time limit."""
    threading.Thread(target=_exit_with_parent, daemon=True, name="kvviz-parent-watch").start()
    import torch

    import kvviz.engine.loading  # noqa: F401  (transformers: the rest of the start-up)

    ready.set()

    threads: dict[tuple, int] = {}  # (model, dtype) -> torch threads chosen for it, measured once
    cores = torch.get_num_threads()
    while True:
        job = jobs.get()
        if isinstance(job, Quit):
            return
        if not isinstance(job, Job):
            raise TypeError(f"the device worker was sent {job!r}, which is not a Job")
        _run(job, results.put, cancel, threads, cores)


@dataclass(frozen=True)
class Outbox:
    """Where a job reports to the app: every message sent through it carries the job's id."""

    job_id: int
    put: Callable[[Message], None]

    def send(self, message_type: type[Message], /, **fields) -> None:
        self.put(message_type(job_id=self.job_id, **fields))

    def progress(self, fraction: float, message: str) -> None:
        self.send(Progress, fraction=fraction, message=message)


def _run(job: Job, put: Callable[[Message], None], cancel, threads: dict[tuple, int], cores: int) -> None:
    """Load the job's model, run the job's payload (by its kind's runner), and report; Done is sent whatever
    happens."""
    from kvviz.engine.compare import CompareError
    from kvviz.engine.loading import LoadError

    out = Outbox(job.job_id, put)
    try:
        lm = _load(job, out, threads, cores)
        KINDS[type(job.payload)].run(job.payload, lm, out, cancel)
    except (LoadError, ValueError) as exc:
        out.send(Failed, message=str(exc), bad_input=True)
    except (CompareError, KvvizError) as exc:  # its own line (a Said, in the reader's language), not its type's name
        out.send(Failed, message=str(exc), bad_input=False)
    except Exception as exc:  # report any fault to the page and keep serving the next job
        out.send(Failed, message=f"{type(exc).__name__}: {exc}", bad_input=False)
    finally:
        out.send(Done)


def _load(job: Job, out: Outbox, threads: dict[tuple, int], cores: int):
    """The job's model, loaded (or already kept), with its CPU threads chosen; Loaded is sent."""
    import torch

    from kvviz.engine.loading import load_model

    started = time.perf_counter()  # the load happens before the request's own clock starts (its t0)
    lm = load_model(job.spec, local_folders=not job.hosted, safetensors_only=job.hosted, progress=out.progress)
    n = None
    if lm.device.type == "cpu":
        key = (lm.spec, lm.dtype_name)
        if key not in threads:
            out.progress(0.95, said("progress.threads"))
            threads[key] = choose_cpu_threads(lm, cores)
        n = threads[key]
        torch.set_num_threads(n)
    out.send(Loaded, spec=lm.spec, random_weights=lm.random_weights, tokenizer_note=lm.tokenizer_note,
             device=str(lm.device), dtype=lm.dtype_name, cpu_threads=n, load_s=time.perf_counter() - started)
    return lm


# The runners: one per kind of job, each given its payload, the loaded model, the job's outbox and the stop event.


def _generate(payload: Generate, lm, out: Outbox, cancel) -> None:
    """Stream the generation's events as Tokens batches a twentieth of a second apart: a queue put per token
    would wake the queue's feeder thread, which then competes with the model loop for the interpreter."""
    from kvviz.engine.loop import generate

    batch: list[Event] = []
    sent = time.monotonic()
    for event in generate(lm, payload.request, cancel):
        batch.append(event)
        if time.monotonic() - sent >= BATCH_S or isinstance(event, Finished):
            out.send(Tokens, events=tuple(batch))
            batch, sent = [], time.monotonic()
    if batch:
        out.send(Tokens, events=tuple(batch))


def _compare(payload: Compare, lm, out: Outbox, cancel) -> None:
    from kvviz.engine.compare import compare

    request = payload.request
    out.send(Compared, comparison=compare(lm, request, cancel=cancel, static=request.static,  # static: a third mode
                                          report=out.progress))


def _lesson(payload: Lesson, lm, out: Outbox, cancel) -> None:
    from kvviz.engine.lesson_script import run_lesson

    out.send(Scripted, result=run_lesson(lm, payload.request, cancel))


def _engine_load(payload: EngineLoad, lm, out: Outbox, cancel) -> None:
    from kvviz.serving.engine_load import engine_load

    out.send(Served, result=engine_load(lm, payload.load, payload.prompts, cancel))


def _batch(payload: Batch, lm, out: Outbox, cancel) -> None:
    from kvviz.engine.batch import run_batch

    out.send(Batched, result=run_batch(lm, payload.request, cancel, report=out.progress))


def _sweep(payload: BatchSweep, lm, out: Outbox, cancel) -> None:
    """The batch sweep, its progress reported per batch size (the fraction: B over the largest B)."""
    from kvviz.engine.batch_sweep import batch_sweep
    from kvviz.serving.prompts import synthetic

    top = payload.max_batch
    prompts = [p.text for p in synthetic(top, payload.prompt_tokens, lm.tokenizer, seed=0)]
    frame = batch_sweep(lm, prompts, payload.new_tokens, top, cancel=cancel,
                        progress=lambda b, m: out.progress(min(b / top, 1.0), m))
    out.send(Swept, frame=frame)


@dataclass(frozen=True)
class Kind:
    """How the worker runs one kind of job, and the message type that carries its answer."""

    run: Callable[..., None]  # (payload, the loaded model, the job's Outbox, the stop event)
    answer: type[Message]  # Tokens for a generation (a stream); one message for the others


KINDS: dict[type, Kind] = {  # the dispatch table: a payload's type -> its kind
    Generate: Kind(_generate, Tokens),
    Compare: Kind(_compare, Compared),
    Lesson: Kind(_lesson, Scripted),
    EngineLoad: Kind(_engine_load, Served),
    Batch: Kind(_batch, Batched),
    BatchSweep: Kind(_sweep, Swept),
}


class WorkerGone(KvvizError, RuntimeError):
    """The worker process ended (killed to free the device) while a job waited for it; start on a fresh one."""


class DeviceWorker:
    """The parent's handle on the worker process. One job runs at a time: start() waits for the one before."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")  # a clean interpreter: no server threads, no inherited locks
        self._jobs = ctx.Queue()
        self._results = ctx.Queue()
        self._cancel = ctx.Event()
        self._ready = ctx.Event()
        self._process = ctx.Process(target=_serve, args=(self._jobs, self._results, self._cancel, self._ready),
                                    daemon=True, name="kvviz-device-worker")
        self._process.start()
        self._busy = threading.Lock()
        self._ids = iter(range(1, 2**62))

    def start(self, spec: str, payload: Payload, time_limit_s: float | None = None,
              hosted: bool = False) -> WorkerJob:
        """Begin a job running `payload` on model `spec`, once the job before it has ended. The payload was checked
        when it was built, and its type is checked here: a bad job raises before the worker sees it.

        time_limit_s: the job is stopped once it has run this long (see WorkerJob.follow), counted from when a fresh
        process has started up, not before (a worker ended to free the device costs the next job no time of its own).
        """
        job = Job(job_id=next(self._ids), spec=spec, payload=payload, hosted=hosted)
        self._busy.acquire()
        if not self._wait_ready():  # ended while this job waited for the one before it, or while starting up
            self._busy.release()
            raise WorkerGone("job.worker_gone")
        self._cancel.clear()
        self._jobs.put(job)
        return WorkerJob(self, job.job_id, KINDS[type(payload)].answer, time_limit_s)

    def _wait_ready(self) -> bool:
        """Whether the process is alive and started up, waiting for its start-up (at most READY_TIMEOUT_S)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready.wait(WAIT_PERIOD_S):
            if not self.alive() or time.monotonic() > deadline:
                return False
        return self.alive()

    def receive(self, timeout_s: float) -> Message | None:
        """The next message from the worker process, or None if none came within timeout_s."""
        try:
            return self._results.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            return None

    def stop_job(self) -> None:
        """Ask the running job to stop before its next token."""
        self._cancel.set()

    def job_ended(self) -> None:
        """The running job is over (its Done came, or its process was ended): the next start() may go."""
        self._busy.release()

    def busy(self) -> bool:
        return self._busy.locked()

    def alive(self) -> bool:
        return self._process.is_alive()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def exitcode(self) -> int | None:
        """None while the process runs; 0 once it returned from its loop; negative when a signal ended it."""
        return self._process.exitcode

    def kill(self) -> None:
        """End the worker process at once, models and all; the next job starts a fresh one."""
        self._process.kill()
        self._process.join(10)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the running job, let the process return from its loop, and close the queues.

        Ending by returning (not by the signal multiprocessing sends daemons at exit) runs the process's
        own clean-up: the loaders' progress bars make a named semaphore in it (tqdm's lock), which
        otherwise outlives it and is reported as leaked when the app stops.
        """
        self._cancel.set()
        self._jobs.put(Quit())
        deadline = time.monotonic() + timeout_s
        while self.alive() and time.monotonic() < deadline:
            self.receive(0.1)  # what the last job still sends is dropped, so a full pipe cannot block its exit
        if self.alive():  # still loading a model: it cannot hear Quit
            self.kill()
        for q in (self._jobs, self._results):
            q.close()
            q.join_thread()


class WorkerJob:
    """One job as its caller sees it: follow() yields its messages; stop() and abandon() end it early.

    A job with a time limit is stopped by follow() once the limit has passed, and reports timed_out. A
    stop reaches the generation loop within a token, but not a model that is still loading nor a compile: a job
    still running KILL_GRACE_S after its stop (the limit's or anyone's) ends with the worker process, which
    follow() then reports as Failed and Done, so the device is freed. Only following a job frees the
    device: a job nobody follows any more is handed to abandon(), which follows it to the end on a thread.
    """

    def __init__(self, worker: DeviceWorker, job_id: int, answer: type[Message],
                 time_limit_s: float | None = None) -> None:
        self._worker = worker
        self.job_id = job_id
        self.answer = answer  # the type of the message that carries the job's answer (Tokens: a stream of them)
        self.done = False
        self.time_limit_s = time_limit_s
        self.timed_out = False
        self._deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
        self._stopped_at: float | None = None
        self._ending: list[Message] = []  # messages the job reports itself when its process is gone

    def follow(self, period_s: float) -> Iterator[Message | Tick]:
        """Every message of this job as it arrives and a Tick at the end of every period_s, until Done.

        The job's limits are checked at every Tick. Following a finished job yields nothing.
        """
        while not self.done or self._ending:
            deadline = time.monotonic() + period_s
            while (message := self._next(deadline)) is not None:
                yield message
                if isinstance(message, Done):
                    return
            self._enforce_limits()
            if not self._ending:
                yield Tick()

    def _next(self, deadline: float) -> Message | None:
        """This job's next message, or None at the deadline."""
        while True:
            if self._ending:
                return self._ending.pop(0)
            if self.done:
                return None
            message = self._worker.receive(deadline - time.monotonic())
            if message is None:
                if not self._worker.alive():
                    self._end("the device worker process died")
                    continue
                return None
            if message.job_id != self.job_id:
                continue  # a message of an earlier job that was abandoned
            if isinstance(message, Done):
                self._finish()
            return message

    def _enforce_limits(self) -> None:
        if self.done:
            return
        now = time.monotonic()
        if self._deadline is not None and not self.timed_out and now >= self._deadline:
            self.timed_out = True
            self.stop()
        elif self._stopped_at is not None and now >= self._stopped_at + KILL_GRACE_S:
            self._worker.kill()
            self._end(said("job.time_limit_restart", s=self.time_limit_s) if self.timed_out else
                      said("job.stuck_restart", s=KILL_GRACE_S))

    def _end(self, why: str) -> None:
        """The job's process is gone: report it as the worker would have, and free the device."""
        self._ending += [Failed(job_id=self.job_id, message=why, bad_input=False), Done(job_id=self.job_id)]
        self._finish()

    def _finish(self) -> None:
        if not self.done:
            self.done = True
            self._worker.job_ended()

    def stop(self) -> None:
        """Ask the generation to stop at its next token."""
        if not self.done:
            self._worker.stop_job()
            if self._stopped_at is None:
                self._stopped_at = time.monotonic()

    def abandon(self) -> None:
        """Stop the job and follow what is left of it on a thread of its own, returning at once.

        For a caller that will not follow the job any more: the app's generator when its tab went away,
        which the web server closes from its event loop, where waiting even one token would stall every
        other visitor. The device is free once the job ends, or, past KILL_GRACE_S, once its process does;
        the next job's start() waits for that.
        """
        if self.done:
            return
        self.stop()
        threading.Thread(target=self.wait, args=(KILL_GRACE_S + 30,), daemon=True,
                         name=f"kvviz-abandoned-job-{self.job_id}").start()

    def wait(self, timeout_s: float = 600.0) -> list[Message]:
        """Every remaining message, until the job ends (or timeout_s passes)."""
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        for message in self.follow(WAIT_PERIOD_S):
            if not isinstance(message, Tick):
                out.append(message)
            elif time.monotonic() >= deadline:
                break
        return out


class WorkerSlot:
    """The app's one worker process: started on first use, replaced when it ended, closed when the app exits."""

    def __init__(self, worker: DeviceWorker | None = None) -> None:
        self._worker = worker
        self._lock = threading.Lock()
        self._exit_hook = False

    def current(self) -> DeviceWorker:
        """The live worker, starting one if there is none (or the last one died or was ended)."""
        with self._lock:
            if self._worker is None or not self._worker.alive():
                self._worker = DeviceWorker()
                if not self._exit_hook:
                    # Registered after multiprocessing's own exit hook, so it runs first: the worker
                    # returns from its loop before multiprocessing would terminate it.
                    atexit.register(self.close)
                    self._exit_hook = True
            return self._worker

    def start(self, spec: str, payload: Payload, time_limit_s: float | None = None,
              hosted: bool = False) -> WorkerJob:
        """DeviceWorker.start on the current worker, waiting for the job before it; if that job's process was
        ended to free the device meanwhile, on the fresh one that replaces it."""
        while True:
            try:
                return self.current().start(spec, payload, time_limit_s, hosted)
            except WorkerGone:
                continue

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None


APP_WORKER = WorkerSlot()


def start_job(spec: str, payload: Payload, time_limit_s: float | None = None, hosted: bool = False) -> WorkerJob:
    """A job on the app's worker (APP_WORKER.start)."""
    return APP_WORKER.start(spec, payload, time_limit_s, hosted)
