"""Part: kvviz's load generator against a server whose timings are known by construction (kvviz.serving.
timed_server: first token 300 ms after each request, then one every 25 ms, 32 tokens, no queueing), closed
loops of 1, 8, 32, 128 and 256 requests in flight in whole waves. Each row is one level of one repeat: what the
client read against the construction (TTFT p50, output tokens/s = C × tokens / (ttft + (tokens - 1) × itl),
TPOT p50), what the client itself cost (its CPU per token, busy share, reads' waits, time to headers, its own
verdict) and how well the server kept its schedule (its sends' lateness), with the load average at the time.
Repeats are interleaved (levels up, then down, ...) so a machine's drift spreads over every level; the summary
gives each level's median and spread (min-max) against the target: TTFT within 5%, throughput within 3%.
Knows the benchmark's steps; the measuring is kvviz.serving's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from kvviz.serving.endpoint import endpoint
from kvviz.serving.load import Load
from kvviz.serving.loadgen import run
from kvviz.serving.prompts import synthetic
from kvviz.serving.timed_server import TimedServer, timed_server

TTFT_TARGET, THROUGHPUT_TARGET = 0.05, 0.03


@dataclass(frozen=True)
class LoadgenPlan:
    """The server's construction, the levels, whole waves per level, interleaved repeats."""

    levels: tuple[int, ...] = (1, 8, 32, 128, 256)
    waves: int = 4
    repeats: int = 5
    ttft_s: float = 0.3
    itl_s: float = 0.025
    tokens: int = 32


FULL = LoadgenPlan()
QUICK = LoadgenPlan(levels=(1, 8, 32), waves=2, repeats=1)


def level_run(server: TimedServer, plan: LoadgenPlan, concurrency: int, repeat: int) -> dict:
    """One level: `waves` whole waves of `concurrency` requests, as a row against the construction."""
    server.lateness(reset=True)
    load = Load(concurrency=concurrency, requests=plan.waves * concurrency, output_tokens=plan.tokens)
    result = run(endpoint(server.base_url, server.model), load, synthetic(64, 16, seed=repeat))
    late = server.lateness()
    s, truth = result.stats, server.throughput(concurrency)
    return {"repeat": repeat, "concurrency": concurrency, "requests": s.requests, "completed": s.completed,
            "failed": s.failed, "ttft_p50_s": s.ttft.p50, "ttft_error": s.ttft.p50 / plan.ttft_s - 1,
            "output_tokens_per_s": s.output_tokens_per_s, "construction_tokens_per_s": truth,
            "throughput_error": s.output_tokens_per_s / truth - 1, "tpot_p50_s": s.tpot.p50,
            "tpot_error": s.tpot.p50 / plan.itl_s - 1 if s.tpot.p50 else None, "itl_p50_s": s.itl.p50,
            "duration_s": s.duration_s, **result.client.flat(),
            "server_late_p50_s": late.p50_s, "server_late_p99_s": late.p99_s, "server_late_max_s": late.max_s,
            "server_read_wait_p99_s": late.read_wait_p99_s, "load_average_1m": os.getloadavg()[0]}


def loadgen_bench(plan: LoadgenPlan) -> tuple[pd.DataFrame, dict]:
    """Every level of every repeat against one timed server; the rows and the summary."""
    load_before = os.getloadavg()
    rows = []
    with timed_server(plan.ttft_s, plan.itl_s, plan.tokens) as server:
        for repeat in range(plan.repeats):
            order = plan.levels if repeat % 2 == 0 else plan.levels[::-1]
            rows += [level_run(server, plan, c, repeat) for c in order]
    frame = pd.DataFrame(rows)
    return frame, summarize_loadgen(frame, plan, load_before)


def _spread(values: pd.Series) -> dict:
    return {"median": float(values.median()), "min": float(values.min()), "max": float(values.max())}


def summarize_loadgen(frame: pd.DataFrame, plan: LoadgenPlan, load_before: tuple) -> dict:
    """Each level's median and spread of the errors against the construction, the client's cost, whether the
    medians meet the target, and the load average around the run."""
    levels = {}
    for c, rows in frame.groupby("concurrency"):
        ttft, tput = rows["ttft_error"], rows["throughput_error"]
        levels[int(c)] = {
            "ttft_p50_s": _spread(rows["ttft_p50_s"]), "ttft_error": _spread(ttft),
            "output_tokens_per_s": _spread(rows["output_tokens_per_s"]),
            "construction_tokens_per_s": float(rows["construction_tokens_per_s"].iloc[0]),
            "throughput_error": _spread(tput), "tpot_error": _spread(rows["tpot_error"]),
            "client_cpu_us_per_token": _spread(rows["client_cpu_us_per_token"]),
            "client_busy": _spread(rows["client_busy"]),
            "client_read_wait_p90_s": _spread(rows["client_read_wait_p90_s"]),
            "client_headers_p50_s": _spread(rows["client_headers_p50_s"]),
            "client_limited_runs": int(rows["client_limited"].sum()),
            "server_late_p99_s_max": float(rows["server_late_p99_s"].max()),
            "within_target": bool(abs(ttft.median()) <= TTFT_TARGET and abs(tput.median()) <= THROUGHPUT_TARGET),
            "every_run_within_target": bool((ttft.abs() <= TTFT_TARGET).all()
                                            and (tput.abs() <= THROUGHPUT_TARGET).all()),
        }
    return {"construction": {"ttft_s": plan.ttft_s, "itl_s": plan.itl_s, "tokens": plan.tokens},
            "waves": plan.waves, "repeats": plan.repeats,
            "target": {"ttft_error": TTFT_TARGET, "throughput_error": THROUGHPUT_TARGET},
            "levels": levels, "all_within_target": all(v["within_target"] for v in levels.values()),
            "cpu_count": os.cpu_count(), "load_average_before": list(load_before),
            "load_average_after": list(os.getloadavg())}
