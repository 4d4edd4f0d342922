"""`python -m kvviz.bench.parallel_serving`: the same load on several parallel layouts of one model (tp1, tp2,
pp2, dp2 by default), side by side, written as results/parallel/serving.{json,csv,md} and a figure.

Each layout gets one vLLM start per round (kvviz.serving.vllm.running_vllm, CPU build: each worker a process,
workers talking over gloo); in it, every level of the closed loop (requests in flight) runs `repeats` times, the
levels' order alternating, each level after an unmeasured warm-up at its batch size. A run's row holds the client's
figures (output tokens/s, TTFT, TPOT and ITL percentiles, kvviz.serving.loadgen), the CPU time vLLM's whole process
group spent during it (its processes' utime + stime from /proc, so a layout's communication and waiting show as CPU
spent per token) and the load average before and after it. A layout's record holds the ranks and the KV each holds
as vLLM logged them (kvviz.serving.vllm.StartupFacts) beside kvviz's per-rank prediction
(kvviz.serving.parallel_capacity). With several rounds the layouts are interleaved (their order reversed every other
round), so a machine's drift spreads over all of them; the summary gives each layout's and level's medians with
their spread (min-max, IQR), and `reading` says in words, from those medians, what each layout traded against
tp1 (English and Chinese: kvviz/i18n/serving_cli.py). Knows the benchmark's steps; measuring is kvviz.serving's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kvviz.calc.machine import machine
from kvviz.calc.parallel import Parallelism
from kvviz.i18n import LANGS, normalize, t
from kvviz.serving.load import Load
from kvviz.serving.loadgen import run
from kvviz.serving.parallel_capacity import parse_layout, plan_layouts
from kvviz.serving.prompts import Prompt, load_tokenizer, synthetic
from kvviz.serving.sweep import level_row

OUT = Path("results/parallel")
TAG = "serving"
FIGURES = ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_p50_s",
           "itl_p99_s", "server_cpu_ms_per_token")


@dataclass(frozen=True)
class ParallelServingPlan:
    """What runs: the model, the layouts, the closed loop's levels (requests in flight), whole waves a level,
    repeats of each level in one start, rounds (a start of every layout each), prompt and output tokens, the KV
    space of each worker (GiB) and the context served."""

    model: str = "tiny"
    layouts: tuple[Parallelism, ...] = (Parallelism(1, 1, 1), Parallelism(2, 1, 1), Parallelism(1, 2, 1),
                                        Parallelism(1, 1, 2))
    levels: tuple[int, ...] = (1, 8)
    waves: int = 2
    repeats: int = 3
    rounds: int = 1
    prompt_tokens: int = 64
    output_tokens: int = 64
    kv_space_gib: int = 1
    max_model_len: int = 1024
    dummy_weights: bool = False

    def load(self, concurrency: int) -> Load:
        """One measured run at `concurrency`: `waves` whole waves (at least 8 requests)."""
        return Load(concurrency=concurrency, requests=max(8, self.waves * concurrency),
                    output_tokens=self.output_tokens)

    def prompts_per_start(self) -> int:
        """Requests one start sends: every level's warm-up and its repeats."""
        return sum(c + self.repeats * self.load(c).requests for c in self.levels)


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system, all threads) the live processes of process group `pgid` have spent: vLLM's
    API server, engine cores and workers (kvviz.serving.vllm starts them in one group). /proc/<pid>/stat's comm
    may hold spaces, so its fields are read after the last ')'."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # the process ended while we read
            continue
        if int(fields[2]) == pgid:  # fields after comm: state ppid pgrp ...; utime, stime are the 14th, 15th
            total += int(fields[11]) + int(fields[12])
    return total / tick


