"""Part `fast`, the static mode against the plain loops: kvviz's three modes (cached, uncached, and cached on a
static cache with a compiled decode step) beside transformers' own model.generate (greedy, its default dynamic
cache), on the same model, prompt and number of new tokens. Per run: tokens/s end to end and in decode,
bandwidth achieved against the measured matrix-vector bandwidth, and the compile time, reported apart.

The engine's modes run through kvviz.engine.loop, so their figures are the RunSummary's; model.generate is
timed whole, and again for one token, so that its decode rate leaves out the prefill as the engine's does.
Bytes per decode step, and so bandwidth, follow the one rule (kvviz.engine.metrics.decode_bandwidth):
model.generate's step reads what the cached loop's reads (the same weights and the same growing cache).
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable
from dataclasses import replace

import pandas as pd
import torch

from kvviz.bench.overhead import run_generate
from kvviz.engine import regions
from kvviz.engine.compiled import decoder_lengths, forget_decoders
from kvviz.engine.loading import LoadedModel, load_model, unload_all
from kvviz.engine.loop import run_to_end
from kvviz.engine.metrics import RunSummary, decode_bandwidth
from kvviz.engine.request import GenerationRequest

ENGINE_MODES = ("cached", "static", "uncached")
VARIANTS = ("generate", *ENGINE_MODES)


def _engine_row(summary: RunSummary, bandwidth: float) -> dict:
    row = {"new_tokens": summary.new_tokens, "prompt_tokens": summary.prompt_tokens, "ttft_s": summary.ttft_s,
           "seconds": summary.e2e_s, "tokens_per_s": summary.tokens_per_s,
           "decode_tokens_per_s": summary.decode_tokens_per_s, "tpot_s": summary.tpot_s, "compile_s": summary.compile_s}
    return with_bytes(row, summary.bytes_per_decode_step, bandwidth)


def _generate_row(lm: LoadedModel, prompt: str, new_tokens: int) -> dict:
    """model.generate timed for new_tokens and for one token: its decode rate is (n - 1) / the difference.
    Its bytes per step and bandwidth are filled in from the cached loop's run (with_bytes)."""
    _, one_s = run_generate(lm, prompt, 1)
    n, seconds = run_generate(lm, prompt, new_tokens)
    decode_rate = (n - 1) / (seconds - one_s) if n > 1 and seconds > one_s else None
    return {"new_tokens": n, "prompt_tokens": None, "ttft_s": one_s, "seconds": seconds, "tokens_per_s": n / seconds,
            "decode_tokens_per_s": decode_rate, "tpot_s": 1 / decode_rate if decode_rate else None, "compile_s": 0.0}


def with_bytes(row: dict, step_bytes: float, bandwidth: float) -> dict:
    """A row with bytes per decode step and the bandwidth its decode rate achieved by them (the one rule)."""
    achieved = decode_bandwidth(step_bytes, row["decode_tokens_per_s"])
    return {**row, "bytes_per_decode_step": step_bytes, "bandwidth_achieved": achieved,
            "bandwidth_utilisation": achieved / bandwidth if achieved else None}


def _run(lm: LoadedModel, req: GenerationRequest) -> tuple[RunSummary, list[int]]:
    tokens, fin = run_to_end(lm, req)
    if fin is None or fin.summary is None:
        raise RuntimeError(f"{lm.spec} {req.mode}: {fin.error if fin else 'no finish'}")
    return fin.summary, [t.token_id for t in tokens]


def _say(line: str) -> None:
    """Progress on stderr (a full run takes minutes; stdout keeps the results' JSON)."""
    print(line, file=sys.stderr, flush=True)


