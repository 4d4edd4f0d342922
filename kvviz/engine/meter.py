"""Measuring a run, in one place: the clock, the cache's bytes, the allocator, the text, the summary.

The loop hands its meter each sampled token; the meter reads the clock first (after the device has
synced, kvviz.base.device.Stopwatch), and only then weighs the cache (measured from its tensors and
predicted by the memory model), reads the CUDA allocator and detokenizes, so none of that is timed as the
model's work. It builds every token and finish event, by keyword, and the run's summary from the
timestamps it kept.

Two meters share their parts: Meter for one sequence (kvviz.engine.loop), BatchMeter for B rows decoded
together (kvviz.engine.batch). Both weigh memory with one MemoryGauge and stream each sequence's tokens through
one TokenLog, which numbers the tokens, times them and builds their events. What differs is what a run reports:
a single run times each token and its summary is the serving metrics (RunSummary); a batch times each forward
pass of all its rows (BatchStep) and reports rows, padding and passes (BatchSummary). This module knows events,
caches and metrics; it never runs the model.
"""

from __future__ import annotations

from typing import TypeVar

import torch

from kvviz.base.device import Stopwatch
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.hardware import bandwidth_source, device_accelerator
from kvviz.calc.memory import (
    EXPANDED,
    LATENT,
    layer_groups,
    static_cache_bytes,
    token_layer_bytes,
    transformers_cache_bytes,
)
from kvviz.engine.events import (
    BatchEvent,
    BatchFinished,
    BatchStep,
    BatchTokenEvent,
    Compiled,
    Finished,
    PrefillDone,
    RowFinished,
    TokenEvent,
)
from kvviz.engine.loading import LoadedModel, transformers_keeps_mla_latent
from kvviz.engine.metrics import BatchSummary, RunSummary, percentile, summarize
from kvviz.engine.steps import cache_nbytes
from kvviz.engine.streaming import TextStream
from kvviz.i18n import Said, said

AnyTokenEvent = TypeVar("AnyTokenEvent", bound=TokenEvent)


class MemoryGauge:
    """A run's memory readings: the CUDA allocator's growth since the run began (None off CUDA), and the memory
    model's bytes for its cache, predicted for the dtype and MLA layout this transformers keeps."""

    def __init__(self, lm: LoadedModel) -> None:
        self._lm = lm
        self._cuda = lm.device.type == "cuda"
        self._base_alloc = torch.cuda.memory_allocated(lm.device) if self._cuda else 0  # before the cache
        self._kv_dtype, self._mla_latent = kv_dtype(lm.dtype_name), transformers_keeps_mla_latent()

    def allocated(self) -> int | None:
        """Bytes the CUDA allocator holds beyond what it held when the run began; None off CUDA."""
        return torch.cuda.memory_allocated(self._lm.device) - self._base_alloc if self._cuda else None

    def predicted(self, batch: int, seq_len: int) -> int:
        """The memory model's bytes for a dynamic cache of `batch` sequences of seq_len positions."""
        return transformers_cache_bytes(self._lm.arch, batch, seq_len, self._kv_dtype, self._mla_latent)

    def predicted_static(self, batch: int, cache_tokens: int) -> int:
        """The memory model's bytes for a static cache of cache_tokens positions: all there from the start."""
        return static_cache_bytes(self._lm.arch, batch, cache_tokens, self._kv_dtype, self._mla_latent)


def padding_bytes(lm: LoadedModel, mask: torch.Tensor) -> int:
    """Bytes of the cache that hold padding (mask 0), layer by layer: a full layer holds every position of every
    row, a sliding one the last window - 1 between passes (as transformers_cache_bytes counts)."""
    per = token_layer_bytes(lm.arch, kv_dtype(lm.dtype_name), LATENT if transformers_keeps_mla_latent() else EXPANDED)
    total = 0
    for group in layer_groups(lm.arch):
        kept = mask if group.window is None else mask[:, -(group.window - 1):]  # [B, kept]
        total += int((kept == 0).sum()) * group.count * per
    return total


class TokenLog:
    """One sequence's tokens as they come: each one's time, and its text (streamed, held back inside a character).
    One per run, one per row of a batch."""

    def __init__(self, tokenizer) -> None:
        self._stream = TextStream(tokenizer)
        self._text: list[str] = []
        self.times: list[float] = []  # each token's t_s

    def event(self, kind: type[AnyTokenEvent], token_id: int, t: float, **measured) -> AnyTokenEvent:
        """The token's event (TokenEvent or a subclass, with the `measured` fields): index counts this sequence's
        tokens, phase is "prefill" for its first and "decode" after, dt_s is since its previous token (t0 first)."""
        text = self._stream.put(token_id)
        self._text.append(text)
        event = kind(index=len(self.times), token_id=token_id, text=text, phase="decode" if self.times else "prefill",
                     dt_s=t - (self.times[-1] if self.times else 0.0), t_s=t, **measured)
        self.times.append(t)
        return event

    def text(self) -> str:
        """The text streamed so far (what is held back inside a character not included)."""
        return "".join(self._text)

    def end(self) -> str:
        """The whole text: the held-back part flushed."""
        self._text.append(self._stream.end())
        return self.text()


