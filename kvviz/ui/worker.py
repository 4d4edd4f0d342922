"""The device worker: a separate process that owns the models and runs them for the web app.

A model's Python-heavy forward pass and a web server in one process share one interpreter lock, and
the server's threads slowed a small model's decode by 10-15% even while idle. So the app runs every
device job (a generation, a comparison, a load of requests, a batch, a batch sweep) in this worker
process, which loads and keeps the models.

The protocol is typed. The app sends a Job (its kind a JobKind: an unknown kind cannot be built); the
worker answers with messages tagged with the job's id: Progress while loading, Loaded, then Tokens
(batches of kvviz.engine.loop's events), Compared, Served (a load's RunResult, kvviz.serving.engine_load),
Batched (a batch's BatchResult, kvviz.engine.batch), Swept (a batch sweep's table) or Scripted (the lesson
script's run beside kvviz's, kvviz.engine.lesson_script), Failed when
something went wrong, and always Done last. WorkerJob.follow() is the one loop that reads them, for every
caller. Stop sets an event the generation loop checks before every token (every request of a load checks
it, and the load sends no more; a batch checks it before every step); a job that has not ended KILL_GRACE_S
after its stop (a model still loading cannot be interrupted) ends with the worker process, so a stop always
frees the device. Nothing here imports gradio; the worker process never imports it either.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum

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


class JobKind(Enum):
    GENERATE = "generate"  # one generation, streamed as Tokens
    COMPARE = "compare"  # cached against uncached (and static), answered with one Compared
    LOAD = "load"  # a load of requests on kvviz's own engine (kvviz.serving.engine_load), answered with one Served
    BATCH = "batch"  # prompts decoded together (kvviz.engine.batch.run_batch), answered with one Batched
    BATCH_SWEEP = "batch sweep"  # B = 1, 2, 4, ... (kvviz.engine.batch_sweep), answered with one Swept
    LESSON = "lesson"  # the lesson's script, then kvviz's loop (kvviz.engine.lesson_script), answered with one Scripted


@dataclass(frozen=True)
class SweepAsk:
    """A batch sweep to run: B = 1, 2, 4, ... up to max_batch, on distinct synthetic prompts of prompt_tokens
    tokens (counted with the model's tokenizer, in the worker), new_tokens each. Checked when built."""

    max_batch: int
    prompt_tokens: int
    new_tokens: int

    def __post_init__(self) -> None:
        whole_number(self.max_batch, "largest batch", 1, 1_024)
        whole_number(self.prompt_tokens, "prompt tokens", 1, 100_000)
        whole_number(self.new_tokens, "new tokens", 2, MAX_NEW_TOKENS)


@dataclass(frozen=True, kw_only=True)
class Job:
    """What the app asks of the worker process: run `request` on model `spec`, the `kind` way; a LOAD job
    carries no request but a `load` and its `prompts` (a closed loop the engine can take, checked here).

    hosted: the worker loads no local folders and only safetensors weights for this job.
    """

    job_id: int
    kind: JobKind
    spec: str
    request: GenerationRequest | None = None
    load: Load | None = None
    prompts: tuple[Prompt, ...] = ()
    batch: BatchRequest | None = None  # BATCH
    sweep: SweepAsk | None = None  # BATCH_SWEEP
    hosted: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.kind, JobKind):
            raise ValueError(f"unknown job kind {self.kind!r}; a job is one of {', '.join(k.name for k in JobKind)}")
        carried = {JobKind.BATCH: (self.batch, BatchRequest), JobKind.BATCH_SWEEP: (self.sweep, SweepAsk)}
        if self.kind in carried:
            value, kind = carried[self.kind]
            if not isinstance(value, kind) or self.request is not None or self.load is not None:
                raise TypeError(f"a {self.kind.name} job carries a {kind.__name__}, not {type(value).__name__}")
            return
        if self.batch is not None or self.sweep is not None:
            raise TypeError(f"a {self.kind.name} job carries no batch")
        if self.kind is not JobKind.LOAD:
            if not isinstance(self.request, GenerationRequest):
                raise TypeError(f"a job's request is a GenerationRequest, not {type(self.request).__name__}")
            if self.load is not None or self.prompts:
                raise TypeError(f"a {self.kind.name} job carries a request, not a load")
            return
        if self.request is not None:
            raise TypeError("a LOAD job carries a load and prompts, not a request")
        if not isinstance(self.load, Load):
            raise TypeError(f"a LOAD job's load is a Load, not {type(self.load).__name__}")
        if not isinstance(self.prompts, tuple) or not all(isinstance(p, Prompt) for p in self.prompts):
            raise TypeError("a LOAD job's prompts are a tuple of Prompt")
        engine_requests(self.load, self.prompts)  # ValueError here for a load the engine cannot take


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
    """A LOAD job's answer: every request's record and the run's figures (cancelled when the job was stopped)."""

    job_id: int
    result: RunResult


