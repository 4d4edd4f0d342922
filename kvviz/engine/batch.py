"""Static batching: B prompts decoded together, one token per unfinished row per forward pass, as events.

The lesson's memory formula has a batch term; this module measures it. The B prompts are tokenized and
LEFT-padded to the longest (the tokenizer's pad id, or its EOS when it has none), so that every row's newest
token sits in the last column and one forward pass serves all of them:

    prompts    row 0:  [pad pad  a   b   c ]     attention_mask  [0 0 1 1 1]   position_ids [0 0 0 1 2]
               row 1:  [ d   e   f   g   h ]                     [1 1 1 1 1]                [0 1 2 3 4]
    prefill    all rows in one pass over [B, L]; the cache then holds B × L positions, padding included
    decode     one token per row per pass ([B, 1] with the cache; without it the whole [B, L + s] again)
    finish     each row at its own EOS (unless ignore_eos) or at max_new_tokens; a finished row stays in the
               batch (static batching keeps the shape) and is fed the pad token with mask 0, so the cache
               keeps growing for it too: those positions are padding, and are counted as such

position_ids are cumsum(mask) - 1 (clamped at 0), so a row's first real token is at position 0 whatever its
padding. Greedy only: a batch exists here to be measured, and greedy lets each row be checked against the
same prompt generated alone (batch_against_single).

Events, in order (every t_s is seconds since the batch was received, read after the device synced):

    RequestReceived, [Waiting], DeviceAcquired     as the single-sequence loop (kvviz.engine.loop)
    BatchTokenized     every row's prompt tokens, the padded length and the padding
    PrefillDone        prompt_tokens = the real prompt tokens of all rows (padding excluded)
    per step           BatchStep (step 0 = prefill), then one BatchTokenEvent per row that was still running,
                       then a RowFinished for each row that ended at this step (each row is reported once)
    BatchFinished      completed, cancelled or failed; with a BatchSummary unless it failed

BatchStep.kv_bytes is measured from the cache tensors (kvviz.engine.steps.cache_nbytes) and
kv_bytes_predicted is the memory model's transformers_cache_bytes(arch, B, seq_len, ...), the same function
the single-sequence meter compares against, at the padded length: they are equal at every step, padding
included; padding_tokens and padding_bytes say how much of it is padding. BatchStep.dt_s is the forward pass
alone (clock read after a sync just before it and just after it), the step time a batch sweep wants.

run_batch() consumes the events into a BatchResult (rows, a per-step DataFrame, the summary);
batch_against_single() runs each prompt alone through the single-sequence loop and reports, per row,
whether the tokens agree and, where they part, the top-2 logit margin of the single run there.
This module knows models, tokenizers and the memory model; it draws nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from dataclasses import asdict, dataclass

import pandas as pd
import torch

from kvviz.base.device import Stopwatch
from kvviz.base.errors import InputError, KvvizError
from kvviz.base.inputs import flag, whole_number
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.memory import (
    EXPANDED,
    LATENT,
    layer_groups,
    token_layer_bytes,
    transformers_cache_bytes,
)
from kvviz.engine.admission import Refusal, encode_prompt, eos_ids, run_does_not_fit
from kvviz.engine.compare import first_divergence
from kvviz.engine.events import DeviceAcquired, PrefillDone, RequestReceived, TokenEvent, Waiting
from kvviz.engine.loading import LoadedModel, transformers_keeps_mla_latent
from kvviz.engine.loop import metered_run, run_to_end
from kvviz.engine.metrics import percentile
from kvviz.engine.queueing import on_device
from kvviz.engine.request import LABELS, MAX_NEW_TOKENS, GenerationRequest, prompt_text
from kvviz.engine.steps import cache_kwarg, cache_nbytes, new_cache, uncached_step
from kvviz.engine.streaming import TextStream
from kvviz.i18n import said

MAX_BATCH = 1024  # prompts in one batch; memory binds long before this on any real model


@dataclass(frozen=True)
class BatchRequest:
    """B prompts to decode together, greedily. Checked when built: ValueError with one line naming the bad value."""

    prompts: tuple[str, ...]
    max_new_tokens: int = 64
    use_cache: bool = True
    chat_template: bool = False
    ignore_eos: bool = False  # every row runs to max_new_tokens whatever it emits (benchmarks do this)

    def __post_init__(self) -> None:
        if isinstance(self.prompts, list):
            object.__setattr__(self, "prompts", tuple(self.prompts))
        if not isinstance(self.prompts, tuple):
            raise InputError("batch.not_tuple")
        if not 1 <= len(self.prompts) <= MAX_BATCH:
            raise InputError("batch.error.size", most=MAX_BATCH, n=len(self.prompts))
        for i, prompt in enumerate(self.prompts):
            if not prompt_text(prompt, row=i + 1).strip():
                raise InputError("batch.prompt_empty", i=i + 1)
        whole_number(self.max_new_tokens, LABELS["max_new_tokens"], 1, MAX_NEW_TOKENS, integral_floats=False)
        for name in ("use_cache", "chat_template", "ignore_eos"):
            flag(getattr(self, name), LABELS[name])

    @property
    def mode(self) -> str:
        return "cached" if self.use_cache else "uncached"

    @property
    def batch_size(self) -> int:
        return len(self.prompts)


# ---- events -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchTokenized:
    """Every row tokenized and left-padded to the longest: padded_len = max(prompt_tokens)."""

    t_s: float
    prompt_tokens: tuple[int, ...]  # real tokens of each row's prompt
    padded_len: int
    padding_tokens: int  # B × padded_len - sum(prompt_tokens)
    chat_template: bool


@dataclass(frozen=True)
class BatchStep:
    """One forward pass over the whole batch (step 0 is the prefill).

    seq_len: positions per row in the cache after the pass (padded_len + step), padding included; in uncached
    mode the positions the pass read. kv_bytes: the cache tensors' bytes (B × seq_len positions), measured;
    kv_bytes_predicted: transformers_cache_bytes for batch B at seq_len. padding_tokens: positions held with
    mask 0 (left padding, and what finished rows were fed since); padding_bytes: their share of kv_bytes.
    dt_s: the forward pass alone, synced before and after. Both byte figures are 0 without a cache.
    """

    step: int
    phase: str  # "prefill" or "decode"
    t_s: float
    dt_s: float
    active_rows: int  # rows that took a token from this pass
    seq_len: int
    kv_bytes: int
    kv_bytes_predicted: int
    padding_tokens: int
    padding_bytes: int
    cuda_allocated_bytes: int | None  # the CUDA allocator's growth since the batch began; None off CUDA


@dataclass(frozen=True)
class BatchTokenEvent(TokenEvent):
    """A TokenEvent of one row. index counts the row's own tokens; dt_s is since the row's previous token (since
    t0 for the first). seq_len is the row's length in the cache, padding included (its real tokens are its
    prompt tokens + index); kv_bytes and kv_bytes_predicted are the row's share, the batch's figure / B."""

    row: int


@dataclass(frozen=True)
class RowFinished:
    """A row has ended: eos, max_new_tokens, context_full or cancelled. text is its whole output."""

    row: int
    t_s: float
    reason: str
    new_tokens: int
    text: str


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


@dataclass(frozen=True)
class BatchFinished:
    """The end of a batch: completed (every row ended on its own), cancelled, or failed (with error)."""

    t_s: float
    reason: str
    summary: BatchSummary | None
    error: str | None = None
    bad_input: bool = False  # failed because of what was asked (too long a prompt), not a fault


BatchEvent = (RequestReceived | Waiting | DeviceAcquired | BatchTokenized | PrefillDone | BatchStep
              | BatchTokenEvent | RowFinished | BatchFinished)


# ---- padding, positions, the forward pass -------------------------------------------------------------------


def pad_token_id(lm: LoadedModel) -> int:
    """The id fed at padded positions: the tokenizer's pad token, else its EOS (masked out either way)."""
    tok = lm.tokenizer
    for candidate in (tok.pad_token_id, tok.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def left_pad(prompt_ids: tuple[tuple[int, ...], ...], pad_id: int,
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompts right-aligned in one [B, L] tensor (L the longest), with the attention mask (1 real, 0 pad)."""
    width = max(len(ids) for ids in prompt_ids)
    rows = [[pad_id] * (width - len(ids)) + list(ids) for ids in prompt_ids]
    mask = [[0] * (width - len(ids)) + [1] * len(ids) for ids in prompt_ids]
    return (torch.tensor(rows, dtype=torch.long, device=device),  # [B, L]
            torch.tensor(mask, dtype=torch.long, device=device))  # [B, L]


def position_ids(mask: torch.Tensor) -> torch.Tensor:
    """Each position's index among its row's real tokens: cumsum(mask) - 1, clamped at 0 (padding says 0).
    mask [B, S] -> [B, S]; a row's first real token is at 0 however much padding precedes it."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def batch_logits(model: torch.nn.Module, input_ids: torch.Tensor, mask: torch.Tensor, cache) -> torch.Tensor:
    """One forward pass of the batch; the logits of each row's last position, [B, vocab].

    input_ids [B, n] are the newest n positions (the whole padded sequence at prefill or without a cache, the one
    token just sampled when decoding with it); mask [B, S] covers every position so far, cached ones included.
    Only the last position's logits are computed (logits_to_keep=1), as steps.prefill does.
    """
    positions = position_ids(mask)[:, -input_ids.shape[1]:]  # [B, n]
    kw = {cache_kwarg(model): cache} if cache is not None else {}
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=cache is not None,
                logits_to_keep=1, **kw)
    return out.logits[:, -1, :]  # [B, vocab]


def padding_bytes(lm: LoadedModel, mask: torch.Tensor) -> int:
    """Bytes of the cache that hold padding (mask 0), layer by layer: a full layer holds every position of every
    row, a sliding one the last window - 1 between passes (as transformers_cache_bytes counts)."""
    per = token_layer_bytes(lm.arch, kv_dtype(lm.dtype_name), LATENT if transformers_keeps_mla_latent() else EXPANDED)
    total = 0
    for group in layer_groups(lm.arch):
        kept = mask if group.window is None else mask[:, -(group.window - 1):]  # [B, kept]
        total += int((kept == 0).sum()) * group.count * per
    return total


# ---- admission ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchPlan:
    """An admitted batch: what the loop needs to run it."""

    prompt_ids: tuple[tuple[int, ...], ...]
    max_tokens: int  # max_new_tokens, or fewer when the context ends first (for the longest row)
    limit_reason: str  # a row's finish when max_tokens are made: "max_new_tokens" or "context_full"
    stop_ids: frozenset[int]  # tokens that end a row (EOS); empty when the request ignores EOS


def admit_batch(lm: LoadedModel, req: BatchRequest, prompt_ids: list[list[int]]) -> BatchPlan | Refusal:
    """The plan for this tokenized batch on `lm`, or why it cannot run: an empty row, the padded length against
    the context (which caps the new tokens), the whole batch's cache and widest pass against free memory."""
    empty = next((i for i, ids in enumerate(prompt_ids) if not ids), None)
    if empty is not None:
        return Refusal(said("admit.batch_row_empty", i=empty + 1))
    width, context = max(len(ids) for ids in prompt_ids), lm.context_length
    if context and width >= context:
        return Refusal(said("admit.batch_over_context", n=width, context=context))
    max_tokens = req.max_new_tokens if not context else min(req.max_new_tokens, context - width)
    refusal = run_does_not_fit(lm, req.use_cache, width, max_tokens, batch=len(prompt_ids))
    if refusal:
        return Refusal(refusal)
    return BatchPlan(prompt_ids=tuple(tuple(ids) for ids in prompt_ids), max_tokens=max_tokens,
                     limit_reason="context_full" if max_tokens < req.max_new_tokens else "max_new_tokens",
                     stop_ids=frozenset() if req.ignore_eos else eos_ids(lm))


# ---- measuring ----------------------------------------------------------------------------------------------


class BatchMeter:
    """What one admitted batch has measured: the clock (read after a device sync), the cache's bytes, each row's
    tokens and text, and the summary. It builds the step, token and finish events; it never runs the model."""

    def __init__(self, lm: LoadedModel, req: BatchRequest, watch: Stopwatch, *, prompt_tokens: tuple[int, ...],
                 queue_s: float, tokenized_s: float) -> None:
        self._lm, self._req, self._watch = lm, req, watch
        self._prompt_tokens, self._queue_s, self._tokenized_s = prompt_tokens, queue_s, tokenized_s
        self._cuda = lm.device.type == "cuda"
        self._base_alloc = torch.cuda.memory_allocated(lm.device) if self._cuda else 0  # before the cache
        self._kv_dtype, self._mla_latent = kv_dtype(lm.dtype_name), transformers_keeps_mla_latent()
        batch = len(prompt_tokens)
        self._streams = [TextStream(lm.tokenizer) for _ in range(batch)]
        self._texts: list[list[str]] = [[] for _ in range(batch)]
        self._token_times: list[list[float]] = [[] for _ in range(batch)]
        self._step_ends: list[float] = []
        self._step_dts: list[float] = []
        self._peak_kv = self._peak_padding = 0
        self._pass_start = 0.0

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
        predicted = (transformers_cache_bytes(self._lm.arch, batch, seq_len, self._kv_dtype, self._mla_latent)
                     if cached else 0)
        pad_bytes = padding_bytes(self._lm, mask) if cached else 0
        self._peak_kv, self._peak_padding = max(self._peak_kv, kv), max(self._peak_padding, pad_bytes)
        events: list[BatchEvent] = []
        if step == 0:
            events.append(PrefillDone(t_s=t, prefill_s=t - self._tokenized_s, prompt_tokens=sum(self._prompt_tokens)))
        alloc = torch.cuda.memory_allocated(self._lm.device) - self._base_alloc if self._cuda else None
        events.append(BatchStep(
            step=step, phase="prefill" if step == 0 else "decode", t_s=t, dt_s=self._step_dts[-1],
            active_rows=sum(running), seq_len=seq_len, kv_bytes=kv, kv_bytes_predicted=predicted,
            padding_tokens=int((mask == 0).sum()), padding_bytes=pad_bytes,
            cuda_allocated_bytes=alloc))
        for row in (r for r, on in enumerate(running) if on):
            events.append(self._token(row, ids[row], t, seq_len, kv // batch, predicted // batch))
        events += [self._row_finished(row, t, reason) for row, reason in ends.items()]
        return events

    def _token(self, row: int, token_id: int, t: float, seq_len: int, kv: int, predicted: int) -> BatchTokenEvent:
        times = self._token_times[row]
        text = self._streams[row].put(token_id)
        self._texts[row].append(text)
        event = BatchTokenEvent(
            index=len(times), token_id=token_id, text=text, phase="prefill" if not times else "decode",
            dt_s=t - (times[-1] if times else 0.0), t_s=t, seq_len=seq_len, kv_bytes=kv, kv_bytes_predicted=predicted,
            cuda_allocated_bytes=None, row=row)
        times.append(t)
        return event

    def _row_finished(self, row: int, t: float, reason: str) -> RowFinished:
        self._texts[row].append(self._streams[row].end())
        return RowFinished(row=row, t_s=t, reason=reason, new_tokens=len(self._token_times[row]),
                           text="".join(self._texts[row]))

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
        new_tokens = sum(len(times) for times in self._token_times)
        rate = new_tokens / e2e
        return BatchSummary(
            model=lm.spec, device=str(lm.device), dtype=lm.dtype_name, mode=self._req.mode, batch_size=batch,
            prompt_tokens=self._prompt_tokens, padded_len=max(self._prompt_tokens), queue_s=self._queue_s,
            tokenize_s=self._tokenized_s - self._queue_s, prefill_s=ttft - self._tokenized_s, ttft_s=ttft,
            decode_steps=len(self._step_dts) - 1, decode_step_median_s=percentile(self._step_dts[1:], 50),
            new_tokens=new_tokens, e2e_s=e2e, tokens_per_s=rate, tokens_per_s_per_sequence=rate / batch,
            decode_tokens_per_s=(new_tokens - batch) / (e2e - ttft) if e2e > ttft else None,
            peak_kv_bytes=self._peak_kv, peak_padding_bytes=self._peak_padding)


# ---- the loop -----------------------------------------------------------------------------------------------


def generate_batch(lm: LoadedModel, req: BatchRequest, cancel: threading.Event | None = None) -> Iterator[BatchEvent]:
    """Start a batch now (t0) and return the generator of its events (the module docstring lists them).

    The request was checked when it was built; what is found later (a prompt longer than the context, a batch
    that cannot fit, a fault on the device) ends the stream with BatchFinished(reason="failed"). Setting `cancel`
    stops the batch before its next forward pass (or while it waits for the device).
    """
    watch = Stopwatch(lm.device)  # t0: the batch has arrived
    cancel = cancel or threading.Event()
    return on_device(lm.device, req.mode, cancel, watch,
                     lambda t_s: BatchFinished(t_s=t_s, reason="cancelled", summary=None),
                     lambda queue_s: _admit_and_run(lm, req, cancel, watch, queue_s))


def _admit_and_run(lm: LoadedModel, req: BatchRequest, cancel: threading.Event, watch: Stopwatch,
                   queue_s: float) -> Iterator[BatchEvent]:
    """Tokenize every row, admit the batch, run its passes; a fault on the device ends it as failed."""
    encoded = [encode_prompt(lm, prompt, req.chat_template) for prompt in req.prompts]
    lengths = tuple(len(ids) for ids, _ in encoded)
    tokenized_s = watch.elapsed()
    yield BatchTokenized(t_s=tokenized_s, prompt_tokens=lengths, padded_len=max(lengths),
                         padding_tokens=len(lengths) * max(lengths) - sum(lengths),
                         chat_template=any(templated for _, templated in encoded))
    plan = admit_batch(lm, req, [ids for ids, _ in encoded])
    if isinstance(plan, Refusal):
        yield BatchFinished(t_s=watch.elapsed(), reason="failed", summary=None, error=plan.reason, bad_input=True)
        return
    meter = BatchMeter(lm, req, watch, prompt_tokens=lengths, queue_s=queue_s, tokenized_s=tokenized_s)
    yield from metered_run(lm, _forward_passes(lm, req, plan, cancel, meter), meter,
                           lambda: said("run.batch_of", n=len(lengths)))


def row_ends(ids: list[int], running: list[bool], plan: BatchPlan, last: bool) -> dict[int, str]:
    """The rows that end with this pass's tokens, and why: their EOS, or the limit on the last pass."""
    ends = {}
    for row, (token_id, on) in enumerate(zip(ids, running, strict=True)):
        if on and token_id in plan.stop_ids:
            ends[row] = "eos"
        elif on and last:
            ends[row] = plan.limit_reason
    return ends


def _forward_passes(lm: LoadedModel, req: BatchRequest, plan: BatchPlan, cancel: threading.Event,
                    meter: BatchMeter) -> Generator[BatchEvent, None, str]:
    """Prefill every row in one pass, then one pass per step until every row has ended or a cancel (checked
    before every pass). Yields the step, token and row events; returns the batch's finish reason."""
    model, pad = lm.model, pad_token_id(lm)
    sequence, mask = left_pad(plan.prompt_ids, pad, lm.device)  # [B, L] each
    cache = new_cache(model) if req.use_cache else None
    running = [True] * len(plan.prompt_ids)
    next_ids = None
    with torch.inference_mode():
        for step in range(plan.max_tokens):
            if cancel.is_set():
                yield from meter.cancelled(running)
                return "cancelled"
            if step:
                # A finished row is fed the pad token with mask 0: static batching keeps the shape.
                on = torch.tensor(running, device=lm.device)  # [B]
                fed = torch.where(on, next_ids, pad)  # [B]
                sequence = torch.cat([sequence, fed[:, None]], dim=1)  # [B, L + step]
                mask = torch.cat([mask, on[:, None].long()], dim=1)  # [B, L + step]
            meter.start_pass()
            # With the cache only the newest column goes in after the prefill; without it, everything again.
            fresh = sequence if cache is None or step == 0 else sequence[:, -1:]
            next_ids = batch_logits(model, fresh, mask, cache).argmax(dim=-1)  # [B]
            ids, t = meter.clock(next_ids)
            ends = row_ends(ids, running, plan, last=step == plan.max_tokens - 1)
            yield from meter.step(step, t, ids, running, ends, mask, cache)
            running = [on and row not in ends for row, on in enumerate(running)]
            if not any(running):
                break
    return "completed"


# ---- results ------------------------------------------------------------------------------------------------


class BatchError(KvvizError, RuntimeError):
    """A batch that failed on the device or was cancelled; the message says which."""


@dataclass(frozen=True)
class RowResult:
    """One row of a finished batch. ttft_s is the batch's prefill end (every row's first token comes from it);
    padding is the left padding the row was given (padded_len - prompt_tokens)."""

    row: int
    prompt: str
    prompt_tokens: int
    padding: int
    token_ids: tuple[int, ...]
    text: str
    finish_reason: str
    new_tokens: int
    ttft_s: float
    end_s: float  # when its last token came


STEP_COLUMNS = list(BatchStep.__dataclass_fields__)


@dataclass(frozen=True)
class BatchResult:
    """A completed batch: its rows, one DataFrame row per forward pass (BatchStep's fields), one per token
    (BatchTokenEvent's fields, `row` included), and the summary."""

    rows: tuple[RowResult, ...]
    steps: pd.DataFrame
    tokens: pd.DataFrame
    summary: BatchSummary

    @property
    def batch_size(self) -> int:
        return self.summary.batch_size

    @property
    def prefill_s(self) -> float:
        return self.summary.prefill_s

    @property
    def decode_step_median_s(self) -> float | None:
        return self.summary.decode_step_median_s

    @property
    def tokens_per_s(self) -> float:
        return self.summary.tokens_per_s

    @property
    def tokens_per_s_per_sequence(self) -> float:
        return self.summary.tokens_per_s_per_sequence


def run_batch(lm: LoadedModel, req: BatchRequest, cancel: threading.Event | None = None) -> BatchResult:
    """Consume a whole batch into a BatchResult. ValueError when what was asked cannot run (a prompt longer than
    the context, a batch that does not fit); BatchError when it failed on the device or was cancelled."""
    tokens: list[BatchTokenEvent] = []
    steps: list[BatchStep] = []
    ends: dict[int, RowFinished] = {}
    finished = None
    for event in generate_batch(lm, req, cancel):
        if isinstance(event, BatchTokenEvent):
            tokens.append(event)
        elif isinstance(event, BatchStep):
            steps.append(event)
        elif isinstance(event, RowFinished):
            ends[event.row] = event
        elif isinstance(event, BatchFinished):
            finished = event
    if finished is not None and finished.bad_input:
        raise InputError("run.failed", why=finished.error)
    if finished is None or finished.reason != "completed" or finished.summary is None:
        reason = finished.reason if finished else "unfinished"
        if reason == "cancelled":
            raise BatchError("batch.stopped")
        raise (BatchError("run.failed", why=finished.error) if finished and finished.error else
               BatchError("batch.unfinished"))
    summary = finished.summary
    rows = tuple(RowResult(
        row=row, prompt=prompt, prompt_tokens=summary.prompt_tokens[row],
        padding=summary.padded_len - summary.prompt_tokens[row],
        token_ids=tuple(t.token_id for t in tokens if t.row == row), text=ends[row].text,
        finish_reason=ends[row].reason, new_tokens=ends[row].new_tokens, ttft_s=summary.ttft_s, end_s=ends[row].t_s)
        for row, prompt in enumerate(req.prompts))
    return BatchResult(rows=rows, steps=pd.DataFrame([asdict(s) for s in steps], columns=STEP_COLUMNS),
                       tokens=pd.DataFrame([asdict(t) for t in tokens],
                                           columns=list(BatchTokenEvent.__dataclass_fields__)),
                       summary=summary)


# ---- batched against alone ----------------------------------------------------------------------------------


AGREEMENT_COLUMNS = ["row", "prompt_tokens", "padding", "batched_tokens", "single_tokens", "identical",
                     "first_divergence", "single_top2_margin", "batched_token_gap"]


def top2_margin(lm: LoadedModel, ids: list[int], other: int | None = None) -> tuple[float, float | None]:
    """For the sequence `ids` alone (no cache, no padding): the next-token logits' top-1 minus top-2, and, given
    another token, top-1 minus that token's logit (how far behind the single run's view the other choice was)."""
    with torch.inference_mode():
        logits = uncached_step(lm.model, torch.tensor([ids], device=lm.device))[0].float()  # [vocab]
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1]), None if other is None else float(top[0] - logits[other])


def batch_against_single(lm: LoadedModel, req: BatchRequest, result: BatchResult | None = None) -> pd.DataFrame:
    """For each row, the same prompt generated alone by the single-sequence loop (greedy, same max_new_tokens,
    cache, template and EOS rule) against the batched row: identical or not, and the first position where they
    part with, there, the single run's top-2 logit margin and the gap between its top logit and the batched
    token's. A part at a small margin is a near-tie resolved another way by another floating-point sum order
    (batch shapes change it); a large one is a bug. `result`: the batch already run (else it is run here)."""
    result = result or run_batch(lm, req)
    records = []
    for row in result.rows:
        single, _ = run_to_end(lm, GenerationRequest(row.prompt, max_new_tokens=req.max_new_tokens,
                                                     use_cache=req.use_cache, chat_template=req.chat_template,
                                                     ignore_eos=req.ignore_eos))
        alone, batched = [t.token_id for t in single], list(row.token_ids)
        split = first_divergence(alone, batched)
        if split is None and len(alone) != len(batched):
            split = min(len(alone), len(batched))  # one ended where the other went on
        margin = gap = None
        if split is not None and split < len(alone):
            prompt_ids, _ = encode_prompt(lm, row.prompt, req.chat_template)
            margin, gap = top2_margin(lm, prompt_ids + alone[:split], batched[split] if split < len(batched) else None)
        records.append({"row": row.row, "prompt_tokens": row.prompt_tokens, "padding": row.padding,
                        "batched_tokens": len(batched), "single_tokens": len(alone), "identical": alone == batched,
                        "first_divergence": split, "single_top2_margin": margin, "batched_token_gap": gap})
    return pd.DataFrame(records, columns=AGREEMENT_COLUMNS)
