"""A load on kvviz's own engine, in this process: the closed loop loadgen sends over HTTP, measured the same way.

`concurrency` threads each take the next request and consume kvviz.engine.loop.generate() for it. The engine
serves one request at a time (one lock per device, no batching), so with C requests in flight, C - 1 of them
wait for the device, and that wait is part of their TTFT and E2E, as a queue in a server is. The engine's
queue is not first come, first served: a thread that has just finished often takes the device again for its
next request ahead of those already waiting, so some requests wait several turns (TTFT's tail) while the
median may barely move; the records show it as it happens. Every request becomes a RequestRecord with
record.py's definitions, read from the engine's events (which count from the request's own t0, its send):

    sent_s       when the thread started the request, from the run's start
    accepted_s   DeviceAcquired: the moment the engine took the request on (its analogue of the server's
                 "response accepted": everything before it is queueing)
    ttft_s       the first TokenEvent;  arrivals_s: every TokenEvent (one token, one arrival)
    e2e_s        the Finished event (the last token's time if the stream ended without one)
    new_tokens   the tokens generated, counted by the engine itself (usage_reported=True)

The figures are stats.py's and the result is loadgen's RunResult, so both sides of a comparison read alike.
Bounded as loadgen is: at most `requests`, none started after `duration_s`, none running past `timeout_s`; a
cancel event ends the run, the requests in flight (running or waiting) recorded as cancelled. Only the closed
loop: an open loop needs loadgen's arrival schedule. Knows the engine and records; no HTTP, no model loading.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from kvviz.base.errors import InputError, StateError
from kvviz.engine.events import DeviceAcquired, Event, Finished, PromptTokenized, TokenEvent
from kvviz.engine.loading import LoadedModel
from kvviz.engine.loop import generate
from kvviz.engine.request import GenerationRequest
from kvviz.i18n import Said, said
from kvviz.serving.load import CLOSED, Load
from kvviz.serving.loadgen import RunResult
from kvviz.serving.prompts import Prompt
from kvviz.serving.record import RequestRecord
from kvviz.serving.stats import Slo, run_stats

ENGINE_API = "engine"
ENGINE_URL = "kvviz engine (in process)"
CANCELLED = "cancelled"


def engine_requests(load: Load, prompts: Sequence[Prompt]) -> list[GenerationRequest]:
    """The engine's request for each prompt under `load`, as a benchmark asks (raw text, no chat template, run
    to output_tokens whatever the model emits when ignore_eos). ValueError in one line for a load the engine
    cannot take (an open loop, no prompts, more tokens than the engine allows)."""
    if load.arrivals != CLOSED:
        raise InputError("engine_load.closed_loop_only", arrivals=load.arrivals)
    if not prompts:
        raise InputError("serving.no_prompts")
    return [GenerationRequest(p.text, max_new_tokens=load.output_tokens, chat_template=False,
                              ignore_eos=load.ignore_eos) for p in prompts]


def timeout_message(timeout_s: float) -> Said:
    return said("serving.timeout", s=timeout_s)


class RequestStop(threading.Event):
    """What generate() checks before every token and while it waits for the device: set when the run is
    stopping (cancelled, or a fault in another request) or when this request's timeout has passed."""

    def __init__(self, stopping: Callable[[], bool], timeout_s: float) -> None:
        super().__init__()
        self._stopping, self.timeout_s = stopping, timeout_s
        self._deadline = time.perf_counter() + timeout_s

    def timed_out(self) -> bool:
        return time.perf_counter() >= self._deadline

    def is_set(self) -> bool:
        return super().is_set() or self._stopping() or self.timed_out()


