"""The simulator checked against the real vLLM: calibrate on some loads, predict held-out ones, run those on vLLM
with kvviz's load generator, and state the error per point and the mean absolute percentage error per metric.

Per model, one vLLM start serves the calibration and every held-out load (closed loops at several concurrencies,
a decode-heavy and a prompt-heavy mix, open loops of Poisson arrivals at rates set from the calibrated prediction,
a shared prefix). A second start with a KV pool of few blocks (--num-gpu-blocks-override) sweeps the concurrency
of a closed loop: the first concurrency at which the simulator preempts, against the first at which vLLM's
vllm:num_preemptions_total rises. A held-out load is never among the calibration's. The error of a metric is
(predicted - measured) / measured; each point keeps the 1-minute load average of the machine when it ran, as the
machine is shared and the measured figures move with it. Knows plans and errors; measuring and fitting are
calibrate's.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kvviz.serving import iterations
from kvviz.serving.iterations import EngineStep
from kvviz.serving.stats import RunStats
from kvviz.serving.vllm import REPO
from kvviz.sim.calibrate import (
    CALIBRATION,
    ENGINE_CLOCK,
    QUICK_CALIBRATION,
    Engine,
    Fitted,
    LoadPoint,
    Measured,
    Mix,
    as_client,
    calibrate,
    engine_tpot_s,
    joined_share,
    measure,
    replay,
    serving,
    warm_up,
)
from kvviz.sim.scheduler import FULL_ATTENTION, KvGroupSpec
from kvviz.sim.simulate import Limits, SimResult, simulate
from kvviz.sim.step_time import NAMES
from kvviz.sim.workload import closed_loop

if TYPE_CHECKING:
    from kvviz.serving.metrics_reader import ServerView

METRICS = {"output_tokens_per_s": lambda s: s.output_tokens_per_s, "tpot_p50_s": lambda s: s.tpot.p50,
           "ttft_p50_s": lambda s: s.ttft.p50, "e2e_p50_s": lambda s: s.e2e.p50}
# Where the TPOT error sits: the predicted mean TPOT against the client's mean and against the engine's own clock
# (vLLM's request_decode_time; Measured.engine_tpot_mean_s). Close to the engine and far from the client, the
# error is in what the simulator leaves out after the engine (the API server streaming); far from both, in the
# step-time model. A diagnosis beside the targets, not one of them.
SPLIT = ("tpot_mean_s", "engine_tpot_mean_s")


@dataclass(frozen=True)
class ModelPlan:
    """What one model is validated on: its calibration loads, its held-out loads (an open loop's rate given as a
    fraction of the request rate the calibrated simulator predicts for a closed loop of 16 of the same mix), and
    the preemption sweep (a KV pool of `blocks` blocks and its max_model_len, one wave of a closed loop at each
    concurrency; none: no sweep)."""

    model: str
    max_model_len: int
    calibration: tuple[LoadPoint, ...]
    held_out: tuple[LoadPoint, ...]
    open_fractions: tuple[tuple[Mix, float, int], ...] = ()
    sweep_blocks: int | None = None
    sweep_mix: Mix | None = None
    sweep_concurrency: tuple[int, ...] = ()
    sweep_max_model_len: int = 256
    dummy_weights: bool = False  # a folder with a config alone, served with random weights

    @property
    def name(self) -> str:
        """The model's name: a named model's, or a folder's own name."""
        return Path(self.model).name