def measured_run(ep, load: Load, prompts: Sequence[Prompt], pgid: int) -> dict:
    """One closed-loop run as a row: the client's figures, vLLM's group's CPU per output token, the load
    average (1 min) before and after."""
    load_before, cpu_before = os.getloadavg()[0], group_cpu_s(pgid)
    result = run(ep, load, prompts)
    server_cpu = group_cpu_s(pgid) - cpu_before
    row = level_row(result)
    tokens = max(row["output_tokens"], 1)
    return row | {"server_cpu_s": server_cpu, "server_cpu_ms_per_token": 1e3 * server_cpu / tokens,
                  "server_cpu_share": server_cpu / row["duration_s"] if row["duration_s"] else None,
                  "load_average_before": load_before, "load_average_after": os.getloadavg()[0]}


def layout_record(layout: Parallelism, server, predicted) -> dict:
    """The ranks and the KV each holds as vLLM logged them (its KV space and the tokens of its engine, of each
    of which it keeps its share), the bytes a token leaves on a rank (kvviz's prediction, which
    results/parallel/parallel-capacity checks against vLLM), and the start-up time."""
    ranks = [{"rank": r.rank, "kv_space_gib": r.kv_space_gib, "kv_tokens": r.kv_capacity_tokens}
             for r in server.facts.ranks()]
    return {"layout": layout.label, "ready_s": server.ready_s, "workers": layout.tp * layout.pp * layout.dp,
            "ranks": ranks, "engines": {e.name: e.kv_capacity_tokens for e in server.facts.engines},
            "bytes_per_token_per_rank": predicted.bytes_per_token_per_rank,
            "kv_heads_per_rank": predicted.kv_heads_per_rank, "stage_layers": list(predicted.stage_layers),
            "modelled_logged_tokens": predicted.modelled_logged_tokens}


def serve_layout(plan: ParallelServingPlan, layout: Parallelism, predicted, prompts: list[Prompt],
                 round_: int, log_dir: Path) -> tuple[list[dict], dict]:
    """One start of `layout`: each level warmed up and run plan.repeats times (levels up, then down, ...); its
    rows and the layout's record."""
    from kvviz.serving.models import model_folder
    from kvviz.serving.vllm import ServerSpec, free_port, running_vllm

    folder = model_folder(plan.model, dummy_weights=plan.dummy_weights)
    spec = ServerSpec(folder.path, folder.name, port=free_port(), max_model_len=plan.max_model_len,
                      kv_space_gib=plan.kv_space_gib, dummy=folder.dummy, tensor_parallel=layout.tp,
                      pipeline_parallel=layout.pp, data_parallel=layout.dp)
    rows, used = [], 0
    log = log_dir / f"vllm-parallel-serving-{layout.label.replace(' ', '')}-r{round_}.log"
    with running_vllm(spec, log_path=log) as server:
        ep = server.endpoint()
        for c in plan.levels:  # warm-ups: a CPU server runs a batch of a new size slowly the first time
            run(ep, Load(concurrency=c, requests=c, output_tokens=min(plan.output_tokens, 32)), prompts[used:])
            used += c
        for repeat in range(plan.repeats):
            for c in plan.levels if repeat % 2 == 0 else plan.levels[::-1]:
                load = plan.load(c)
                row = measured_run(ep, load, prompts[used:used + load.requests], server.pid)
                rows.append({"layout": layout.label, "round": round_, "repeat": repeat, **row})
                used += load.requests
        record = layout_record(layout, server, predicted)
    return rows, record | {"round": round_}


def parallel_serving(plan: ParallelServingPlan, log_dir: Path) -> tuple[pd.DataFrame, list[dict]]:
    """Every round: each layout started, loaded and stopped in turn (the order reversed every other round).
    Every layout is checked by the calculator before the first start (InputError in one line)."""
    plans = plan_layouts([plan.model], list(plan.layouts), plan.kv_space_gib, plan.max_model_len,
                         plan.dummy_weights)
    from kvviz.serving.models import model_folder

    tokenizer = load_tokenizer(model_folder(plan.model, dummy_weights=plan.dummy_weights).path)
    rows, records = [], []
    for round_ in range(1, plan.rounds + 1):
        for _, _, layout, predicted in plans if round_ % 2 else plans[::-1]:
            # the same prompts for every layout and round: each start's cache is fresh, so each sees them once
            prompts = synthetic(plan.prompts_per_start(), plan.prompt_tokens, tokenizer, seed=7)
            # a start takes a minute or more: say which one is under way
            print(json.dumps({"layout": layout.label, "round": round_, "starting": True}), flush=True)
            got, record = serve_layout(plan, layout, predicted, prompts, round_, log_dir)
            rows += got
            records.append(record)
            print(json.dumps({"layout": layout.label, "round": round_, "ready_s": record["ready_s"],
                              "tokens_per_s": [round(r["output_tokens_per_s"], 1) for r in got]}), flush=True)
    return pd.DataFrame(rows), records


