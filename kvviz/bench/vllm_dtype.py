"""vLLM's CPU build in bf16 against fp32 on this machine: the same loads on one model, a vLLM start per dtype per
round, the rounds interleaved (bf16, fp32, bf16, fp32, ...) so that a machine whose speed moves moves both alike.

Why it is a benchmark: kvviz asks vLLM for fp32 on an x86 CPU without bf16 instructions
(kvviz.serving.vllm.cpu_fp32), where bf16 is computed in software. This measures what that choice buys and costs
on the machine it runs on: TTFT, TPOT and output tokens/s of a loop of one, a loop of four and a prompt-heavy loop,
each dtype's medians over the rounds with their range, and fp32 ÷ bf16 per round. Needs vLLM's environment
(`python -m kvviz.serving setup`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from kvviz.base.cpu import lacks_bf16
from kvviz.sim.calibrate import LoadPoint, Mix

DTYPES = ("bfloat16", "float32")
METRICS = ("ttft_p50_s", "tpot_p50_s", "output_tokens_per_s")


@dataclass(frozen=True)
class Plan:
    model: str
    loads: tuple[LoadPoint, ...]
    rounds: int


FULL = Plan("smollm2-135m-instruct", (LoadPoint(Mix(64, 32), 4, concurrency=1),
                                      LoadPoint(Mix(64, 32), 8, concurrency=4),
                                      LoadPoint(Mix(384, 8), 4, concurrency=2)), 2)
QUICK = Plan("tiny", (LoadPoint(Mix(32, 16), 2, concurrency=1), LoadPoint(Mix(128, 4), 2, concurrency=2)), 1)


def _progress(**fields) -> None:
    """A JSON line as each start and load ends (as kvviz.bench.parallel_serving prints them): a start is about a
    minute, a bf16 load on a CPU without bf16 instructions up to a minute more."""
    print(json.dumps(fields), flush=True)


def one_start(model: str, dtype: str, loads: tuple[LoadPoint, ...]) -> list[dict]:
    """One vLLM start of `model` asked for `dtype` (--dtype), a warm-up, then each load: a row per load with the
    dtype vLLM's log states it ran."""
    from kvviz.sim.calibrate import measure, serving, warm_up

    rows = []
    with serving(model, 1024, extra_args=("--dtype", dtype)) as served:
        _progress(dtype=dtype, ready_s=round(served.server.ready_s or 0, 1), vllm_dtype=served.server.facts.dtype)
        warm_up(served)
        for point in loads:
            m = measure(served, point)
            rows.append({"dtype": dtype, "vllm_dtype": served.server.facts.dtype, "load": point.label,
                         "ttft_p50_s": m.stats.ttft.p50, "tpot_p50_s": m.stats.tpot.p50,
                         "output_tokens_per_s": m.stats.output_tokens_per_s, "completed": m.stats.completed,
                         "load_average_1m": m.load_average})
            _progress(**{k: round(v, 4) if isinstance(v, float) else v for k, v in rows[-1].items()})
    return rows


def summarize(frame: pd.DataFrame) -> dict:
    """Per load and metric: each dtype's median over the rounds and its range, and fp32 ÷ bf16 per round (its
    median and range: above 1 is fp32's larger figure, better for tokens/s, worse for the times)."""
    out: dict = {}
    for load, rows in frame.groupby("load", sort=False):
        entry = {}
        for metric in METRICS:
            by = {d: rows[rows.dtype == d].set_index("round")[metric] for d in DTYPES}
            ratio = (by["float32"] / by["bfloat16"]).dropna()
            entry[metric] = {**{d: {"median": float(v.median()), "min": float(v.min()), "max": float(v.max())}
                                for d, v in by.items()},
                             "fp32_over_bf16": {"median": float(ratio.median()), "min": float(ratio.min()),
                                                "max": float(ratio.max())}}
        out[load] = entry
    return out


def dtype_bench(plan: Plan) -> tuple[pd.DataFrame, dict]:
    """The plan's rounds, each a start in bf16 then one in fp32; the rows and their summary."""
    rows = []
    for r in range(plan.rounds):
        for dtype in DTYPES:
            _progress(round=r + 1, of=plan.rounds, starting=dtype)
            rows += [{"round": r, **row} for row in one_start(plan.model, dtype, plan.loads)]
    frame = pd.DataFrame(rows)
    return frame, {"model": plan.model, "rounds": plan.rounds, "cpu_lacks_bf16": lacks_bf16(),
                   "loads": summarize(frame)}