def request_record(index: int, sent_s: float, prompt: Prompt, stream: Iterable[Event],
                   stop: RequestStop | None = None) -> tuple[RequestRecord, bool]:
    """One request's record from its engine events (consumed here), and whether it failed for what was asked
    (a prompt the model cannot take) rather than by a fault. A request the stop ended is an error: cancelled,
    or past its timeout; its partial timings stay in the record, which the figures skip as failed."""
    accepted, prompt_tokens, arrivals, finish = None, prompt.tokens, [], None
    for event in stream:
        if isinstance(event, DeviceAcquired):
            accepted = event.t_s
        elif isinstance(event, PromptTokenized):
            prompt_tokens = event.prompt_tokens
        elif isinstance(event, TokenEvent):
            arrivals.append(event.t_s)
        elif isinstance(event, Finished):
            finish = event
    if finish is None:
        error = "the engine ended the request without finishing it"
    elif finish.reason == "failed":
        error = finish.error or "the engine failed the request"
    elif finish.reason == "cancelled":
        error = timeout_message(stop.timeout_s) if stop is not None and stop.timed_out() else CANCELLED
    else:  # eos, max_new_tokens, context_full: an answer, however long
        error = None
    e2e = finish.t_s if finish is not None else (arrivals[-1] if arrivals else None)
    record = RequestRecord(index=index, sent_s=sent_s, prompt_tokens=prompt_tokens, new_tokens=len(arrivals),
                           accepted_s=accepted, ttft_s=arrivals[0] if arrivals else None, e2e_s=e2e,
                           arrivals_s=tuple(arrivals), usage_reported=True, error=error)
    return record, bool(finish is not None and finish.bad_input)


class _Run:
    """One run's shared state: the clock, the next request's index, the records, the first fault."""

    def __init__(self, lm: LoadedModel, load: Load, prompts: Sequence[Prompt],
                 cancel: threading.Event | None) -> None:
        self.lm, self.load, self.prompts, self.cancel = lm, load, prompts, cancel
        self.requests = engine_requests(load, prompts)
        self.records: list[RequestRecord] = []
        self.bad_input = False
        self.fault: BaseException | None = None
        self._indices = itertools.count()
        self._take = threading.Lock()
        self._all_started = threading.Barrier(load.concurrency, action=self.begin)
        self.begin()

    def begin(self) -> None:
        """Start the run's clock (sent_s counts from here) and its time limit: again once every loop has started."""
        self.start = time.perf_counter()
        self.deadline = self.start + self.load.duration_s

    def stopping(self) -> bool:
        return self.fault is not None or (self.cancel is not None and self.cancel.is_set())

    def next_index(self) -> int | None:
        """The next request to send, or None when the run sends no more (all taken, time up, stopping)."""
        with self._take:
            if self.stopping() or time.perf_counter() >= self.deadline:
                return None
            index = next(self._indices)
            return index if index < self.load.requests else None

    def one(self, index: int) -> None:
        """Send request `index` to the engine now and keep its record, however it ends."""
        n = index % len(self.prompts)
        stop = RequestStop(self.stopping, self.load.timeout_s)
        sent = time.perf_counter() - self.start  # generate() starts the request's t0 just after
        record, bad_input = request_record(index, sent, self.prompts[n], generate(self.lm, self.requests[n], stop),
                                           stop)
        self.bad_input |= bad_input
        self.records.append(record)

    def worker(self) -> None:
        """One of the `concurrency` loops: send, wait for the answer, send the next. The loops begin together,
        so the first `concurrency` requests are in flight at once, not staggered by threads still starting."""
        try:
            self._all_started.wait()
            while (index := self.next_index()) is not None:
                self.one(index)
        except BaseException as exc:  # raised again by engine_load, in the caller's thread
            self.fault = self.fault or exc


def engine_load(lm: LoadedModel, load: Load, prompts: Sequence[Prompt], cancel: threading.Event | None = None,
                *, slo: Slo | None = None) -> RunResult:
    """Run `load` on kvviz's own engine with model `lm` and `prompts` (cycled); every record and the figures.

    cancel: a threading Event (or a multiprocessing one: only is_set() is read); once set, no request starts
    and those in flight end as cancelled. ValueError for a load the engine cannot take, or a run whose every
    request was refused for what it asked; RuntimeError when no request completed for another reason (a fault,
    timeouts). A fault in any request's thread stops the run and is raised here."""
    run = _Run(lm, load, prompts, cancel)
    threads = [threading.Thread(target=run.worker, daemon=True, name=f"kvviz-engine-load-{i}")
               for i in range(load.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    duration = time.perf_counter() - run.start
    if run.fault is not None:
        raise run.fault
    cancelled = cancel is not None and cancel.is_set()
    records = tuple(sorted(run.records, key=lambda r: r.index))
    stats = run_stats(list(records), duration, slo)
    if stats.completed == 0 and not cancelled:
        if not stats.first_error:
            raise StateError("serving.none_completed")
        raise (InputError("serving.failed", why=stats.first_error) if run.bad_input else
               StateError("serving.failed", why=stats.first_error))
    endpoint = {"url": ENGINE_URL, "model": lm.spec, "api": ENGINE_API, "api_key": False}
    return RunResult(endpoint, load, records, stats, cancelled)