def spread(values: pd.Series) -> dict:
    """The median of values and their spread: min, max, the quartiles, how many."""
    v = values.dropna().astype(float)
    if v.empty:
        return {"median": None, "min": None, "max": None, "q1": None, "q3": None, "n": 0}
    return {"median": float(v.median()), "min": float(v.min()), "max": float(v.max()),
            "q1": float(v.quantile(0.25)), "q3": float(v.quantile(0.75)), "n": len(v)}


def summarize(frame: pd.DataFrame, records: list[dict]) -> dict:
    """Each layout's figures at each level (medians with spread over its runs), its ranks and their KV, its
    start-up times and the load average over its runs."""
    out = {}
    for layout, rows in frame.groupby("layout", sort=False):
        mine = [r for r in records if r["layout"] == layout]
        levels = {int(c): {k: spread(at[k]) for k in FIGURES} | {"completed": int(at["completed"].sum()),
                                                                 "requests": int(at["requests"].sum())}
                  for c, at in rows.groupby("concurrency")}
        loads = pd.concat([rows["load_average_before"], rows["load_average_after"]])
        out[layout] = {"levels": levels, "ranks": mine[0]["ranks"], "engines": mine[0]["engines"],
                       "bytes_per_token_per_rank": mine[0]["bytes_per_token_per_rank"],
                       "kv_heads_per_rank": mine[0]["kv_heads_per_rank"], "stage_layers": mine[0]["stage_layers"],
                       "ready_s": [r["ready_s"] for r in mine], "load_average_1m": spread(loads)}
    return out


def _median(summary: dict, layout: str, level: int, key: str) -> float:
    return summary[layout]["levels"][level][key]["median"]


def reading(summary: dict, lang: str = "en") -> str:
    """What each layout traded against tp1 on this machine, from the medians: per layout its TPOT at the lowest
    level and its throughput at the highest against tp1's, and the CPU vLLM spent per token; then which layout
    was fastest at each end. Every comparison word is chosen by the numbers, not assumed."""
    base = "tp1 pp1 dp1"
    levels = sorted(summary[base]["levels"])
    low, high = levels[0], levels[-1]
    cpus = machine_cpus()
    loads = [v["load_average_1m"] for v in summary.values()]
    parts = [t("serving_cli.pserve.intro", lang, cpus=cpus, low=low, high=high,
               load_lo=min(x["min"] for x in loads), load_hi=max(x["max"] for x in loads),
               base_load=summary[base]["load_average_1m"]["median"],
               tpot=_median(summary, base, low, "tpot_p50_s") * 1e3,
               tps=_median(summary, base, high, "output_tokens_per_s"),
               cpu=_median(summary, base, high, "server_cpu_ms_per_token"))]
    if max(x["max"] for x in loads) > cpus:
        parts.append(t("serving_cli.pserve.busy", lang, cpus=cpus))
    for layout in summary:
        if layout == base:
            continue
        tpot = _median(summary, layout, low, "tpot_p50_s") / _median(summary, base, low, "tpot_p50_s")
        tps = _median(summary, layout, high, "output_tokens_per_s") / _median(summary, base, high,
                                                                                "output_tokens_per_s")
        kind = next(k for k, n in _sizes(layout).items() if n > 1)  # the first size above 1 names the text
        tokens = [r["kv_tokens"] for r in summary[layout]["ranks"]]
        parts.append(t(f"serving_cli.pserve.{kind}", lang, layout=_short(layout), low=low, high=high, cpus=cpus,
                       load=summary[layout]["load_average_1m"]["median"],
                       tpot=_median(summary, layout, low, "tpot_p50_s") * 1e3, tpot_ratio=tpot,
                       tpot_word=t("serving_cli.pserve.slower" if tpot > 1 else "serving_cli.pserve.faster", lang),
                       tps=_median(summary, layout, high, "output_tokens_per_s"), tps_ratio=tps,
                       ttft=_median(summary, layout, low, "ttft_p50_s") * 1e3,
                       base_ttft=_median(summary, base, low, "ttft_p50_s") * 1e3,
                       cpu=_median(summary, layout, high, "server_cpu_ms_per_token"),
                       ranks=len(tokens), tokens=max((n or 0) for n in tokens)))
    best_low = min(summary, key=lambda lay: _median(summary, lay, low, "tpot_p50_s"))
    best_high = max(summary, key=lambda lay: _median(summary, lay, high, "output_tokens_per_s"))
    parts.append(t("serving_cli.pserve.verdict", lang, low=low, high=high, best_low=_short(best_low),
                   best_high=_short(best_high)))
    if len(summary) > 1 and best_low == base and best_high == base:
        parts.append(t("serving_cli.pserve.none_paid", lang))
    return ("" if normalize(lang) == "zh" else " ").join(parts)  # Chinese sentences run on without spaces