class Meter:
    """What one admitted run has measured so far. Times are seconds since the request arrived (t0)."""

    def __init__(self, lm: LoadedModel, mode: str, watch: Stopwatch, *, prompt_tokens: int, queue_s: float,
                 tokenized_s: float, static_tokens: int | None = None) -> None:
        self._lm, self._mode, self._watch = lm, mode, watch
        self._static_tokens = static_tokens  # a static cache's length: allocated whole, predicted whole
        self._prompt_tokens, self._queue_s, self._tokenized_s = prompt_tokens, queue_s, tokenized_s
        self._gauge = MemoryGauge(lm)
        self._log = TokenLog(lm.tokenizer)
        self._kv_read: list[int] = []  # the cache each decode step read: as the step before left it
        self._kv_now = 0
        self._prefill_s: float | None = None
        self._compile_s = 0.0

    @property
    def tokens(self) -> int:
        return len(self._log.times)

    def where(self) -> Said:
        """Where the run stands, for a failure's message."""
        return said("run.after_tokens", n=self.tokens)

    def elapsed(self) -> float:
        """Seconds since t0, read after the device synced."""
        return self._watch.elapsed()

    def compiled(self, started_s: float, reused: bool, cache_tokens: int, graphs: int, how: str) -> Compiled:
        """The static mode's decode step is ready. Made now (since started_s): that time is the compile's and
        every later reading leaves it out; reused: nothing is left out and compile_s is 0."""
        t = self._watch.elapsed()
        self._compile_s = 0.0 if reused else t - started_s
        self._watch.exclude(self._compile_s)
        return Compiled(t_s=t - self._compile_s, compile_s=self._compile_s, reused=reused,
                        cache_tokens=cache_tokens, graphs=graphs, how=how)

    def _clock(self, token: torch.Tensor) -> tuple[int, float]:
        token_id = int(token)  # waits for the device to produce it
        return token_id, self._watch.elapsed()

    def prefilled(self, token: torch.Tensor, seq_len: int, cache) -> tuple[PrefillDone, TokenEvent]:
        """The first token, which ends the prefill: prefill time runs from the end of tokenizing to it (a compile
        before it is left out)."""
        token_id, t = self._clock(token)
        self._prefill_s = t - self._tokenized_s
        done = PrefillDone(t_s=t, prefill_s=self._prefill_s, prompt_tokens=self._prompt_tokens)
        return done, self._token(token_id, t, seq_len, cache)

    def decoded(self, token: torch.Tensor, seq_len: int, cache) -> TokenEvent:
        """A token from a decode step, which read the cache as the previous step left it."""
        token_id, t = self._clock(token)
        self._kv_read.append(self._kv_now)
        return self._token(token_id, t, seq_len, cache)

    def _token(self, token_id: int, t: float, seq_len: int, cache) -> TokenEvent:
        cached = cache is not None
        self._kv_now = cache_nbytes(cache) if cached else 0
        return self._log.event(TokenEvent, token_id, t, seq_len=seq_len, kv_bytes=self._kv_now,
                               kv_bytes_predicted=self._predicted_kv(seq_len) if cached else 0,
                               cuda_allocated_bytes=self._gauge.allocated())

    def _predicted_kv(self, seq_len: int) -> int:
        """The memory model's bytes for the cache after seq_len tokens: a static cache is all there from the start."""
        if self._static_tokens is not None:
            return self._gauge.predicted_static(1, self._static_tokens)
        return self._gauge.predicted(1, seq_len)

    def finished(self, reason: str) -> Finished:
        """The end of a run that did not fail: the held-back text flushed, and the summary."""
        text = self._log.end()
        summary = self.summary(reason)
        return Finished(t_s=self._watch.elapsed(), reason=reason, text=text, summary=summary)

    def failed(self, error: str) -> Finished:
        """A run that failed on the device: the text streamed so far, no summary."""
        return Finished(t_s=self._watch.elapsed(), reason="failed", text=self._log.text(), summary=None,
                        error=error)

    def summary(self, reason: str) -> RunSummary:
        lm = self._lm
        accel = device_accelerator(str(lm.device))
        return summarize(
            model=lm.spec, device=str(lm.device), dtype=lm.dtype_name, mode=self._mode, finish_reason=reason,
            prompt_tokens=self._prompt_tokens, token_times=self._log.times, queue_s=self._queue_s,
            tokenize_s=self._tokenized_s - self._queue_s, prefill_s=self._prefill_s, weight_bytes=lm.weight_bytes,
            kv_bytes_read=self._kv_read, bandwidth_bound=accel.bandwidth,
            bandwidth_source=bandwidth_source(accel), compile_s=self._compile_s,
        )


