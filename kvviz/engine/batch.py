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
                       (all of them defined in kvviz.engine.events)
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

One engine, two loops. This module owns only what a batch alone has: the padding, the loop over B rows, and the
result. Everything else is the single sequence's, in the same modules: the queue (queueing.on_device), the
request's checks (request.BatchRequest), admission (admission.admit_batch: the same new-token limit, finish,
stop tokens and fit rule), the forward pass (steps.batch_step, whose keywords come from steps.forward_kwargs
like every other step), the events (events), the meter (meter.BatchMeter, on the same MemoryGauge and TokenLog)
and the end of a run (loop.admitted_run, loop.metered_run). The single request is not run as a batch of one
through this loop, because that would make the lesson's loop (loop._forward_passes) read worse and measure
differently: it would carry the mask, positions, per-row running flags and padding that one sequence never has;
a batch reads the clock before and after each pass (BatchStep.dt_s is the pass alone), where a single run
syncs once per token, so a batch of one would add a device sync to every token of every single run; and the
single loop's sampling (temperature, top-k, top-p, seed) and the static mode's compiled step, traced for one
[1, 1] token without mask or positions, would have to learn rows. This module knows models, tokenizers and
the memory model; it draws nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import asdict, dataclass

import pandas as pd
import torch

from kvviz.base.device import Stopwatch
from kvviz.base.errors import InputError, KvvizError
from kvviz.engine.admission import BatchPlan, admit_batch, encode_prompt
from kvviz.engine.compare import REPORT_S, first_divergence
from kvviz.engine.events import (
    BatchEvent,
    BatchFinished,
    BatchStep,
    BatchTokenEvent,
    BatchTokenized,
    RowFinished,
)
from kvviz.engine.loading import LoadedModel
from kvviz.engine.loop import admitted_run, run_to_end
from kvviz.engine.meter import BatchMeter
from kvviz.engine.metrics import BatchSummary
from kvviz.engine.queueing import on_device
from kvviz.engine.request import BatchRequest, GenerationRequest
from kvviz.engine.steps import batch_step, new_cache, uncached_step
from kvviz.i18n import Said, said

# ---- padding -------------------------------------------------------------------------------------------------


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
    """Tokenize every row, then admission, then the passes under their meter (loop.admitted_run)."""
    encoded = [encode_prompt(lm, prompt, req.chat_template) for prompt in req.prompts]
    lengths = tuple(len(ids) for ids, _ in encoded)
    tokenized_s = watch.elapsed()
    yield BatchTokenized(t_s=tokenized_s, prompt_tokens=lengths, padded_len=max(lengths),
                         padding_tokens=len(lengths) * max(lengths) - sum(lengths),
                         chat_template=any(templated for _, templated in encoded))

    def start(plan: BatchPlan) -> tuple[BatchMeter, Generator[BatchEvent, None, str]]:
        meter = BatchMeter(lm, req.mode, watch, prompt_tokens=lengths, queue_s=queue_s, tokenized_s=tokenized_s)
        return meter, _forward_passes(lm, req, plan, cancel, meter)

    yield from admitted_run(lm, watch, admit_batch(lm, req, [ids for ids, _ in encoded]), BatchFinished, start)


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
            next_ids = batch_step(model, fresh, mask, cache).argmax(dim=-1)  # [B]
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


def run_batch(lm: LoadedModel, req: BatchRequest, cancel: threading.Event | None = None,
              report: Callable[[float, Said], None] | None = None) -> BatchResult:
    """Consume a whole batch into a BatchResult. ValueError when what was asked cannot run (a prompt longer than
    the context, a batch that does not fit); BatchError when it failed on the device or was cancelled.
    report(fraction, phase): told the prefill, then each decode step (at most every REPORT_S), steps over the
    most the batch may take."""
    tokens: list[BatchTokenEvent] = []
    steps: list[BatchStep] = []
    ends: dict[int, RowFinished] = {}
    finished = None
    sent = 0.0
    for event in generate_batch(lm, req, cancel):
        if isinstance(event, BatchTokenEvent):
            tokens.append(event)
        elif isinstance(event, BatchStep):
            steps.append(event)
            if report is not None and (event.step == 0 or time.monotonic() - sent >= REPORT_S):
                sent = time.monotonic()
                report(event.step / req.max_new_tokens, said("progress.batch_prefill", b=req.batch_size)
                       if event.step == 0 else said("progress.batch_step", k=event.step, n=req.max_new_tokens,
                                                     rows=event.active_rows))
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
