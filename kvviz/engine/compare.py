"""Cached against uncached decoding on the same prompt, device and settings, with the model's prediction; on
request a third mode beside them, cached on a static cache with a compiled decode step (static).

Every mode runs after a short warm-up of each, one after the other. The result holds the per-token
rows of all (a pandas DataFrame), the speedup, whether the tokens agree and where they first part,
and the roofline prediction for every step: with the cache a step reads the weights and the cache
and does work that barely grows; without it every step is a prefill of the whole sequence; on a static
cache a step reads the whole preallocated cache, its unwritten positions masked. The static warm-up is
sized like the measured run, so it is the one that compiles and the measured run reuses the compiled step.
Comparison.runs lists every mode that ran, one ModeRun each, for a view that shows them side by side.
CompareProgress says how far a comparison is (tokens made over tokens planned, and the phase, a compile told with what
to expect before it starts), for the page's progress bar. It knows the engine and the estimates; it draws
nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import pandas as pd

from kvviz.base.errors import InputError, KvvizError
from kvviz.calc.dtypes import kv_dtype, weight_dtype
from kvviz.calc.hardware import device_accelerator
from kvviz.calc.params import count_params
from kvviz.calc.roofline import decode_estimate, prefill_estimate
from kvviz.engine.admission import static_cache_tokens
from kvviz.engine.compiled import has_decoder, last_compile_s
from kvviz.engine.events import Finished, TokenEvent
from kvviz.engine.loading import LoadedModel
from kvviz.engine.loop import run_to_end
from kvviz.engine.metrics import RunSummary
from kvviz.engine.request import MODE_LABELS, GenerationRequest
from kvviz.i18n import Said, said


class CompareError(KvvizError, RuntimeError):
    """One of the runs failed; the message is its error."""


@dataclass(frozen=True)
class ModeRun:
    """One mode's measured run in a comparison, with how it stands against the others."""

    mode: str  # "cached", "uncached" or "static"
    summary: RunSummary
    text: str
    speedup: float  # uncached time / this run's time, request received to last token, queue (and compile) excluded
    decode_speedup: float | None  # uncached TPOT / this run's TPOT
    tokens_identical: bool  # the same tokens as the cached run
    first_divergence: int | None  # index of the first token where this run parts from the cached one
    compile_s: float = 0.0  # static: compiling its step during the comparison (0 when an earlier request had)
    cache_tokens: int | None = None  # static: the preallocated cache's length in tokens

    @property
    def label(self) -> str:
        return MODE_LABELS[self.mode]

    def as_dict(self) -> dict:
        return {"mode": self.mode, "label": self.label, "speedup": self.speedup,
                "decode_speedup": self.decode_speedup, "tokens_identical": self.tokens_identical,
                "first_divergence": self.first_divergence, "compile_s": self.compile_s,
                "cache_tokens": self.cache_tokens, "summary": self.summary.as_dict(),
                "lesson": self.summary.lesson(), "text": self.text}


@dataclass(frozen=True)
class Comparison:
    rows: pd.DataFrame  # one row per token per mode
    prediction: pd.DataFrame  # one row per step: predicted FLOPs, bytes and lower-bound time, both modes
    cached: RunSummary
    uncached: RunSummary
    cached_text: str
    uncached_text: str
    speedup: float  # uncached time / cached time, request received to last token, queue excluded
    decode_speedup: float | None  # uncached TPOT / cached TPOT
    tokens_identical: bool
    first_divergence: int | None  # index of the first token where the two runs part
    compared_tokens: int
    static: ModeRun | None = None  # the third mode, when the comparison was asked to run it

    @property
    def runs(self) -> tuple[ModeRun, ...]:
        """Every mode that ran, in the order to show them: cached, uncached, then static when it ran."""
        cached = ModeRun("cached", self.cached, self.cached_text, self.speedup, self.decode_speedup, True, None)
        uncached = ModeRun("uncached", self.uncached, self.uncached_text, 1.0, 1.0 if self.decode_speedup else None,
                           self.tokens_identical, self.first_divergence)
        return (cached, uncached) if self.static is None else (cached, uncached, self.static)

    def as_dict(self) -> dict:
        out = {
            "speedup": self.speedup, "decode_speedup": self.decode_speedup,
            "tokens_identical": self.tokens_identical, "first_divergence": self.first_divergence,
            "compared_tokens": self.compared_tokens,
            "cached": {"summary": self.cached.as_dict(), "lesson": self.cached.lesson(), "text": self.cached_text},
            "uncached": {"summary": self.uncached.as_dict(), "lesson": self.uncached.lesson(),
                         "text": self.uncached_text},
            "rows": self.rows.to_dict(orient="records"),
            "prediction": self.prediction.to_dict(orient="records"),
        }
        if self.static is not None:
            out["static"] = self.static.as_dict()
        return out


