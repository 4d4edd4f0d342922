"""The Plan tab's computation: the page's values checked into one simulated replica and its workload, the
predicted curves over load, the plan under the SLO (kvviz.sim.plan), and measured runs set against the
prediction of the same load.

Two kinds of replica: a GPU preset (the roofline lower bound of each step, kvviz.sim.roofline) for a calculator
preset or a model folder, or this machine as a calibration file measured it (kvviz.sim.calibrate; the model is
the one the file names, its KV blocks from the space given, its scheduler as the calibration's vLLM ran it). A
calibrated prediction is the client's view: the calibration's request overhead is added to every TTFT, as the
validation does (kvviz.sim.calibrate.as_client); a roofline one is the engine's. The curves: an open loop at
fractions of the knee's rate (and at the load asked), or a closed loop at 1, 2, 4, ... requests in flight (and
the concurrency asked), each point one bounded simulation of the same requests. The hosted demo simulates at
most HOSTED_SIM_REQUESTS requests a point and gives the whole plan HOSTED_WALL_S real seconds. Nothing here
imports gradio or plotly; the measured runs are kvviz.serving's (the tab runs them, this module compares).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from kvviz.base.errors import InputError
from kvviz.base.inputs import choice, number, text, whole_number
from kvviz.calc.hardware import ACCELERATORS
from kvviz.engine.hosting import HostPolicy
from kvviz.serving.stats import RunStats
from kvviz.sim import step_time
from kvviz.sim.calibrate import as_client
from kvviz.sim.plan import (
    CALIBRATED,
    DEFAULT_BAND,
    Engine,
    Knee,
    Plan,
    Search,
    Shape,
    SloLimits,
    architecture_of,
    calibrated_engine,
    check_target_and_price,
    gpu_engine,
    knee,
    plan,
)
from kvviz.sim.simulate import Limits, SimResult, simulate
from kvviz.sim.workload import Workload, closed_loop

GPU, HERE = "GPU preset (roofline lower bound)", "this machine, calibrated"
DEVICES = (GPU, HERE)
OPEN, CLOSED = "open loop: Poisson arrivals at a rate", "closed loop: fixed requests in flight"
LOOPS = (OPEN, CLOSED)
CALIBRATIONS = Path(__file__).resolve().parents[3] / "results" / "simulator"  # the ones made on this machine
RATE_FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.85, 1.0, 1.15)  # of the knee's rate: the open-loop curve
MAX_SIM_REQUESTS = 20_000  # a point's requests, from the page
HOSTED_SIM_REQUESTS = 500  # ... in a hosted demo
WALL_S = 120.0  # real seconds the whole plan may simulate
HOSTED_WALL_S = 20.0
CHECK_SCALES = (0.5, 1.0, 2.0)  # the measured check: half the load asked, the load, twice it


@dataclass(frozen=True)
class PlanValues:
    """What the tab sends, field by field, as sent (anything: the API can send any JSON)."""

    device: object = GPU
    model: object = "llama-3.1-8b"
    gpu: object = "h100-sxm"
    tp: object = 0  # 0: the smallest that fits
    pp: object = 1
    calibration: object = "calibration-tiny.json"
    kv_space_gib: object = 1
    loop: object = OPEN
    rate: object = 20.0
    concurrency: object = 16
    prompt_tokens: object = 512
    output_tokens: object = 128
    prefix_tokens: object = 0
    requests: object = 300
    ttft_s: object = 1.0
    ttft_percentile: object = 99.0
    tpot_s: object = 0.05
    tpot_percentile: object = 99.0
    price: object = 2.5
    target_rate: object = 50.0


@dataclass(frozen=True)
class Setup:
    """One checked question: the replica, the model's name, the requests, the SLO, the loop and its load
    (requests/s open, requests in flight closed), the price per GPU-hour and target rate (None: not asked) and the
    real seconds the plan may take."""

    engine: Engine
    model: str
    shape: Shape
    slo: SloLimits
    closed: bool
    load: float
    price: float | None
    target_rate: float | None
    wall_s: float

    @property
    def overhead_s(self) -> float:
        """The request overhead added to every predicted TTFT: the calibration's (kvviz.sim.plan.Engine), 0 on a
        roofline."""
        return self.engine.overhead_s


@dataclass(frozen=True)
class Prediction:
    """The answer: the setup, the knee, the curve (one row per load, curve_row's columns), the row of the load
    asked, and the plan under the SLO."""

    setup: Setup
    knee: Knee
    curve: pd.DataFrame
    asked: dict
    plan: Plan


def calibration_choices() -> list[str]:
    """The calibration files kept in results/simulator, by name."""
    return sorted(p.name for p in CALIBRATIONS.glob("calibration-*.json"))


def shown_source(source: str) -> str:
    """A calibration kept here as results/simulator/NAME (not this checkout's absolute path); anything else as is."""
    path = Path(source)
    return f"results/simulator/{path.name}" if path.parent == CALIBRATIONS else source


def calibration_path(value: object, policy: HostPolicy) -> Path:
    """A calibration kept here by name, or (not hosted) a path to one."""
    name = text(value, "calibration", 4096).strip()
    if name in calibration_choices():
        return CALIBRATIONS / name
    if policy.hosted:
        raise InputError("input.unknown_choice", name="calibration", value=repr(name),
                         choices=", ".join(calibration_choices()))
    return Path(name).expanduser()


def calibrated_scheduler(path: Path) -> dict:
    """The scheduler the calibration's vLLM ran (its engine record: block size, sequences, token budget, model
    length), as SchedulerConfig fields; {} for a file without one (made by `fit`)."""
    record = json.loads(path.read_text(encoding="utf-8")).get("engine")
    names = ("block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len")
    return {n: record[n] for n in names if isinstance(record, dict) and isinstance(record.get(n), int)}


def replica(v: PlanValues, policy: HostPolicy) -> tuple[Engine, str]:
    """(the replica, the model's name) for the page's device choice."""
    if choice(v.device, "device", DEVICES) == HERE:
        from kvviz.serving.models import model_folder  # the local model's folder, only in this mode

        path = calibration_path(v.calibration, policy)
        model = step_time.load(path).model  # the file's own checks first
        if not model:
            raise InputError("sim.calibration_bad", path=str(path), why="model")
        folder = model_folder(model).path
        gib = whole_number(v.kv_space_gib, "KV-cache space (GiB)", 1, 2 if policy.hosted else 1_024)
        return calibrated_engine(path, folder, None, gib, calibrated_scheduler(path)), model
    model = text(v.model, "model", 4096).strip()
    folder = Path(model).expanduser()
    if policy.hosted or not (folder / "config.json").is_file():  # a calculator preset
        folder = Path(choice(model, "model", _presets()))
    gpu = choice(str(v.gpu).strip().lower(), "GPU", ACCELERATORS)
    tp = whole_number(v.tp, "tensor parallel size", 0, 1024)
    pp = whole_number(v.pp, "pipeline parallel size", 1, 1024)
    return gpu_engine(architecture_of(folder), ACCELERATORS[gpu], tp or None, pp), folder.name


def _presets() -> list[str]:
    from kvviz.calc.presets import preset_names

    return preset_names()


def setup_from_values(v: PlanValues, policy: HostPolicy) -> Setup:
    """Every value checked, the cheap ones first (the replica counts the model's parameters: a second or more)."""
    most = HOSTED_SIM_REQUESTS if policy.hosted else MAX_SIM_REQUESTS
    shape = Shape(whole_number(v.prompt_tokens, "prompt tokens", 1, 1_000_000),
                  whole_number(v.output_tokens, "output tokens", 1, 1_000_000),
                  whole_number(v.prefix_tokens, "shared prefix tokens", 0, 1_000_000),
                  requests=whole_number(v.requests, "requests per point", 1, most))
    slo = SloLimits(number(v.ttft_s, "TTFT limit (s)", 0, 1e6, low_open=True),
                    number(v.tpot_s, "TPOT limit (s)", 0, 1e6, low_open=True),
                    number(v.ttft_percentile, "TTFT percentile", 0, 100, low_open=True),
                    number(v.tpot_percentile, "TPOT percentile", 0, 100, low_open=True))
    closed = choice(v.loop, "loop", LOOPS) == CLOSED
    load = (whole_number(v.concurrency, "concurrency", 1, 100_000) if closed else
            number(v.rate, "request rate (requests/s)", 0, 1e9, low_open=True))
    price = None if v.price in (None, "") else number(v.price, "price per GPU-hour", 0, 1e9)
    target = None if v.target_rate in (None, "", 0) else number(v.target_rate, "target rate", 0, 1e9, low_open=True)
    check_target_and_price(target, price)
    engine, model = replica(v, policy)
    return Setup(engine, model, shape, slo, closed, load, price, target,
                 HOSTED_WALL_S if policy.hosted else WALL_S)


def workload(setup: Setup, load: float, requests: int | None = None) -> Workload:
    """The setup's requests at one load (`requests` of them, the setup's count by default)."""
    shape = setup.shape if requests is None else replace(setup.shape, requests=requests)
    if setup.closed:
        return closed_loop(shape.requests, int(load), shape.prompt_tokens, shape.output_tokens, shape.prefix_tokens)
    return shape.at(load)


def simulated_stats(setup: Setup, load: float, requests: int | None = None, wall_s: float = 60.0) -> RunStats:
    """One load on the simulator, its figures as the setup predicts them (the request overhead on every TTFT)."""
    work = workload(setup, load, requests)
    result = simulate(work, setup.engine.config, setup.engine.model,
                      Limits(max_requests=len(work.requests), max_wall_s=wall_s), setup.slo.goodput,
                      handoff_s=setup.engine.handoff_s, return_s=setup.engine.overhead_s)
    if result.stopped is not None:
        raise InputError("sim.plan_knee_stopped", why=result.stopped)
    return _client(setup, result, work.rate)


def _client(setup: Setup, result: SimResult, rate: float | None) -> RunStats:
    return as_client(result, setup.overhead_s, rate) if setup.overhead_s else result.stats


def curve_row(load: float, stats: RunStats) -> dict:
    """One point of a curve: the load, what was completed, throughput, TTFT and TPOT p50/p99, and tokens/s per
    user (1 / TPOT p50: the decode speed one user sees)."""
    tpot = stats.tpot.p50
    return {"load": load, "requests": stats.requests, "completed": stats.completed,
            "requests_per_s": stats.requests_per_s, "output_tokens_per_s": stats.output_tokens_per_s,
            "ttft_p50_s": stats.ttft.p50, "ttft_p99_s": stats.ttft.p99, "tpot_p50_s": tpot,
            "tpot_p99_s": stats.tpot.p99, "user_tokens_per_s": 1 / tpot if tpot else None}


def curve_loads(setup: Setup, saturated: Knee) -> list[float]:
    """The loads of the curve: fractions of the knee's rate (open), or 1, 2, 4, ... up to the requests sent and
    max_num_seqs (closed); the load asked among them."""
    if setup.closed:
        top = min(setup.engine.config.max_num_seqs, setup.shape.requests)
        loads = [2 ** i for i in range(int(math.log2(top)) + 1)] + [top]
    else:
        loads = [saturated.requests_per_s * f for f in RATE_FRACTIONS]
    return sorted(set(loads) | {setup.load})


def predict(setup: Setup, on_step=None) -> Prediction:
    """The knee, the curve and the plan. on_step(done, of, load): called before each simulated load of the
    curve (done of `of`), and with load None before the plan's search."""
    saturated = knee(setup.engine, setup.shape, setup.wall_s)
    loads = curve_loads(setup, saturated)
    rows = []
    for i, load in enumerate(loads):
        if on_step:
            on_step(i, len(loads), load)
        rows.append(curve_row(load, simulated_stats(setup, load, wall_s=setup.wall_s)))
    if on_step:
        on_step(len(loads), len(loads), None)
    found = plan(setup.engine, setup.slo, setup.shape, Search(max_wall_s=setup.wall_s), setup.target_rate,
                 setup.price, saturated, band=DEFAULT_BAND if is_calibrated(setup) else None)
    curve = pd.DataFrame(rows)
    asked = curve[curve["load"] == setup.load].iloc[0].to_dict()
    return Prediction(setup, saturated, curve, asked, found)


METRICS = ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")


def check_loads(setup: Setup) -> list[float]:
    """The loads the measured check runs: half the load asked, the load, twice it (a closed loop's in whole
    requests in flight, at least 1)."""
    if setup.closed:
        return sorted({max(1, round(setup.load * s)) for s in CHECK_SCALES})
    return [setup.load * s for s in CHECK_SCALES]


def errors(measured: pd.DataFrame, predicted: pd.DataFrame) -> pd.DataFrame:
    """One row per load and metric: predicted, measured, and the error (predicted - measured) / measured;
    both frames have curve_row's columns, one row per load, in the same order."""
    rows = []
    for (_, m), (_, p) in zip(measured.iterrows(), predicted.iterrows(), strict=True):
        for metric in METRICS:
            got, said_ = m[metric], p[metric]
            error = (said_ - got) / got if got and said_ is not None and not pd.isna(said_) else None
            rows.append({"load": m["load"], "metric": metric, "predicted": said_, "measured": got, "error": error})
    return pd.DataFrame(rows)


def is_calibrated(setup: Setup) -> bool:
    return setup.engine.how == CALIBRATED
