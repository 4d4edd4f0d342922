"""How many torch threads a model runs with on a CPU, chosen by timing its decode step.

A CPU shared with a web server and a browser decodes fastest on all its cores only when the model is
large enough to use them; a small one gains little and slows the page. choose_cpu_threads times the
engine's own decode_step (kvviz.engine.steps) with both counts and keeps a core free unless using it
pays. It knows torch's thread setting and the engine's steps; not the app that asks.
"""

from __future__ import annotations

import statistics

import torch

from kvviz.base.device import Stopwatch
from kvviz.engine.loading import LoadedModel
from kvviz.engine.steps import decode_step, new_cache, prefill

PROBE_PROMPT_TOKENS = 8


def step_seconds(lm: LoadedModel, threads: int, steps: int = 6) -> float:
    """Median seconds of one cached decode step of `lm` with `threads` torch threads (sets them)."""
    torch.set_num_threads(threads)
    model, cache = lm.model, new_cache(lm.model)
    prompt = torch.zeros((1, PROBE_PROMPT_TOKENS), dtype=torch.long, device=lm.device)  # [1, 8] of token 0
    times = []
    with torch.inference_mode():
        token = prefill(model, prompt, cache).argmax(dim=-1, keepdim=True)  # [1, 1]
        for _ in range(steps + 1):
            watch = Stopwatch(lm.device)
            token = decode_step(model, token, cache).argmax(dim=-1, keepdim=True)  # [1, 1]
            int(token)
            times.append(watch.elapsed())
    return statistics.median(times[1:])  # the first decode step warms up


def choose_cpu_threads(lm: LoadedModel, cores: int) -> int:
    """Torch threads for `lm` beside a web server: one core is left to the server and the browser unless
    using it too makes a decode step more than 10% faster (measured now, a dozen steps)."""
    if cores <= 1:
        return 1
    fewer, all_cores = step_seconds(lm, cores - 1), step_seconds(lm, cores)
    return cores if all_cores < 0.9 * fewer else cores - 1
