"""Capacity under an SLO, from the simulator: the highest request rate one replica holds, the knee of its
throughput curve, the replicas and GPUs a target rate needs, and what a million output tokens cost.

The SLO is a limit on a percentile of TTFT and one on a percentile of TPOT, over every request of a run. A rate is
held when it is not past the knee, an open loop of `requests` requests at that rate (Poisson from a seed, or evenly
spaced) all finish, and both percentiles are within their limits. (Past the knee a bounded run of a few hundred
requests can still meet the SLO, but a longer one queues without end: such a rate is not held.) The highest rate
held is searched on the simulator: the knee first, which when held is the answer (throughput, not the SLO, bounds
the replica); else halving until a rate is held (the bracket), then bisection at geometric midpoints until the
lowest rate not held is within `resolution` (relative) of the highest held; the answer is that highest rate held,
low by at most the resolution. Each point is one bounded simulation; the search is bounded in points and in real
seconds and says when it stopped early (its answer is then the best held so far, its resolution the bracket it had
reached).

The knee: the rate where throughput stops following the offered load, i.e. the saturated throughput of one
replica, simulated as a closed loop that keeps max_num_seqs requests in the engine.

Replicas for a target rate: ⌈target / highest rate held⌉, each tp × pp GPUs (on a GPU preset, the smallest tp
whose GPU holds the weights and one max_model_len sequence's KV, as kvviz.calc.parallel sizes it, unless tp is
given). Cost per million output tokens: GPUs × price per GPU-hour / 3600 / (rate × output tokens per request) ×
10^6, at the highest rate held (one replica, full) and at the target (its replicas, sharing it).
The band: the highest rate held again with every step `fraction` slower and `fraction` faster than the
engine's step time, the SLO as given: how far the answer moves when the machine runs off its calibration. Near the
SLO's edge it moves far more than the steps do: on SmolLM2's 128/16 at TPOT p90 <= 2 of its lone decode steps, steps
5, 10, 15 and 20% slower took the answer from 0.62 to 0.58, 0.53, 0.43 and 0.19 requests/s (docs/simulator.md).
Knows the simulator and the calculator; prints nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.inputs import number, whole_number
from kvviz.base.units import GIB
from kvviz.calc.arch import Architecture, architecture_from_source
from kvviz.calc.dtypes import kv_dtype, weight_dtype
from kvviz.calc.hardware import Accelerator
from kvviz.calc.parallel import Parallelism, deploy, tp_choices
from kvviz.calc.params import count_params
from kvviz.calc.presets import load_preset
from kvviz.engine.metrics import percentile
from kvviz.i18n import Said, said
from kvviz.serving.record import RequestRecord
from kvviz.serving.stats import Slo
from kvviz.sim import step_time
from kvviz.sim.calibrate import handoff, request_overhead, with_overhead
from kvviz.sim.capacity import gpu_pool, kv_groups, kv_pool
from kvviz.sim.roofline import LABEL, roofline_step_time
from kvviz.sim.scheduler import FULL_ATTENTION, SchedulerConfig
from kvviz.sim.simulate import Limits, simulate
from kvviz.sim.step_time import StepContents, StepTimeModel
from kvviz.sim.workload import RequestSpec, Workload, arrivals, closed_loop, from_csv, open_loop, read_csv

GPU_BLOCK_SIZE = 16  # vLLM's CUDA default block size
MAX_NODE_TP = 8  # the sizing tries tensor parallelism within one node of 8 GPUs


def gpu_scheduler_defaults(accel: Accelerator) -> tuple[int, int]:
    """vLLM 0.32's OpenAI-server defaults on a GPU (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults):
    (max_num_batched_tokens, max_num_seqs) = (16384, 1024) from 160 GiB of memory, (8192, 1024) from 70 GiB
    unless an A100, else (2048, 256)."""
    memory = accel.memory_bytes / GIB
    if memory >= 160:
        return 16384, 1024
    if memory >= 70 and "a100" not in accel.name.lower():
        return 8192, 1024
    return 2048, 256


@dataclass(frozen=True)
class SloLimits:
    """TTFT and TPOT limits in seconds, each on a percentile in (0, 100] of the run's requests."""

    ttft_s: float = 1.0
    tpot_s: float = 0.05
    ttft_percentile: float = 99.0
    tpot_percentile: float = 99.0

    def __post_init__(self) -> None:
        number(self.ttft_s, "TTFT limit (s)", 0.0, 1e6, low_open=True)
        number(self.tpot_s, "TPOT limit (s)", 0.0, 1e6, low_open=True)
        number(self.ttft_percentile, "TTFT percentile", 0.0, 100.0, low_open=True)
        number(self.tpot_percentile, "TPOT percentile", 0.0, 100.0, low_open=True)

    @property
    def goodput(self) -> Slo:
        return Slo(self.ttft_s, self.tpot_s)


