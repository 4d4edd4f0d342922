"""A load on an OpenAI-compatible streaming endpoint: closed loop, open loop, bounded, cancellable.

Closed loop: `concurrency` requests in flight, each followed at once by the next (vLLM's --max-concurrency,
guidellm's "concurrent"). Open loop: requests arrive at `rate` per second, as a Poisson process (seeded) or
evenly spaced, with at most `concurrency` in flight (an arrival that finds them all busy waits, as in `vllm
bench serve --request-rate R --max-concurrency C`). Every run is bounded: at most `requests` requests, none
sent after `duration_s`, none lasting past `timeout_s`, so it ends by itself within duration_s + timeout_s;
a cancel event ends it sooner, the requests in flight recorded as cancelled.

The load goes over http1.py's keep-alive connections, as many as the concurrency, opened before the run's clock
starts (a TCP or TLS handshake is the client's cost, not the server's TTFT); httpx only checks the endpoint
first and, when a watcher is given, polls the server's /metrics (metrics_reader). Every run measures the
client's own cost beside the server's figures (overhead.py: CPU of the loop's thread, how long its reads
waited, time to headers) and says when the client limited it. A result's error texts have been through
kvviz.serving.redact (no key kvviz knows of); a cancel stops the checks before the clock too. Knows loads and
timing; the wire format is sse.py's, the figures stats.py's.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import random
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import httpx

from kvviz.base.errors import InputError
from kvviz.i18n import said
from kvviz.serving.endpoint import Endpoint, EndpointError
from kvviz.serving.http1 import HttpError, Pool
from kvviz.serving.load import CLOSED, POISSON, Load
from kvviz.serving.overhead import ClientOverhead, client_overhead
from kvviz.serving.prompts import Prompt
from kvviz.serving.record import RequestRecord
from kvviz.serving.redact import redact
from kvviz.serving.sse import request_for, server_message, stream_request, transport_message
from kvviz.serving.stats import RunStats, Slo, run_stats


@dataclass(frozen=True)
class RunResult:
    """One run: where it went, what was asked, every request's record, the figures, the server's samples, and
    what the client itself cost (None for a run not made by this client: kvviz's own engine)."""

    endpoint: dict
    load: Load
    records: tuple[RequestRecord, ...]
    stats: RunStats
    cancelled: bool
    samples: tuple = ()
    metrics_error: str | None = None
    client: ClientOverhead | None = None


@dataclass
class Progress:
    """What the run under way has shown so far, for a reader on another thread (the app redraws from it
    while the run goes): the records of the requests that ended, the arrival time of every output chunk
    (seconds since the run's start) and the server's samples (the watcher's own list). Written only on the
    run's event loop; begin() gives each run of a sweep fresh lists, so a reader never sees two runs mixed."""

    records: list[RequestRecord] = field(default_factory=list)
    arrivals_s: list[float] = field(default_factory=list)
    samples: list = field(default_factory=list)
    concurrency: int | None = None

    def begin(self, load: Load, watcher=None) -> None:
        self.records, self.arrivals_s = [], []
        self.samples = watcher.samples if watcher is not None else []
        self.concurrency = load.concurrency


@dataclass
class InFlight:
    """The requests now in flight: each one's prompt tokens and output chunks so far (for the KV prediction).
    Mutated only on the event loop's thread."""

    prompt: dict[int, int] = field(default_factory=dict)
    output: dict[int, int] = field(default_factory=dict)

    def lengths(self) -> list[int]:
        """Current length of each request in flight: prompt tokens + output tokens received."""
        return [p + self.output.get(i, 0) for i, p in self.prompt.items()]


async def check_endpoint(client: httpx.AsyncClient, ep: Endpoint) -> None:
    """Before any load: the server answers, takes the key, and serves the model (where it lists its models
    at /v1/models; a server that does not is given the benefit of the doubt). EndpointError otherwise."""
    try:
        resp = await client.get(ep.base_url + "/v1/models", headers=ep.headers(), timeout=10.0)
    except httpx.HTTPError as exc:
        raise EndpointError("serving.failed", why=transport_message(exc, ep.base_url)) from None
    if resp.status_code in (401, 403):
        raise EndpointError("serving.failed", why=server_message(resp.status_code, resp.content[:2000], _keys(ep)))
    try:
        served = [m["id"] for m in resp.json()["data"]] if resp.status_code == 200 else None
    except (ValueError, KeyError, TypeError):
        served = None
    if served is not None and ep.model not in served:
        raise EndpointError("endpoint.not_served", model=ep.model, served=", ".join(served))


class _Run:
    """One run's shared state: the connections, the clock, the records, what is in flight."""

    def __init__(self, pool: Pool, ep: Endpoint, load: Load, prompts: Sequence[Prompt], progress: Progress) -> None:
        self.pool, self.ep, self.load, self.prompts = pool, ep, load, prompts
        self.records = progress.records  # the reader's list: it sees each record as it is kept
        self.arrivals_s = progress.arrivals_s
        self.in_flight = InFlight()
        self.requests: dict[int, bytes] = {}  # each prompt's request bytes, made once: a burst of sends is cheaper
        self.begin()

    def begin(self) -> None:
        """Start the run's clock (sent_s counts from here) and its time limit."""
        self.start = time.perf_counter()
        self.deadline = self.start + self.load.duration_s

    def open(self) -> bool:
        """Whether a new request may still be sent."""
        return len(self.records) + len(self.in_flight.prompt) < self.load.requests and \
            time.perf_counter() < self.deadline

    async def one(self, index: int, due_s: float | None = None, waited_s: float = 0.0) -> None:
        """Send request `index` and keep its record, however it ends (due_s, waited_s: an open loop's schedule
        for it and how long it waited for a free slot)."""
        which = index % len(self.prompts)
        prompt = self.prompts[which]
        if which not in self.requests:
            self.requests[which] = request_for(self.pool, self.ep, prompt, self.load.output_tokens,
                                               self.load.ignore_eos)
        sent = time.perf_counter() - self.start  # a failed request's record; a sent one's is its write's
        self.in_flight.prompt[index] = prompt.tokens or 0
        output, arrivals, start = self.in_flight.output, self.arrivals_s, self.start

        def arrived(chunks: int, now: float) -> None:  # on every chunk: kept to two stores
            output[index] = chunks
            arrivals.append(now - start)

        try:
            record = await _within(stream_request(self.pool, self.ep, prompt, index, start, self.load.output_tokens,
                                                  self.load.ignore_eos, arrived, self.requests[which]),
                                   self.load.timeout_s)
        except asyncio.TimeoutError:
            record = RequestRecord(index, sent, prompt.tokens, 0,
                                   error=said("serving.timeout", s=self.load.timeout_s))
        except asyncio.CancelledError:
            self.records.append(RequestRecord(index, sent, prompt.tokens, 0, error="cancelled"))
            raise
        finally:
            self.in_flight.prompt.pop(index, None)
            self.in_flight.output.pop(index, None)
        if due_s is not None:
            record = replace(record, due_s=due_s, waited_s=waited_s)
        self.records.append(record)

    async def closed(self) -> None:
        indices = itertools.count()

        async def worker() -> None:
            while self.open():
                await self.one(next(indices))

        await asyncio.gather(*(worker() for _ in range(self.load.concurrency)))

    async def open_loop(self) -> None:
        """Arrivals at the load's rate (the first at once), at most `concurrency` in flight: an arrival that
        finds every slot busy waits for one, and so do the arrivals that fall due meanwhile (each record says
        how long after its due time it got its slot)."""
        rng = random.Random(self.load.seed)
        slots = asyncio.Semaphore(self.load.concurrency)
        tasks, due = [], self.start

        async def bounded(index: int, due_s: float, waited_s: float) -> None:
            try:
                await self.one(index, due_s, waited_s)
            finally:
                slots.release()

        held_until = self.start  # when the loop last got a slot it had waited for
        for index in range(self.load.requests):
            if due >= self.deadline:  # checked before the wait, not after it: a tiny rate cannot outlast the run
                break
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            full = slots.locked()
            try:  # a slot freed after the deadline would send nothing: wait for one until then only
                await _within(slots.acquire(), max(0.0, self.deadline - time.perf_counter()))
            except asyncio.TimeoutError:
                break
            got = time.perf_counter()
            if got >= self.deadline:
                slots.release()
                break
            # held by the cap: it found every slot busy, or fell due while the loop waited for an earlier one's
            held = full or held_until > due
            held_until = got if full else held_until
            tasks.append(asyncio.create_task(bounded(index, due - self.start, got - due if held else 0.0)))
            due += rng.expovariate(self.load.rate) if self.load.arrivals == POISSON else 1 / self.load.rate
        await asyncio.gather(*tasks)


async def run_load(ep: Endpoint, load: Load, prompts: Sequence[Prompt], *, slo: Slo | None = None,
                   cancel: asyncio.Event | None = None, watcher=None, progress: Progress | None = None) -> RunResult:
    """Run `load` against `ep` with `prompts` (cycled) and return every record and the figures.

    watcher: a metrics_reader.Watcher to poll the server's /metrics during the run. progress: where a reader
    on another thread follows the run (begun afresh here). EndpointError when the
    server cannot be used at all (unreachable, refused key, model not served) or when no request succeeded."""
    if not prompts:
        raise InputError("serving.no_prompts")
    # verify=False for plain http: no TLS, so the system's CA bundle is not read (tens of ms per run)
    async with httpx.AsyncClient(timeout=httpx.Timeout(10.0), verify=not ep.base_url.startswith("http://")) as client:
        pool = Pool(ep.base_url)
        try:
            # the checks and connections before the clock, stopped at once by a cancel (a time limit, Stop) too
            if await _until_done_or_cancelled(_ready(client, ep, pool, load), cancel):
                return _nothing_sent(ep, load, slo)
            progress = progress or Progress()
            progress.begin(load, watcher)
            run = _Run(pool, ep, load, prompts, progress)
            stop, first = asyncio.Event(), asyncio.Event()
            polling = asyncio.create_task(watcher.poll(client, run.in_flight, stop, first)) if watcher else None
            if polling is not None:  # the server's counters before the first request, not after it
                try:  # set by the first sample, or by polling failing
                    await _until_done_or_cancelled(asyncio.wait_for(first.wait(), 10.0), cancel)
                except asyncio.TimeoutError:
                    pass
            del pool.waits[:]  # the warm-up's reads are not the run's
            cpu = time.thread_time()  # this thread runs the loop: its CPU is the client's, not the app's others
            with _old_objects_frozen():
                run.begin()
                driver = run.closed() if load.arrivals == CLOSED else run.open_loop()
                cancelled = await _until_done_or_cancelled(driver, cancel)
                duration = time.perf_counter() - run.start
            cpu = time.thread_time() - cpu
            stop.set()
            if polling is not None:
                await polling
        finally:
            pool.close()
    records = _redacted(tuple(sorted(run.records, key=lambda r: r.index)), ep)
    stats = run_stats(list(records), duration, slo, rate=load.rate, concurrency=load.concurrency)
    if stats.completed == 0 and not cancelled:
        raise (EndpointError("serving.failed", why=stats.first_error) if stats.first_error else
               EndpointError("serving.none_completed"))
    overhead = client_overhead(stats, records, cpu, pool.waits)
    return RunResult(ep.describe(), load, records, stats, cancelled, tuple(watcher.samples) if watcher else (),
                     redact(watcher.error, _keys(ep)) if watcher and watcher.error else None, overhead)


def _keys(ep: Endpoint) -> tuple[str, ...]:
    return (ep.api_key,) if ep.api_key else ()


def _redacted(records: tuple[RequestRecord, ...], ep: Endpoint) -> tuple[RequestRecord, ...]:
    """The records with each error through the redaction step: an error may quote what the server sent (a status
    line, a stream's text), and a result is what the page, the JSON and the history show."""
    return tuple(replace(r, error=redact(r.error, _keys(ep))) if r.error else r for r in records)


async def _within(coro, timeout_s: float):
    """coro's result, or asyncio.TimeoutError after timeout_s; on Python 3.11+ in the caller's own task
    (asyncio.timeout), without the task wait_for starts, which would write the request a loop pass later."""
    if hasattr(asyncio, "timeout"):
        async with asyncio.timeout(timeout_s):
            return await coro
    return await asyncio.wait_for(coro, timeout_s)


@contextmanager
def _old_objects_frozen() -> Iterator[None]:
    """The process's objects from before the run kept out of the garbage collector's full collections while it
    goes (gc.freeze): in a process holding pandas, torch or an app, a full collection walks hundreds of thousands of
    them and stalls the event loop for 40-50 ms (seen at 256 in flight: a closed loop's next requests went out that
    much late). Objects made during the run are collected as usual."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def _ready(client: httpx.AsyncClient, ep: Endpoint, pool: Pool, load: Load) -> None:
    """The endpoint checked and the run's connections opened."""
    await check_endpoint(client, ep)
    await _warm(pool, min(load.concurrency, load.requests))


def _nothing_sent(ep: Endpoint, load: Load, slo: Slo | None) -> RunResult:
    """A run cancelled before its first request: no records, marked cancelled."""
    return RunResult(ep.describe(), load, (), run_stats([], 0.0, slo, rate=load.rate, concurrency=load.concurrency),
                     True)


async def _warm(pool: Pool, connections: int) -> None:
    """The run's connections opened before its clock starts; a server that cannot be reached is EndpointError."""
    try:
        await pool.warm(connections)
    except HttpError as exc:
        raise exc.recast(EndpointError) from None


async def _until_done_or_cancelled(driver, cancel: asyncio.Event | None) -> bool:
    """Run the driver to its end, or cancel it (and its requests in flight) when `cancel` is set."""
    main = asyncio.ensure_future(driver)
    if cancel is None:
        await main
        return False
    stopper = asyncio.ensure_future(cancel.wait())
    await asyncio.wait({main, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if main.done():
        main.result()
        return False
    main.cancel()
    try:
        await main
    except asyncio.CancelledError:
        pass
    return True


def run(ep: Endpoint, load: Load, prompts: Sequence[Prompt], *, slo: Slo | None = None,
        cancel: threading.Event | None = None, watcher=None, progress: Progress | None = None) -> RunResult:
    """run_load from ordinary code, on an event loop of its own; `cancel` may be set from any thread."""

    async def main() -> RunResult:
        stop = asyncio.Event()
        if cancel is None:
            return await run_load(ep, load, prompts, slo=slo, watcher=watcher, progress=progress)

        async def relay() -> None:
            while not cancel.is_set():
                await asyncio.sleep(0.05)
            stop.set()

        relaying = asyncio.create_task(relay())
        try:
            return await run_load(ep, load, prompts, slo=slo, cancel=stop, watcher=watcher, progress=progress)
        finally:
            relaying.cancel()

    return asyncio.run(main())