@dataclass
class Point:
    """One held-out load: measured and predicted figures, per metric. unseen_decodes: the requests whose whole
    output reached the client at one instant (vLLM merges a request's outputs while its API server lags behind the
    engine), so their TPOT was not measured; when it is every request, the point has no measured TPOT."""

    model: str
    kind: str
    point: LoadPoint
    measured: RunStats
    predicted: RunStats
    load_average: float
    measured_preemptions: int | None
    predicted_preemptions: int
    unseen_decodes: int = 0
    joined_share: float = 0.0  # of the output chunks, those read joined to a later one (calibrate.joined_share)
    measured_again: RunStats | None = None
    server: ServerView | None = None
    engine_steps: tuple[EngineStep, ...] = ()  # vLLM's own record of the load's steps (kvviz.serving.iterations)
    predicted_steps: tuple[float, ...] = ()  # the simulated steps' durations, in seconds

    @property
    def engine_tpot_mean_s(self) -> float | None:
        return engine_tpot_s(self.server, self.point.mix.output_tokens)

    def row(self) -> dict:
        p = self.point
        row = {"model": self.model, "kind": self.kind, "load": p.label, "loop": "closed" if p.closed else "poisson",
               "concurrency": p.concurrency, "rate_per_s": p.rate, "requests": p.requests,
               "prompt_tokens": p.mix.prompt_tokens, "output_tokens": p.mix.output_tokens,
               "prefix_tokens": p.mix.prefix_tokens, "load_average_1m": self.load_average,
               "completed": self.measured.completed, "measured_preemptions": self.measured_preemptions,
               "predicted_preemptions": self.predicted_preemptions, "unseen_decodes": self.unseen_decodes,
               "joined_share": self.joined_share}
        for name, get in METRICS.items():
            m, q = get(self.measured), get(self.predicted)
            row[f"measured_{name}"], row[f"predicted_{name}"] = m, q
            row[f"error_{name}"] = _error(q, m)
            if self.measured_again is not None:
                again = get(self.measured_again)
                row[f"measured_again_{name}"], row[f"repeat_{name}"] = again, _error(again, m)
        view = self.server
        for name in ("ttft", "queue", "prefill", "decode"):  # vLLM's own clock, per request, over the load
            row[f"engine_{name}_mean_s"] = getattr(view, f"{name}_mean_s") if view else None
        q = self.predicted.tpot.mean
        row["predicted_tpot_mean_s"] = q
        for name, m in zip(SPLIT, (self.measured.tpot.mean, self.engine_tpot_mean_s), strict=True):
            row[f"measured_{name}"], row[f"error_{name}"] = m, _error(q, m)
        return row | self.step_row()

    def step_row(self) -> dict:
        """The load's steps as vLLM logged them beside the simulator's: how many, the median step (vLLM's is its
        model's time alone, the simulator's the whole step), vLLM's median decode step, and the share of its decode
        steps' time spent in stalls (kvviz.serving.iterations.summary). None where vLLM logged none (a server started
        without the flag)."""
        engine = iterations.summary(self.engine_steps) if self.engine_steps else None
        times = self.predicted_steps
        return {"engine_steps": engine["steps"] if engine else None, "predicted_steps": len(times),
                "engine_step_median_s": engine["median_s"] if engine else None,
                "engine_decode_median_s": engine["decode_median_s"] if engine else None,
                "predicted_step_median_s": statistics.median(times) if times else None,
                "engine_stall_share": engine["stall_share"] if engine else None}


def _error(predicted: float | None, measured: float | None) -> float | None:
    return (predicted - measured) / measured if measured and predicted is not None else None


@dataclass
class ModelResult:
    model: str
    engine: Engine
    fitted: Fitted
    calibration_runs: list[Measured]
    points: list[Point] = field(default_factory=list)
    onset_measured: int | None = None
    onset_predicted: int | None = None
    onset_as_full: int | None = None  # a model with local layers: the onset were they counted as full attention
    sweep_engine: Engine | None = None
    drift: Measured | None = None  # the first calibration load measured again after the held-out loads


def drift_row(result: ModelResult) -> dict | None:
    """How far the first calibration load moved between its calibration run and its run after the held-out loads:
    per metric the two figures and (after - before) / before, and the machine's load average at each. The
    machine's own drift over the validation, which the calibration cannot know of."""
    if result.drift is None:
        return None
    before, after = result.calibration_runs[0], result.drift
    row = {"load": before.point.label, "load_average_1m": [before.load_average, after.load_average]}
    for name, get in METRICS.items():
        b, a = get(before.stats), get(after.stats)
        row[name] = [b, a]
        row[f"moved_{name}"] = (a - b) / b if a is not None and b else None
    return row


