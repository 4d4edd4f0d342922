"""The load the simulator is given: which requests, how long, and when they come.

A closed loop keeps `concurrency` requests in the engine: a client sends its next request the moment its last one
ends (no think time, no network; the simulator has it join the engine's step after the one then beginning). An
open loop sends at a rate: Poisson arrivals (exponential gaps, from a seed) or evenly spaced ones, from time 0.
Lengths are fixed for every request, or read from a CSV file of prompt_tokens, output_tokens, arrival_s rows
(arrival_s is read for an open loop, ignored in a closed one). A shared prefix: the first prefix_tokens of every
prompt are the same tokens (one group), which the prefix cache can reuse. Knows no scheduler.
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.inputs import number, whole_number

MAX_REQUESTS = 1_000_000
MAX_TOKENS = 10_000_000


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: its lengths, its shared prefix, and (open loop) when it arrives, in seconds."""

    prompt_tokens: int
    output_tokens: int
    arrival_s: float | None = None
    prefix_tokens: int = 0


@dataclass(frozen=True)
class Workload:
    """The requests in sending order; concurrency for a closed loop, rate (requests/s, None for a trace from a
    file) for an open one."""

    requests: tuple[RequestSpec, ...]
    closed: bool
    concurrency: int | None = None
    rate: float | None = None


def _lengths(prompt: int, output: int, prefix: int) -> tuple[int, int, int]:
    prompt = whole_number(prompt, "prompt_tokens", 1, MAX_TOKENS)
    output = whole_number(output, "output_tokens", 1, MAX_TOKENS)
    return prompt, output, whole_number(prefix, "prefix_tokens", 0, prompt)


def closed_loop(requests: int, concurrency: int, prompt_tokens: int, output_tokens: int,
                prefix_tokens: int = 0) -> Workload:
    n = whole_number(requests, "requests", 1, MAX_REQUESTS)
    concurrency = whole_number(concurrency, "concurrency", 1, MAX_REQUESTS)
    prompt, output, prefix = _lengths(prompt_tokens, output_tokens, prefix_tokens)
    return Workload(tuple(RequestSpec(prompt, output, None, prefix) for _ in range(n)), True, concurrency)


def arrivals(requests: int, rate: float, poisson: bool, seed: int = 0) -> list[float]:
    """Arrival times in seconds from 0: Poisson (exponential gaps of mean 1/rate, the first at 0) or constant."""
    if not poisson:
        return [i / rate for i in range(requests)]
    draw = random.Random(seed)
    times, now = [], 0.0
    for _ in range(requests):
        times.append(now)
        now += draw.expovariate(rate)
    return times


def open_loop(requests: int, rate: float, prompt_tokens: int, output_tokens: int, prefix_tokens: int = 0,
              poisson: bool = True, seed: int = 0) -> Workload:
    n = whole_number(requests, "requests", 1, MAX_REQUESTS)
    rate = number(rate, "rate", 0.0, 1e9, low_open=True)
    prompt, output, prefix = _lengths(prompt_tokens, output_tokens, prefix_tokens)
    times = arrivals(n, rate, poisson, seed)
    return Workload(tuple(RequestSpec(prompt, output, t, prefix) for t in times), False, rate=rate)


def from_csv(path: Path, concurrency: int | None = None, prefix_tokens: int = 0) -> Workload:
    """The rows of a CSV file with a header naming prompt_tokens and output_tokens (and arrival_s, needed unless
    a concurrency makes it a closed loop). An open loop's requests are sent in order of arrival."""
    rows = read_csv(path)
    needed = ["prompt_tokens", "output_tokens"] + ([] if concurrency else ["arrival_s"])
    missing = [name for name in needed if name not in rows[0]]
    if missing:
        raise InputError("sim.csv_columns", path=str(path), missing=", ".join(missing))
    specs = [_row_spec(path, line, row, concurrency is None, prefix_tokens) for line, row in enumerate(rows, 2)]
    if concurrency is not None:
        return Workload(tuple(specs), True, whole_number(concurrency, "concurrency", 1, MAX_REQUESTS))
    return Workload(tuple(sorted(specs, key=lambda s: s.arrival_s)), False)


def read_csv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    except FileNotFoundError:
        raise InputError("sim.csv_missing", path=str(path)) from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError("sim.csv_unreadable", path=str(path), why=type(exc).__name__) from None
    if not rows:
        raise InputError("sim.csv_empty", path=str(path))
    if len(rows) > MAX_REQUESTS:
        raise InputError("sim.csv_too_many", path=str(path), n=len(rows), most=MAX_REQUESTS)
    return rows


def _row_spec(path: Path, line: int, row: dict[str, str], timed: bool, prefix: int) -> RequestSpec:
    """One row as a request; a bad cell is refused with its file, line and column."""
    prompt = int(cell(path, line, row, "prompt_tokens"))
    output = int(cell(path, line, row, "output_tokens"))
    arrival = cell(path, line, row, "arrival_s", None) if timed else None
    if prefix > prompt:
        raise InputError("sim.prefix_longer", line=line, prefix=prefix, prompt=prompt)
    return RequestSpec(prompt, output, arrival, prefix)


def cell(path: Path, line: int, row: dict[str, str], column: str, low: int | None = 1) -> float:
    """A CSV cell: a whole number in low..MAX_TOKENS (a count), or with low None seconds (finite, from 0)."""
    text = (row.get(column) or "").strip()
    try:
        value = float(text) if low is None else int(text)
    except ValueError:
        value = None
    if low is None and not (value is not None and math.isfinite(value) and value >= 0):
        raise InputError("sim.csv_seconds", path=str(path), line=line, column=column, value=text[:40])
    if low is not None and not (value is not None and low <= value <= MAX_TOKENS):
        raise InputError("sim.csv_count", path=str(path), line=line, column=column, value=text[:40], low=low)
    return value