@dataclass(frozen=True)
class Shape:
    """The requests of every point: their lengths, a shared prefix, how they arrive, how many a point sends.

    From a workload file (Shape.from_file) every point sends the file's requests with their own lengths: at their
    own arrival times scaled to the point's rate (the file's bursts and lulls kept; `timed`), or, where the file
    gives no times, Poisson or evenly spaced at that rate. prompt_tokens and output_tokens are then the file's
    means rounded (what the texts show); mean_output_tokens is exact (what a cost per token is counted from)."""

    prompt_tokens: int = 512
    output_tokens: int = 128
    prefix_tokens: int = 0
    poisson: bool = True
    seed: int = 0
    requests: int = 300
    trace: tuple[RequestSpec, ...] | None = field(default=None, repr=False, compare=False)
    source: str | None = None  # the workload file, when there is one

    def __post_init__(self) -> None:
        self.at(1.0)  # the workload's own checks: lengths from 1, a prefix within the prompt, a count of requests

    @classmethod
    def from_file(cls, path: Path, prefix_tokens: int = 0, poisson: bool = True, seed: int = 0) -> Shape:
        """The requests of a CSV file of prompt_tokens, output_tokens and (optionally) arrival_s rows; a bad row
        is refused with its line (kvviz.sim.workload)."""
        timed = "arrival_s" in read_csv(path)[0]
        rows = from_csv(path, None if timed else 1, prefix_tokens).requests
        n = len(rows)
        return cls(round(sum(r.prompt_tokens for r in rows) / n), round(sum(r.output_tokens for r in rows) / n),
                   prefix_tokens, poisson, seed, n, rows, str(path))

    @property
    def timed(self) -> bool:
        """Whether the file's own arrival times shape every point: a file with times spread over some interval."""
        return (self.trace is not None and self.trace[0].arrival_s is not None
                and self.trace[-1].arrival_s > self.trace[0].arrival_s)

    @property
    def mean_output_tokens(self) -> float:
        if self.trace is None:
            return float(self.output_tokens)
        return sum(r.output_tokens for r in self.trace) / len(self.trace)

    def at(self, rate: float) -> Workload:
        if self.trace is None:
            return open_loop(self.requests, rate, self.prompt_tokens, self.output_tokens, self.prefix_tokens,
                             self.poisson, self.seed)
        rate = number(rate, "rate", 0.0, 1e9, low_open=True)
        if self.timed:
            # The file's mean rate is (n - 1) arrivals over its span; stretching its times by that rate over this
            # one keeps each gap's share of the whole.
            first, span = self.trace[0].arrival_s, self.trace[-1].arrival_s - self.trace[0].arrival_s
            stretch = (len(self.trace) - 1) / span / rate
            times = [(r.arrival_s - first) * stretch for r in self.trace]
        else:
            times = arrivals(len(self.trace), rate, self.poisson, self.seed)
        timed = tuple(replace(r, arrival_s=when) for r, when in zip(self.trace, times, strict=True))
        return Workload(timed, False, rate=rate)

    def closed(self, requests: int, concurrency: int) -> Workload:
        """A closed loop of `requests` requests at `concurrency`: these lengths, or the file's rows in turn."""
        if self.trace is None:
            return closed_loop(requests, concurrency, self.prompt_tokens, self.output_tokens, self.prefix_tokens)
        rows = tuple(replace(self.trace[i % len(self.trace)], arrival_s=None) for i in range(requests))
        return Workload(rows, True, whole_number(concurrency, "concurrency", 1, 1_000_000))

    def described(self) -> dict:
        """The shape as a record (JSON): its fields without the file's rows, which the file holds."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trace"} | (
            {"timed": self.timed, "mean_output_tokens": self.mean_output_tokens} if self.trace else {})


@dataclass(frozen=True)
class Search:
    """How far the search goes: its relative resolution, and its bounds in points and real seconds."""

    resolution: float = 0.02
    max_points: int = 40
    max_wall_s: float = 120.0

    def __post_init__(self) -> None:
        number(self.resolution, "resolution", 0.0, 1.0, low_open=True)
        whole_number(self.max_points, "max points", 3, 10_000)
        number(self.max_wall_s, "max wall seconds", 0.0, 1e6, low_open=True)


ROOFLINE, CALIBRATED = "roofline", "calibrated"
HOW = {ROOFLINE: LABEL, CALIBRATED: "calibrated fit"}  # how each kind of step time is labelled in every output


@dataclass(frozen=True)
class Engine:
    """One replica as simulated: its scheduler and KV blocks, its step time and what that is (ROOFLINE on a GPU
    preset, CALIBRATED from a file: `source` names the preset or the file), the device, and the GPUs it takes
    (tp × pp; 1, this machine, for a calibration); a calibration's request overhead (seconds on every TTFT and E2E:
    the SLO is judged on the client's view; and from a closed loop's request ending to its next one reaching the
    engine) and front-end handoff (kvviz.sim.simulate), 0 on a roofline."""

    config: SchedulerConfig
    model: StepTimeModel
    how: str
    source: str
    device: str
    tp: int = 1
    pp: int = 1
    overhead_s: float = 0.0
    handoff_s: float = 0.0

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class Point:
    """One simulated rate: whether it held, its percentiles, its throughput."""

    rate: float
    held: bool
    ttft_s: float | None
    tpot_s: float | None
    output_tokens_per_s: float
    completed: int
    requests: int


@dataclass(frozen=True)
class Knee:
    """The saturated throughput of one replica: a closed loop at max_num_seqs."""

    requests_per_s: float
    output_tokens_per_s: float
    preemptions: int


@dataclass(frozen=True)
class Cost:
    """Price per GPU-hour, and per million output tokens at the highest rate held and at the target."""

    price_per_gpu_hour: float
    at_max: float | None
    at_target: float | None


@dataclass(frozen=True)
class Scaled:
    """A step time `factor` times another's: a machine running its steps slower (> 1) or faster (< 1) than the
    one its step time was fitted or derived on."""

    inner: StepTimeModel
    factor: float

    def seconds(self, step: StepContents) -> float:
        return self.factor * self.inner.seconds(step)


MAX_BAND = 0.5  # a band of more than half the step time says nothing a plan can use
DEFAULT_BAND = 0.1  # a calibration's band unless asked otherwise: on one 2-core EPYC, two calibrations of SmolLM2
# 13 minutes apart put its lone decode step 12% short and 6% long (docs/simulator.md, "Open loops are not slower")


@dataclass(frozen=True)
class Band:
    """The highest rate held with every step `fraction` slower, and `fraction` faster, than the engine's (the SLO
    and the search as the plan's): each the max_rate of its own search."""

    fraction: float
    slower_max_rate: float
    faster_max_rate: float


