"""The device worker: a separate process that owns the models and runs them for the web app.

A model's Python-heavy forward pass and a web server in one process share one interpreter lock, and
the server's threads slowed a small model's decode by 10-15% even while idle. So the app runs every
device job (a generation, a comparison) in this worker process, which loads and keeps the models, and
streams kvviz.engine.loop's events back through a queue. The app drains that queue a few times a second.
Stop sets an event the worker's generation loop checks before every token; a job that has not ended
KILL_GRACE_S after its stop (a model still loading cannot be interrupted) ends with the worker process, so
a stop always frees the device. Nothing here imports gradio; the worker process never imports it either.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import threading
import time
from dataclasses import dataclass

from kvviz.engine.events import Event, Finished
from kvviz.engine.request import GenerationRequest
from kvviz.engine.threads import choose_cpu_threads


@dataclass(frozen=True)
class Progress:
    fraction: float
    message: str


@dataclass(frozen=True)
class Loaded:
    """What the page needs to know about the model the worker is running."""

    spec: str
    random_weights: bool
    tokenizer_note: str
    device: str
    dtype: str
    cpu_threads: int | None  # torch threads the worker runs this model with on a CPU


@dataclass(frozen=True)
class Failed:
    message: str
    bad_input: bool  # the request or the model asked for was wrong (not a fault of the worker)


BATCH_S = 0.05
KILL_GRACE_S = 10.0  # how long a stopped job may keep running before its worker process is ended


def _exit_with_parent() -> None:
    """End this process as soon as the app's process is gone (killed, crashed), so no orphan keeps a model."""
    import os
    from multiprocessing.connection import wait

    parent = mp.parent_process()
    if parent is not None:
        wait([parent.sentinel])
        os._exit(0)


def _serve(jobs, results, cancel) -> None:
    """The worker process's loop: one job at a time, every message tagged with its job's id."""
    threading.Thread(target=_exit_with_parent, daemon=True, name="kvviz-parent-watch").start()
    import torch

    from kvviz.engine.compare import CompareError, compare
    from kvviz.engine.loading import LoadError, load_model
    from kvviz.engine.loop import generate

    cores = torch.get_num_threads()
    threads: dict[tuple, int] = {}
    while True:
        job = jobs.get()
        if job is None:
            return
        job_id, kind, spec, req, hosted = job
        try:
            lm = load_model(spec, progress=lambda f, m, j=job_id: results.put((j, Progress(f, m))),
                            local_folders=not hosted, safetensors_only=hosted)
            n = None
            if lm.device.type == "cpu":
                key = (lm.spec, lm.dtype_name)
                if key not in threads:
                    results.put((job_id, Progress(0.95, "choosing the number of CPU threads")))
                    threads[key] = choose_cpu_threads(lm, cores)
                n = threads[key]
                torch.set_num_threads(n)
            results.put((job_id, Loaded(lm.spec, lm.random_weights, lm.tokenizer_note, str(lm.device),
                                        lm.dtype_name, n)))
            if kind == "generate":
                # Events leave in batches a twentieth of a second apart: a queue put per token would wake
                # the queue's feeder thread, which then competes with the model loop for the interpreter.
                batch, sent = [], time.monotonic()
                for event in generate(lm, req, cancel):
                    batch.append(event)
                    if time.monotonic() - sent >= BATCH_S or isinstance(event, Finished):
                        results.put((job_id, batch))
                        batch, sent = [], time.monotonic()
                if batch:
                    results.put((job_id, batch))
            else:
                results.put((job_id, compare(lm, req, cancel=cancel)))
        except (LoadError, ValueError) as exc:
            results.put((job_id, Failed(str(exc), bad_input=True)))
        except CompareError as exc:
            results.put((job_id, Failed(str(exc), bad_input=False)))
        except Exception as exc:  # report any fault to the page and keep serving the next job
            results.put((job_id, Failed(f"{type(exc).__name__}: {exc}", bad_input=False)))
        finally:
            results.put((job_id, None))


class WorkerGone(RuntimeError):
    """The worker process ended (killed to free the device) while a job waited for it; start on a fresh one."""


