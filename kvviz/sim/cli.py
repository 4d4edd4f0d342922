"""`python -m kvviz.sim`: predict a serving run on the simulated vLLM V1 scheduler, and fit a step-time model.

  predict   a workload (--concurrency N: closed loop; --rate R: open loop, Poisson unless --constant; --workload
            FILE.csv: rows of prompt_tokens, output_tokens, arrival_s, sent at their arrivals or, with
            --concurrency, in a closed loop) on a KV cache of --num-blocks blocks (or
            those kvviz's memory model gives --model DIR in --kv-space-gib GiB, as vLLM's CPU build makes them), with a
            step-time model from --calibration FILE or --coefficients a,b,c,d[,e]; prints the run's statistics, or
            --json; --trace FILE.csv writes the step trace
  fit       a step-time calibration from a CSV of measured steps (prefill_tokens, decode_seqs, attention_pairs,
            seconds), written as JSON, with its residuals
  calibrate start vLLM (its own environment) on --model, run a few closed loops with kvviz's load generator, fit
            the step time to them (kvviz.sim.calibrate) and write the calibration (--out); predict refuses it for
            another model or device
  validate  calibrate, then predict held-out loads and run them on vLLM: the error per point and the MAPE per
            metric (kvviz.sim.validate); --quick: a small plan on tiny (one vLLM start)
Every subcommand takes --lang en|zh (default: the locale's); its result lines and errors in that language
(kvviz/i18n/sim.py). JSON output stays English.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

from kvviz.base.errors import InputError, KvvizError
from kvviz.i18n import LANGS, asked_lang, t
from kvviz.i18n.errors import translate
from kvviz.serving.stats import Distribution, Slo
from kvviz.sim import plan_cli, step_time
from kvviz.sim.calibrate import as_client, check_model_config, device_id, handoff, request_overhead
from kvviz.sim.capacity import groups_text, kv_pool
from kvviz.sim.scheduler import (
    CPU_BLOCK_SIZE,
    CPU_MAX_NUM_BATCHED_TOKENS,
    CPU_MAX_NUM_SEQS,
    FULL_ATTENTION,
    SchedulerConfig,
)
from kvviz.sim.simulate import Limits, SimResult, simulate
from kvviz.sim.step_time import StepContents
from kvviz.sim.workload import Workload, cell, closed_loop, from_csv, open_loop, read_csv

USAGE_ERROR = 2
FIT_COLUMNS = ("prefill_tokens", "decode_seqs", "attention_pairs", "seconds")


def _workload_args(p: argparse.ArgumentParser) -> None:
    loop = p.add_mutually_exclusive_group()
    loop.add_argument("--concurrency", type=int, help="closed loop: this many requests in the engine at once")
    loop.add_argument("--rate", type=float, help="open loop: requests per second (Poisson unless --constant)")
    p.add_argument("--constant", action="store_true", help="open loop: evenly spaced arrivals")
    p.add_argument("--seed", type=int, default=0, help="the Poisson arrivals' seed (default 0)")
    p.add_argument("--workload", type=Path, help="a CSV of prompt_tokens, output_tokens, arrival_s rows: an open "
                   "loop at the file's arrivals, or with --concurrency a closed loop of its lengths")
    p.add_argument("--requests", type=int, default=100, help="requests to send (default 100; without --workload)")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--prefix-tokens", type=int, default=0, help="tokens every prompt starts with, the same in all")


def _engine_args(p: argparse.ArgumentParser) -> None:
    kv = p.add_mutually_exclusive_group(required=True)
    kv.add_argument("--num-blocks", type=int, help="KV cache capacity in blocks")
    kv.add_argument("--model", type=Path, help="a model folder: the capacity from kvviz's memory model, with "
                    "--kv-space-gib")
    p.add_argument("--kv-space-gib", type=float, default=1.0, help="vLLM's KV space with --model "
                   "(VLLM_CPU_KVCACHE_SPACE; default 1)")
    p.add_argument("--block-size", type=int, default=CPU_BLOCK_SIZE, help=f"default {CPU_BLOCK_SIZE} (vLLM, CPU)")
    p.add_argument("--max-num-seqs", type=int, default=CPU_MAX_NUM_SEQS)
    p.add_argument("--max-num-batched-tokens", type=int, default=CPU_MAX_NUM_BATCHED_TOKENS)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--no-chunked-prefill", action="store_true")
    p.add_argument("--no-prefix-caching", action="store_true")
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--calibration", type=Path, help="a step-time calibration (JSON, from `calibrate` or `fit`)")
    model.add_argument("--coefficients", help="a,b,c,d[,e]: t = a + b*prefill_tokens + c*decode_seqs"
                       " + d*attention_pairs + e*prompt_cross s (e 0 when left out)")
    p.add_argument("--slo-ttft", type=float, default=Slo().ttft_s, help="goodput's TTFT limit, seconds")
    p.add_argument("--slo-tpot", type=float, default=Slo().tpot_s, help="goodput's TPOT limit, seconds")
    p.add_argument("--max-wall-s", type=float, default=Limits().max_wall_s, help="real seconds at most")
    p.add_argument("--max-steps", type=int, default=Limits().max_steps)
    p.add_argument("--trace", type=Path, help="write the per-step trace to this CSV")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kvviz.sim", description=__doc__.split("\n\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    predict = commands.add_parser("predict", help="simulate a workload and print its statistics")
    _workload_args(predict)
    _engine_args(predict)
    fit = commands.add_parser("fit", help="fit a step-time calibration from measured steps")
    fit.add_argument("rows", type=Path, help="CSV: " + ", ".join(FIT_COLUMNS))
    fit.add_argument("--out", type=Path, required=True, help="the calibration JSON to write")
    fit.add_argument("--model", help="the model the steps were measured on (kept in the file)")
    fit.add_argument("--device", help="the device they were measured on (kept in the file)")
    for command in (predict, fit, _calibrate_parser(commands), _validate_parser(commands)):
        command.add_argument("--json", action="store_true", help="print JSON (English keys)")
        command.add_argument("--lang", choices=LANGS, default=None, help="language of messages: en or zh")
    plan_cli.add_to(commands)  # `plan`: capacity under an SLO (kvviz/sim/plan_cli.py); it sets args.handler
    return p


def _calibrate_parser(commands) -> argparse.ArgumentParser:
    p = commands.add_parser("calibrate", help="measure vLLM on this machine and fit the step-time model to it")
    p.add_argument("--model", default="tiny", help="tiny, smollm2-135m-instruct or a model folder (default tiny)")
    p.add_argument("--max-model-len", type=int, default=1024)
    p.add_argument("--out", type=Path, help="the calibration JSON (default calibration-<model>.json)")
    p.add_argument("--quick", action="store_true", help="three small loads instead of six")
    return p


def _validate_parser(commands) -> argparse.ArgumentParser:
    p = commands.add_parser("validate", help="calibrate, predict held-out loads, run them on vLLM, print the errors")
    p.add_argument("--quick", action="store_true", help="a small plan on tiny, one vLLM start")
    p.add_argument("--models", nargs="+", default=None,
                   help="of the full plan's models (tiny, smollm2-135m-instruct), these only")
    p.add_argument("--repeat", action="store_true",
                   help="run every held-out load twice: how far the measurement itself moves")
    p.add_argument("--engine-steps", action="store_true",
                   help="vLLM logs its every step: each load's steps, median decode step and stalls beside the "
                        "simulator's (the logging slows the engine a little)")
    return p


def workload_of(args: argparse.Namespace) -> Workload:
    if args.workload and args.rate is not None:
        raise InputError("sim.rate_with_file")
    if args.workload:
        return from_csv(args.workload, args.concurrency, args.prefix_tokens)
    if args.concurrency is None and args.rate is None:
        raise InputError("sim.no_loop")
    if args.concurrency is not None:
        return closed_loop(args.requests, args.concurrency, args.prompt_tokens, args.output_tokens,
                           args.prefix_tokens)
    return open_loop(args.requests, args.rate, args.prompt_tokens, args.output_tokens, args.prefix_tokens,
                     poisson=not args.constant, seed=args.seed)


def config_of(args: argparse.Namespace) -> SchedulerConfig:
    config = SchedulerConfig(num_blocks=args.num_blocks, block_size=args.block_size,
                             max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                             max_model_len=args.max_model_len, chunked_prefill=not args.no_chunked_prefill,
                             prefix_caching=not args.no_prefix_caching)
    if args.model is None:
        return config
    pool = kv_pool(args.model, args.kv_space_gib, args.block_size, args.max_model_len)
    return replace(config, num_blocks=pool.num_blocks, groups=pool.groups)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def report_lines(result: SimResult, coefficients: tuple[float, ...], lang: str = "en") -> list[str]:
    s, trace = result.stats, result.trace
    a, b, c, d, e = coefficients
    lines = [t("sim_cli.header", lang, completed=s.completed, requests=s.requests, duration=s.duration_s,
               steps=len(trace), a=a, b=b, c=c, d=d, e=e),
             t("sim_cli.throughput", lang, tokens_per_s=s.output_tokens_per_s, requests_per_s=s.requests_per_s,
               goodput=s.goodput_requests_per_s, slo_ttft=s.slo.ttft_s, slo_tpot=s.slo.tpot_s)]
    for name, dist in (("TTFT", s.ttft), ("TPOT", s.tpot), ("ITL", s.itl), ("E2E", s.e2e)):
        lines.append(_latency_line(name, dist, lang))
    lines.append(t("sim_cli.kv", lang, peak=max((x.kv_blocks_used for x in trace), default=0),
                   capacity=result.kv_blocks, preemptions=sum(x.preemptions for x in trace),
                   cached=sum(x.cached_tokens for x in trace), running=max((x.running for x in trace), default=0),
                   waiting=max((x.waiting for x in trace), default=0)))
    if result.stopped:
        lines.append(t("sim_cli.stopped", lang, why=translate(result.stopped, lang)))
    return lines


def _latency_line(name: str, dist: Distribution, lang: str) -> str:
    return t("sim_cli.latency", lang, name=name, mean=_ms(dist.mean), p50=_ms(dist.p50), p90=_ms(dist.p90),
             p99=_ms(dist.p99))


def write_trace(result: SimResult, path: Path) -> None:
    rows = [asdict(step) for step in result.trace]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["index"])
        writer.writeheader()
        writer.writerows(rows)


def step_model(args: argparse.Namespace) -> tuple[step_time.LinearStepTime, float, float]:
    """The step-time model, the request overhead (seconds on each TTFT and E2E) and the front end's handoff
    (kvviz.sim.simulate), both 0 unless a calibration states them. A calibration made for another model (its name,
    or its config.json) or another device is refused."""
    if not args.calibration:
        return step_time.parse_coefficients(args.coefficients), 0.0, 0.0
    model = step_time.load(args.calibration, model=args.model.name if args.model else None, device=device_id()).step
    if args.model:
        check_model_config(args.calibration, args.model)
    return model, request_overhead(args.calibration), handoff(args.calibration)


def predict(args: argparse.Namespace) -> None:
    model, overhead, handed = step_model(args)
    limits = Limits(max_steps=args.max_steps, max_wall_s=args.max_wall_s)
    workload = workload_of(args)
    config = config_of(args)
    result = simulate(workload, config, model, limits, Slo(args.slo_ttft, args.slo_tpot), handoff_s=handed,
                      return_s=overhead)
    if overhead:
        result = replace(result, stats=as_client(result, overhead, workload.rate))
    if args.trace:
        write_trace(result, args.trace)
    if args.json:
        print(json.dumps({"stats": result.stats.flat(), "stopped": result.stopped,
                          "coefficients": dict(zip(step_time.NAMES, model.coefficients(), strict=True)),
                          "kv_blocks": result.kv_blocks, "kv_groups": [asdict(g) for g in config.groups],
                          "steps": len(result.trace), "preemptions": sum(x.preemptions for x in result.trace)},
                         indent=2))
        return
    print("\n".join(report_lines(result, model.coefficients(), args.lang)))
    if config.groups != FULL_ATTENTION:
        print(t("sim_cli.groups", args.lang, groups=groups_text(config.groups, args.lang)))
    if args.trace:
        print(t("sim_cli.trace", args.lang, path=args.trace))


def fit_rows(path: Path) -> list[tuple[StepContents, float]]:
    rows = read_csv(path)
    missing = [name for name in FIT_COLUMNS if name not in rows[0]]
    if missing:
        raise InputError("sim.csv_columns", path=str(path), missing=", ".join(missing))
    return [(StepContents(*(int(cell(path, line, row, name, 0)) for name in FIT_COLUMNS[:3])),
             cell(path, line, row, "seconds", None)) for line, row in enumerate(rows, 2)]


def fit(args: argparse.Namespace) -> None:
    calibration = step_time.fit(fit_rows(args.rows))
    calibration = step_time.Calibration(calibration.step, args.model, args.device, calibration.fit)
    step_time.save(calibration, args.out)
    if args.json:
        print(json.dumps(step_time.fit_record(calibration, args.out), indent=2))
        return
    s, f = calibration.step, calibration.fit
    print(t("sim_cli.fit", args.lang, rows=f.rows, a=s.a, b=s.b, c=s.c, d=s.d, e=s.e, rms=f.residual_rms_s,
            max=f.residual_max_s))
    print(t("sim_cli.saved", args.lang, path=args.out))


def calibrate_command(args: argparse.Namespace) -> None:
    """Start vLLM on the model, run the calibration loads, fit, write the file, say what was fitted."""
    from kvviz.serving.vllm import VENV
    from kvviz.sim import calibrate

    out = args.out or Path(f"calibration-{Path(args.model).name}.json")
    loads = calibrate.QUICK_CALIBRATION if args.quick else calibrate.CALIBRATION
    say = progress(args.lang)
    with calibrate.serving(args.model, args.max_model_len) as served:
        say("sim_cli.v_ready", model=served.engine.model_name, blocks=served.engine.num_blocks,
            size=served.engine.block_size)
        calibrate.warm_up(served)
        fitted, runs = calibrate.calibrate(served, loads, say)
        data = calibrate.save(out, fitted, served.engine, runs, VENV)
    if args.json:
        print(json.dumps(data | {"path": str(out)}, indent=2))
        return
    print(t("sim_cli.calibrated", args.lang, model=data["model"], device=data["device"], loads=len(runs),
            vllm=data["device_info"]["vllm_version"], blocks=served.engine.num_blocks))
    print("\n".join(fit_lines(fitted, args.lang)))
    print(t("sim_cli.saved", args.lang, path=out))


def fit_lines(fitted, lang: str) -> list[str]:
    """What a calibration's fit says: its coefficients and residuals, the rows set aside as stalls, the clock when it
    was vLLM's own, the loads left out as paced by the front end, the request overhead and handoff."""
    from kvviz.sim import calibrate

    s, f = fitted.step, fitted.fit
    lines = [t("sim_cli.fit", lang, rows=f.rows, a=s.a, b=s.b, c=s.c, d=s.d, e=s.e, rms=f.residual_rms_s,
               max=f.residual_max_s)]
    if f.set_aside:
        lines.append(t("sim_cli.set_aside", lang, n=f.set_aside, ratio=calibrate.STALL_RATIO))
    if fitted.clock == calibrate.ENGINE_CLOCK:
        lines.append(t("sim_cli.engine_clock", lang))
    elif clocked := [load for load, row in fitted.residuals_by_load.items() if row.get("engine_clock")]:
        lines.append(t("sim_cli.engine_clock_loads", lang, n=len(clocked), loads="; ".join(clocked)))
    if paced := [load for load, row in fitted.residuals_by_load.items()
                 if row.get("front_end_paced") and not row.get("kept") and not row.get("engine_clock")]:
        lines.append(t("sim_cli.paced_out", lang, n=len(paced), loads="; ".join(paced)))
    if fitted.front_alone_s is None:
        lines.append(t("sim_cli.overhead", lang, ms=fitted.request_overhead_s * 1000,
                       handoff_ms=fitted.handoff_s * 1000))
    else:
        lines.append(t("sim_cli.overhead_alone", lang, ms=fitted.request_overhead_s * 1000,
                       http_ms=(fitted.request_overhead_s - fitted.front_alone_s) * 1000,
                       alone_ms=fitted.front_alone_s * 1000, handoff_ms=fitted.handoff_s * 1000))
    return lines