@dataclass(frozen=True, kw_only=True)
class Batched:
    """A BATCH job's answer: every row's tokens, the per-step table, the summary (kvviz.engine.batch)."""

    job_id: int
    result: BatchResult


@dataclass(frozen=True, kw_only=True)
class Swept:
    """A BATCH_SWEEP job's answer: one row per batch size, measured beside predicted (kvviz.engine.batch_sweep)."""

    job_id: int
    frame: pd.DataFrame


@dataclass(frozen=True, kw_only=True)
class Scripted:
    """A LESSON job's answer: the lesson script's run beside kvviz's on the same prompt (kvviz.engine.lesson_script)."""

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
WAIT_PERIOD_S = 0.5  # how often wait() and abandon() check a job's limits


def _exit_with_parent() -> None:
    """End this process as soon as the app's process is gone (killed, crashed), so no orphan keeps a model."""
    import os
    from multiprocessing.connection import wait

    parent = mp.parent_process()
    if parent is not None:
        wait([parent.sentinel])
        os._exit(0)


def _serve(jobs, results, cancel) -> None:
    """The worker process's loop: one Job at a time until Quit; anything else on the queue is a bug."""
    threading.Thread(target=_exit_with_parent, daemon=True, name="kvviz-parent-watch").start()
    import torch

    threads: dict[tuple, int] = {}  # (model, dtype) -> torch threads chosen for it, measured once
    cores = torch.get_num_threads()
    while True:
        job = jobs.get()
        if isinstance(job, Quit):
            return
        if not isinstance(job, Job):
            raise TypeError(f"the device worker was sent {job!r}, which is not a Job")
        _run(job, results.put, cancel, threads, cores)


def _run(job: Job, send, cancel, threads: dict[tuple, int], cores: int) -> None:
    """Load the job's model, run it the job's way, and report; Done is sent whatever happens."""
    from kvviz.engine.compare import CompareError
    from kvviz.engine.loading import LoadError

    try:
        lm = _load(job, send, threads, cores)
        if job.kind is JobKind.GENERATE:
            _generate(job, lm, send, cancel)
        elif job.kind is JobKind.COMPARE:
            from kvviz.engine.compare import compare

            result = compare(lm, job.request, cancel=cancel, static=job.request.static)  # static: the third mode
            send(Compared(job_id=job.job_id, comparison=result))
        elif job.kind is JobKind.LOAD:
            from kvviz.serving.engine_load import engine_load

            send(Served(job_id=job.job_id, result=engine_load(lm, job.load, job.prompts, cancel)))
        elif job.kind is JobKind.BATCH:
            from kvviz.engine.batch import run_batch

            send(Batched(job_id=job.job_id, result=run_batch(lm, job.batch, cancel)))
        elif job.kind is JobKind.BATCH_SWEEP:
            _sweep(job, lm, send, cancel)
        elif job.kind is JobKind.LESSON:
            from kvviz.engine.lesson_script import run_lesson

            send(Scripted(job_id=job.job_id, result=run_lesson(lm, job.request, cancel)))
        else:  # a JobKind added without a way to run it
            raise NotImplementedError(f"the worker cannot run a {job.kind} job")
    except (LoadError, ValueError) as exc:
        send(Failed(job_id=job.job_id, message=str(exc), bad_input=True))
    except CompareError as exc:
        send(Failed(job_id=job.job_id, message=str(exc), bad_input=False))
    except Exception as exc:  # report any fault to the page and keep serving the next job
        send(Failed(job_id=job.job_id, message=f"{type(exc).__name__}: {exc}", bad_input=False))
    finally:
        send(Done(job_id=job.job_id))


