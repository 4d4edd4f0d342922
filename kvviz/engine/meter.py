"""Measuring a run, in one place: the clock, the cache's bytes, the allocator, the text, the summary.

The loop hands the Meter each sampled token; the Meter reads the clock first (after the device has
synced, kvviz.base.device.Stopwatch), and only then weighs the cache (measured from its tensors and
predicted by the memory model), reads the CUDA allocator and detokenizes, so none of that is timed as the
model's work. It builds every token and finish event, by keyword, and the run's summary from the
timestamps it kept. It knows events, caches and metrics; it never runs the model.
"""

from __future__ import annotations

import torch

from kvviz.base.device import Stopwatch
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.hardware import device_accelerator
from kvviz.calc.memory import static_cache_bytes, transformers_cache_bytes
from kvviz.engine.events import Compiled, Finished, PrefillDone, TokenEvent
from kvviz.engine.loading import LoadedModel, transformers_keeps_mla_latent
from kvviz.engine.metrics import RunSummary, summarize
from kvviz.engine.steps import cache_nbytes
from kvviz.engine.streaming import TextStream


class Meter:
    """What one admitted run has measured so far. Times are seconds since the request arrived (t0)."""

    def __init__(self, lm: LoadedModel, mode: str, watch: Stopwatch, *, prompt_tokens: int, queue_s: float,
                 tokenized_s: float, static_tokens: int | None = None) -> None:
        self._lm, self._mode, self._watch = lm, mode, watch
        self._static_tokens = static_tokens  # a static cache's length: allocated whole, predicted whole
        self._prompt_tokens, self._queue_s, self._tokenized_s = prompt_tokens, queue_s, tokenized_s
        self._cuda = lm.device.type == "cuda"
        self._base_alloc = torch.cuda.memory_allocated(lm.device) if self._cuda else 0  # before the cache
        self._kv_dtype, self._mla_latent = kv_dtype(lm.dtype_name), transformers_keeps_mla_latent()
        self._stream = TextStream(lm.tokenizer)
        self._text: list[str] = []
        self._times: list[float] = []  # each token's t_s
        self._kv_read: list[int] = []  # the cache each decode step read: as the step before left it
        self._kv_now = 0
        self._prefill_s: float | None = None
        self._compile_s = 0.0

    @property
    def tokens(self) -> int:
        return len(self._times)

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
        return done, self._token(token_id, t, seq_len, cache, phase="prefill")

    def decoded(self, token: torch.Tensor, seq_len: int, cache) -> TokenEvent:
        """A token from a decode step, which read the cache as the previous step left it."""
        token_id, t = self._clock(token)
        self._kv_read.append(self._kv_now)
        return self._token(token_id, t, seq_len, cache, phase="decode")

    def _token(self, token_id: int, t: float, seq_len: int, cache, phase: str) -> TokenEvent:
        cached = cache is not None
        self._kv_now = cache_nbytes(cache) if cached else 0
        text = self._stream.put(token_id)
        self._text.append(text)
        event = TokenEvent(
            index=len(self._times), token_id=token_id, text=text, phase=phase,
            dt_s=t - (self._times[-1] if self._times else 0.0), t_s=t, seq_len=seq_len, kv_bytes=self._kv_now,
            kv_bytes_predicted=self._predicted_kv(seq_len) if cached else 0,
            cuda_allocated_bytes=(torch.cuda.memory_allocated(self._lm.device) - self._base_alloc
                                  if self._cuda else None),
        )
        self._times.append(t)
        return event

    def _predicted_kv(self, seq_len: int) -> int:
        """The memory model's bytes for the cache after seq_len tokens: a static cache is all there from the start."""
        if self._static_tokens is not None:
            return static_cache_bytes(self._lm.arch, 1, self._static_tokens, self._kv_dtype, self._mla_latent)
        return transformers_cache_bytes(self._lm.arch, 1, seq_len, self._kv_dtype, self._mla_latent)

    def finished(self, reason: str) -> Finished:
        """The end of a run that did not fail: the held-back text flushed, and the summary."""
        self._text.append(self._stream.end())
        summary = self.summary(reason)
        return Finished(t_s=self._watch.elapsed(), reason=reason, text="".join(self._text), summary=summary)

    def failed(self, error: str) -> Finished:
        """A run that failed on the device: the text streamed so far, no summary."""
        return Finished(t_s=self._watch.elapsed(), reason="failed", text="".join(self._text), summary=None,
                        error=error)

    def summary(self, reason: str) -> RunSummary:
        lm = self._lm
        accel = device_accelerator(str(lm.device))
        return summarize(
            model=lm.spec, device=str(lm.device), dtype=lm.dtype_name, mode=self._mode, finish_reason=reason,
            prompt_tokens=self._prompt_tokens, token_times=self._times, queue_s=self._queue_s,
            tokenize_s=self._tokenized_s - self._queue_s, prefill_s=self._prefill_s, weight_bytes=lm.weight_bytes,
            kv_bytes_read=self._kv_read, bandwidth_bound=accel.bandwidth,
            bandwidth_source=f"{accel.name}: {accel.note or 'published figure'}", compile_s=self._compile_s,
        )