def token_frame(tokens: list[TokenEvent], mode: str) -> pd.DataFrame:
    """Per-token rows of one run."""
    frame = pd.DataFrame([asdict(t) for t in tokens], columns=list(TokenEvent.__dataclass_fields__))
    frame.insert(0, "mode", mode)
    return frame


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where two token lists differ (within the shorter), or None."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)


def predict_steps(lm: LoadedModel, prompt_tokens: int, steps: int, static_tokens: int | None = None) -> pd.DataFrame:
    """Roofline lower bounds per step for each mode on this device.

    Step 0 is the prefill in every mode. After it, the cached step i decodes one token against
    prompt_tokens + i - 1 cached ones; the uncached step i runs a prefill of prompt_tokens + i tokens; with
    static_tokens, the static step i reads and attends over the whole static cache, static_tokens positions
    (columns static_*).
    """
    arch = lm.arch
    count = count_params(arch)
    accel = device_accelerator(str(lm.device))
    wd, kvd = weight_dtype(lm.dtype_name), kv_dtype(lm.dtype_name)
    whole = decode_estimate(arch, count, accel, wd, kvd, 1, static_tokens) if static_tokens else None
    rows = []
    for i in range(steps):
        seq_len = prompt_tokens + i
        full = prefill_estimate(arch, count, accel, wd, kvd, 1, seq_len)
        cached = full if i == 0 else decode_estimate(arch, count, accel, wd, kvd, 1, seq_len)
        row = {"index": i, "seq_len": seq_len,
               "cached_flops": cached.flops, "cached_bytes": cached.bytes,
               "cached_lower_bound_s": cached.lower_bound_s,
               "uncached_flops": full.flops, "uncached_bytes": full.bytes,
               "uncached_lower_bound_s": full.lower_bound_s}
        if whole is not None:
            static = full if i == 0 else whole
            row.update(static_flops=static.flops, static_bytes=static.bytes, static_lower_bound_s=static.lower_bound_s)
        rows.append(row)
    return pd.DataFrame(rows)


REPORT_S = 0.25  # progress at most this often: each report crosses to the page's process


class CompareProgress:
    """How far a comparison is, for a caller's `report(fraction, Said)`: tokens made over tokens planned across
    its runs (warm-ups, then the measured ones), with the phase; at most every REPORT_S, and at once when the
    phase changes (a compile, which makes no token for seconds to minutes, is told before it starts)."""

    def __init__(self, report: Callable[[float, Said], None] | None, planned: int) -> None:
        self.report, self.planned, self.done = report, max(planned, 1), 0
        self._sent = 0.0

    def phase(self, message: Said) -> None:
        self._send(message, force=True)

    def tokens(self, mode: str, n: int) -> Callable[[TokenEvent], None]:
        """The on_token of one measured run of `n` tokens in `mode`."""
        def on_token(event: TokenEvent) -> None:
            self.done += 1
            self._send(said("progress.compare_tokens", mode=MODE_SAID[mode], k=event.index + 1, n=n))
        return on_token

    def warm(self, event: TokenEvent) -> None:
        self.done += 1

    def _send(self, message: Said, force: bool = False) -> None:
        now = time.monotonic()
        if self.report is not None and (force or now - self._sent >= REPORT_S):
            self._sent = now
            self.report(min(self.done / self.planned, 1.0), message)


MODE_SAID = {"cached": said("progress.mode_cached"), "uncached": said("progress.mode_uncached"),
             "static": said("progress.mode_static")}


def _compile_note(lm: LoadedModel, length: int) -> Said:
    """What to expect before the static mode's step compiles: nothing to wait for when this process holds it
    already, the last compile's time on this machine, or that it is the first one."""
    if has_decoder(lm.model, length):
        return said("progress.static_warmup")
    last = last_compile_s(lm.model, length)
    if last is None:
        return said("progress.compiling_first", length=f"{length:,}")
    return said("progress.compiling_again", length=f"{length:,}", s=f"{last:,.0f}")


