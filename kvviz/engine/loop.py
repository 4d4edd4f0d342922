"""The generation loop: one request, queued for the device, admitted, then prefill and decode, as events.

generate() returns a generator of typed events (kvviz.engine.events) that a consumer reads as they
happen. In order:

    queue      one lock per device, first come first served (kvviz.engine.queueing): a request that finds it
               busy waits, and the wait is its queue time
    admission  tokenize, then admit(): the prompt limit, the context, the memory fit (kvviz.engine.admission)
    compile    static mode only: the compiled decode step for this shape, built now or reused
               (kvviz.engine.compiled); its time is reported apart and left out of the run's clock
    prefill    the whole prompt in one forward pass gives the first token          (steps.prefill)
    decode     one token per forward pass, with the cache or without it    (steps.decode_step / uncached_step),
               or the compiled step on the static cache                          (StaticDecoder.decode)
    finish     EOS, max_new_tokens, context full, cancelled, or failed (out of memory on the device)

Everything measured (timestamps read after a device sync, the cache's bytes, the text) is measured by
the Meter (kvviz.engine.meter), which also builds the events. The CLI, the app and the benchmarks all
consume this same loop. A batch (kvviz.engine.batch) shares all of it but _forward_passes: the queue, admission's
rules, the steps, the meter's parts and the end of a run (admitted_run, metered_run); it has its own loop over
B rows, and its docstring says why. It knows models and tokenizers, not user interfaces.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

import torch

from kvviz.base.device import Stopwatch
from kvviz.base.errors import first_line
from kvviz.engine.admission import BatchPlan, Plan, Refusal, admit, encode_prompt
from kvviz.engine.compiled import StaticDecoder, static_decoder
from kvviz.engine.events import BatchFinished, Event, Finished, PromptTokenized, TokenEvent
from kvviz.engine.loading import LoadedModel
from kvviz.engine.meter import BatchMeter, Meter
from kvviz.engine.queueing import on_device
from kvviz.engine.request import GenerationRequest
from kvviz.engine.steps import decode_step, new_cache, prefill, sample, uncached_step
from kvviz.i18n import said


def generate(lm: LoadedModel, req: GenerationRequest, cancel: threading.Event | None = None) -> Iterator[Event]:
    """Start a request now (t0) and return the generator of its events.

    The request was checked when it was built; problems found later (a prompt longer than the context, a
    run that cannot fit, a fault on the device) end the stream with Finished(reason="failed").
    """
    watch = Stopwatch(lm.device)  # t0: the request has arrived
    cancel = cancel or threading.Event()
    return on_device(lm.device, req.mode, cancel, watch,
                     lambda t_s: Finished(t_s=t_s, reason="cancelled", text="", summary=None),
                     lambda queue_s: _admit_and_run(lm, req, cancel, watch, queue_s))


def _admit_and_run(lm: LoadedModel, req: GenerationRequest, cancel: threading.Event, watch: Stopwatch,
                   queue_s: float) -> Iterator[Event]:
    """Tokenize, then admission, then the forward passes under their meter (admitted_run)."""
    ids, templated = encode_prompt(lm, req.prompt, req.chat_template)
    tokenized_s = watch.elapsed()
    yield PromptTokenized(t_s=tokenized_s, prompt_tokens=len(ids), chat_template=templated)

    def start(plan: Plan) -> tuple[Meter, Generator[Event, None, str]]:
        meter = Meter(lm, req.mode, watch, prompt_tokens=len(ids), queue_s=queue_s, tokenized_s=tokenized_s,
                      static_tokens=plan.static_tokens)
        return meter, _forward_passes(lm, req, plan, cancel, meter)

    yield from admitted_run(lm, watch, admit(lm, req, ids), Finished, start)


def admitted_run(lm: LoadedModel, watch: Stopwatch, plan: Plan | BatchPlan | Refusal,
                 end: type[Finished] | type[BatchFinished],
                 start: Callable[[Any], tuple[Meter | BatchMeter, Generator]]) -> Iterator:
    """What follows admission, for a single sequence and a batch alike: a Refusal ends the run as bad input (an
    `end` event, nothing run); a plan runs the forward passes that start(plan) returns with their meter."""
    if isinstance(plan, Refusal):
        yield end(t_s=watch.elapsed(), reason="failed", summary=None, error=plan.reason, bad_input=True)
        return
    meter, passes = start(plan)
    yield from metered_run(lm, passes, meter)


def metered_run(lm: LoadedModel, passes: Generator, meter: Meter | BatchMeter) -> Iterator:
    """Run the forward passes (a generator of events returning the finish reason) and end with the meter's
    finish, or with its failure in one line: out of memory on the device (meter.where() says after what) or
    another fault of the device. The one way a run ends, for a single sequence and a batch."""
    try:
        reason = yield from passes
    except torch.OutOfMemoryError as exc:
        failure = said("run.oom", device=lm.device, where=meter.where(), why=first_line(exc))
    except RuntimeError as exc:
        failure = f"{type(exc).__name__}: {first_line(exc)}"
    else:
        yield meter.finished(reason)
        return
    # The cache lived only in the passes' frame, which the exception's traceback held until the except clause
    # ended: it is gone now, and the allocator can give its memory back before the failure is reported.
    if lm.device.type == "cuda":
        torch.cuda.empty_cache()
    yield meter.failed(failure)


def _forward_passes(lm: LoadedModel, req: GenerationRequest, plan: Plan, cancel: threading.Event,
                    meter: Meter) -> Generator[Event, None, str]:
    """Prefill, then one decode step per token, until EOS, plan.max_tokens or a cancel (checked before every
    token). Yields the token events (after the compile's, in the static mode); returns the finish reason."""
    model = lm.model
    generator = torch.Generator(device=lm.device).manual_seed(req.seed) if req.seed is not None else None
    sequence = torch.tensor([plan.prompt_ids], device=lm.device)  # [1, prompt_len]
    with torch.inference_mode():
        if cancel.is_set():
            return "cancelled"
        static: StaticDecoder | None = None
        if plan.static_tokens is not None:
            started = meter.elapsed()
            static, reused = static_decoder(model, plan.static_tokens)
            yield meter.compiled(started, reused, static.length, 0 if reused else static.graphs, static.settings.label)
        cache = static.cache if static else new_cache(model) if req.use_cache else None
        # Prefill: the whole prompt in one pass fills the cache and gives the first token.
        logits = static.prefill(model, sequence) if static else prefill(model, sequence, cache)
        token = sample(logits, req, generator)  # [1, 1]
        done, event = meter.prefilled(token, sequence.shape[1], cache)
        yield done
        yield event
        for _ in range(plan.max_tokens - 1):
            if event.token_id in plan.stop_ids:
                return "eos"
            if cancel.is_set():
                return "cancelled"
            sequence = torch.cat([sequence, token], dim=1)  # [1, seq_len]
            # Decode: only the new token goes in; the cache holds the rest. Without it, everything again.
            logits = (static.decode(model, token) if static else decode_step(model, token, cache) if cache is not None
                      else uncached_step(model, sequence))
            token = sample(logits, req, generator)  # [1, 1]
            event = meter.decoded(token, sequence.shape[1], cache)
            yield event
    return "eos" if event.token_id in plan.stop_ids else plan.limit_reason


def run_to_end(lm: LoadedModel, req: GenerationRequest, cancel: threading.Event | None = None,
               on_token: Callable[[TokenEvent], None] | None = None) -> tuple[list[TokenEvent], Finished]:
    """Consume a whole generation; returns its token events and its Finished event. on_token: told each token as
    it comes (a caller's progress)."""
    tokens, finished = [], None
    for event in generate(lm, req, cancel):
        if isinstance(event, TokenEvent):
            tokens.append(event)
            if on_token is not None:
                on_token(event)
        elif isinstance(event, Finished):
            finished = event
    return tokens, finished
