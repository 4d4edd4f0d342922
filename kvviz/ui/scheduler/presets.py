"""The Scheduler tab's loads: five presets, each small enough to follow and showing one effect, and their
simulated runs with this machine's calibrated step times.

A preset is one uniform load (every request the same lengths; a closed loop of `concurrency`, or evenly spaced
arrivals at `rate`), so the same load can be sent to a real vLLM by kvviz's load generator, and a scheduler's
knobs chosen to show its effect (a few blocks to fill, a small budget to chunk a prompt in). The step times are
the linear model fitted on this machine's vLLM (results/simulator/calibration-<model>.json, made by
`python -m kvviz.sim calibrate`), so the simulated seconds are this machine's. Knows no gradio.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.inputs import choice, whole_number
from kvviz.serving.load import CLOSED, CONSTANT, Load
from kvviz.sim import step_time
from kvviz.sim.scheduler import FULL_ATTENTION, SLIDING, KvGroupSpec, SchedulerConfig
from kvviz.sim.simulate import Limits, SimResult, simulate
from kvviz.sim.step_time import Calibration
from kvviz.sim.workload import Workload, closed_loop, open_loop

CALIBRATIONS = Path(__file__).resolve().parents[3] / "results" / "simulator"
DEFAULT_CALIBRATED = "smollm2-135m-instruct"  # the Serving tab's default model, calibrated on this machine
MAX_VIEW_REQUESTS = 48  # a few dozen rows: more do not read as rows any more
VIEW_LIMITS = Limits(max_requests=MAX_VIEW_REQUESTS, max_steps=3_000, max_wall_s=10.0)


@dataclass(frozen=True)
class Preset:
    """A load and the scheduler it runs on. concurrency: a closed loop; rate: evenly spaced arrivals (per s)."""

    key: str
    requests: int
    prompt_tokens: int
    output_tokens: int
    num_blocks: int
    block_size: int = 32
    max_num_seqs: int = 128
    max_num_batched_tokens: int = 512
    prefix_tokens: int = 0
    concurrency: int | None = None
    rate: float | None = None
    window: int | None = None  # every layer a sliding window of this many tokens (one sliding KV group)

    def workload(self, requests: int | None = None) -> Workload:
        n = requests or self.requests
        if self.concurrency is not None:
            return closed_loop(n, self.concurrency, self.prompt_tokens, self.output_tokens, self.prefix_tokens)
        return open_loop(n, self.rate, self.prompt_tokens, self.output_tokens, self.prefix_tokens, poisson=False)

    def config(self) -> SchedulerConfig:
        groups = FULL_ATTENTION if self.window is None else (KvGroupSpec(SLIDING, self.window),)
        return SchedulerConfig(num_blocks=self.num_blocks, block_size=self.block_size, max_num_seqs=self.max_num_seqs,
                               max_num_batched_tokens=self.max_num_batched_tokens, max_model_len=1024, groups=groups)

    def load(self, requests: int | None = None) -> Load:
        """The same load for kvviz's load generator (ignore_eos: every request its full output, as simulated)."""
        n = requests or self.requests
        if self.concurrency is not None:
            return Load(CLOSED, min(self.concurrency, n), n, self.output_tokens)
        return Load(CONSTANT, n, n, self.output_tokens, rate=self.rate)


PRESETS = {p.key: p for p in (
    # Requests come every 1/6 s, each lives ~25 steps: the batch grows by one every two or three steps up to
    # max_num_seqs 4, and the later ones wait in the queue for a seat.
    Preset("fill", 12, 96, 24, num_blocks=48, max_num_seqs=4, rate=6.0),
    # A 640-token prompt every second with a 256-token budget: each is prefilled in three chunks, in the same
    # steps as the earlier requests' decodes, which keep their token each step (running first). Every half second
    # was too often once SmolLM2's calibration put 0.86 ms on a prompt token: a prompt came while the one before
    # was still in its chunks, and two shared the budget.
    Preset("chunk", 5, 640, 40, num_blocks=128, max_num_batched_tokens=256, rate=1.0),
    # Four requests of 64 + 96 tokens in 16 blocks of 32: each ends needing 5 blocks (20 in all). At step 65 the
    # first needs its fifth block, none is free, and the last admitted is preempted; it comes back when the
    # others end, with its first block still a prefix-cache hit.
    Preset("preempt", 4, 64, 96, num_blocks=16, concurrency=4),
    # Every prompt opens with the same 256 tokens (8 blocks): the first computes them, each later one finds them
    # in the prefix cache and computes only its own 64.
    Preset("prefix", 6, 320, 16, num_blocks=64, prefix_tokens=256, rate=2.0),
    # The "preempt" load on a model whose every layer attends over the last 64 tokens only (Mistral 7B v0.1's
    # shape, its window cut to fit): before each step a request frees the blocks wholly behind its window, so it
    # holds 2 or 3 blocks however long it grows, the four hold 12 at most, and nobody is preempted.
    Preset("window", 4, 64, 96, num_blocks=16, concurrency=4, window=64),
)}


def preset(key: object) -> Preset:
    return PRESETS[choice(key, "preset", tuple(PRESETS))]


def view_requests(value: object, top: int) -> int:
    """How many requests to simulate: a whole number from 1 to `top` (the view's rows; fewer where hosted)."""
    return whole_number(value, "requests", 1, top)


def calibration(model: str = DEFAULT_CALIBRATED) -> Calibration:
    """This machine's step-time calibration for `model`, as `python -m kvviz.sim calibrate` saved it."""
    path = CALIBRATIONS / f"calibration-{model}.json"
    if not path.is_file():
        raise InputError("sim.calibration_missing", path=str(path))
    return step_time.load(path)


def run_preset(p: Preset, requests: int | None = None, model: Calibration | None = None) -> SimResult:
    """The preset's load simulated with every step's detail, on the calibrated step times."""
    model = model or calibration()
    return simulate(p.workload(requests), p.config(), model.step, VIEW_LIMITS, detail=True)