def _sizes(label: str) -> dict:
    """"tp2 pp1 dp1" -> {"tp": 2, "pp": 1, "dp": 1} (Parallelism's label, read back)."""
    return {part[:2]: int(part[2:]) for part in label.split()}


def _short(label: str) -> str:
    """"tp2 pp1 dp1" -> "tp2"; "tp1 pp1 dp1" -> "tp1": the sizes above 1, as the bench's options name them."""
    sizes = _sizes(label)
    return "".join(f"{k}{n}" for k, n in sizes.items() if n > 1) or "tp1"


def machine_cpus() -> int:
    from kvviz.base.cpu import usable_cpus

    return usable_cpus()


def markdown(result: dict) -> str:
    """The table (a row per layout and level: medians, with the min-max of throughput), the ranks' KV, the
    reading in both languages, the command and the machine."""
    s, m = result["results"], result["machine"]
    head = ("| layout | in flight | output tokens/s (min-max) | TTFT p50 / p99 ms | TPOT p50 / p99 ms | ITL p50 / p99 "
            "ms | vLLM CPU ms/token | KV a rank holds (tokens, each rank's share) | load avg 1m |")
    lines = [f"    {result['command']}", "", head, "|" + "---|" * 9]
    for layout, v in s["layouts"].items():
        held = [r for r in v["ranks"] if r["kv_tokens"]]
        # one worker has no rank name worth printing (vLLM calls it plain "Worker")
        kv = f"{held[0]['kv_tokens']:,}" if len(held) == 1 else " · ".join(f"{r['rank']} {r['kv_tokens']:,}"
                                                                             for r in held)
        for c, f in v["levels"].items():
            def ms(k: str, f=f) -> str:
                return f"{f[k]['median'] * 1e3:.1f}"
            tps = f["output_tokens_per_s"]
            lines.append(f"| {_short(layout)} | {c} | {tps['median']:,.0f} ({tps['min']:,.0f}-{tps['max']:,.0f}) | "
                         f"{ms('ttft_p50_s')} / {ms('ttft_p99_s')} | {ms('tpot_p50_s')} / {ms('tpot_p99_s')} | "
                         f"{ms('itl_p50_s')} / {ms('itl_p99_s')} | {f['server_cpu_ms_per_token']['median']:.1f} | "
                         f"{kv} | {v['load_average_1m']['median']:.2f} |")
    lines += ["", s["reading"]["en"], "", s["reading"]["zh"], "",
              f"Machine: {m.get('cpu_model')}, {m.get('usable_cpus')} usable CPUs, ISA {' '.join(m.get('isa', []))}, "
              f"stream read {m.get('cpu_stream_read_gb_s')} GB/s, load average when written {m.get('load_average')}; "
              f"before the run {s['load_average_before']}, after {s['load_average_after']}."]
    return "\n".join(lines) + "\n"