class DeviceWorker:
    """The parent's handle on the worker process. One job runs at a time."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")  # a clean interpreter: no server threads, no inherited locks
        self._jobs = ctx.Queue()
        self._results = ctx.Queue()
        self.cancel = ctx.Event()
        self._process = ctx.Process(target=_serve, args=(self._jobs, self._results, self.cancel), daemon=True,
                                    name="kvviz-device-worker")
        self._process.start()
        self._busy = threading.Lock()
        self._ids = iter(range(1, 2**62))

    def start(self, kind: str, spec: str, req: GenerationRequest, time_limit_s: float | None = None,
              hosted: bool = False) -> WorkerJob:
        """Begin a job ("generate" or "compare") for a request that is valid by construction.

        time_limit_s: the job is stopped once it has run this long (see WorkerJob.drain). hosted: the
        worker loads no local folders and only safetensors weights for this job.
        """
        self._busy.acquire()
        if not self.alive():  # ended while this job waited for the one before it
            self._busy.release()
            raise WorkerGone("the device worker process ended")
        self.cancel.clear()
        job_id = next(self._ids)
        self._jobs.put((job_id, kind, spec, req, hosted))
        return WorkerJob(self, job_id, time_limit_s)

    def alive(self) -> bool:
        return self._process.is_alive()

    def kill(self) -> None:
        """End the worker process at once, models and all; device_worker() starts a fresh one next time."""
        self._process.kill()
        self._process.join(10)

    def close(self) -> None:
        self._jobs.put(None)
        self._process.join(10)


class WorkerJob:
    """One job's messages, collected with drain(); the same interface as a local background run.

    A job with a time limit is stopped by the first drain() after the limit, and reports timed_out. A
    stop reaches the generation loop within a token, but not a model that is still loading: a job
    still running KILL_GRACE_S after its stop (the limit's or anyone's) ends with the worker process at
    the next drain(), so the device is freed. Only drain() frees the device: a job nobody follows any
    more is handed to abandon(), which drains it to the end on a thread of its own.
    """

    def __init__(self, worker: DeviceWorker, job_id: int, time_limit_s: float | None = None) -> None:
        self._worker = worker
        self._id = job_id
        self.done = False
        self.time_limit_s = time_limit_s
        self.timed_out = False
        self._deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
        self._stopped_at: float | None = None

    def drain(self, period_s: float) -> list[Event | Progress | Loaded | Failed | object]:
        """This job's messages of the next period_s seconds (fewer if the job ends first)."""
        out = self._collect(period_s)
        self._enforce_limits(out)
        return out

    def _enforce_limits(self, out: list) -> None:
        if self.done:
            return
        now = time.monotonic()
        if self._deadline is not None and not self.timed_out and now >= self._deadline:
            self.timed_out = True
            self.stop()
        elif self._stopped_at is not None and now >= self._stopped_at + KILL_GRACE_S:
            self._worker.kill()
            why = (f"stopped by the time limit of {self.time_limit_s:g} s" if self.timed_out else
                   f"stopped, but the job did not end within {KILL_GRACE_S:g} s")
            out.append(Failed(f"{why} (the device worker was restarted to free the device)", bad_input=False))
            self._finish()

    def _collect(self, period_s: float) -> list:
        out: list = []
        deadline = time.monotonic() + period_s
        while not self.done:
            try:
                job_id, item = self._worker._results.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                if not self._worker.alive():
                    out.append(Failed("the device worker process died", bad_input=False))
                    self._finish()
                break
            if job_id != self._id:
                continue  # a message of an earlier job that was abandoned
            if item is None:
                self._finish()
            elif isinstance(item, list):  # a batch of the engine's events
                out.extend(item)
            else:
                out.append(item)
        return out

    def _finish(self) -> None:
        if not self.done:
            self.done = True
            self._worker._busy.release()

    def stop(self) -> None:
        """Ask the generation to stop at its next token."""
        if not self.done:
            self._worker.cancel.set()
            if self._stopped_at is None:
                self._stopped_at = time.monotonic()

    def abandon(self) -> None:
        """Stop the job and drain what is left of it on a thread of its own, returning at once.

        For a caller that will not follow the job any more: the app's generator when its tab went away,
        which the web server closes from its event loop, where waiting even one token would stall every
        other visitor. The device is free once the job ends, or, past KILL_GRACE_S, once its process does;
        the next job's start() waits for that.
        """
        if self.done:
            return
        self.stop()
        threading.Thread(target=self.wait, args=(KILL_GRACE_S + 30,), daemon=True,
                         name=f"kvviz-abandoned-job-{self._id}").start()

    def wait(self, timeout_s: float = 600.0) -> list:
        """Every remaining message, until the job ends."""
        out: list = []
        deadline = time.monotonic() + timeout_s
        while not self.done and time.monotonic() < deadline:
            out += self.drain(0.5)
        return out


_WORKER: DeviceWorker | None = None
_WORKER_LOCK = threading.Lock()


def device_worker() -> DeviceWorker:
    """The app's one worker process, started on first use (and again if it died)."""
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None or not _WORKER.alive():
            _WORKER = DeviceWorker()
        return _WORKER


def start_job(kind: str, spec: str, req: GenerationRequest, time_limit_s: float | None = None,
              hosted: bool = False) -> WorkerJob:
    """DeviceWorker.start on the app's worker, waiting for the job before it; if that job's worker process was
    ended to free the device meanwhile, on the fresh one that replaces it."""
    while True:
        try:
            return device_worker().start(kind, spec, req, time_limit_s, hosted)
        except WorkerGone:
            continue