def progress(lang: str):
    """calibrate's and validate's progress lines, in the language asked, on stderr."""
    def say(key: str, **fields) -> None:
        print(t(key, lang, **fields), file=sys.stderr, flush=True)
    return say


def validate_command(args: argparse.Namespace) -> None:
    """Run the validation plan and print every held-out point's errors and the MAPE per metric."""
    from kvviz.sim import validate

    plans = validate.QUICK if args.quick else tuple(
        p for p in validate.FULL if not args.models or p.name in args.models)
    results = [validate.validate_model(plan, say=progress(args.lang), repeat=args.repeat,
                                       engine_steps=args.engine_steps)
               for plan in plans]
    summary = validate.summary(results)
    if args.json:  # with the machine it was measured on, as every benchmark result is
        from kvviz.calc.machine import machine

        print(json.dumps({"machine": machine()} | summary, indent=2))
        return
    for row in summary["points"]:
        print(t("sim_cli.point", args.lang, **validate.percent_row(row)))
        if row["engine_steps"] is not None:
            print(t("sim_cli.steps", args.lang, steps=row["engine_steps"], predicted=row["predicted_steps"],
                    decode_ms=1e3 * (row["engine_decode_median_s"] or 0),
                    predicted_ms=1e3 * row["predicted_step_median_s"],
                    stalls="-" if row["engine_stall_share"] is None else f"{100 * row['engine_stall_share']:.0f}%"))
    for model, errors in summary["mape"].items():
        print(t("sim_cli.mape", args.lang, model=model, points=summary["held_out_points"][model],
                **validate.percent(errors)))
    for model, moved in summary["repeatability"].items():
        if moved["points"]:
            print(t("sim_cli.repeat", args.lang, model=model, points=moved["points"],
                    **validate.percent({n: moved[n] for n in validate.METRICS})))
    for model, split in summary["tpot_split"].items():
        if split["points"]:
            print(t("sim_cli.tpot_split", args.lang, model=model, points=split["points"],
                    **validate.percent({n: split[n] for n in validate.SPLIT})))
    for model, onset in summary["preemption_onset"].items():
        print(t("sim_cli.onset", args.lang, model=model, measured=onset["measured"], predicted=onset["predicted"]))
        if onset.get("predicted_as_full_attention") is not None:
            print(t("sim_cli.onset_as_full", args.lang, model=model, predicted=onset["predicted_as_full_attention"]))


COMMANDS = {"predict": predict, "fit": fit, "calibrate": calibrate_command, "validate": validate_command}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    args.lang = args.lang or asked_lang(argv)
    try:
        (getattr(args, "handler", None) or COMMANDS[args.command])(args)
    except (ValueError, KvvizError) as exc:  # bad input, or vLLM that would not start
        print(t("sim_cli.error", args.lang, message=translate(exc, args.lang)), file=sys.stderr)
        return USAGE_ERROR
    return 0
