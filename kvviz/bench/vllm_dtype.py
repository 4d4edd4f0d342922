"""vLLM's CPU build in bf16 against fp32 on this machine: the same loads on one model, a vLLM start per dtype per
round, the rounds interleaved (kvviz.bench.vllm_ab).

Why it is a benchmark: kvviz asks vLLM for fp32 on an x86 CPU without bf16 instructions
(kvviz.serving.vllm.cpu_fp32), where bf16 is computed in software. This measures what that choice buys and costs
on the machine it runs on: TTFT, TPOT and output tokens/s of a loop of one, a loop of four and a prompt-heavy loop,
each dtype's medians over the rounds with their range, and fp32 ÷ bf16 per round. Needs vLLM's environment
(`python -m kvviz.serving setup`).
"""

from __future__ import annotations

import pandas as pd

from kvviz.base.cpu import lacks_bf16
from kvviz.bench import vllm_ab
from kvviz.bench.vllm_ab import Comparison, Plan, Setting
from kvviz.sim.calibrate import LoadPoint, Mix

DTYPES = ("bfloat16", "float32")
DTYPE = Comparison("dtype", "vllm_dtype", lambda server: server.facts.dtype,
                   tuple(Setting(d, ("--dtype", d)) for d in DTYPES), "fp32_over_bf16")

FULL = Plan("smollm2-135m-instruct", (LoadPoint(Mix(64, 32), 4, concurrency=1),
                                      LoadPoint(Mix(64, 32), 8, concurrency=4),
                                      LoadPoint(Mix(384, 8), 4, concurrency=2)), 2)
QUICK = Plan("tiny", (LoadPoint(Mix(32, 16), 2, concurrency=1), LoadPoint(Mix(128, 4), 2, concurrency=2)), 1)


def summarize(frame: pd.DataFrame) -> dict:
    """Per load and metric: each dtype's median over the rounds and its range, and fp32 ÷ bf16 per round."""
    return vllm_ab.summarize(frame, DTYPE)


def dtype_bench(plan: Plan) -> tuple[pd.DataFrame, dict]:
    """The plan's rounds, a start in each dtype, the order turned each round; the rows and their summary."""
    frame, starts, loads = vllm_ab.ab_bench(plan, DTYPE)
    return frame, {"model": plan.model, "rounds": plan.rounds, "cpu_lacks_bf16": lacks_bf16(), "starts": starts,
                   "loads": loads}