def predicted_stats(point: LoadPoint, engine: Engine, fitted: Fitted) -> tuple[RunStats, int]:
    """The calibrated simulator's figures for a load, as the client would measure them (the request overhead on
    TTFT and E2E), and its preemptions."""
    stats, preempted, _ = _predicted(point, engine, fitted)
    return stats, preempted


def _predicted(point: LoadPoint, engine: Engine, fitted: Fitted) -> tuple[RunStats, int, SimResult]:
    """predicted_stats's figures and the simulated run they come from (its steps)."""
    sim = replay(point, engine, fitted.step, fitted.handoff_s, return_s=fitted.request_overhead_s)
    return as_client(sim, fitted.request_overhead_s, point.rate), sum(s.preemptions for s in sim.trace), sim


def open_rate(mix: Mix, fraction: float, engine: Engine, fitted: Fitted) -> float:
    """fraction of the request rate the calibrated simulator gives a closed loop of 16 of this mix: an open loop
    set from the prediction, not from a measurement."""
    sim = simulate(closed_loop(32, 16, mix.prompt_tokens, mix.output_tokens, mix.prefix_tokens), engine.scheduler(),
                   fitted.step, Limits(max_wall_s=60.0), handoff_s=fitted.handoff_s,
                   return_s=fitted.request_overhead_s)
    return round(fraction * sim.stats.requests_per_s, 3)


def _point(model: str, kind: str, measured: Measured, engine: Engine, fitted: Fitted) -> Point:
    stats, preempted, sim = _predicted(measured.point, engine, fitted)
    unseen = sum(1 for r in measured.records if r.ok and r.new_tokens > 1 and r.tpot_s is None)
    return Point(model, kind, measured.point, measured.stats, stats, measured.load_average, measured.preemptions,
                 preempted, unseen, joined_share(measured), server=measured.server, engine_steps=measured.engine_steps,
                 predicted_steps=tuple(s.duration_s for s in sim.trace))


def onset(points: list[Point], which: Callable[[Point], int | None]) -> int | None:
    """The lowest concurrency of the sweep at which preemptions happened."""
    hit = sorted(p.point.concurrency for p in points if (which(p) or 0) > 0)
    return hit[0] if hit else None


def _quiet(key: str, **fields) -> None:
    """The default progress: none."""


def validate_model(plan: ModelPlan, say: Callable[..., None] = _quiet, repeat: bool = False,
                   engine_steps: bool = False) -> ModelResult:
    """Calibrate on the plan's loads, then measure and predict its held-out loads and its preemption sweep.
    say(key, **fields): each step's progress, as a kvviz/i18n/sim.py text key (sim_cli.v_*) and its fields.
    repeat: run every held-out load a second time, right after the first (the same prompts' lengths, an open
    loop's same arrivals): how far the measurement moves by itself, the floor under any prediction's error; and
    the first calibration load again after the held-out ones (ModelResult.drift): how far the machine moved over
    the validation.
    engine_steps: vLLM logs its every step, and each point's row says how many it ran, its median decode step and
    the share of time in stalls, beside the simulator's steps (calibrate.serving: the logging costs the engine
    time, so the errors are of a slower engine)."""
    with serving(plan.model, plan.max_model_len, engine_steps=engine_steps,
                 dummy_weights=plan.dummy_weights) as served:
        say("sim_cli.v_ready", model=plan.name, blocks=served.engine.num_blocks, size=served.engine.block_size)
        warm_up(served)
        fitted, runs = calibrate(served, plan.calibration, say)
        s = fitted.step
        say("sim_cli.v_fitted_engine" if fitted.clock == ENGINE_CLOCK else "sim_cli.v_fitted", model=plan.name,
            a=s.a, b=s.b, c=s.c, d=s.d, overhead=fitted.request_overhead_s, handoff=fitted.handoff_s,
            rms=fitted.fit.residual_rms_s, aside=fitted.fit.set_aside)
        result = ModelResult(plan.name, served.engine, fitted, runs)
        opened = tuple(LoadPoint(mix, n, rate=open_rate(mix, f, served.engine, fitted), seed=n)
                       for mix, f, n in plan.open_fractions)
        for point in plan.held_out + opened:
            measured = measure(served, point)
            result.points.append(_point(plan.name, "held-out", measured, served.engine, fitted))
            if repeat:
                result.points[-1].measured_again = measure(served, point).stats
            say("sim_cli.v_point", **_brief(result.points[-1]))
        if repeat:
            result.drift = measure(served, plan.calibration[0])
            moved = drift_row(result)
            say("sim_cli.v_drift", model=plan.name, load=moved["load"],
                **{k: signed_percent(moved[f"moved_{k}"]) for k in METRICS})
    if plan.sweep_blocks and plan.sweep_mix:
        with serving(plan.model, plan.sweep_max_model_len, num_blocks=plan.sweep_blocks,
                     engine_steps=engine_steps, dummy_weights=plan.dummy_weights) as small:
            result.sweep_engine = small.engine
            warm_up(small)
            sweep = []
            for c in plan.sweep_concurrency:
                point = LoadPoint(plan.sweep_mix, c, concurrency=c)  # one wave: they run together
                sweep.append(_point(plan.name, "preemption sweep", measure(small, point), small.engine, fitted))
                say("sim_cli.v_point", **_brief(sweep[-1]))
            result.points += sweep
            result.onset_measured = onset(sweep, lambda p: p.measured_preemptions)
            result.onset_predicted = onset(sweep, lambda p: p.predicted_preemptions)
            if small.engine.groups != FULL_ATTENTION:
                as_full = replace(small.engine, groups=(KvGroupSpec(),) * len(small.engine.groups))
                counted = {p.point.concurrency: _predicted(p.point, as_full, fitted)[1] for p in sweep}
                result.onset_as_full = min((c for c, n in counted.items() if n), default=None)
    return result


