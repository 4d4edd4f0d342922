"""A preset's load on the local vLLM, and the simulator's run of the same load on that server's scheduler.

The load goes through kvviz's serving path: fresh synthetic prompts of the preset's lengths (a fresh seed each
time, so that no earlier run's prompts are still in the server's prefix cache; the shared prefix is shared within
the run), kvviz.serving.loadgen.run, and a metrics_reader.Watcher polling /metrics. The simulator then runs the
same workload on a SchedulerConfig made of what the server reports (its KV blocks less vLLM's null block, its
block size) and vLLM's CPU defaults (budget, sequences), with the step times calibrated for the served model
(the default model's where none was made for it). A host's time limit stops the load. Knows no gradio.
"""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass, replace

from kvviz.engine.hosting import HostPolicy
from kvviz.serving.endpoint import Endpoint
from kvviz.serving.loadgen import RunResult, run
from kvviz.serving.metrics_reader import CacheConfig, Watcher, server_view
from kvviz.serving.prompts import load_tokenizer, synthetic
from kvviz.sim.scheduler import SchedulerConfig
from kvviz.sim.simulate import SimResult, simulate
from kvviz.sim.step_time import Calibration
from kvviz.ui.scheduler.presets import CALIBRATIONS, DEFAULT_CALIBRATED, VIEW_LIMITS, Preset, calibration

ENGINE_MAX_MODEL_LEN = 1024  # kvviz.serving.local.LocalEngine.start's default, which the Serving tab keeps


@dataclass(frozen=True)
class RealRun:
    """The load as vLLM ran it (its records and /metrics samples), the server's cache, the simulator's run, and
    this machine's 1-minute load average when the load ended (other work slows vLLM, not the simulator)."""

    result: RunResult
    cache: CacheConfig
    sim: SimResult
    calibration: Calibration
    load_average: float

    @property
    def preemptions(self) -> float | None:
        view = server_view(self.result.samples)
        return view.preemptions if view else None


def served_calibration(model: str | None) -> Calibration:
    """The calibration made for the served model on this machine, else the default model's."""
    name = model if model and (CALIBRATIONS / f"calibration-{model}.json").is_file() else DEFAULT_CALIBRATED
    return calibration(name)


def checked_load(p: Preset, requests: int, policy: HostPolicy):
    """The preset's load; hosted, within the host's limits and stopped at its time limit."""
    load = p.load(requests)
    if policy.hosted:
        load = replace(load, duration_s=policy.time_limit_s, timeout_s=min(load.timeout_s, policy.time_limit_s))
        policy.check_load(load.concurrency, requests, p.output_tokens, p.prompt_tokens, load.duration_s, load.rate)
    return load


def engine_config(cache: CacheConfig) -> SchedulerConfig:
    """The server's scheduler as the simulator takes it: its pool less the null block, vLLM's CPU defaults."""
    return SchedulerConfig(num_blocks=cache.num_blocks - 1, block_size=cache.block_size,
                           max_model_len=ENGINE_MAX_MODEL_LEN)


def run_on_vllm(ep: Endpoint, folder, model: str | None, p: Preset, requests: int, policy: HostPolicy,
                cancel: threading.Event | None = None) -> RealRun | None:
    """The preset's load on the server, then the simulator's run of it; None when the server's /metrics did not
    give its KV cache's size."""
    load = checked_load(p, requests, policy)
    prompts = synthetic(requests, p.prompt_tokens, load_tokenizer(folder), seed=random.randrange(10**9),
                        shared_prefix=p.prefix_tokens)
    cancel = cancel or threading.Event()
    timer = threading.Timer(policy.time_limit_s, cancel.set) if policy.hosted else None
    if timer is not None:
        timer.start()
    watcher = Watcher(ep)
    try:
        result = run(ep, load, prompts, cancel=cancel, watcher=watcher)
    finally:
        if timer is not None:
            timer.cancel()
    if watcher.cache is None:
        return None
    c = served_calibration(model)
    sim = simulate(p.workload(requests), engine_config(watcher.cache), c.step, VIEW_LIMITS)
    return RealRun(result, watcher.cache, sim, c, round(os.getloadavg()[0], 1))