def write(out: Path, frame: pd.DataFrame, records: list[dict], plan: ParallelServingPlan, command: str,
          load_before: Sequence[float], png: bool = True) -> dict:
    """out/serving.csv (every run), .json (plan, each start's record, summary, reading, command, machine), .md
    and the figure (.html, .png)."""
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / f"{TAG}.csv", index=False)
    results = {"model": plan.model, "levels": list(plan.levels), "waves": plan.waves, "repeats": plan.repeats,
               "rounds": plan.rounds, "prompt_tokens": plan.prompt_tokens, "output_tokens": plan.output_tokens,
               "kv_space_gib": plan.kv_space_gib, "max_model_len": plan.max_model_len, "starts": records,
               "load_average_before": [round(x, 2) for x in load_before],
               "load_average_after": [round(x, 2) for x in os.getloadavg()]}
    return write_summary(out, frame, {"command": command, "machine": machine(), "results": results}, png)


def write_summary(out: Path, frame: pd.DataFrame, result: dict, png: bool = True) -> dict:
    """The summary and the reading of `frame` (the runs) and result's starts, by today's rules, into result and
    out/serving.json, .md and the figure; the command, the machine and the plan stay as measured."""
    layouts = summarize(frame, result["results"]["starts"])
    result["results"] |= {"layouts": layouts, "reading": {lang: reading(layouts, lang) for lang in LANGS}}
    (out / f"{TAG}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    (out / f"{TAG}.md").write_text(markdown(result))
    from kvviz.bench.figures import parallel_serving_figure, save_figure

    save_figure(parallel_serving_figure(frame), out / TAG, png)
    return result


def rewrite(out: Path, png: bool = True) -> dict:
    """out/serving.json, .md and the figure again from out/serving.csv and the starts in out/serving.json."""
    result = json.loads((out / f"{TAG}.json").read_text())
    return write_summary(out, pd.read_csv(out / f"{TAG}.csv"), result, png)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m kvviz.bench.parallel_serving", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny", help="tiny, smollm2-135m-instruct, random:<preset>, a folder")
    p.add_argument("--layouts", nargs="+", default=["tp1", "tp2", "pp2", "dp2"], help="tp2, pp2, dp2, tp2pp2...")
    p.add_argument("--levels", nargs="+", type=int, default=[1, 8], help="requests in flight (closed loop)")
    p.add_argument("--waves", type=int, default=2, help="whole waves of requests a run (at least 8 requests)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each level in one start")
    p.add_argument("--rounds", type=int, default=1, help="starts of every layout, interleaved")
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument("--kv-space-gib", type=int, default=1)
    p.add_argument("--max-model-len", type=int, default=1024)
    p.add_argument("--dummy-weights", action="store_true")
    p.add_argument("--no-png", action="store_true", help="the figure as HTML only")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--rewrite", action="store_true", help="no run: the summary, the reading, the table and the "
                   "figure again from --out's serving.csv and serving.json")
    args = p.parse_args(argv)
    if args.rewrite:
        print(rewrite(args.out, png=not args.no_png)["results"]["reading"]["en"])
        return 0
    plan = ParallelServingPlan(args.model, tuple(parse_layout(x) for x in args.layouts), tuple(args.levels),
                               args.waves, args.repeats, args.rounds, args.prompt_tokens, args.output_tokens,
                               args.kv_space_gib, args.max_model_len, args.dummy_weights)
    load_before = os.getloadavg()
    started = time.perf_counter()
    try:
        frame, records = parallel_serving(plan, Path("results-tmp"))
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (vllm.Stopped): vLLM is stopped, nothing written
        print("interrupted: nothing written", file=sys.stderr)
        return 128 + getattr(exc, "signum", signal.SIGINT)
    result = write(args.out, frame, records, plan, "python -m kvviz.bench.parallel_serving " + " ".join(argv),
                   load_before, png=not args.no_png)
    print(result["results"]["reading"]["en"], f"({time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
