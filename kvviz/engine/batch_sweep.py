"""The batch sweep: the same prompts decoded together at B = 1, 2, 4, ... by kvviz's batched engine, each
measurement beside the roofline's prediction for that batch on this device.

Why batching is nearly free in decode: a decode step reads every weight once whatever the batch, and each
sequence adds only its own KV cache and its own FLOPs. While the step is bound by memory, B sequences cost
about what one does, so tokens/s grows about B-fold; once the FLOPs per byte read pass the device's ridge
point (peak FLOP/s / bandwidth) the step turns compute-bound and grows with B. The sweep stops at
`max_batch`, before a batch whose cache and weights the calculator says would not fit (kvviz.calc.capacity),
or at the first batch that runs out of memory on the device.

One row per batch size, columns (times in seconds, bytes in bytes, rates per second):

    model, device, dtype, accelerator   what ran, and the device figures the prediction used
    batch                      B, sequences decoded together
    prompt_tokens              the longest prompt of the batch (the padded width); new_tokens: per sequence
    context_tokens             tokens in each sequence's cache at the median decode step (what is predicted)
    prefill_s                  the batch's prefill pass, which gives every sequence its first token (median of
                               repeats); ttft_s: the same from the batch's arrival, tokenizing and admission included
    step_s                     median decode pass over every decode step of the repeats; step_min_s, step_max_s.
                               A pass is the forward pass alone, as the engine times it (BatchStep.dt_s)
    tokens_per_s_total         B / step_s: tokens the batch decodes per second
    tokens_per_s_per_seq       1 / step_s: what each sequence sees
    decode_tokens_per_s_loop   decode tokens / decode wall time of the engine's loop, its bookkeeping between
                               passes (detokenizing B rows, weighing the cache) included (median of repeats)
    kv_bytes                   the cache's tensors after the last step (measured), padding included
    kv_bytes_predicted         the memory model's bytes for the same cache (the engine's figure, padding included)
    padding_tokens             pad positions the batch carries (0 when every prompt has the same length)
    step_s_predicted           decode_estimate's lower bound: max(FLOPs / peak, bytes / bandwidth)
    step_memory_s_predicted, step_compute_s_predicted   its two terms
    bound_predicted            "memory" or "compute"; intensity_predicted: FLOPs per byte of the step
    weight_bytes_read_predicted  the weights one step reads, once for the whole batch
    kv_read_bytes_predicted    the rest of the step's bytes: every sequence's cache read, its new K/V written
    prefill_s_predicted        prefill_estimate's lower bound for B prompts; prefill_bound_predicted its bound
    tokens_per_s_total_predicted, tokens_per_s_per_seq_predicted   B and 1 over step_s_predicted
    step_over_predicted        step_s / step_s_predicted (>= 1 on a device the roofline describes)
    prefill_over_predicted     prefill_s / prefill_s_predicted
    bandwidth, peak_flops, ridge_point   the device's figures (bytes/s, FLOP/s, FLOP/B), the same on every row
    weights_bytes              the weights in the calculator's count (kvviz.calc.params.weight_bytes)
    compute_bound_batch        the smallest B whose decode step is compute-bound at context_tokens (NaN: none)
    memory_limit_batch         the largest B whose cache at prompt + new tokens fits beside the weights
    kv_budget_bytes            the calculator's KV budget: memory × mem_util − weights − reserve
    stop_reason                why the sweep ended: "max_batch", "memory (predicted)", "out of memory at B=…",
                               "cancelled"

Every row is one run of kvviz.engine.batch.run_batch with EOS ignored (each sequence makes new_tokens), after a
warm-up at the same B. It knows the engine and the calculator; it draws and prints nothing.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from kvviz.base.errors import InputError
from kvviz.base.units import GIB
from kvviz.calc.arch import Architecture
from kvviz.calc.capacity import capacity
from kvviz.calc.dtypes import kv_dtype, weight_dtype
from kvviz.calc.hardware import Accelerator, device_accelerator
from kvviz.calc.params import count_params, weight_bytes, weight_bytes_read_per_step
from kvviz.calc.roofline import decode_estimate, prefill_estimate
from kvviz.engine.admission import encode_prompt
from kvviz.engine.batch import BatchError, BatchRequest, run_batch
from kvviz.engine.loading import LoadedModel
from kvviz.i18n import said

COLUMNS = (
    "model", "device", "dtype", "accelerator", "batch", "prompt_tokens", "new_tokens", "context_tokens",
    "prefill_s", "ttft_s", "step_s", "step_min_s", "step_max_s", "tokens_per_s_total", "tokens_per_s_per_seq",
    "decode_tokens_per_s_loop",
    "kv_bytes", "kv_bytes_predicted", "padding_tokens",
    "step_s_predicted", "step_memory_s_predicted", "step_compute_s_predicted", "bound_predicted",
    "intensity_predicted", "weight_bytes_read_predicted", "kv_read_bytes_predicted", "prefill_s_predicted",
    "prefill_bound_predicted",
    "tokens_per_s_total_predicted", "tokens_per_s_per_seq_predicted", "step_over_predicted", "prefill_over_predicted",
    "bandwidth", "peak_flops", "ridge_point", "weights_bytes", "compute_bound_batch", "memory_limit_batch",
    "kv_budget_bytes", "stop_reason",
)
MAX_SEARCH_BATCH = 2**24  # compute_bound_batch looks no further: beyond it the step never turns compute-bound
STOP_MAX_BATCH, STOP_MEMORY, STOP_CANCELLED = "max_batch", "memory (predicted)", "cancelled"
Progress = Callable[[int, str], None]  # (batch, what is happening now)


@dataclass(frozen=True)
class SweepLimits:
    """What the roofline and the calculator say of a sweep before it runs: the device's figures, the batch where
    the decode step turns compute-bound (None: never, the FLOPs per byte level off below the ridge point) and
    the largest batch whose cache fits beside the weights."""

    accelerator: str
    bandwidth: float
    peak_flops: float
    ridge_point: float
    weights_bytes: int
    context_tokens: int
    compute_bound_batch: int | None
    memory_limit_batch: int
    kv_budget_bytes: int


def batch_sizes(max_batch: int) -> list[int]:
    """1, 2, 4, ... up to max_batch, and max_batch itself when it is not a power of two."""
    if max_batch < 1:
        raise InputError("sweep.max_batch", n=max_batch)
    sizes = [2**i for i in range(max_batch.bit_length()) if 2**i <= max_batch]
    return sizes if sizes[-1] == max_batch else [*sizes, max_batch]


def decode_context(prompt_tokens: int, new_tokens: int) -> int:
    """Tokens in each sequence's cache at the median decode step. Decode step i (1 .. new_tokens - 1) feeds
    token i and reads the prompt and the i - 1 tokens before it: prompt_tokens + i - 1 cached tokens."""
    if new_tokens < 2:
        raise InputError("sweep.new_tokens", n=new_tokens)
    return prompt_tokens + (new_tokens - 2) // 2


def predict_batch(arch: Architecture, accel: Accelerator, dtype: str, batch: int, prompt_tokens: int,
                  new_tokens: int) -> dict:
    """The roofline's columns for one batch: the decode step at the median context, and the prefill of B prompts,
    with weights and cache both in `dtype` (fp32, bf16, fp16: what the engine runs)."""
    count, wd, kvd = count_params(arch), weight_dtype(dtype), kv_dtype(dtype)
    step = decode_estimate(arch, count, accel, wd, kvd, batch, decode_context(prompt_tokens, new_tokens))
    prefill = prefill_estimate(arch, count, accel, wd, kvd, batch, prompt_tokens)
    weights_read = weight_bytes_read_per_step(arch, count, wd, batch)
    return {
        "step_s_predicted": step.lower_bound_s, "step_memory_s_predicted": step.memory_s,
        "step_compute_s_predicted": step.compute_s, "bound_predicted": step.bound,
        "intensity_predicted": step.intensity, "weight_bytes_read_predicted": weights_read,
        "kv_read_bytes_predicted": step.bytes - weights_read, "prefill_s_predicted": prefill.lower_bound_s,
        "prefill_bound_predicted": prefill.bound,
        "tokens_per_s_total_predicted": batch / step.lower_bound_s,
        "tokens_per_s_per_seq_predicted": 1 / step.lower_bound_s,
    }


def compute_bound_batch(arch: Architecture, accel: Accelerator, dtype: str, context_tokens: int) -> int | None:
    """The smallest batch whose decode step at `context_tokens` is compute-bound on `accel` (its FLOPs per byte
    reach the ridge point), or None when no batch up to MAX_SEARCH_BATCH is. Intensity grows with B, so the
    first compute-bound power of two is found, then the boundary below it by bisection."""
    count, wd, kvd = count_params(arch), weight_dtype(dtype), kv_dtype(dtype)

    def compute_bound(b: int) -> bool:
        return decode_estimate(arch, count, accel, wd, kvd, b, context_tokens).bound == "compute"

    hi = 1
    while not compute_bound(hi):
        if hi >= MAX_SEARCH_BATCH:
            return None
        hi *= 2
    lo = hi // 2  # not compute-bound (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    return hi


def sweep_limits(arch: Architecture, accel: Accelerator, dtype: str, prompt_tokens: int, new_tokens: int,
                 mem_util: float = 0.9, reserve_bytes: int = GIB) -> SweepLimits:
    """The sweep's limits on `accel`: the compute-bound batch at the median decode context, and the memory
    limit from the calculator (kvviz.calc.capacity) for sequences of prompt + new tokens, unpaged (block of
    one token, as transformers' cache grows token by token)."""
    weights = weight_bytes(count_params(arch), weight_dtype(dtype))
    context = decode_context(prompt_tokens, new_tokens)
    cap = capacity(arch, accel, kv_dtype(dtype), weights, 1, prompt_tokens + new_tokens, mem_util, reserve_bytes,
                   block_size=1)
    return SweepLimits(accelerator=accel.name, bandwidth=accel.bandwidth, peak_flops=accel.peak_flops,
                       ridge_point=accel.ridge_point, weights_bytes=weights, context_tokens=context,
                       compute_bound_batch=compute_bound_batch(arch, accel, dtype, context),
                       memory_limit_batch=cap.max_batch, kv_budget_bytes=cap.kv_budget_bytes)


@dataclass(frozen=True)
class BatchMeasurement:
    """What one batch size measured (the engine's figures, medians over the repeats)."""

    batch: int
    prompt_tokens: int  # the padded width: the longest prompt of the batch
    new_tokens: int
    prefill_s: float
    ttft_s: float
    step_s: float  # median decode step
    step_min_s: float
    step_max_s: float
    kv_bytes: int  # after the last step
    kv_bytes_predicted: int
    padding_tokens: int
    decode_tokens_per_s_loop: float


def sweep_frame(model: str, device: str, dtype: str, arch: Architecture, accel: Accelerator,
                measurements: Sequence[BatchMeasurement], limits: SweepLimits, stop_reason: str) -> pd.DataFrame:
    """The sweep's table (COLUMNS, one row per measurement): each measurement, its rates, the prediction for its
    batch on `accel`, the ratios of the two, and the sweep's limits repeated on every row, so that a saved CSV
    alone redraws every figure."""
    rows = []
    for m in measurements:
        pred = predict_batch(arch, accel, dtype, m.batch, m.prompt_tokens, m.new_tokens)
        rows.append({
            "model": model, "device": device, "dtype": dtype, "accelerator": limits.accelerator, "batch": m.batch,
            "prompt_tokens": m.prompt_tokens, "new_tokens": m.new_tokens,
            "context_tokens": decode_context(m.prompt_tokens, m.new_tokens),
            "prefill_s": m.prefill_s, "ttft_s": m.ttft_s, "step_s": m.step_s, "step_min_s": m.step_min_s,
            "step_max_s": m.step_max_s, "tokens_per_s_total": m.batch / m.step_s, "tokens_per_s_per_seq": 1 / m.step_s,
            "decode_tokens_per_s_loop": m.decode_tokens_per_s_loop,
            "kv_bytes": m.kv_bytes, "kv_bytes_predicted": m.kv_bytes_predicted, "padding_tokens": m.padding_tokens,
            **pred,
            "step_over_predicted": m.step_s / pred["step_s_predicted"],
            "prefill_over_predicted": m.prefill_s / pred["prefill_s_predicted"],
            "bandwidth": limits.bandwidth, "peak_flops": limits.peak_flops, "ridge_point": limits.ridge_point,
            "weights_bytes": limits.weights_bytes, "compute_bound_batch": limits.compute_bound_batch,
            "memory_limit_batch": limits.memory_limit_batch, "kv_budget_bytes": limits.kv_budget_bytes,
            "stop_reason": stop_reason,
        })
    # None (never compute-bound) becomes NaN: the column stays numeric in memory and in a CSV read back.
    frame = pd.DataFrame(rows, columns=list(COLUMNS)).astype({"compute_bound_batch": "float64"})
    # Also for a sweep that measured nothing; and kept as said (a keyed text, kvviz.i18n.Said), which a pandas 3
    # string column turns into its plain English, so that the explanation renders them in the reader's language.
    frame.attrs["stop_reason"], frame.attrs["accelerator"] = stop_reason, limits.accelerator
    return frame


def summarize_sweep(frame: pd.DataFrame) -> dict:
    """One model's sweep in plain numbers (JSON-ready): the first and last batch, the decode step and the rates
    at each, their growth, the measured / predicted ratio at each end and at its lowest, whether every cache
    measured what the memory model predicts, and the limits."""
    f = frame.sort_values("batch")
    first, last = f.iloc[0], f.iloc[-1]
    ratio = f.set_index("batch")["step_over_predicted"]
    cb = first["compute_bound_batch"]

    def at(row: pd.Series) -> dict:
        return {k: float(row[k]) for k in ("step_s", "step_min_s", "step_max_s", "step_s_predicted",
                                           "step_over_predicted", "tokens_per_s_total", "tokens_per_s_per_seq",
                                           "prefill_s", "prefill_s_predicted", "kv_bytes")}

    return {
        "model": str(first["model"]), "device": str(first["device"]), "dtype": str(first["dtype"]),
        "prompt_tokens": int(last["prompt_tokens"]), "new_tokens": int(last["new_tokens"]),
        "batches": [int(b) for b in f["batch"]], "first": {"batch": int(first["batch"]), **at(first)},
        "last": {"batch": int(last["batch"]), **at(last)},
        "step_growth": float(last["step_s"] / first["step_s"]),
        "step_growth_predicted": float(last["step_s_predicted"] / first["step_s_predicted"]),
        "tokens_per_s_growth": float(last["tokens_per_s_total"] / first["tokens_per_s_total"]),
        "prefill_growth": float(last["prefill_s"] / first["prefill_s"]),
        "lowest_ratio": float(ratio.min()), "lowest_ratio_batch": int(ratio.idxmin()),
        "kv_exact": bool((f["kv_bytes"] == f["kv_bytes_predicted"]).all()),
        "weights_bytes": int(first["weights_bytes"]), "ridge_point": float(first["ridge_point"]),
        "bandwidth": float(first["bandwidth"]), "peak_flops": float(first["peak_flops"]),
        "accelerator": frame.attrs.get("accelerator", str(first["accelerator"])),
        "compute_bound_batch": None if pd.isna(cb) else int(cb),
        "memory_limit_batch": int(first["memory_limit_batch"]), "kv_budget_bytes": int(first["kv_budget_bytes"]),
        "stop_reason": frame.attrs.get("stop_reason", str(first["stop_reason"])),
    }


def measure_batch(lm: LoadedModel, prompts: Sequence[str], new_tokens: int, repeats: int = 1,
                  warmup_tokens: int = 2, cancel: threading.Event | None = None) -> BatchMeasurement:
    """Decode `prompts` together (EOS ignored) after a short warm-up at the same batch size, `repeats` times.
    Raises as kvviz.engine.batch.run_batch does: ValueError (cannot run as asked), BatchError (failed or
    cancelled)."""
    run_batch(lm, BatchRequest(tuple(prompts), min(warmup_tokens, new_tokens), ignore_eos=True), cancel)
    results = [run_batch(lm, BatchRequest(tuple(prompts), new_tokens, ignore_eos=True), cancel)
               for _ in range(repeats)]
    steps = pd.concat([r.steps for r in results], ignore_index=True)
    decode = steps.loc[steps["phase"] == "decode", "dt_s"]
    last = results[-1].steps.iloc[-1]
    s = results[-1].summary
    return BatchMeasurement(
        batch=s.batch_size, prompt_tokens=s.padded_len, new_tokens=s.new_tokens // s.batch_size,
        prefill_s=statistics.median(steps.loc[steps["phase"] == "prefill", "dt_s"]),
        ttft_s=statistics.median(r.summary.ttft_s for r in results),
        step_s=float(decode.median()), step_min_s=float(decode.min()), step_max_s=float(decode.max()),
        kv_bytes=int(last["kv_bytes"]), kv_bytes_predicted=int(last["kv_bytes_predicted"]),
        padding_tokens=int(last["padding_tokens"]),
        decode_tokens_per_s_loop=statistics.median(r.summary.decode_tokens_per_s for r in results))


def _prompt_width(lm: LoadedModel, prompts: Sequence[str]) -> int:
    """The padded width of these prompts: the longest, in the model's tokens (as the engine counts them)."""
    return max(len(encode_prompt(lm, p, chat_template=False)[0]) for p in prompts)


def _run_one(lm: LoadedModel, prompts: Sequence[str], new_tokens: int, repeats: int, warmup_tokens: int,
             cancel: threading.Event | None) -> BatchMeasurement | str:
    """One batch size measured, or why the sweep stops here (out of memory, cancelled). A batch the engine's
    admission says cannot fit ends the sweep too, except at B=1, where nothing would be measured at all."""
    try:
        return measure_batch(lm, prompts, new_tokens, repeats, warmup_tokens, cancel)
    except ValueError as exc:
        if len(prompts) == 1:
            raise
        return said("sweep.no_fit", b=len(prompts), why=str(exc))
    except BatchError as exc:
        if cancel is not None and cancel.is_set():
            return STOP_CANCELLED
        if getattr(exc.values.get("why"), "key", None) != "run.oom":  # the failure as data, not its words
            raise
        return said("sweep.oom", b=len(prompts))


def batch_sweep(lm: LoadedModel, prompts: Sequence[str], new_tokens: int, max_batch: int | None = None, *,
                accel: Accelerator | None = None, repeats: int = 1, warmup_tokens: int = 2, mem_util: float = 0.9,
                reserve_bytes: int = GIB, cancel: threading.Event | None = None,
                progress: Progress | None = None) -> pd.DataFrame:
    """Measure B = 1, 2, 4, ... up to max_batch (default: every prompt) on the first B of `prompts`, beside the
    roofline's prediction on `accel` (default: this device's figures, kvviz.calc.hardware.device_accelerator).
    Stops early, without running it, at a batch the calculator says would not fit, and at the first batch that
    fails for memory or is cancelled. Returns the table the module docstring describes."""
    max_batch = len(prompts) if max_batch is None else max_batch
    if len(prompts) < max_batch:
        raise InputError("sweep.prompts", b=max_batch, n=max_batch, got=len(prompts))
    width = _prompt_width(lm, prompts[:max_batch])
    if lm.context_length and width + new_tokens > lm.context_length:
        raise InputError("sweep.context", width=width, new=new_tokens, context=lm.context_length)
    accel = accel or device_accelerator(str(lm.device))
    limits = sweep_limits(lm.arch, accel, lm.dtype_name, width, new_tokens, mem_util, reserve_bytes)
    done, stop = [], STOP_MAX_BATCH
    for b in batch_sizes(max_batch):
        if b > limits.memory_limit_batch:
            stop = STOP_MEMORY
            break
        if progress:
            progress(b, said("progress.sweep_batch", b=b, n=repeats, tokens=new_tokens))
        got = _run_one(lm, prompts[:b], new_tokens, repeats, warmup_tokens, cancel)
        if isinstance(got, str):
            stop = got
            break
        done.append(got)
    return sweep_frame(lm.spec, str(lm.device), lm.dtype_name, lm.arch, accel, done, limits, stop)