@dataclass(frozen=True)
class Plan:
    """The answer and how it was found. max_rate: the highest rate seen held (0 when none was); next_rate: the
    lowest rate seen not held above it (None when the knee held: the knee is the answer); resolution:
    next_rate / max_rate - 1; band: the answer with the steps slower and faster (None unless asked)."""

    engine: Engine
    slo: SloLimits
    shape: Shape
    knee: Knee
    points: tuple[Point, ...]
    max_rate: float
    next_rate: float | None
    target_rate: float | None
    replicas: int | None
    cost: Cost | None
    stopped: Said | None
    band: Band | None = None

    @property
    def resolution(self) -> float | None:
        return None if not self.max_rate or self.next_rate is None else self.next_rate / self.max_rate - 1

    @property
    def gpus(self) -> int | None:
        return None if self.replicas is None else self.replicas * self.engine.gpus


def architecture_of(model: str | Path) -> Architecture:
    """A model folder (its config.json) or the name of a calculator preset."""
    path = Path(model)
    return architecture_from_source(path) if (path / "config.json").is_file() else load_preset(str(model))


def smallest_tp(arch: Architecture, accel: Accelerator, pp: int, max_model_len: int) -> int:
    """The smallest tp (within a node) whose GPU holds the weights and one max_model_len sequence's KV, as the
    calculator sizes it (kvviz.calc.parallel.deploy, 90% of memory, 1 GiB reserve)."""
    count, w, kv = count_params(arch), weight_dtype(accel.default_dtype), kv_dtype(accel.default_dtype)
    for tp in (t for t in tp_choices(arch) if t <= MAX_NODE_TP):
        if deploy(arch, count, Parallelism(tp, pp), accel, kv, w, 1, max_model_len,
                  block_size=GPU_BLOCK_SIZE).per_gpu.fits:
            return tp
    raise InputError("sim.plan_no_fit", gpu=accel.name, most=MAX_NODE_TP, pp=pp, length=max_model_len)