def _load(job: Job, send, threads: dict[tuple, int], cores: int):
    """The job's model, loaded (or already kept), with its CPU threads chosen; Loaded is sent."""
    import torch

    from kvviz.engine.loading import load_model

    started = time.perf_counter()  # the load happens before the request's own clock starts (its t0)
    lm = load_model(job.spec, local_folders=not job.hosted, safetensors_only=job.hosted,
                    progress=lambda f, m: send(Progress(job_id=job.job_id, fraction=f, message=m)))
    n = None
    if lm.device.type == "cpu":
        key = (lm.spec, lm.dtype_name)
        if key not in threads:
            send(Progress(job_id=job.job_id, fraction=0.95, message=said("progress.threads")))
            threads[key] = choose_cpu_threads(lm, cores)
        n = threads[key]
        torch.set_num_threads(n)
    send(Loaded(job_id=job.job_id, spec=lm.spec, random_weights=lm.random_weights, tokenizer_note=lm.tokenizer_note,
                device=str(lm.device), dtype=lm.dtype_name, cpu_threads=n, load_s=time.perf_counter() - started))
    return lm


def _generate(job: Job, lm, send, cancel) -> None:
    """Stream the generation's events as Tokens batches a twentieth of a second apart: a queue put per token
    would wake the queue's feeder thread, which then competes with the model loop for the interpreter."""
    from kvviz.engine.loop import generate

    batch: list[Event] = []
    sent = time.monotonic()
    for event in generate(lm, job.request, cancel):
        batch.append(event)
        if time.monotonic() - sent >= BATCH_S or isinstance(event, Finished):
            send(Tokens(job_id=job.job_id, events=tuple(batch)))
            batch, sent = [], time.monotonic()
    if batch:
        send(Tokens(job_id=job.job_id, events=tuple(batch)))


def _sweep(job: Job, lm, send, cancel) -> None:
    """The batch sweep, its progress reported per batch size (the fraction: B over the largest B)."""
    from kvviz.engine.batch_sweep import batch_sweep
    from kvviz.serving.prompts import synthetic

    ask = job.sweep
    prompts = [p.text for p in synthetic(ask.max_batch, ask.prompt_tokens, lm.tokenizer, seed=0)]
    frame = batch_sweep(lm, prompts, ask.new_tokens, ask.max_batch, cancel=cancel,
                        progress=lambda b, m: send(Progress(job_id=job.job_id, fraction=min(b / ask.max_batch, 1.0),
                                                            message=m)))
    send(Swept(job_id=job.job_id, frame=frame))


class WorkerGone(KvvizError, RuntimeError):
    """The worker process ended (killed to free the device) while a job waited for it; start on a fresh one."""