def _brief(p: Point) -> dict:
    """A point's progress line's fields: its errors as signed percentages, its preemptions, the load average."""
    return {**percent_row(p.row()), "measured": p.measured_preemptions, "predicted": p.predicted_preemptions}


def mape(rows: list[dict], names=tuple(METRICS), kind: str = "error") -> dict[str, float | None]:
    """The mean absolute percentage error per metric over the rows that have one; kind "repeat": the mean
    |second - first| / first over the rows measured twice, the measurement's own spread in MAPE's terms."""
    out = {}
    for name in names:
        errors = [abs(r[f"{kind}_{name}"]) for r in rows if r.get(f"{kind}_{name}") is not None]
        out[name] = sum(errors) / len(errors) if errors else None
    return out


# The full validation: tiny and SmolLM2-135M-Instruct, each calibrated on CALIBRATION's loads (64/32, 384/8, 960/8)
# and checked on mixes it never saw: a decode-heavy 32/64 and a prompt-heavy 768/16, closed and open, and a shared
# prefix of 300 tokens (two whole blocks of 128) in a 384-token prompt. Sized for two shared, busy cores: a few
# waves of requests per load.
DECODE, PROMPT, SHARED = Mix(32, 64), Mix(768, 16), Mix(384, 32, 300)
HELD_OUT = (LoadPoint(DECODE, 4, concurrency=2), LoadPoint(DECODE, 16, concurrency=8),
            LoadPoint(DECODE, 40, concurrency=20), LoadPoint(PROMPT, 3, concurrency=1),
            LoadPoint(PROMPT, 8, concurrency=4), LoadPoint(PROMPT, 20, concurrency=10),
            LoadPoint(SHARED, 12, concurrency=6))
