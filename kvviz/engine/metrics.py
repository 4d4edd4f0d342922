"""Run summaries: the latency and throughput metrics serving benchmarks use, from one run's timestamps.

Definitions follow ../reference/metrics.md: t0 is the moment the request was received (before it
waited for the device); TTFT = first token - t0; ITL = gaps between tokens after the first;
E2E = last token - t0; TPOT = (E2E - TTFT) / (n - 1). The lesson's own keys (prompt_tokens,
new_tokens, ttft_s, tpot_s, tokens_per_s) keep their meaning. A batch's summary (BatchSummary) counts per
forward pass of B rows. This module only does arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from itertools import pairwise


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation, as numpy's default; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class RunSummary:
    """What one generation measured. Times in seconds, rates per second, bytes in bytes."""

    model: str
    device: str
    dtype: str
    mode: str  # "cached", "uncached" or "static" (cached, static + compiled)
    finish_reason: str
    prompt_tokens: int
    new_tokens: int
    ttft_s: float | None
    tpot_s: float | None
    tokens_per_s: float | None
    queue_s: float
    tokenize_s: float
    prefill_s: float | None
    prefill_tokens_per_s: float | None
    e2e_s: float | None
    decode_tokens_per_s: float | None
    itl_s: list[float] = field(default_factory=list)
    itl_p50_s: float | None = None
    itl_p90_s: float | None = None
    itl_p99_s: float | None = None
    bytes_per_decode_step: float | None = None
    bandwidth_achieved: float | None = None  # bytes/s
    bandwidth_bound: float | None = None  # the device's bytes/s
    bandwidth_utilisation: float | None = None
    bandwidth_source: str = ""
    compile_s: float = 0.0  # the static mode's compile, left out of every time above (0: none, or reused)

    def lesson(self) -> dict:
        """The lesson script's five keys, with its meanings."""
        return {k: getattr(self, k) for k in ("prompt_tokens", "new_tokens", "ttft_s", "tpot_s", "tokens_per_s")}

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BatchSummary:
    """What one batch measured. Times in seconds since the batch was received, rates per second, bytes in bytes.

    ttft_s: the prefill's end, every row's first token. decode_step_median_s: the median BatchStep.dt_s over
    decode steps (the forward pass alone). tokens_per_s: all rows' new tokens / e2e_s; per sequence: that / B.
    decode_tokens_per_s: tokens from decode steps / (e2e_s - ttft_s).
    """

    model: str
    device: str
    dtype: str
    mode: str
    batch_size: int
    prompt_tokens: tuple[int, ...]
    padded_len: int
    queue_s: float
    tokenize_s: float
    prefill_s: float
    ttft_s: float
    decode_steps: int
    decode_step_median_s: float | None
    new_tokens: int
    e2e_s: float
    tokens_per_s: float
    tokens_per_s_per_sequence: float
    decode_tokens_per_s: float | None
    peak_kv_bytes: int
    peak_padding_bytes: int


def decode_bandwidth(step_bytes: float | None, decode_tokens_per_s: float | None) -> float | None:
    """Bytes/s a decode loop moved: bytes one step reads (weights + KV cache) × decode steps per second, as
    gpt-fast reports it; None without both. The one rule for every mode, the benchmarks' included."""
    return step_bytes * decode_tokens_per_s if step_bytes and decode_tokens_per_s else None


def summarize(*, model: str, device: str, dtype: str, mode: str, finish_reason: str, prompt_tokens: int,
              token_times: list[float], queue_s: float, tokenize_s: float, prefill_s: float | None,
              weight_bytes: int, kv_bytes_read: list[int], bandwidth_bound: float | None,
              bandwidth_source: str, compile_s: float = 0.0) -> RunSummary:
    """Build the summary from token timestamps (seconds since t0, first token first).

    kv_bytes_read: KV bytes each decode step read (the cache as it stood when the step began; a static cache is
    read whole, its unwritten positions masked). Bandwidth achieved: decode_bandwidth.
    """
    n = len(token_times)
    ttft = token_times[0] if n else None
    e2e = token_times[-1] if n else None
    itl = [b - a for a, b in pairwise(token_times)]
    decode_s = (e2e - ttft) if n > 1 else None
    decode_rate = (n - 1) / decode_s if decode_s else None
    step_bytes = weight_bytes + sum(kv_bytes_read) / len(kv_bytes_read) if kv_bytes_read else None
    achieved = decode_bandwidth(step_bytes, decode_rate)
    return RunSummary(
        model=model, device=device, dtype=dtype, mode=mode, finish_reason=finish_reason,
        prompt_tokens=prompt_tokens, new_tokens=n, ttft_s=ttft,
        tpot_s=(e2e - ttft) / max(n - 1, 1) if n else None,
        tokens_per_s=n / e2e if n and e2e else None,
        queue_s=queue_s, tokenize_s=tokenize_s, prefill_s=prefill_s,
        prefill_tokens_per_s=prompt_tokens / prefill_s if prefill_s else None,
        e2e_s=e2e, decode_tokens_per_s=decode_rate, itl_s=itl,
        itl_p50_s=percentile(itl, 50), itl_p90_s=percentile(itl, 90), itl_p99_s=percentile(itl, 99),
        bytes_per_decode_step=step_bytes, bandwidth_achieved=achieved, bandwidth_bound=bandwidth_bound,
        bandwidth_utilisation=achieved / bandwidth_bound if achieved and bandwidth_bound else None,
        bandwidth_source=bandwidth_source, compile_s=compile_s,
    )