def fast_runs(lm: LoadedModel, prompt: str, new_tokens: int, repeats: int, uncached_repeats: int,
              bandwidth: float, stream_read: Callable[[], float] | None = None) -> pd.DataFrame:
    """Every variant on `lm`, after a warm-up each (the static one compiles: its compile_s is the warm-up's row,
    repeat -1), then `repeats` timed rounds in a rotating order (uncached in the first uncached_repeats rounds
    only: it is slow and no target is set on it). EOS is ignored so every run makes new_tokens tokens.

    With `stream_read` (bytes/s of a plain streaming read, measured when called), each timed run is preceded by
    one, kept in its row (stream_read_before): a shared host's memory bandwidth moves by half from one minute to
    the next (28 to 51 GB/s on a 2-core EPYC within one run), so a run is set against the read beside it, not one
    made minutes earlier."""
    req = GenerationRequest(prompt, max_new_tokens=new_tokens, ignore_eos=True)
    base = {"model": lm.spec, "device": str(lm.device), "dtype": lm.dtype_name}
    _say(f"fast: {lm.spec}@{lm.dtype_name}: warm-ups, the static step's compile")
    run_generate(lm, prompt, min(new_tokens, 4))
    for mode in ("cached", "uncached"):
        _run(lm, replace(req, max_new_tokens=min(new_tokens, 4)).with_mode(mode))
    warm, _ = _run(lm, req.with_mode("static"))  # full length: the same static cache as the timed runs
    # The kernel the CPU's static step chose for each shape of its products, and each kernel's time for them
    choice = regions.kernel_choice(lm.model)
    rows = [{**base, "variant": "static", "repeat": -1, "tokens_identical": None, **_engine_row(warm, bandwidth),
             "kernels": "; ".join(f"{shape} {c['kernel']}" for shape, c in choice.items()) or None,
             "kernel_choice": json.dumps(choice)}]
    for rep in range(repeats):
        _say(f"fast: {lm.spec}@{lm.dtype_name}: round {rep + 1} of {repeats}")
        done, ids, before = {}, {}, {}
        for variant in VARIANTS[rep % len(VARIANTS):] + VARIANTS[: rep % len(VARIANTS)]:
            if variant == "uncached" and rep >= uncached_repeats:
                continue
            before[variant] = stream_read() if stream_read else None
            if variant == "generate":
                done[variant] = _generate_row(lm, prompt, new_tokens)
            else:
                summary, ids[variant] = _run(lm, req.with_mode(variant))
                done[variant] = _engine_row(summary, bandwidth)
        # model.generate's step reads what the cached loop's reads: the same weights and the same growing cache
        done["generate"] = with_bytes(done["generate"], done["cached"]["bytes_per_decode_step"], bandwidth)
        rows += [{**base, "variant": variant, "repeat": rep,
                  "tokens_identical": ids[variant] == ids["cached"] if variant in ids else None, **row,
                  "stream_read_before": before[variant]}
                 for variant, row in done.items()]
    return pd.DataFrame(rows)


def fast_bench(specs: list[str], prompt: str, new_tokens: int, repeats: int, uncached_repeats: int,
               bandwidth: float, device: str | None = None,
               profiles: list[tuple[pd.DataFrame, pd.DataFrame]] | None = None,
               stream_read: Callable[[], float] | None = None) -> pd.DataFrame:
    """fast_runs for each MODEL@DTYPE in `specs`, each model and its compiled steps freed before the next. With
    `profiles` (a list), each model's decode steps are also profiled after its timed rounds, on the static cache
    length the runs used (kvviz.bench.step_profile), and appended to it."""
    frames = []
    for spec in specs:
        model, _, dtype = spec.partition("@")
        lm = load_model(model, device=device, dtype=dtype or None)
        frames.append(fast_runs(lm, prompt, new_tokens, repeats, uncached_repeats, bandwidth, stream_read))
        if profiles is not None:
            from kvviz.bench.step_profile import profile_model

            profiles.append(profile_model(lm, max(decoder_lengths(lm.model))))
        del lm
        forget_decoders()
        unload_all()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return pd.concat(frames, ignore_index=True)


def with_stream_share(frame: pd.DataFrame, stream_bandwidth: float) -> pd.DataFrame:
    """Each run's achieved bandwidth as a share of a plain streaming read's (the physical ceiling): the read made
    just before the run where there is one (stream_read_before), else `stream_bandwidth`."""
    reads = frame.get("stream_read_before", pd.Series(float("nan"), frame.index))
    return frame.assign(share_of_stream_read=frame["bandwidth_achieved"] / reads.fillna(stream_bandwidth))


