"""What one decode step spends its time in, for the fast part's --profile: the eager cached step (the forward
pass model.generate and the cached loop run) and the static mode's compiled step, each profiled over a few
steps by torch.profiler (self time per operator and input shapes, per step), and on a CPU the oneDNN kernels
that ran the matrix products (oneDNN's verbose lines: which implementation, e.g. brg_matmul:avx10_1_512_amx,
on which problem, in how many ms). That is what a figure depends on and a machine record cannot show: whether a
bf16 matrix-vector product ran on AMX tiles, on AVX-512 or in a generic loop, whether the weights were prepacked for
oneDNN, and how much of a step is the Python that calls the kernels.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable

import pandas as pd
import torch

from kvviz.engine.compiled import static_decoder
from kvviz.engine.loading import LoadedModel
from kvviz.engine.steps import decode_step, new_cache, prefill

PROMPT_TOKENS = 32
WARM_STEPS = 3
PROFILED_STEPS = 5


def _steps(lm: LoadedModel, variant: str, length: int) -> Callable[[], None]:
    """A function that runs one more decode step of `variant` ('cached' or 'static') after a PROMPT_TOKENS
    prompt; each call feeds the token the last one chose."""
    model = lm.model
    prompt = torch.ones((1, PROMPT_TOKENS), dtype=torch.long, device=lm.device)
    if variant == "static":
        decoder, _ = static_decoder(model, length)
        logits = decoder.prefill(model, prompt)
        state = {"token": logits.argmax(-1, keepdim=True)}

        def step() -> None:
            state["token"] = decoder.decode(model, state["token"]).argmax(-1, keepdim=True)
    else:
        cache = new_cache(model)
        logits = prefill(model, prompt, cache)
        state = {"token": logits.argmax(-1, keepdim=True)}

        def step() -> None:
            state["token"] = decode_step(model, state["token"], cache).argmax(-1, keepdim=True)
    return step


def profile_steps(lm: LoadedModel, variant: str, length: int, top: int = 12) -> pd.DataFrame:
    """The `top` operators of one decode step by self time, averaged over PROFILED_STEPS steps after WARM_STEPS:
    operator, input shapes, calls and ms per step, share of the step's profiled time."""
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode():
        step = _steps(lm, variant, length)
        for _ in range(WARM_STEPS):
            step()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(PROFILED_STEPS):
                step()
    rows = [{"op": e.key, "shapes": str(e.input_shapes), "calls_per_step": e.count / PROFILED_STEPS,
             "self_ms_per_step": e.self_cpu_time_total / 1e3 / PROFILED_STEPS}
            for e in prof.key_averages(group_by_input_shape=True)]
    frame = pd.DataFrame(rows)
    total = frame["self_ms_per_step"].sum()
    frame["share"] = frame["self_ms_per_step"] / total
    frame = frame.sort_values("self_ms_per_step", ascending=False).head(top)
    return frame.assign(variant=variant, step_ms_profiled=total)


_VERBOSE = re.compile(r"^onednn_verbose,(?:v\d+,)?primitive,exec,cpu,(?P<primitive>[^,]+),(?P<impl>[^,]+),.*,"
                      r"(?P<problem>[^,]*),(?P<ms>[0-9.]+)\s*$")


def parse_onednn_verbose(text: str) -> pd.DataFrame:
    """oneDNN's verbose exec lines as rows: primitive, implementation, problem (e.g. 1x896:896x4864), ms."""
    rows = [{"primitive": m["primitive"], "implementation": m["impl"], "problem": m["problem"],
             "ms": float(m["ms"])}
            for m in map(_VERBOSE.match, text.splitlines()) if m]
    return pd.DataFrame(rows, columns=["primitive", "implementation", "problem", "ms"])


def onednn_kernels(lm: LoadedModel, variant: str, length: int) -> pd.DataFrame:
    """The oneDNN primitives one decode step of `variant` ran on a CPU, grouped by implementation and problem:
    calls and ms per step. Empty when oneDNN ran nothing (the matrix products went elsewhere: MKL, or a
    generic loop). oneDNN writes its verbose lines to the process's standard output, read here through a file."""
    if lm.device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return group_kernels(parse_onednn_verbose(""))
    with torch.inference_mode():
        step = _steps(lm, variant, length)
        for _ in range(WARM_STEPS):
            step()
        with tempfile.TemporaryFile(mode="w+b") as sink:
            saved = os.dup(1)
            try:
                os.dup2(sink.fileno(), 1)
                with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                    step()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
    return group_kernels(parse_onednn_verbose(text))


def group_kernels(lines: pd.DataFrame) -> pd.DataFrame:
    """One step's verbose lines grouped by primitive, implementation and problem: calls and ms per step."""
    grouped = lines.groupby(["primitive", "implementation", "problem"], as_index=False).agg(
        calls_per_step=("ms", "size"), ms_per_step=("ms", "sum"))
    return grouped.sort_values("ms_per_step", ascending=False, ignore_index=True)


def profile_model(lm: LoadedModel, length: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both variants' top operators and oneDNN kernels for one loaded model, tagged with its spec and dtype."""
    tag = {"model": lm.spec, "dtype": lm.dtype_name}
    ops = pd.concat([profile_steps(lm, v, length) for v in ("cached", "static")], ignore_index=True)
    kernels = pd.concat([onednn_kernels(lm, v, length).assign(variant=v) for v in ("cached", "static")],
                        ignore_index=True)
    return ops.assign(**tag), kernels.assign(**tag)