class DeviceWorker:
    """The parent's handle on the worker process. One job runs at a time: start() waits for the one before."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")  # a clean interpreter: no server threads, no inherited locks
        self._jobs = ctx.Queue()
        self._results = ctx.Queue()
        self._cancel = ctx.Event()
        self._process = ctx.Process(target=_serve, args=(self._jobs, self._results, self._cancel), daemon=True,
                                    name="kvviz-device-worker")
        self._process.start()
        self._busy = threading.Lock()
        self._ids = iter(range(1, 2**62))

    def start(self, kind: JobKind, spec: str, request: GenerationRequest, time_limit_s: float | None = None,
              hosted: bool = False) -> WorkerJob:
        """Begin a job for a request that is valid by construction, once the job before it has ended.

        time_limit_s: the job is stopped once it has run this long (see WorkerJob.follow).
        """
        job = Job(job_id=next(self._ids), kind=kind, spec=spec, request=request, hosted=hosted)  # checked first
        return self._submit(job, time_limit_s)

    def start_load(self, spec: str, load: Load, prompts: Sequence[Prompt], time_limit_s: float | None = None,
                   hosted: bool = False) -> WorkerJob:
        """Begin a LOAD job: `load` with `prompts` (cycled) on kvviz's own engine running model `spec`, answered
        with one Served; a load the engine cannot take raises ValueError here, before the worker sees it."""
        job = Job(job_id=next(self._ids), kind=JobKind.LOAD, spec=spec, load=load, prompts=tuple(prompts),
                  hosted=hosted)
        return self._submit(job, time_limit_s)

    def start_batch(self, spec: str, work: BatchRequest | SweepAsk, time_limit_s: float | None = None,
                    hosted: bool = False) -> WorkerJob:
        """Begin a BATCH job (a BatchRequest, answered with Batched) or a BATCH_SWEEP (a SweepAsk, answered with
        Swept)."""
        sweep = isinstance(work, SweepAsk)
        job = Job(job_id=next(self._ids), kind=JobKind.BATCH_SWEEP if sweep else JobKind.BATCH, spec=spec,
                  batch=None if sweep else work, sweep=work if sweep else None, hosted=hosted)
        return self._submit(job, time_limit_s)

    def _submit(self, job: Job, time_limit_s: float | None) -> WorkerJob:
        """Send a checked job once the job before it has ended."""
        self._busy.acquire()
        if not self.alive():  # ended while this job waited for the one before it
            self._busy.release()
            raise WorkerGone("job.worker_gone")
        self._cancel.clear()
        self._jobs.put(job)
        return WorkerJob(self, job.job_id, time_limit_s)

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
    stop reaches the generation loop within a token, but not a model that is still loading: a job still
    running KILL_GRACE_S after its stop (the limit's or anyone's) ends with the worker process, which
    follow() then reports as Failed and Done, so the device is freed. Only following a job frees the
    device: a job nobody follows any more is handed to abandon(), which follows it to the end on a thread.
    """

    def __init__(self, worker: DeviceWorker, job_id: int, time_limit_s: float | None = None) -> None:
        self._worker = worker
        self.job_id = job_id
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

    def start_job(self, kind: JobKind, spec: str, request: GenerationRequest, time_limit_s: float | None = None,
                  hosted: bool = False) -> WorkerJob:
        """DeviceWorker.start on the current worker, waiting for the job before it; if that job's process was
        ended to free the device meanwhile, on the fresh one that replaces it."""
        return self._on_current(lambda worker: worker.start(kind, spec, request, time_limit_s, hosted))

    def start_load_job(self, spec: str, load: Load, prompts: Sequence[Prompt], time_limit_s: float | None = None,
                       hosted: bool = False) -> WorkerJob:
        """DeviceWorker.start_load on the current worker, as start_job does."""
        return self._on_current(lambda worker: worker.start_load(spec, load, prompts, time_limit_s, hosted))

    def start_batch_job(self, spec: str, work: BatchRequest | SweepAsk, time_limit_s: float | None = None,
                        hosted: bool = False) -> WorkerJob:
        """DeviceWorker.start_batch on the current worker, as start_job does."""
        return self._on_current(lambda worker: worker.start_batch(spec, work, time_limit_s, hosted))

    def _on_current(self, start: Callable[[DeviceWorker], WorkerJob]) -> WorkerJob:
        """start(the current worker), again on the fresh worker while the one it waited for was ended."""
        while True:
            try:
                return start(self.current())
            except WorkerGone:
                continue

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None


APP_WORKER = WorkerSlot()


def start_job(kind: JobKind, spec: str, request: GenerationRequest, time_limit_s: float | None = None,
              hosted: bool = False) -> WorkerJob:
    """A job on the app's worker (APP_WORKER.start_job)."""
    return APP_WORKER.start_job(kind, spec, request, time_limit_s, hosted)


def start_load_job(spec: str, load: Load, prompts: Sequence[Prompt], time_limit_s: float | None = None,
                   hosted: bool = False) -> WorkerJob:
    """A LOAD job on the app's worker (APP_WORKER.start_load_job): answered with Served, then Done."""
    return APP_WORKER.start_load_job(spec, load, prompts, time_limit_s, hosted)


def start_batch_job(spec: str, work: BatchRequest | SweepAsk, time_limit_s: float | None = None,
                    hosted: bool = False) -> WorkerJob:
    """A BATCH (BatchRequest) or BATCH_SWEEP (SweepAsk) job on the app's worker (APP_WORKER.start_batch_job)."""
    return APP_WORKER.start_batch_job(spec, work, time_limit_s, hosted)
