"""`python -m kvviz.bench PART`: the command line over the benchmark parts; each part writes CSV and JSON.

Parts: overhead (1), payoff (2), memory (3), hardware (4), calculator and app (5), gpu (6: parts 1-4 on
CUDA), batch (kvviz's batched engine over B, against the roofline), load, concurrency (many clients on one
app), leaks (memory over many runs), cancel (how soon Stop, a cancelled call or a closed tab frees the device),
serving (vLLM under load, beside vLLM's own benchmark and kvviz's engine; not in `all`, as it needs vLLM's
environment), loadgen (kvviz's load generator against a server of known timings, up to 256 in flight), fast
(the static mode: a preallocated cache and a compiled decode step, beside the plain loops and
model.generate), vllm-dtype (vLLM's CPU build in bf16 against fp32), vllm-worker (its worker in a process of
its own against in the engine core's), figures (plotly HTML and PNG from the results), and all
(every part in turn; with --quick, seconds each, as CI runs it).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from kvviz.bench.common import LESSON_PROMPT, LONG_PROMPT, write_results

RESULTS = Path("results")


def _overhead(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.overhead import overhead, summarize_overhead
    from kvviz.engine.loading import load_model

    if args.quick:
        args.models, args.new_tokens, args.repeats = ["random:smollm2-135m"], 8, 2
    frames, summary = [], {}
    for spec in args.models:
        model, _, dtype = spec.partition("@")
        lm = load_model(model, device=args.device, dtype=dtype or None)
        frame = overhead(lm, args.prompt, args.new_tokens, args.repeats)
        frames.append(frame)
        summary[f"{model}@{lm.dtype_name}"] = summarize_overhead(frame)
    write_results(args.out, "overhead-quick" if args.quick else "overhead", pd.concat(frames), summary, argv)


def _load(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.overhead import load_times

    if args.quick:
        args.models, args.repeats = ["tiny"], 1
    frame = load_times(args.models, args.repeats)
    med = frame.groupby(["model", "mode"])["seconds"].median()
    summary = {"median_seconds": {f"{m} ({mode})": v for (m, mode), v in med.items()}, "repeats": args.repeats}
    write_results(args.out, "load-quick" if args.quick else "load", frame, summary, argv)


def _payoff(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.payoff import fit_payoff, payoff
    from kvviz.engine.loading import load_model

    lm = load_model(args.model)
    prompts = {"short": LESSON_PROMPT} if args.quick else {"short": LESSON_PROMPT, "long": LONG_PROMPT}
    n = 32 if args.quick else args.new_tokens
    frames, summary = [], {}
    for name, prompt in prompts.items():
        rows, prediction = payoff(lm, prompt, n)
        summary[name] = {"prompt_tokens": int(rows["seq_len"].min()), **fit_payoff(rows, prediction)}
        frames.append(rows.assign(model=lm.spec, prompt=name).merge(prediction, on=["index"], suffixes=("", "_pred")))
    write_results(args.out, "payoff-quick" if args.quick else "payoff", pd.concat(frames),
                  {"model": lm.spec, "new_tokens": n, **summary}, argv)


def _memory(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.memory_truth import FULL, QUICK, memory_truth, summarize_memory

    families = QUICK if args.quick else FULL
    if args.only:
        families = tuple(f for f in families if f.preset in args.only or f.model in args.only)
        if not families:
            raise SystemExit(f"--only {' '.join(args.only)}: no such family; choose among the presets and models of "
                             f"{', '.join(f.model or f.preset for f in FULL)}")
    frame = memory_truth(families, args.device)
    write_results(args.out, "memory-quick" if args.quick else "memory", frame, summarize_memory(frame), argv)


def _hardware(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.hardware import hardware_limit, summarize_hardware
    from kvviz.calc.hardware import measure_device

    if args.quick:
        args.models, args.new_tokens, args.repeats = ["tiny"], 8, 1
    # The full run measures the peak with a 4096 matmul: smaller ones understate what a prefill reaches.
    accel = measure_device("cpu", 32, 512, 2) if args.quick else measure_device("cpu", 256, 4096, 5)
    frame = hardware_limit(args.models, accel, args.new_tokens, args.repeats)
    write_results(args.out, "hardware-quick" if args.quick else "hardware", frame,
                  summarize_hardware(frame, accel), argv)


def _batch(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.batch import batch_bench
    from kvviz.calc.hardware import device_accelerator, measure_device
    from kvviz.engine.loading import resolve_device

    if args.quick:
        args.models, args.max_batch, args.prompt_tokens, args.new_tokens, args.repeats = ["tiny"], [4], 16, 8, 1
    device = resolve_device(args.device)
    # A GPU: its preset's figures. A CPU: measured as the hardware part measures it; the full run multiplies
    # 4096 x 4096 matrices for the peak (smaller ones understate what a batch's matmuls reach).
    accel = (device_accelerator(str(device)) if device.type != "cpu" else
             measure_device("cpu", 32, 512, 2) if args.quick else measure_device("cpu", 256, 4096, 5))
    frame, summary = batch_bench(args.models, args.max_batch, args.prompt_tokens, args.new_tokens, args.repeats,
                                 accel, str(device))
    write_results(args.out, "batch-quick" if args.quick else "batch", frame, summary, argv)


def _fast(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    import pandas as pd

    from kvviz.bench.fast import fast_bench, summarize_fast, summarize_profiles, with_stream_share
    from kvviz.calc.hardware import measure_device, stream_read_bandwidth
    from kvviz.engine.loading import resolve_device

    if args.quick:
        args.models, args.new_tokens, args.repeats, args.uncached_repeats = ["tiny@fp32"], 8, 1, 1
    device = resolve_device(args.device)
    # The limit is measured as the hardware part measures it: a matrix-vector product over a large matrix; the
    # physical ceiling beside it, by a plain streaming read.
    mib = 32 if args.quick else 2048 if device.type == "cuda" else 256
    accel = measure_device(str(device), mib, 256, 2 if args.quick else 5)
    read_mib = 64 if args.quick else 512
    stream = stream_read_bandwidth(str(device), read_mib, 2 if args.quick else 5)
    profiles: list | None = [] if args.profile else None

    def read_beside() -> float:  # before each timed run: the ceiling as the run meets it
        return stream_read_bandwidth(str(device), read_mib, 3)

    frame = fast_bench(args.models, args.prompt, args.new_tokens, args.repeats, args.uncached_repeats,
                       accel.bandwidth, str(device), profiles, read_beside)
    frame = with_stream_share(frame, stream)  # each run against the physical ceiling, for the rows and the figure
    tag = "fast-quick" if args.quick else "fast"
    summary = summarize_fast(frame, accel.bandwidth, accel.note, stream)
    if profiles:
        ops = pd.concat([o for o, _ in profiles], ignore_index=True)
        kernels = pd.concat([k for _, k in profiles], ignore_index=True)
        args.out.mkdir(parents=True, exist_ok=True)
        ops.to_csv(args.out / f"{tag}-profile.csv", index=False)
        kernels.to_csv(args.out / f"{tag}-onednn.csv", index=False)
        summary["profile"] = summarize_profiles(ops, kernels)
    write_results(args.out, tag, frame, summary, argv)


def _calculator(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.responsiveness import calculator_latency

    frame = calculator_latency(2 if args.quick else args.repeats)
    ms = frame["seconds"] * 1e3
    write_results(args.out, "calculator-quick" if args.quick else "calculator", frame,
                  {"p50_ms": ms.quantile(0.5), "p95_ms": ms.quantile(0.95), "max_ms": ms.max(), "calls": len(frame)},
                  argv)


def _app(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.responsiveness import app_against_cli

    if args.quick:
        args.new_tokens, args.repeats = 16, 1
    frame = app_against_cli(args.model, args.prompt, args.new_tokens, args.repeats)
    med = frame.groupby("where")["tpot_s"].median()
    write_results(args.out, "app-quick" if args.quick else "app", frame,
                  {"median_tpot_ms": (med * 1e3).to_dict(), "app_tpot_over_cli": med["app"] / med["cli"],
                   "repeats": args.repeats, "model": args.model}, argv)


def _concurrency(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    import shlex

    from kvviz.bench.concurrency import load_test, summarize_load
    from kvviz.ui.serve import running_app

    if args.quick:
        args.clients, args.model, args.new_tokens = 4, "tiny", 8
    with running_app(*shlex.split(args.app_args)) as app:
        jobs, calc = load_test(app.url, args.clients, args.model, args.new_tokens,
                               direct_calculator="--hosted" in args.app_args)
    summary = {"app_args": args.app_args, "model": args.model, "new_tokens": args.new_tokens,
               **summarize_load(jobs, calc)}
    tag = "concurrency-quick" if args.quick else args.tag
    write_results(args.out, tag, jobs, summary, argv)
    calc.to_csv(args.out / f"{tag}-calculator.csv", index=False)


def _leaks(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.leaks import app_generations, summarize_leaks
    from kvviz.ui.serve import running_app

    if args.quick:
        args.runs = 20
    with running_app() as app:
        frame = app_generations(app.url, app.pid, args.runs, args.model, args.new_tokens)
    write_results(args.out, "leaks-quick" if args.quick else "leaks", frame,
                  {"model": args.model, "new_tokens": args.new_tokens, **summarize_leaks(frame, min(20, args.runs))},
                  argv)


def _cancel(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.cancel import release_times, summarize_release
    from kvviz.ui.serve import running_app

    if args.quick:
        args.models, args.repeats, args.new_tokens = ["random:smollm2-135m"], 1, 300
    with running_app() as app:
        frame = release_times(app.url, args.models, args.repeats, args.new_tokens)
    write_results(args.out, "cancel-quick" if args.quick else "cancel", frame,
                  {"repeats": args.repeats, "max_new_tokens": args.new_tokens, "ways": sorted(frame["way"].unique()),
                   **summarize_release(frame)}, argv)


def _gpu(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    import torch

    from kvviz.bench.gpu import run_gpu

    if not args.quick and not torch.cuda.is_available():
        raise SystemExit("python -m kvviz.bench gpu: no CUDA GPU here; --quick runs the same script on the CPU")
    failed = run_gpu(args.out / ("gpu-quick" if args.quick else "gpu"), args.quick, argv)
    if failed:
        raise SystemExit(f"python -m kvviz.bench gpu: part(s) failed, the others' results are written: "
                         f"{', '.join(failed)} (their errors are in gpu-run.json)")


def _serving(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.serving import FULL, QUICK, serving_bench

    frame, summary = serving_bench(QUICK if args.quick else FULL)  # vLLM's log: results-tmp/
    write_results(args.out, "serving-quick" if args.quick else "serving", frame, summary, argv)


def _vllm_dtype(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from dataclasses import replace

    from kvviz.bench.vllm_dtype import FULL, QUICK, dtype_bench

    plan = QUICK if args.quick else replace(FULL, model=args.model, rounds=args.rounds)
    frame, summary = dtype_bench(plan)
    write_results(args.out, "vllm-dtype-quick" if args.quick else "vllm-dtype", frame, summary, argv)


def _vllm_worker(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from dataclasses import replace

    from kvviz.bench.vllm_worker import FULL, QUICK, worker_bench

    plan = QUICK if args.quick else replace(FULL, model=args.model, rounds=args.rounds)
    frame, summary = worker_bench(plan)
    write_results(args.out, "vllm-worker-quick" if args.quick else "vllm-worker", frame, summary, argv)


def _loadgen(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from dataclasses import replace

    from kvviz.bench.loadgen import FULL, QUICK, loadgen_bench

    plan = QUICK if args.quick else replace(FULL, repeats=args.repeats, waves=args.waves, levels=tuple(args.levels))
    frame, summary = loadgen_bench(plan)
    write_results(args.out, "loadgen-quick" if args.quick else "loadgen", frame, summary, argv)


def _simulator(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.simulator import simulator_bench

    out = args.out / "simulator"
    frame, summary = simulator_bench(args.quick, out, args.models)
    tag = "simulator-quick" if args.quick else "simulator"
    write_results(out, tag, frame, summary, argv)
    from kvviz.bench.simulator import markdown_table

    (out / f"{tag}.md").write_text(markdown_table(frame, summary), encoding="utf-8")
    if not args.no_figures:
        from kvviz.bench.figures import write_simulator_figure

        for path in write_simulator_figure(out, tag, png=not args.no_png):
            print(path)


def _figures(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    from kvviz.bench.figures import write_figures

    for path in write_figures(args.out, args.out / "figures", png=not args.no_png, quick=args.quick):
        print(path)


ALL = ("overhead", "load", "payoff", "memory", "hardware", "batch", "fast", "calculator", "app", "concurrency",
       "leaks", "cancel", "loadgen", "gpu")


def _all(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    """Every part in turn with its defaults (or quick settings), then the figures of what they wrote."""
    for part in ALL:
        sub = ["--quick"] if args.quick else []
        if part == "gpu" and not args.quick:
            import torch

            if not torch.cuda.is_available():
                print("all: no CUDA GPU here, part 6 (gpu) skipped", file=sys.stderr)
                continue
        start = time.perf_counter()
        main([part, *sub, "--out", str(args.out)])
        print(f"all: {part} took {time.perf_counter() - start:.1f} s", file=sys.stderr)
    no_png = ["--no-png"] if args.no_png else []
    main(["figures", *sub, "--out", str(args.out), *no_png])
    gpu = args.out / ("gpu-quick" if args.quick else "gpu")
    if gpu.is_dir():  # part 6 writes plain names (overhead.csv...) into its own folder
        main(["figures", "--out", str(gpu), *no_png])


PARTS = {"overhead": _overhead, "load": _load, "payoff": _payoff, "memory": _memory, "hardware": _hardware,
         "batch": _batch, "fast": _fast, "calculator": _calculator, "app": _app, "concurrency": _concurrency,
         "leaks": _leaks, "cancel": _cancel, "gpu": _gpu, "serving": _serving, "loadgen": _loadgen,
         "simulator": _simulator, "vllm-dtype": _vllm_dtype, "vllm-worker": _vllm_worker,
         "figures": _figures, "all": _all}


def _models(*default: str, help_: str | None = None) -> tuple[str, dict]:
    return "--models", {"nargs": "+", "default": list(default), **({"help": help_} if help_ else {})}


def _int(flag: str, default: int, help_: str | None = None) -> tuple[str, dict]:
    return flag, {"type": int, "default": default, **({"help": help_} if help_ else {})}


def _text(flag: str, default: str, help_: str | None = None) -> tuple[str, dict]:
    return flag, {"default": default, **({"help": help_} if help_ else {})}


NO_PNG = ("--no-png", {"action": "store_true", "help": "HTML figures only (PNG needs kaleido and a chromium)"})

# Each part: what it measures, what --quick makes of it, and its own options (flag, add_argument's keywords).
PART_OPTIONS: dict[str, tuple[str, str, list[tuple[str, dict]]]] = {
    "overhead": ("kvviz's loop against model.generate and the lesson's plain loop", "a small twin, 8 tokens, 2 repeats",
                 [_models("random:qwen2.5-0.5b", help_="models as MODEL or MODEL@DTYPE (default random:qwen2.5-0.5b)"),
                  _int("--new-tokens", 64), _int("--repeats", 5), _text("--prompt", LESSON_PROMPT),
                  _text("--device", "auto")]),
    "load": ("time to load models (twins: against default weight initialisation)", "tiny, once",
             [_models("tiny", "random:qwen2.5-0.5b"), _int("--repeats", 3)]),
    "payoff": ("cached against uncached over new-token counts and two prompt lengths",
               "32 tokens, the short prompt only", [_text("--model", "tiny"), _int("--new-tokens", 512)]),
    "memory": ("measured KV bytes against the prediction, a twin of each attention family",
               "one or two layers per family, short prompts",
               [_text("--device", "auto"),
                ("--only", {"nargs": "+", "default": None, "help": "only the families of these presets or models"})]),
    "hardware": ("measured bandwidth and matmul peak, and how close models run to them",
                 "small measurement, tiny only, 8 tokens, 1 repeat",
                 [_models("tiny", "random:qwen2.5-0.5b"), _int("--new-tokens", 64), _int("--repeats", 3)]),
    "batch": ("kvviz's batched engine swept over B = 1, 2, 4, ..., each batch beside the roofline's prediction",
              "tiny, B up to 4, 16 prompt tokens, 8 new ones",
              [_models("tiny", "random:qwen2.5-0.5b", help_="models as MODEL or MODEL@DTYPE"),
               ("--max-batch", {"nargs": "+", "type": int, "default": [128, 32],
                                "help": "largest batch: one number, or one per model (default 128 32)"}),
               _int("--prompt-tokens", 32), _int("--new-tokens", 16),
               _int("--repeats", 2, "runs per batch size after its warm-up (default 2)"),
               _text("--device", "auto")]),
    "fast": ("the static mode (a preallocated cache, a compiled decode step) beside the cached and uncached loops and "
             "model.generate: tokens/s, bandwidth against the measured limit, compile time",
             "tiny in fp32, 8 tokens, 1 round",
             [_models("tiny@fp32", "tiny@bf16", "random:qwen2.5-0.5b@fp32", "random:qwen2.5-0.5b@bf16",
                      "smollm2-135m-instruct@fp32", help_="models as MODEL@DTYPE"),
              _int("--new-tokens", 64), _int("--repeats", 3, "timed rounds after the warm-ups (default 3)"),
              _int("--uncached-repeats", 1, "rounds that also run the uncached loop, which is slow (default 1)"),
              _text("--prompt", LESSON_PROMPT), _text("--device", "auto"),
              ("--profile", {"action": "store_true",
                             "help": "also profile a decode step of the cached and static modes per model: the "
                                     "top operators and the oneDNN kernels (<out>/fast-profile.csv, "
                                     "fast-onednn.csv)"})]),
    "calculator": ("latency of the calculator's handler, every preset", "2 calls per preset",
                   [_int("--repeats", 20)]),
    "app": ("decode speed in the app against the CLI, same generation", "16 tokens, 1 repeat",
            [_text("--model", "tiny"), _text("--prompt", "What is a package?"), _int("--new-tokens", 128),
             _int("--repeats", 5)]),
    "concurrency": ("clients at once mixing generations, comparisons and calculator calls on one app",
                    "4 clients, 8 tokens",
                    [_int("--clients", 8),
                     _text("--model", "random:smollm2-135m",
                           "default: a twin slow enough (about 55 ms a token here) to keep the device busy"),
                     _int("--new-tokens", 32),
                     _text("--app-args", "", 'options for app.py, e.g. "--hosted --queue-size 4"'),
                     _text("--tag", "concurrency", "name of the result files (default concurrency)")]),
    "leaks": ("consecutive generations through the app, its memory and its worker's sampled", "20 runs",
              [_int("--runs", 200), _text("--model", "tiny"), _int("--new-tokens", 8)]),
    "cancel": ("time from Stop, a cancelled call or a closed tab to the next request starting, beside TPOT",
               "one repeat on the smallest twin, 300-token runs",
               [_models("random:smollm2-135m", "random:qwen2.5-0.5b",
                        help_="random twins for the long run (they never meet their end of sequence)"),
                _int("--repeats", 3), _int("--new-tokens", 1000, "length the long run asks for")]),
    "gpu": ("parts 1-4 on CUDA with Qwen2.5-0.5B and Llama-3-8B twins in bf16 (into OUT/gpu)",
            "the same script on the CPU with a small twin (into OUT/gpu-quick)", []),
    "serving": ("vLLM serving tiny: kvviz's sweep, vLLM's own benchmark beside it, kvviz's engine one at a time "
                "(needs `python -m kvviz.serving setup`)",
                "levels 1-2, 32 tokens, the comparison at 2 in flight", []),
    "loadgen": ("kvviz's load generator against a server of known timings (first token 300 ms, a token every 25 ms, "
                "32 tokens) at 1, 8, 32, 128 and 256 in flight: TTFT and throughput against the construction, the "
                "client's own cost", "levels 1, 8, 32, two waves, one repeat",
                [_int("--repeats", 5, "interleaved repeats of every level (default 5)"),
                 _int("--waves", 4, "whole waves of requests per level (default 4)"),
                 ("--levels", {"nargs": "+", "type": int, "default": [1, 8, 32, 128, 256],
                               "help": "requests in flight (default 1 8 32 128 256)"})]),
    "simulator": ("kvviz.sim against vLLM: calibrate per model, predict held-out loads (closed and open, two mixes, "
                  "a shared prefix), run them on vLLM, the error per point and the MAPE per metric, the preemption "
                  "onset on a small KV pool (into OUT/simulator; needs `python -m kvviz.serving setup`)",
                  "tiny only, three small calibration loads and three held-out ones, one vLLM start",
                  [("--models", {"nargs": "+", "default": None,
                                 "help": "of tiny and smollm2-135m-instruct, these only (default both)"}),
                   NO_PNG, ("--no-figures", {"action": "store_true", "help": "no figure"})]),
    "vllm-dtype": ("vLLM's CPU build in bf16 against fp32 on this machine: TTFT, TPOT and tokens/s of three loads, "
                   "a start per dtype per round, rounds interleaved (needs `python -m kvviz.serving setup`)",
                   "tiny, two small loads, one round",
                   [_text("--model", "smollm2-135m-instruct"), _int("--rounds", 2)]),
    "vllm-worker": ("vLLM's CPU build with its worker in a process of its own against in the engine core's "
                    "process: TTFT, TPOT and tokens/s of seven loads, a start each way per round, rounds interleaved "
                    "(needs `python -m kvviz.serving setup`)",
                    "tiny, one small load, one round",
                    [_text("--model", "tiny"), _int("--rounds", 4)]),
    "figures": ("plotly figures (HTML and PNG) of the results in OUT, into OUT/figures",
                "draw the quick runs' results (PART-quick.csv)", [NO_PNG]),
    "all": ("every part in turn, then the figures", "every part in its quick mode (CI)", [NO_PNG]),
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kvviz.bench", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="part", required=True)
    for name, (help_, quick, options) in PART_OPTIONS.items():
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--quick", action="store_true", help=quick)
        sp.add_argument("--out", type=Path, default=RESULTS, help="folder for the results (default results/)")
        for flag, keywords in options:
            sp.add_argument(flag, **keywords)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from kvviz.serving.vllm import Stopped

    args = parser().parse_args(argv)
    try:
        PARTS[args.part](args, argv)
    except Stopped as exc:  # SIGTERM or SIGHUP while the serving part ran vLLM: it is stopped
        print(f"interrupted ({exc})", file=sys.stderr)
        return 128 + exc.signum
    return 0


if __name__ == "__main__":
    sys.exit(main())
