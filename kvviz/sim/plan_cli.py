"""`python -m kvviz.sim plan`: capacity under an SLO (kvviz.sim.plan), its arguments and its printed answer.

  plan   --model PRESET|DIR and either --gpu PRESET (the roofline lower bound on tp × pp GPUs; the smallest tp that
         fits unless --tp) or --calibration FILE (a fitted step time of this machine; KV blocks from the model
         folder in --kv-space-gib GiB, or --num-blocks); a workload (--prompt-tokens, --output-tokens,
         --prefix-tokens, --requests per point, Poisson unless --constant; or --workload FILE, its rows at each
         rate tried); an SLO (--ttft seconds at
         --ttft-percentile, --tpot seconds at --tpot-percentile); --target-rate and --price per GPU-hour. Prints
         the highest rate one replica holds, the knee, replicas and GPUs for the target, cost, and how each was
         obtained (a roofline lower bound or a calibrated fit); with --band PCT (10 by default on a calibration)
         the highest rate again with every step that much slower and faster; --json for a script.
Its texts are in kvviz/i18n/sim.py (sim_plan.*). cli.py adds this subcommand and calls `handler`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.inputs import number
from kvviz.base.units import fmt_pair
from kvviz.calc.hardware import ACCELERATORS
from kvviz.i18n import LANGS, t
from kvviz.i18n.errors import translate
from kvviz.sim.calibrate import made_elsewhere
from kvviz.sim.capacity import groups_text
from kvviz.sim.plan import (
    CALIBRATED,
    DEFAULT_BAND,
    HOW,
    MAX_BAND,
    Engine,
    Plan,
    Point,
    Search,
    Shape,
    SloLimits,
    architecture_of,
    calibrated_engine,
    check_target_and_price,
    gpu_engine,
    plan,
)
from kvviz.sim.scheduler import FULL_ATTENTION

_OVERRIDES = ("max_num_seqs", "max_num_batched_tokens", "block_size", "max_model_len")


def add_to(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("plan", help="the highest request rate one replica holds under an SLO, replicas, cost")
    p.add_argument("--model", required=True, help="a calculator preset (llama-3.1-8b, ...) or a model folder")
    device = p.add_mutually_exclusive_group(required=True)
    device.add_argument("--gpu", help="a GPU preset: " + ", ".join(ACCELERATORS) + " (roofline lower bound)")
    device.add_argument("--calibration", help="a step-time calibration of this machine (JSON, from `fit`)")
    p.add_argument("--tp", type=int, help="tensor parallel size (default: the smallest that fits)")
    p.add_argument("--pp", type=int, default=1, help="pipeline parallel size (default 1)")
    p.add_argument("--num-blocks", type=int, help="with --calibration: KV capacity in blocks")
    p.add_argument("--kv-space-gib", type=float, default=1.0, help="with --calibration: vLLM's KV space (GiB)")
    for name in _OVERRIDES:
        p.add_argument("--" + name.replace("_", "-"), type=int, help="default: vLLM's for the device "
                       "(max_model_len: the model's context)")
    p.add_argument("--prompt-tokens", type=int, default=Shape.prompt_tokens)
    p.add_argument("--output-tokens", type=int, default=Shape.output_tokens)
    p.add_argument("--prefix-tokens", type=int, default=0, help="tokens every prompt starts with, the same in all")
    p.add_argument("--requests", type=int, default=Shape.requests, help="requests each simulated rate sends")
    p.add_argument("--workload", type=Path, help="a CSV of prompt_tokens, output_tokens (and arrival_s) rows: "
                   "every rate tried sends its requests, at its arrival times scaled to that rate (without "
                   "arrival_s: Poisson or --constant); replaces --prompt-tokens, --output-tokens and --requests")
    p.add_argument("--constant", action="store_true", help="evenly spaced arrivals (default: Poisson)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ttft", type=float, default=SloLimits.ttft_s, help="TTFT limit, seconds")
    p.add_argument("--ttft-percentile", type=float, default=SloLimits.ttft_percentile, help="in (0, 100]")
    p.add_argument("--tpot", type=float, default=SloLimits.tpot_s, help="TPOT limit, seconds")
    p.add_argument("--tpot-percentile", type=float, default=SloLimits.tpot_percentile, help="in (0, 100]")
    p.add_argument("--target-rate", type=float, help="requests/s the deployment must hold")
    p.add_argument("--price", type=float, help="price per GPU-hour (per machine-hour with --calibration)")
    p.add_argument("--resolution", type=float, default=Search.resolution, help="relative (default 0.02)")
    p.add_argument("--max-points", type=int, default=Search.max_points)
    p.add_argument("--max-wall-s", type=float, default=Search.max_wall_s, help="real seconds at most")
    p.add_argument("--band", type=float, help="percent: the answer again with every step that much slower and "
                   "faster (default 10 with --calibration, none with --gpu; 0: none)")
    p.add_argument("--json", action="store_true", help="print JSON (English keys)")
    p.add_argument("--lang", choices=LANGS, default=None, help="language of messages: en or zh")
    p.set_defaults(handler=run)


def _engine(args: argparse.Namespace) -> Engine:
    config = {k: getattr(args, k) for k in _OVERRIDES if getattr(args, k) is not None}
    if args.calibration:
        folder = Path(args.model) if (Path(args.model) / "config.json").is_file() else None
        if "max_model_len" not in config and folder is not None:
            config["max_model_len"] = architecture_of(folder).max_position_embeddings or 2048
        return calibrated_engine(Path(args.calibration), folder, args.num_blocks, args.kv_space_gib, config)
    key = args.gpu.strip().lower()
    if key not in ACCELERATORS:
        raise InputError("input.unknown_choice", name="GPU", value=repr(args.gpu), choices=", ".join(ACCELERATORS))
    length = config.pop("max_model_len", None)
    return gpu_engine(architecture_of(args.model), ACCELERATORS[key], args.tp, args.pp, length, config)


def run(args: argparse.Namespace) -> None:
    # The quick checks first: the engine's sizing counts the model's parameters, which takes seconds.
    slo = SloLimits(args.ttft, args.tpot, args.ttft_percentile, args.tpot_percentile)
    if args.workload:
        shape = Shape.from_file(args.workload, args.prefix_tokens, not args.constant, args.seed)
    else:
        shape = Shape(args.prompt_tokens, args.output_tokens, args.prefix_tokens, not args.constant, args.seed,
                      args.requests)
    search = Search(args.resolution, args.max_points, args.max_wall_s)
    check_target_and_price(args.target_rate, args.price)
    band = (100 * DEFAULT_BAND if args.calibration else 0.0) if args.band is None else args.band
    number(band, "band (%)", 0.0, 100 * MAX_BAND)
    found = plan(_engine(args), slo, shape, search, args.target_rate, args.price,
                 on_point=lambda point: print(progress_line(point, args.lang), file=sys.stderr, flush=True),
                 band=band / 100 if band else None)
    print(json.dumps(as_dict(found), indent=2) if args.json else "\n".join(lines(found, args.model, args.lang)))


def as_dict(p: Plan) -> dict:
    e = p.engine
    return {"how": HOW[e.how], "source": e.source, "device": e.device, "tp": e.tp, "pp": e.pp,
            "engine": asdict(e.config), "slo": asdict(p.slo), "workload": p.shape.described(),
            "knee": asdict(p.knee),
            "max_rate_per_s": p.max_rate, "next_rate_per_s": p.next_rate, "resolution": p.resolution,
            "knee_bound": p.max_rate > 0 and p.next_rate is None and p.stopped is None,
            "target_rate_per_s": p.target_rate, "replicas": p.replicas, "gpus_per_replica": e.gpus, "gpus": p.gpus,
            "cost": asdict(p.cost) if p.cost else None, "band": asdict(p.band) if p.band else None,
            "points": [asdict(x) for x in p.points],
            "stopped": str(p.stopped) if p.stopped else None}


def progress_line(point: Point, lang: str | None = "en") -> str:
    """One rate judged, as the search goes (on stderr: --json's output stays JSON)."""
    return t("sim_plan.progress", lang, rate=point.rate, held=t("sim_plan.held" if point.held else
                                                                    "sim_plan.not_held", lang),
             ttft=_ms(point.ttft_s), tpot=_ms(point.tpot_s))


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def lines(p: Plan, model: str, lang: str = "en") -> list[str]:
    e, s, c = p.engine, p.slo, p.engine.config
    if e.how == CALIBRATED:
        out = [t("sim_plan.how_calibrated", lang, model=model, path=e.source, device=e.device)]
        here = made_elsewhere(e.device)
        if here:
            out.append(t("sim_plan.elsewhere", lang, there=e.device, here=here))
    else:
        out = [t("sim_plan.how_roofline", lang, model=model, gpu=e.source, tp=e.tp, pp=e.pp)]
    arrivals = t("sim_plan.poisson" if p.shape.poisson else "sim_plan.constant", lang)
    when = t("sim_plan.scaled", lang) if p.shape.timed else t("sim_plan.untimed", lang, arrivals=arrivals)
    workload = (t("sim_plan.workload_file", lang, path=p.shape.source, requests=p.shape.requests, arrivals=when,
                  prompt=p.shape.prompt_tokens, output=p.shape.output_tokens, prefix=p.shape.prefix_tokens)
                if p.shape.source else
                t("sim_plan.workload", lang, arrivals=arrivals, prompt=p.shape.prompt_tokens,
                  output=p.shape.output_tokens, prefix=p.shape.prefix_tokens, requests=p.shape.requests))
    out += [t("sim_plan.engine", lang, blocks=c.num_blocks, block=c.block_size, seqs=c.max_num_seqs,
              tokens=c.max_num_batched_tokens, length=c.max_model_len)]
    if c.groups != FULL_ATTENTION:
        out.append(t("sim_cli.groups", lang, groups=groups_text(c.groups, lang)))
    out += [workload,
            t("sim_plan.slo", lang, ttft_q=s.ttft_percentile, ttft=s.ttft_s, tpot_q=s.tpot_percentile,
              tpot=_ms(s.tpot_s)),
            t("sim_plan.knee", lang, rate=p.knee.requests_per_s, tokens=p.knee.output_tokens_per_s,
              preemptions=p.knee.preemptions)]
    out.append(_answer(p, lang))
    if p.band is not None:
        out.append(t("sim_plan.band", lang, pct=100 * p.band.fraction, slower=p.band.slower_max_rate,
                     faster=p.band.faster_max_rate))
    if p.replicas is not None:
        unit = t("sim_plan.machines" if e.how == CALIBRATED else "sim_plan.gpus", lang)
        out.append(t("sim_plan.replicas", lang, target=p.target_rate, replicas=p.replicas, per=e.gpus, gpus=p.gpus,
                     unit=unit))
    if p.cost is not None and p.cost.at_max is not None:
        out.append(t("sim_plan.cost", lang, at_max=p.cost.at_max, price=p.cost.price_per_gpu_hour))
        if p.cost.at_target is not None:
            out.append(t("sim_plan.cost_target", lang, at_target=p.cost.at_target, gpus=p.gpus))
    if p.stopped:
        out.append(t("sim_cli.stopped", lang, why=translate(p.stopped, lang)))
    return out


def _answer(p: Plan, lang: str) -> str:
    tokens = p.max_rate * p.shape.mean_output_tokens
    if not p.max_rate and p.stopped:
        return t("sim_plan.none_stopped", lang, points=len(p.points))
    if p.next_rate is None and p.max_rate < p.knee.requests_per_s:
        return t("sim_plan.max_open", lang, rate=p.max_rate, tokens=tokens, points=len(p.points))
    if not p.max_rate:
        last = p.points[-1] if p.points else None
        return t("sim_plan.none", lang, rate=last.rate if last else 0.0, ttft=_ms(last.ttft_s if last else None),
                 tpot=_ms(last.tpot_s if last else None), points=len(p.points))
    if p.next_rate is None:
        return t("sim_plan.max_at_knee", lang, rate=p.max_rate, tokens=tokens, points=len(p.points))
    rate, next_rate = fmt_pair(p.max_rate, p.next_rate)
    return t("sim_plan.max_rate", lang, rate=rate, tokens=tokens, next=next_rate,
             resolution=p.resolution * 100, points=len(p.points))