class BatchMeter:
    """What one admitted batch has measured: the clock (read after a device sync), the cache's bytes, each row's
    tokens and text, and the summary. It builds the step, token and finish events; it never runs the model."""

    def __init__(self, lm: LoadedModel, mode: str, watch: Stopwatch, *, prompt_tokens: tuple[int, ...],
                 queue_s: float, tokenized_s: float) -> None:
        self._lm, self._mode, self._watch = lm, mode, watch
        self._prompt_tokens, self._queue_s, self._tokenized_s = prompt_tokens, queue_s, tokenized_s
        self._gauge = MemoryGauge(lm)
        self._logs = [TokenLog(lm.tokenizer) for _ in prompt_tokens]  # one per row
        self._step_ends: list[float] = []
        self._step_dts: list[float] = []
        self._peak_kv = self._peak_padding = 0
        self._pass_start = 0.0

    def where(self) -> Said:
        """Which run this is, for a failure's message."""
        return said("run.batch_of", n=len(self._prompt_tokens))

    def start_pass(self) -> None:
        """Read the clock just before a forward pass (after the device has finished the work before it)."""
        self._pass_start = self._watch.elapsed()

    def clock(self, next_ids: torch.Tensor) -> tuple[list[int], float]:
        """The end of a pass: the clock after the device synced, then the sampled ids ([B]) as ints."""
        t = self._watch.elapsed()
        return next_ids.tolist(), t

    def step(self, step: int, t: float, ids: list[int], running: list[bool], ends: dict[int, str],
             mask: torch.Tensor, cache) -> list[BatchEvent]:
        """The events of one pass: PrefillDone (step 0), BatchStep, a token per running row, each row that ended."""
        self._step_ends.append(t)
        self._step_dts.append(t - self._pass_start)
        batch, seq_len = mask.shape  # mask [B, seq_len]: every position in the cache after this pass
        cached = cache is not None
        kv = cache_nbytes(cache) if cached else 0
        predicted = self._gauge.predicted(batch, seq_len) if cached else 0
        pad_bytes = padding_bytes(self._lm, mask) if cached else 0
        self._peak_kv, self._peak_padding = max(self._peak_kv, kv), max(self._peak_padding, pad_bytes)
        events: list[BatchEvent] = []
        if step == 0:
            events.append(PrefillDone(t_s=t, prefill_s=t - self._tokenized_s, prompt_tokens=sum(self._prompt_tokens)))
        events.append(BatchStep(
            step=step, phase="prefill" if step == 0 else "decode", t_s=t, dt_s=self._step_dts[-1],
            active_rows=sum(running), seq_len=seq_len, kv_bytes=kv, kv_bytes_predicted=predicted,
            padding_tokens=int((mask == 0).sum()), padding_bytes=pad_bytes,
            cuda_allocated_bytes=self._gauge.allocated()))
        for row in (r for r, on in enumerate(running) if on):
            events.append(self._logs[row].event(BatchTokenEvent, ids[row], t, seq_len=seq_len, kv_bytes=kv // batch,
                                                kv_bytes_predicted=predicted // batch, cuda_allocated_bytes=None,
                                                row=row))
        events += [self._row_finished(row, t, reason) for row, reason in ends.items()]
        return events

    def _row_finished(self, row: int, t: float, reason: str) -> RowFinished:
        log = self._logs[row]
        return RowFinished(row=row, t_s=t, reason=reason, new_tokens=len(log.times), text=log.end())

    def cancelled(self, running: list[bool]) -> list[BatchEvent]:
        """Every row still running ends as cancelled, now."""
        t = self._watch.elapsed()
        return [self._row_finished(row, t, "cancelled") for row, on in enumerate(running) if on]

    def finished(self, reason: str) -> BatchFinished:
        """The end of a batch that did not fail, with its summary (None when no pass ran)."""
        return BatchFinished(t_s=self._watch.elapsed(), reason=reason, summary=self.summary())

    def failed(self, error: str) -> BatchFinished:
        return BatchFinished(t_s=self._watch.elapsed(), reason="failed", summary=None, error=error)

    def summary(self) -> BatchSummary | None:
        """The batch's metrics from the passes so far (BatchSummary says what each one counts)."""
        if not self._step_ends:
            return None
        lm, batch = self._lm, len(self._prompt_tokens)
        ttft, e2e = self._step_ends[0], self._step_ends[-1]
        new_tokens = sum(len(log.times) for log in self._logs)
        rate = new_tokens / e2e
        return BatchSummary(
            model=lm.spec, device=str(lm.device), dtype=lm.dtype_name, mode=self._mode, batch_size=batch,
            prompt_tokens=self._prompt_tokens, padded_len=max(self._prompt_tokens), queue_s=self._queue_s,
            tokenize_s=self._tokenized_s - self._queue_s, prefill_s=ttft - self._tokenized_s, ttft_s=ttft,
            decode_steps=len(self._step_dts) - 1, decode_step_median_s=percentile(self._step_dts[1:], 50),
            new_tokens=new_tokens, e2e_s=e2e, tokens_per_s=rate, tokens_per_s_per_sequence=rate / batch,
            decode_tokens_per_s=(new_tokens - batch) / (e2e - ttft) if e2e > ttft else None,
            peak_kv_bytes=self._peak_kv, peak_padding_bytes=self._peak_padding)