def gpu_engine(arch: Architecture, accel: Accelerator, tp: int | None = None, pp: int = 1,
               max_model_len: int | None = None, config: dict | None = None) -> Engine:
    """One replica on GPU presets: the smallest tp that fits unless given, the KV blocks and groups vLLM makes of
    the budget the calculator leaves on each GPU (kvviz.sim.capacity.gpu_pool: a sliding-window model's groups
    each draw on the pool, and free the blocks behind their window), vLLM's GPU defaults (overridden by `config`'s
    SchedulerConfig fields), the roofline step time."""
    context = arch.max_position_embeddings or 0
    length = whole_number(max_model_len or context, "max model length", 1, 10**9)
    if context and length > context:
        raise InputError("sim.plan_past_context", asked=length, most=context)
    whole_number(pp, "pipeline parallel size", 1, arch.num_layers)
    tp = smallest_tp(arch, accel, pp, length) if tp is None else whole_number(tp, "tensor parallel size", 1, 1024)
    model = roofline_step_time(arch, accel, tp, pp)
    deployment = deploy(arch, model.count, Parallelism(tp, pp), accel, model.kv, model.weights, 1, length,
                        block_size=GPU_BLOCK_SIZE)
    tokens, seqs = gpu_scheduler_defaults(accel)
    pool = gpu_pool(arch, model.kv, deployment, GPU_BLOCK_SIZE)
    # A model whose groups the scheduler does not keep (state layers, chunked local attention): every layer's KV
    # counted for every token, one full-attention group (as sim.local_layers says for a calibrated engine)
    blocks, groups = (pool.num_blocks, pool.groups) if pool else (deployment.per_gpu.token_slots // GPU_BLOCK_SIZE,
                                                                 FULL_ATTENTION)
    if blocks < 1:
        raise InputError("sim.plan_no_fit", gpu=accel.name, most=tp, pp=pp, length=length)
    scheduler = SchedulerConfig(num_blocks=blocks, block_size=GPU_BLOCK_SIZE, max_num_seqs=seqs,
                                max_num_batched_tokens=tokens, max_model_len=length, groups=groups)
    return Engine(replace(scheduler, **(config or {})), model, ROOFLINE, accel.name, accel.name, tp, pp)


def calibrated_engine(calibration: Path, model_dir: Path | None, num_blocks: int | None = None,
                      kv_space_gib: float = 1.0, config: dict | None = None) -> Engine:
    """One replica on the machine a calibration was fitted on: its step time from the file (refused when it names
    another model than model_dir's), vLLM's CPU defaults (overridden by `config`), the KV blocks given or those
    kvviz's memory model gives the model folder in kv_space_gib GiB (kvviz.sim.capacity), and its KV-cache groups."""
    fitted = step_time.load(calibration, model=Path(model_dir).name if model_dir else None)
    scheduler = SchedulerConfig(num_blocks=1, **(config or {}))
    if num_blocks is None:
        if model_dir is None:
            raise InputError("sim.plan_no_blocks")
        pool = kv_pool(model_dir, kv_space_gib, scheduler.block_size, scheduler.max_model_len)
        scheduler = replace(scheduler, num_blocks=pool.num_blocks, groups=pool.groups)
    else:
        scheduler = replace(scheduler, num_blocks=num_blocks, groups=kv_groups(model_dir, lenient=True))
    return Engine(scheduler, fitted.step, CALIBRATED, str(calibration),
                  fitted.device or "this machine", overhead_s=request_overhead(calibration),
                  handoff_s=handoff(calibration))


