"""vLLM's CPU build with its one worker in a process of its own (vLLM's default) against in its engine core's
process (what kvviz starts, kvviz.serving.vllm.worker_in_engine): the same loads on one model, a vLLM start each
way per round, the rounds interleaved (kvviz.bench.vllm_ab).

Why it is a benchmark: a worker process of its own and the engine core wait on each other by polling a shared
queue, and on a machine of few cores the engine core's polling takes the CPU the API server and the load generator
need. This measures what computing in one process buys on the machine it runs on: TTFT, TPOT and output tokens/s
of decode-heavy loops at 1, 4 and 12 in flight and prompt-heavy ones, each way's medians over the rounds with their
range, B ÷ A per round, and how long each start took to be ready. The log's KV line says which process computed
(vLLM's "Worker", or "EngineCore"). Needs vLLM's environment (`python -m kvviz.serving setup`).
"""

from __future__ import annotations

import pandas as pd

from kvviz.bench import vllm_ab
from kvviz.bench.vllm_ab import Comparison, Plan, Setting
from kvviz.serving.vllm import IN_ENGINE_ENV
from kvviz.sim.calibrate import LoadPoint, Mix

WORKER = Comparison("worker", "computed_in", lambda server: ",".join(w.name for w in server.facts.workers) or None,
                    (Setting("worker process", env={IN_ENGINE_ENV: "1"}),
                     Setting("engine core", env={IN_ENGINE_ENV: "0"})), "engine_core_over_worker_process")

FULL = Plan("tiny", (LoadPoint(Mix(64, 32), 4, concurrency=1), LoadPoint(Mix(64, 32), 8, concurrency=4),
                     LoadPoint(Mix(64, 32), 24, concurrency=12), LoadPoint(Mix(384, 8), 6, concurrency=2),
                     LoadPoint(Mix(384, 8), 12, concurrency=6), LoadPoint(Mix(32, 64), 16, concurrency=8),
                     LoadPoint(Mix(32, 64), 40, concurrency=20)), 4)
QUICK = Plan("tiny", (LoadPoint(Mix(32, 16), 4, concurrency=2),), 1)


def worker_bench(plan: Plan) -> tuple[pd.DataFrame, dict]:
    """The plan's rounds, a start each way, the order turned each round; the rows and their summary."""
    frame, starts, loads = vllm_ab.ab_bench(plan, WORKER)
    return frame, {"model": plan.model, "rounds": plan.rounds, "starts": starts, "loads": loads}