OPEN = ((DECODE, 0.5, 12), (PROMPT, 0.5, 8), (SHARED, 0.7, 12))
# The preemption sweep: 6 blocks of 128 (768 tokens); a request of 100 + 100 tokens holds 1 block for its prompt
# and 2 once past 128 tokens, so 3 in flight fit and 4 do not, if they run together.
FULL = (ModelPlan("tiny", 1024, CALIBRATION, HELD_OUT, OPEN, sweep_blocks=6, sweep_mix=Mix(100, 100),
                  sweep_concurrency=(2, 3, 4, 6), sweep_max_model_len=256),
        ModelPlan("smollm2-135m-instruct", 1024, CALIBRATION, HELD_OUT, OPEN),
        # A sliding-window model (assets/tiny-sliding: tiny's shape in Llama's layers, five of six with a window
        # of 256 tokens, random weights): six KV-cache groups of one layer each, five freeing the blocks behind
        # their window. Its sweep: 100 blocks of 128 tokens (a block: one layer's page), one wave of 300 + 400
        # tokens at each concurrency; counted as six full-attention groups it would preempt from 3 in flight.
        ModelPlan(str(REPO / "assets" / "tiny-sliding"), 1024, CALIBRATION, HELD_OUT, OPEN, sweep_blocks=100,
                  sweep_mix=Mix(300, 400), sweep_concurrency=(2, 3, 4, 6, 8), sweep_max_model_len=1024,
                  dummy_weights=True))
QUICK = (ModelPlan("tiny", 1024, QUICK_CALIBRATION,
                   (LoadPoint(Mix(32, 64), 8, concurrency=4), LoadPoint(Mix(384, 16), 6, concurrency=3)),
                   ((Mix(32, 64), 0.5, 8),)),)


def summary(results: list[ModelResult]) -> dict:
    """Every point's row, the MAPE per metric per model and over all, the held-out points counted, the preemption
    onsets, and each model's calibration (coefficients, overhead, fit)."""
    rows = [p.row() for r in results for p in r.points]
    by_model = {r.model: [p.row() for p in r.points] for r in results}
    return {"points": rows,
            "mape": {**{m: mape(v) for m, v in by_model.items()}, "all": mape(rows)},
            "held_out_points": {**{m: len(v) for m, v in by_model.items()}, "all": len(rows)},
            "repeatability": {m: {**mape(v, kind="repeat"), "points": sum(1 for r in v if "repeat_e2e_p50_s" in r)}
                              for m, v in {**by_model, "all": rows}.items()},
            "drift": {r.model: drift_row(r) for r in results if r.drift is not None},
            "tpot_split": {m: {**mape(both := _both(v), SPLIT), "points": len(both)}
                           for m, v in {**by_model, "all": rows}.items()},
            "preemption_onset": {r.model: {"measured": r.onset_measured, "predicted": r.onset_predicted,
                                           "blocks": r.sweep_engine.num_blocks if r.sweep_engine else None,
                                           "predicted_as_full_attention": r.onset_as_full}
                                 for r in results if r.sweep_engine},
            "calibration": {r.model: {"coefficients": dict(zip(NAMES, r.fitted.step.coefficients(), strict=True)),
                                      "request_overhead_s": r.fitted.request_overhead_s,
                                      "front_alone_s": r.fitted.front_alone_s,
                                      "handoff_s": r.fitted.handoff_s, "clock": r.fitted.clock,
                                      "fit": vars(r.fitted.fit), "residuals_by_load": r.fitted.residuals_by_load,
                                      "loads": [m.point.label for m in r.calibration_runs],
                                      "load_average_1m": [m.load_average for m in r.calibration_runs],
                                      "engine": asdict(r.engine)}
                            for r in results}}


def _both(rows: list[dict]) -> list[dict]:
    """The rows with the TPOT mean measured by the client and by the engine: where the split compares alike."""
    return [r for r in rows if all(r[f"error_{n}"] is not None for n in SPLIT)]


def percent(errors: dict) -> dict:
    """Errors (fractions) as text percentages, '-' where there is none."""
    return {k: "-" if v is None else f"{100 * v:.1f}%" for k, v in errors.items()}


def percent_row(row: dict) -> dict:
    """A point's row for the command line's line: its load and model, the errors as signed percentages."""
    return {"model": row["model"], "load": row["load"], "load_average": row["load_average_1m"],
            **{name: signed_percent(row[f"error_{name}"]) for name in METRICS}}


def signed_percent(fraction: float | None) -> str:
    """A signed fraction as a percentage with one decimal ('+12.3%'), '-' where there is none."""
    return "-" if fraction is None else f"{100 * fraction:+.1f}%"