def summarize_fast(frame: pd.DataFrame, bandwidth: float, how: str, stream_bandwidth: float | None = None) -> dict:
    """Per model and dtype: medians of every variant's figures over the timed rounds, the static mode's compile
    and speedups, and the ceiling the measured bandwidth sets (tokens/s = bandwidth / bytes per step); with
    stream_bandwidth (a plain streaming read's, the physical ceiling), each variant's share of it too (the median
    of the rows' shares, with_stream_share)."""
    if stream_bandwidth:
        frame = with_stream_share(frame, stream_bandwidth)
    keys = ("tokens_per_s", "decode_tokens_per_s", "ttft_s", "bandwidth_utilisation", "bytes_per_decode_step",
            *(("share_of_stream_read",) if stream_bandwidth else ()))
    out = {"measured_bandwidth_gb_s": bandwidth / 1e9, "how": how, "models": {},
           "stream_read_bandwidth_gb_s": stream_bandwidth / 1e9 if stream_bandwidth else None}
    timed = frame[frame["repeat"] >= 0]
    for (model, dtype), group in timed.groupby(["model", "dtype"], sort=False):
        med = group.groupby("variant").median(numeric_only=True)
        pick = {v: {"share_of_stream_read": None} | {k: _num(med.loc[v, k]) for k in keys} for v in med.index}
        static, gen, cached = pick["static"], pick["generate"], pick["cached"]
        warm = frame[(frame["model"] == model) & (frame["dtype"] == dtype) & (frame["repeat"] < 0)]
        out["models"][f"{model}@{dtype}"] = {
            "variants": pick, "compile_s": float(warm["compile_s"].iloc[0]),
            **({"static_kernels": json.loads(warm["kernel_choice"].iloc[0])} if "kernel_choice" in warm else {}),
            "static_tokens_identical_to_cached": bool(group.loc[group["variant"] == "static",
                                                                "tokens_identical"].all()),
            "static_over_generate_decode": _ratio(static["decode_tokens_per_s"], gen["decode_tokens_per_s"]),
            "static_over_generate_end_to_end": _ratio(static["tokens_per_s"], gen["tokens_per_s"]),
            "static_over_cached_decode": _ratio(static["decode_tokens_per_s"], cached["decode_tokens_per_s"]),
            "decode_tokens_per_s_ceiling": bandwidth / static["bytes_per_decode_step"],
            "new_tokens": int(group["new_tokens"].max()), "repeats": int(group["repeat"].nunique()),
            **_spreads(group),
        }
    return out


def _spreads(group: pd.DataFrame) -> dict:
    """The static runs' shares of the streaming read beside them, and those reads (GB/s), as [min, max] over the
    rounds, where the rounds measured them."""
    static = group[group["variant"] == "static"]
    if "stream_read_before" not in static or static["stream_read_before"].isna().all():
        return {}
    reads, shares = static["stream_read_before"] / 1e9, static["share_of_stream_read"]
    return {"static_share_of_stream_read_range": [float(shares.min()), float(shares.max())],
            "stream_read_gb_s_range": [float(reads.min()), float(reads.max())]}


def _num(value) -> float | None:
    return None if pd.isna(value) else float(value)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def summarize_profiles(ops: pd.DataFrame, kernels: pd.DataFrame, top: int = 6) -> dict:
    """Per model and variant: the step's profiled ms, its `top` operators by self time (with input shapes and
    share of the step) and the oneDNN implementations that ran its matrix products (ms per step each)."""
    out: dict = {}
    for (model, dtype, variant), group in ops.groupby(["model", "dtype", "variant"], sort=False):
        mine = kernels[(kernels["model"] == model) & (kernels["dtype"] == dtype) & (kernels["variant"] == variant)]
        by_impl = mine.groupby("implementation")["ms_per_step"].sum().sort_values(ascending=False)
        out.setdefault(f"{model}@{dtype}", {})[variant] = {
            "step_ms_profiled": float(group["step_ms_profiled"].iloc[0]),
            "top_ops": [{"op": r.op, "shapes": r.shapes, "calls_per_step": r.calls_per_step,
                         "self_ms_per_step": round(r.self_ms_per_step, 3), "share": round(r.share, 3)}
                        for r in group.head(top).itertuples()],
            "onednn_ms_per_step": {impl: round(ms, 3) for impl, ms in by_impl.items()},
        }
    return out
