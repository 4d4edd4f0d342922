"""Two ways of starting vLLM's CPU build, compared on this machine: the same loads on one model, a vLLM start per
way per round, the order turned each round (A B, B A, A B, ...) so that a machine whose speed moves moves both alike.

What kvviz.bench.vllm_dtype (bf16 against fp32) and kvviz.bench.vllm_worker (a worker process against the engine
core's process) share: a Setting is a way (vLLM's options and environment), each start a row per load with what
vLLM's log says it ran, and the summary per load and metric each way's median over the rounds with its range, and
B ÷ A per round. Needs vLLM's environment (`python -m kvviz.serving setup`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pandas as pd

from kvviz.sim.calibrate import LoadPoint

METRICS = ("ttft_p50_s", "tpot_p50_s", "output_tokens_per_s")


@dataclass(frozen=True)
class Setting:
    """One way to start vLLM: its name (the row's value in the comparison's column), more of vLLM's options, and
    variables its environment takes over this one's."""

    name: str
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Comparison:
    """What is compared: the rows' column that names the way (`column`), the column that says what vLLM's log
    states it ran (`observed`, read by `observe` from the server), the two ways (A first), and the summary's key
    for B ÷ A."""

    column: str
    observed: str
    observe: Callable
    settings: tuple[Setting, Setting]
    ratio_key: str


@dataclass(frozen=True)
class Plan:
    model: str
    loads: tuple[LoadPoint, ...]
    rounds: int


def progress(**fields) -> None:
    """A JSON line as each start and load ends (as kvviz.bench.parallel_serving prints them): a start is about a
    minute, a load on a slow setting up to a minute more."""
    print(json.dumps(fields), flush=True)


@contextmanager
def environ(env: dict[str, str]) -> Iterator[None]:
    """This process's environment with `env` over it for the block (vLLM's start copies it), as it was after."""
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def one_start(model: str, setting: Setting, comparison: Comparison, loads: tuple[LoadPoint, ...]) -> list[dict]:
    """One vLLM start of `model` the setting's way, a warm-up, then each load: a row per load with what vLLM's
    log says it ran."""
    from kvviz.sim.calibrate import measure, serving, warm_up

    rows = []
    with environ(setting.env), serving(model, 1024, extra_args=setting.extra_args) as served:
        seen = comparison.observe(served.server)
        progress(**{comparison.column: setting.name, "ready_s": round(served.server.ready_s or 0, 1),
                    comparison.observed: seen})
        warm_up(served)
        for point in loads:
            m = measure(served, point)
            rows.append({comparison.column: setting.name, comparison.observed: seen, "load": point.label,
                         "ttft_p50_s": m.stats.ttft.p50, "tpot_p50_s": m.stats.tpot.p50,
                         "output_tokens_per_s": m.stats.output_tokens_per_s, "completed": m.stats.completed,
                         "ready_s": served.server.ready_s, "load_average_1m": m.load_average})
            progress(**{k: round(v, 4) if isinstance(v, float) else v for k, v in rows[-1].items()})
    return rows


def summarize(frame: pd.DataFrame, comparison: Comparison) -> dict:
    """Per load and metric: each way's median over the rounds and its range, and B ÷ A per round (its median and
    range: above 1 is B's larger figure, better for tokens/s, worse for the times)."""
    a, b = (s.name for s in comparison.settings)
    out: dict = {}
    for load, rows in frame.groupby("load", sort=False):
        entry = {}
        for metric in METRICS:
            by = {s: rows[rows[comparison.column] == s].set_index("round")[metric] for s in (a, b)}
            ratio = (by[b] / by[a]).dropna()
            entry[metric] = {**{s: {"median": float(v.median()), "min": float(v.min()), "max": float(v.max())}
                                for s, v in by.items()},
                             comparison.ratio_key: {"median": float(ratio.median()), "min": float(ratio.min()),
                                                    "max": float(ratio.max())}}
        out[load] = entry
    return out


def ab_bench(plan: Plan, comparison: Comparison) -> tuple[pd.DataFrame, list[dict], dict]:
    """The plan's rounds, A then B in even rounds and B then A in odd ones; the rows, each start's ready time,
    and the summary per load."""
    rows, starts = [], []
    for r in range(plan.rounds):
        order = comparison.settings if r % 2 == 0 else comparison.settings[::-1]
        for setting in order:
            progress(round=r + 1, of=plan.rounds, starting=setting.name)
            got = one_start(plan.model, setting, comparison, plan.loads)
            rows += [{"round": r, **row} for row in got]
            starts.append({"round": r, comparison.column: setting.name, "ready_s": got[0]["ready_s"] if got else None})
    frame = pd.DataFrame(rows)
    return frame, starts, summarize(frame, comparison)