def judged(rate: float, records: Sequence[RequestRecord], slo: SloLimits, output_tokens_per_s: float,
           knee_rate: float = math.inf) -> Point:
    """A run at `rate` against the SLO: held when the rate is not past the knee (beyond it a longer run queues
    without end, however few requests a bounded run sends), every request finished and both percentiles are within
    their limits. The one rule for simulated and measured runs alike."""
    done = [r for r in records if r.ok]
    ttft = percentile([r.ttft_s for r in done], slo.ttft_percentile)
    tpot = percentile([r.tpot_s for r in done if r.tpot_s is not None], slo.tpot_percentile)
    held = (rate <= knee_rate and len(done) == len(records) and ttft is not None and ttft <= slo.ttft_s
            and (tpot is None or tpot <= slo.tpot_s))
    return Point(rate, held, ttft, tpot, output_tokens_per_s, len(done), len(records))


def simulated(engine: Engine, slo: SloLimits, shape: Shape, rate: float, wall_s: float,
              knee_rate: float = math.inf) -> Point | None:
    """One rate on the simulator, judged; None when the simulation ran out of its real seconds."""
    result = simulate(shape.at(rate), engine.config, engine.model,
                      Limits(max_requests=shape.requests, max_wall_s=wall_s), slo.goodput, handoff_s=engine.handoff_s,
                      return_s=engine.overhead_s)
    if result.stopped is not None:
        return None
    return judged(rate, with_overhead(result, engine.overhead_s), slo, result.stats.output_tokens_per_s, knee_rate)


def knee(engine: Engine, shape: Shape, wall_s: float) -> Knee:
    """The closed loop at max_num_seqs, three of its batches long (at least shape.requests requests)."""
    seqs = engine.config.max_num_seqs
    load = shape.closed(max(shape.requests, 3 * seqs), seqs)
    result = simulate(load, engine.config, engine.model, Limits(max_requests=len(load.requests), max_wall_s=wall_s),
                      handoff_s=engine.handoff_s, return_s=engine.overhead_s)
    if result.stopped is not None:
        raise InputError("sim.plan_knee_stopped", why=result.stopped)
    return Knee(result.stats.requests_per_s, result.stats.output_tokens_per_s, sum(result.preemptions))


Measure = Callable[[float, float], "Point | None"]  # (rate, real seconds left) -> the point, None if cut short


class RateSearch:
    """The bracket and the bisection over request rates, each point one call of `measure`, the whole bounded in
    points and real seconds; `points` keeps every point, `stopped` why it stopped early (None: it did not)."""

    def __init__(self, measure: Measure, search: Search) -> None:
        self.measure, self.search = measure, search
        self.started = time.monotonic()
        self.points: list[Point] = []
        self.stopped: Said | None = None

    def left_s(self) -> float:
        return self.search.max_wall_s - (time.monotonic() - self.started)

    def held(self, rate: float) -> bool | None:
        """Whether `rate` is held; None when the search is out of points or time (self.stopped says which)."""
        found = None
        if len(self.points) < self.search.max_points and self.left_s() > 0:
            found = self.measure(rate, self.left_s())
        if found is None:
            self.stopped = (said("sim.plan_stopped_points", points=len(self.points))
                            if len(self.points) >= self.search.max_points else
                            said("sim.plan_stopped_wall", seconds=self.search.max_wall_s, points=len(self.points)))
            return None
        self.points.append(found)
        return found.held

    def bracket(self, start: float, factor: float = 2.0, ceiling: float = math.inf) -> tuple[float, float | None]:
        """(a rate held, the lowest rate not held above it) from `start`: up by `factor` while held (never past
        `ceiling`: the rate there is the answer, with None above it), down while not; (0, the lowest rate tried)
        when nothing down to start / 2^20 held, where the SLO is out of reach."""
        low, high, rate = 0.0, None, start
        while True:
            held = self.held(rate)
            if held is None:
                return low, high
            if held:
                low = rate
                if high is not None or rate >= ceiling:
                    return low, high
                rate = min(rate * factor, ceiling)
            else:
                high = rate
                if low or rate / factor < start / 2**20:
                    return low, high
                rate /= factor

    def bisect(self, low: float, high: float) -> tuple[float, float]:
        """Geometric midpoints until high / low - 1 is within the resolution (or the search stops)."""
        while high / low - 1 > self.search.resolution:
            mid = math.sqrt(low * high)
            held = self.held(mid)
            if held is None:
                break
            low, high = (mid, high) if held else (low, mid)
        return low, high

    def run(self, start: float, factor: float = 2.0, ceiling: float = math.inf) -> tuple[float, float | None]:
        low, high = self.bracket(start, factor, ceiling)
        if low and high:
            low, high = self.bisect(low, high)
        return low, high


