"""Part 6, on a GPU: parts 1-4, the static mode (part `fast`) and the leak check on CUDA with random-weight twins
of Qwen2.5-0.5B and Llama-3-8B in bf16, in one run of a few minutes that downloads nothing and imports only
torch, transformers, pandas and kvviz's core.

`python -m kvviz.bench gpu` writes overhead, payoff, memory, hardware and fast results (the same files the CPU
parts write; fast with CUDA graphs, on the Qwen2.5-0.5B twin) and leaks (200 generations, CUDA allocated memory
after each) into results/gpu/. On a GPU
the memory check builds every family's twin whole (no layers dropped). `--quick` runs the same code on
the CPU with a small twin in seconds, so the script is tested where no GPU is.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import torch

from kvviz.bench.common import LESSON_PROMPT, LONG_PROMPT, write_results
from kvviz.bench.fast import fast_bench, summarize_fast
from kvviz.bench.hardware import hardware_limit, summarize_hardware
from kvviz.bench.leaks import cuda_generations, summarize_leaks
from kvviz.bench.memory_truth import FULL, QUICK, memory_truth, summarize_memory
from kvviz.bench.overhead import overhead, summarize_overhead
from kvviz.bench.payoff import fit_payoff, payoff
from kvviz.calc.hardware import measure_device
from kvviz.engine.loading import LoadError, load_model, unload_all
from kvviz.engine.packaged import FetchError

GPU_MODELS = ("random:qwen2.5-0.5b@bf16", "random:llama-3-8b@bf16")
QUICK_MODELS = ("random:smollm2-135m@fp32",)


@dataclasses.dataclass(frozen=True)
class Plan:
    """How much each part runs: the full plan on CUDA, the quick one anywhere."""

    device: str
    models: tuple[str, ...]
    overhead_tokens: int
    repeats: int
    payoff_tokens: int
    matvec_mib: int
    matmul_n: int
    leak_runs: int
    long_prompt: str = LONG_PROMPT  # about 1,600 tokens of a twin's byte-level tokenizer
    fast_models: tuple[str, ...] = ("random:qwen2.5-0.5b@bf16",)  # the static mode's: its target is set on this one


FULL_PLAN = Plan("cuda", GPU_MODELS, 64, 5, 512, 2048, 8192, 200)
QUICK_PLAN = Plan("cpu", QUICK_MODELS, 4, 1, 8, 32, 512, 3, LONG_PROMPT[:160], fast_models=("tiny@fp32",))


def _free(device: str) -> None:
    unload_all()
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def _overhead(out: Path, plan: Plan, argv: Sequence[str] | None) -> None:
    frames, summary = [], {}
    for spec in plan.models:
        model, _, dtype = spec.partition("@")
        lm = load_model(model, device=plan.device, dtype=dtype)
        frame = overhead(lm, LESSON_PROMPT, plan.overhead_tokens, plan.repeats)
        frames.append(frame)
        summary[spec] = summarize_overhead(frame)
    write_results(out, "overhead", pd.concat(frames), summary, argv)


def _payoff(out: Path, plan: Plan, argv: Sequence[str] | None) -> None:
    frames, summary = [], {}
    for spec in plan.models:
        model, _, dtype = spec.partition("@")
        lm = load_model(model, device=plan.device, dtype=dtype)
        for name, prompt in {"short": LESSON_PROMPT, "long": plan.long_prompt}.items():
            rows, prediction = payoff(lm, prompt, plan.payoff_tokens)
            summary[f"{spec} {name}"] = {"prompt_tokens": int(rows["seq_len"].min()), **fit_payoff(rows, prediction)}
            frames.append(rows.assign(model=spec, prompt=name).merge(prediction, on=["index"], suffixes=("", "_pred")))
    write_results(out, "payoff", pd.concat(frames), summary, argv)


def _fast(out: Path, plan: Plan, accel, quick: bool, argv: Sequence[str] | None) -> None:
    """The static mode beside the plain loops and model.generate, against the bandwidth part 4 measured."""
    frame = fast_bench(list(plan.fast_models), LESSON_PROMPT, plan.overhead_tokens, 3 if not quick else 1, 1,
                       accel.bandwidth, plan.device)
    write_results(out, "fast", frame, summarize_fast(frame, accel.bandwidth, accel.note), argv)


def _memory(out: Path, plan: Plan, quick: bool, argv: Sequence[str] | None) -> None:
    """Every family's cache measured against the prediction; a family whose real model cannot be had here (the
    GPU machine reaches no package registry, so SmolLM2's packaged weights may be missing) is listed as not
    measured, with why, and the others still are."""
    # The GPU holds every family's model whole; the CPU run keeps the quick twins' few layers.
    families = QUICK if quick else tuple(dataclasses.replace(f, layers=None) for f in FULL)
    frames, missing = [], {}
    for family in families:
        try:
            frames.append(memory_truth((family,), plan.device, "bf16" if plan.device == "cuda" else None))
        except (LoadError, FetchError) as exc:
            missing[f"{family.preset}: {family.family}"] = str(exc)
        _free(plan.device)
    frame = pd.concat(frames, ignore_index=True)
    write_results(out, "memory", frame, {**summarize_memory(frame), "not_measured": missing}, argv)


def _hardware_and_fast(out: Path, plan: Plan, quick: bool, argv: Sequence[str] | None) -> None:
    accel = measure_device(plan.device, plan.matvec_mib, plan.matmul_n, 5 if not quick else 2)
    frame = hardware_limit(list(plan.models), accel, plan.overhead_tokens, 3 if not quick else 1, plan.device,
                           plan.long_prompt)
    write_results(out, "hardware", frame, summarize_hardware(frame, accel), argv)
    _free(plan.device)
    _fast(out, plan, accel, quick, argv)


def _leaks(out: Path, plan: Plan, argv: Sequence[str] | None) -> None:
    frame = cuda_generations(plan.models[0], plan.leak_runs, 8, plan.device)
    write_results(out, "leaks", frame, summarize_leaks(frame, min(20, plan.leak_runs)), argv)


def run_gpu(out: Path, quick: bool, argv: Sequence[str] | None) -> dict[str, str]:
    """Run parts 1-4, fast and leaks under the plan, each part on its own: one that fails is recorded (its error's
    last lines) and the next still runs, since a GPU is lent for minutes at a time. The seconds each part took and
    the failures are saved in out/gpu-run.json; returns the failures, by part (empty when all ran)."""
    plan = QUICK_PLAN if quick else FULL_PLAN
    parts = {"overhead": lambda: _overhead(out, plan, argv), "payoff": lambda: _payoff(out, plan, argv),
             "memory": lambda: _memory(out, plan, quick, argv),
             "hardware and fast": lambda: _hardware_and_fast(out, plan, quick, argv),
             "leaks": lambda: _leaks(out, plan, argv)}
    seconds: dict[str, float] = {}
    failed: dict[str, str] = {}
    for name, part in parts.items():
        start = time.perf_counter()
        try:
            part()
        except Exception as exc:  # recorded whole; the other parts still run
            failed[name] = "".join(traceback.format_exception(exc)[-4:]).strip()
            print(f"part {name} failed:\n{failed[name]}", file=sys.stderr)
        seconds[name] = time.perf_counter() - start
        _free(plan.device)

    seconds["total"] = sum(seconds.values())
    write_results(out, "gpu-run", pd.DataFrame([seconds]), {"seconds": seconds, "failed": failed, "plan": {
        **{k: v for k, v in dataclasses.asdict(plan).items() if k != "long_prompt"},
        "long_prompt_chars": len(plan.long_prompt)}},
                  argv)
    return failed