def _run(lm: LoadedModel, req: GenerationRequest, cancel: threading.Event | None,
         on_token: Callable[[TokenEvent], None] | None = None) -> tuple[list[TokenEvent], Finished]:
    tokens, finished = run_to_end(lm, req, cancel, on_token)
    if finished is not None and finished.bad_input:
        raise InputError("run.failed", why=finished.error)  # what was asked cannot run (a prompt too long)
    if cancel is not None and cancel.is_set():
        raise CompareError("compare.stopped")
    if finished is None or finished.summary is None:
        raise (CompareError("run.failed", why=finished.error) if finished and finished.error else
               CompareError("run.unfinished"))
    return tokens, finished


def _work_s(summary: RunSummary) -> float:
    """A run's time from request received to last token, its wait for the device left out."""
    return summary.e2e_s - summary.queue_s


def _tpot_ratio(slow: RunSummary, fast: RunSummary, tokens: int) -> float | None:
    return slow.tpot_s / fast.tpot_s if slow.tpot_s and fast.tpot_s and tokens > 1 else None


def compare(lm: LoadedModel, req: GenerationRequest, warmup_tokens: int = 4,
            cancel: threading.Event | None = None, static: bool = False,
            report: Callable[[float, Said], None] | None = None) -> Comparison:
    """Run `req` with and without the cache (after warming both up) and put the two side by side; with
    static, also on a static cache with a compiled decode step (kvviz.engine.compiled), the third run.

    Setting `cancel` stops the run in progress within a token and ends the comparison with CompareError.
    report(fraction, phase) is told how far it is (CompareProgress).
    """
    warm = replace(req, max_new_tokens=min(warmup_tokens, req.max_new_tokens))
    modes = 3 if static else 2
    progress = CompareProgress(report, modes * (warm.max_new_tokens + req.max_new_tokens))
    progress.phase(said("progress.warmup"))
    _, warm_fin = _run(lm, warm.with_mode("cached"), cancel, progress.warm)
    _run(lm, warm.with_mode("uncached"), cancel, progress.warm)
    length = static_warm_fin = None
    if static:
        # The warm-up gets the measured run's cache length, so that it compiles the step the measured run uses.
        length = static_cache_tokens(lm, req.with_mode("static", req.static_tokens), warm_fin.summary.prompt_tokens)
        progress.phase(_compile_note(lm, length))
        _, static_warm_fin = _run(lm, warm.with_mode("static", length), cancel, progress.warm)
    n = req.max_new_tokens
    c_tokens, c_fin = _run(lm, req.with_mode("cached"), cancel, progress.tokens("cached", n))
    u_tokens, u_fin = _run(lm, req.with_mode("uncached"), cancel, progress.tokens("uncached", n))
    c_ids, u_ids = [t.token_id for t in c_tokens], [t.token_id for t in u_tokens]
    split = first_divergence(c_ids, u_ids)
    cs, us = c_fin.summary, u_fin.summary
    frames = [token_frame(c_tokens, "cached"), token_frame(u_tokens, "uncached")]
    static_run = None
    if static:
        s_tokens, s_fin = _run(lm, req.with_mode("static", length), cancel, progress.tokens("static", n))
        s_ids, ss = [t.token_id for t in s_tokens], s_fin.summary
        frames.append(token_frame(s_tokens, "static"))
        static_run = ModeRun("static", ss, s_fin.text, _work_s(us) / _work_s(ss), _tpot_ratio(us, ss, len(s_ids)),
                             s_ids == c_ids, first_divergence(c_ids, s_ids),
                             compile_s=static_warm_fin.summary.compile_s + ss.compile_s, cache_tokens=length)
    return Comparison(
        rows=pd.concat(frames, ignore_index=True),
        prediction=predict_steps(lm, cs.prompt_tokens, max(len(f) for f in frames), length),
        cached=cs, uncached=us, cached_text=c_fin.text, uncached_text=u_fin.text,
        speedup=_work_s(us) / _work_s(cs), decode_speedup=_tpot_ratio(us, cs, len(c_ids)),
        tokens_identical=c_ids == u_ids, first_divergence=split, compared_tokens=min(len(c_ids), len(u_ids)),
        static=static_run,
    )