def plan(engine: Engine, slo: SloLimits, shape: Shape, search: Search = Search(), target_rate: float | None = None,
         price_per_gpu_hour: float | None = None, saturated: Knee | None = None,
         on_point: Callable[[Point], None] | None = None, band: float | None = None) -> Plan:
    """The highest rate one replica holds under `slo`, the knee, replicas for the target, and cost. saturated: the
    knee of this engine and shape when already simulated (the Plan tab draws its curve from it first); on_point
    hears of each rate as it is judged (the CLI's progress); band: a fraction in (0, MAX_BAND], the answer searched
    again with the steps that much slower and faster (Plan.band; each search bounded as the first)."""
    check_target_and_price(target_rate, price_per_gpu_hour)
    if band is not None:
        number(band, "band", 0.0, MAX_BAND, low_open=True)
    started = time.monotonic()
    saturated = saturated or knee(engine, shape, search.max_wall_s)
    left = replace(search, max_wall_s=max(search.max_wall_s - (time.monotonic() - started), 1e-3))
    def measure(rate: float, wall_s: float) -> Point | None:
        point = simulated(engine, slo, shape, rate, wall_s, saturated.requests_per_s)
        if point is not None and on_point is not None:
            on_point(point)
        return point

    searcher = RateSearch(measure, left)
    low, high = searcher.run(saturated.requests_per_s, 2.0, saturated.requests_per_s)
    replicas = math.ceil(target_rate / low) if target_rate and low else None
    cost = None
    if price_per_gpu_hour is not None:
        cost = Cost(price_per_gpu_hour, _per_million(engine.gpus, price_per_gpu_hour, low, shape),
                    _per_million(replicas * engine.gpus, price_per_gpu_hour, target_rate, shape) if replicas else None)
    return Plan(engine, slo, shape, saturated, tuple(searcher.points), low, high, target_rate, replicas, cost,
                searcher.stopped, None if band is None else band_of(engine, slo, shape, search, band))


def band_of(engine: Engine, slo: SloLimits, shape: Shape, search: Search, fraction: float) -> Band:
    """The highest rate held with every step `fraction` slower, then faster (Plan.band)."""
    slower, faster = (plan(replace(engine, model=Scaled(engine.model, 1.0 + sign * fraction)), slo, shape,
                           search).max_rate for sign in (1, -1))
    return Band(fraction, slower, faster)


def check_target_and_price(target_rate: float | None, price_per_gpu_hour: float | None) -> None:
    """A target rate above 0 and a price from 0, when given."""
    if target_rate is not None:
        number(target_rate, "target rate (requests/s)", 0.0, 1e9, low_open=True)
    if price_per_gpu_hour is not None:
        number(price_per_gpu_hour, "price per GPU-hour", 0.0, 1e9)


def _per_million(gpus: int, price: float, rate: float, shape: Shape) -> float | None:
    """Dollars (or whatever the price is in) per 10^6 output tokens: GPUs × price an hour over the output tokens
    an hour at `rate`."""
    return gpus * price / (rate * shape.mean_output_tokens * 3600) * 1e6 if rate else None
