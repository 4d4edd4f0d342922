"""A sweep: the same closed-loop load at 1, 2, 4, ... requests in flight, until throughput stops growing.

As `vllm bench serve` over --max-concurrency values and guidellm's sweep from synchronous to throughput:
each level runs `per_level × concurrency` requests (at least min_requests); the sweep stops when two levels
in a row add less than `saturation_gain` to the best output throughput before them (the server is
saturated), or when the client saturated at a level (its overhead measurement says its own loop was the
bottleneck: a level beyond it would measure the client), or at max_concurrency; stop_reason() says which. Each
level's row is its run's figures plus tokens/s per user, 1 / TPOT p50 (the decode speed one user sees, the
y-axis of the trade-off curve against total tokens/s) and the client's own cost. Knows loads, not servers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import pandas as pd

from kvviz.base.inputs import number, whole_number
from kvviz.serving.endpoint import Endpoint
from kvviz.serving.load import MAX_CONCURRENCY, Load
from kvviz.serving.loadgen import Progress, RunResult, run
from kvviz.serving.prompts import Prompt
from kvviz.serving.stats import Slo

MIN_REQUESTS = 8  # every level sends at least this many requests
CANCELLED, CLIENT, SATURATED, LAST = "cancelled", "client", "saturated", "last"  # why a sweep stopped


def level_requests(concurrency: int, per_level: int = 4, min_requests: int = MIN_REQUESTS) -> int:
    """Requests one level sends: per_level per slot, and at least min_requests."""
    return max(min_requests, per_level * concurrency)


def levels(max_concurrency: int) -> list[int]:
    """1, 2, 4, ... up to max_concurrency, which is always the last level."""
    whole_number(max_concurrency, "max concurrency", 1, MAX_CONCURRENCY)
    out = [1]
    while out[-1] * 2 < max_concurrency:
        out.append(out[-1] * 2)
    return out if out[-1] == max_concurrency else [*out, max_concurrency]


def prompts_needed(max_concurrency: int, per_level: int = 4, min_requests: int = MIN_REQUESTS,
                   warmup: bool = True) -> int:
    """Requests a whole sweep may send: every level's, and its warm-up's."""
    return sum(level_requests(c, per_level, min_requests) + (c if warmup else 0) for c in levels(max_concurrency))


def saturated(results: Sequence[RunResult], gain: float, patience: int = 2) -> bool:
    """Whether the last `patience` levels all produced less than (1 + gain) × the best output tokens/s of the
    levels before them (two levels, so that one level slowed by a busy machine does not end the sweep)."""
    if len(results) <= patience:
        return False
    best = max(r.stats.output_tokens_per_s for r in results[:-patience])
    return all(r.stats.output_tokens_per_s < (1 + gain) * best for r in results[-patience:])


def sweep(ep: Endpoint, prompts: Sequence[Prompt], *, max_concurrency: int = 32, output_tokens: int = 128,
          per_level: int = 4, min_requests: int = MIN_REQUESTS, saturation_gain: float = 0.05, slo: Slo | None = None,
          cancel: threading.Event | None = None, watcher: Callable[[], object] | None = None,
          on_level: Callable[[RunResult], None] | None = None, warmup: bool = True,
          progress: Progress | None = None, duration_s: float = 600.0, timeout_s: float = 300.0) -> list[RunResult]:
    """Run the levels in turn; returns each level's result. watcher: makes a metrics_reader.Watcher per level.
    Each level starts where the previous one's prompts ended (give prompts_needed() of them, and no prompt is
    sent twice, so a prefix cache sees each once). With warmup, each level is preceded by `concurrency` short
    requests at that concurrency, not measured: a server on a CPU is slow the first time it runs a batch of a
    new size (vLLM's CPU build: a fresh server's first run of 4 × 240 tokens took 10 s, the next 4 s).
    progress: followed by each measured level's run in turn (loadgen.Progress). duration_s bounds each level's
    sending, timeout_s each request (warm-ups' too). A cancel (Stop, a host's time limit on the whole sweep) ends
    it within the level under way: that level is kept as cancelled unless it had sent nothing yet."""
    number(saturation_gain, "saturation gain", 0, 10)
    results: list[RunResult] = []
    sent = 0
    for concurrency in levels(max_concurrency):
        load = Load(concurrency=concurrency, requests=level_requests(concurrency, per_level, min_requests),
                    output_tokens=output_tokens, duration_s=duration_s, timeout_s=timeout_s)
        if warmup:
            start = sent % len(prompts)
            warm = run(ep, Load(concurrency=concurrency, requests=concurrency, output_tokens=min(output_tokens, 32),
                                duration_s=duration_s, timeout_s=timeout_s),
                       [*prompts[start:], *prompts[:start]], cancel=cancel)
            sent += concurrency
            if warm.cancelled:
                break
        start = sent % len(prompts)
        result = run(ep, load, [*prompts[start:], *prompts[:start]], slo=slo, cancel=cancel,
                     watcher=watcher() if watcher else None, progress=progress)
        sent += load.requests
        if result.cancelled and not result.records:  # stopped before it sent anything: nothing to show
            break
        results.append(result)
        if on_level is not None:
            on_level(result)
        if stop_reason(results, saturation_gain) != LAST:
            break
    return results


def client_saturated(result: RunResult) -> bool:
    """Whether the client's own loop was the bottleneck of this run (overhead.py's BUSY): a level beyond it would
    measure the client. (Reads that waited or chunks read together are warned of in the run, not stopped at: a
    busy machine or a busy process around the client causes them, and more load does not.)"""
    return result.client is not None and result.client.saturated


def stop_reason(results: Sequence[RunResult], gain: float = 0.05) -> str:
    """Why a sweep stops after these levels: CANCELLED, CLIENT (the client saturated at the last level), SATURATED
    (throughput stopped growing), or LAST (it had more levels to go, or it ran them all)."""
    if results[-1].cancelled:
        return CANCELLED
    if client_saturated(results[-1]):
        return CLIENT
    if saturated(results, gain):
        return SATURATED
    return LAST


def level_row(result: RunResult) -> dict:
    """One level as a flat row: concurrency, the run's figures, tokens/s per user, the client's own cost."""
    flat = result.stats.flat()
    tpot = flat["tpot_p50_s"]
    return {"concurrency": result.load.concurrency, "output_tokens_per_request": result.load.output_tokens,
            **flat, "tokens_per_s_per_user": 1 / tpot if tpot else None,
            **(result.client.flat() if result.client else {})}


def sweep_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    return pd.DataFrame([level_row(r) for r in results])
