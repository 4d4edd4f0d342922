"""The instrumented generation loop: one request, prefill then decode, with or without the KV cache.

generate() returns a generator of typed events, yielded as things happen: the request is received,
waits for the device, gets it, is tokenized, prefill ends with the first token, each decode token,
and a finish (EOS, max_new_tokens, context full, cancelled or failed). Every timestamp is read from
a monotonic clock after synchronizing the device, in one place (_Clock). One lock per device makes
concurrent requests queue; the wait is their queue time. The CLI, the app and the benchmarks all
consume this same loop. It knows models and tokenizers, not user interfaces.
"""

from __future__ import annotations

import inspect
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from kvviz.base.errors import first_line
from kvviz.base.units import GIB
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.hardware import device_accelerator
from kvviz.calc.memory import activation_bytes, transformers_cache_bytes
from kvviz.engine.loading import LoadedModel, free_bytes, transformers_keeps_mla_latent
from kvviz.engine.metrics import RunSummary, summarize
from kvviz.engine.request import GenerationRequest
from kvviz.engine.streaming import TextStream


# Events. t_s is seconds since the request was received (t0).
@dataclass(frozen=True)
class RequestReceived:
    t_s: float
    request_id: int
    mode: str


@dataclass(frozen=True)
class Waiting:
    """The device is busy with another request: this one queues."""

    t_s: float


@dataclass(frozen=True)
class DeviceAcquired:
    t_s: float
    queue_s: float


@dataclass(frozen=True)
class PromptTokenized:
    t_s: float
    prompt_tokens: int
    chat_template: bool


@dataclass(frozen=True)
class PrefillDone:
    """The whole prompt has been read in one forward pass and the first token sampled."""

    t_s: float
    prefill_s: float
    prompt_tokens: int


@dataclass(frozen=True)
class TokenEvent:
    """One output token. seq_len is how many tokens the model had processed when it produced this one
    (the cache length in cached mode); kv bytes are the cache as it then stood."""

    index: int
    token_id: int
    text: str
    phase: str  # "prefill" for the first token, "decode" after
    dt_s: float  # since the previous token (since t0 for the first)
    t_s: float
    seq_len: int
    kv_bytes: int
    kv_bytes_predicted: int
    cuda_allocated_bytes: int | None


@dataclass(frozen=True)
class Finished:
    """The end of a request. reason: eos, max_new_tokens, context_full, cancelled or failed."""

    t_s: float
    reason: str
    text: str
    summary: RunSummary | None
    error: str | None = None
    bad_input: bool = False  # failed because of what was asked (too long a prompt), not a fault


Event = RequestReceived | Waiting | DeviceAcquired | PromptTokenized | PrefillDone | TokenEvent | Finished

_REQUEST_IDS = itertools.count(1)
_DEVICE_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def device_lock(device: torch.device) -> threading.Lock:
    """The one lock that serialises work on `device`."""
    with _LOCKS_GUARD:
        return _DEVICE_LOCKS.setdefault(str(device), threading.Lock())


class _Clock:
    """Seconds since t0, read after the device has finished the work queued so far."""

    def __init__(self, device: torch.device) -> None:
        self._sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
        self.t0 = time.perf_counter()

    def now(self) -> float:
        self._sync()
        return time.perf_counter() - self.t0


def _cache_kwarg(model: torch.nn.Module) -> str:
    """The forward argument that takes the cache: `cache` in recent transformers, `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _accepts(model: torch.nn.Module, name: str) -> bool:
    return name in inspect.signature(model.forward).parameters


def cache_nbytes(cache) -> int:
    """Bytes held by the key and value tensors of a transformers Cache, layer by layer."""
    total = 0
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    return total


def _eos_ids(lm: LoadedModel) -> set[int]:
    ids = {lm.tokenizer.eos_token_id}
    gen = getattr(lm.model, "generation_config", None)
    extra = getattr(gen, "eos_token_id", None) if gen is not None else None
    ids.update(extra if isinstance(extra, (list, tuple)) else [extra])
    return {i for i in ids if i is not None}


def encode_prompt(lm: LoadedModel, prompt: str, chat_template: bool) -> tuple[list[int], bool]:
    """Token ids of the prompt, through the tokenizer's chat template when asked and when it has one."""
    tok = lm.tokenizer
    if chat_template and getattr(tok, "chat_template", None):
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True)
        return tok(text, add_special_tokens=False)["input_ids"], True
    return tok(prompt)["input_ids"], False


def _sample(logits: torch.Tensor, req: GenerationRequest, gen: torch.Generator | None) -> torch.Tensor:
    """Next token id from logits [1, vocab]: argmax when greedy, else temperature, top-k, top-p sampling."""
    if req.temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # [1, 1]
    logits = logits.float() / req.temperature
    if req.top_k:
        kth = torch.topk(logits, min(req.top_k, logits.shape[-1])).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if req.top_p < 1:
        sorted_logits, order = torch.sort(logits, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        drop = cumulative - sorted_logits.softmax(-1) >= req.top_p  # keep the smallest set reaching top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return torch.multinomial(logits.softmax(-1), 1, generator=gen)  # [1, 1]


def generate(lm: LoadedModel, req: GenerationRequest, cancel: threading.Event | None = None) -> Iterator[Event]:
    """Start a request now (t0) and return the generator of its events.

    Raises ValueError at once for a malformed request; problems found later (a prompt longer than the
    context, a fault on the device) end the stream with Finished(reason="failed").
    """
    clock = _Clock(lm.device)
    return _run(lm, req, cancel or threading.Event(), clock, next(_REQUEST_IDS))


def _run(lm: LoadedModel, req: GenerationRequest, cancel: threading.Event, clock: _Clock,
         request_id: int) -> Iterator[Event]:
    yield RequestReceived(0.0, request_id, req.mode)
    lock = device_lock(lm.device)
    if not lock.acquire(blocking=False):
        yield Waiting(clock.now())
        while not lock.acquire(timeout=0.02):
            if cancel.is_set():
                yield Finished(clock.now(), "cancelled", "", None)
                return
    try:
        queue_s = clock.now()
        yield DeviceAcquired(queue_s, queue_s)
        yield from _generate_on_device(lm, req, cancel, clock, queue_s)
    finally:
        lock.release()


def _generate_on_device(lm: LoadedModel, req: GenerationRequest, cancel: threading.Event, clock: _Clock,
                        queue_s: float) -> Iterator[Event]:
    model, device = lm.model, lm.device
    ids, templated = encode_prompt(lm, req.prompt, req.chat_template)
    t_tok = clock.now()
    yield PromptTokenized(t_tok, len(ids), templated)
    if req.max_prompt_tokens is not None and len(ids) > req.max_prompt_tokens:
        yield Finished(clock.now(), "failed", "", None,
                       f"the prompt has {len(ids):,} tokens; this demo allows {req.max_prompt_tokens:,}",
                       bad_input=True)
        return
    context = lm.context_length
    if context and len(ids) >= context:
        yield Finished(clock.now(), "failed", "", None,
                       f"the prompt has {len(ids):,} tokens; the model's context is {context:,}", bad_input=True)
        return

    kvd = kv_dtype(lm.dtype_name)
    mla_latent = transformers_keeps_mla_latent()
    limit = req.max_new_tokens if not context else min(req.max_new_tokens, context - len(ids))
    refusal = _does_not_fit(lm, req, len(ids), limit, kvd, mla_latent)
    if refusal:
        yield Finished(clock.now(), "failed", "", None, refusal, bad_input=True)
        return
    cuda = device.type == "cuda"
    base_alloc = torch.cuda.memory_allocated(device) if cuda else 0
    gen = torch.Generator(device=device).manual_seed(req.seed) if req.seed is not None else None
    eos = _eos_ids(lm)
    stream = TextStream(lm.tokenizer)
    cache = None
    forward_kw: dict = {"logits_to_keep": 1} if _accepts(model, "logits_to_keep") else {}
    if req.use_cache:
        from transformers import DynamicCache

        cache = DynamicCache(config=model.config)
        forward_kw[_cache_kwarg(model)] = cache
    sequence = torch.tensor([ids], device=device)  # [1, prompt_len]
    step_input = sequence
    text_parts: list[str] = []
    token_times: list[float] = []
    kv_read: list[int] = []
    prefill_s = None
    reason = "max_new_tokens"
    out = None
    failure = None
    kv_now = 0  # the cache as the previous step left it: what this step reads
    try:
        with torch.inference_mode():
            for index in range(limit):
                if cancel.is_set():
                    reason = "cancelled"
                    break
                kv_before = kv_now
                out = model(input_ids=step_input, use_cache=req.use_cache, **forward_kw)
                next_id = _sample(out.logits[:, -1, :], req, gen)  # [1, 1]
                token = int(next_id)  # waits for the device
                t = clock.now()
                seq_len = sequence.shape[1]
                if index == 0:
                    prefill_s = t - t_tok
                    yield PrefillDone(t, prefill_s, len(ids))
                else:
                    kv_read.append(kv_before)
                sequence = torch.cat([sequence, next_id], dim=1)
                step_input = next_id if req.use_cache else sequence
                kv_now = cache_nbytes(cache) if cache is not None else 0
                predicted = transformers_cache_bytes(lm.arch, 1, seq_len, kvd, mla_latent) if cache is not None else 0
                delta = stream.put(token)
                text_parts.append(delta)
                yield TokenEvent(index, token, delta, "prefill" if index == 0 else "decode",
                                 t - (token_times[-1] if token_times else 0.0), t, seq_len, kv_now, predicted,
                                 torch.cuda.memory_allocated(device) - base_alloc if cuda else None)
                token_times.append(t)
                if token in eos and not req.ignore_eos:
                    reason = "eos"
                    break
            else:
                if limit < req.max_new_tokens:
                    reason = "context_full"
    except torch.OutOfMemoryError as exc:
        failure = f"out of memory on {device} after {len(token_times)} tokens: {first_line(exc)}"
    except RuntimeError as exc:
        failure = f"{type(exc).__name__}: {first_line(exc)}"
    if failure is not None:
        # The exception's traceback held the forward pass's frames, and through them the cache, until the
        # except clause ended; only now can the cache go and the allocator give its memory back.
        del cache, out
        forward_kw.clear()
        if cuda:
            torch.cuda.empty_cache()
        yield Finished(clock.now(), "failed", "".join(text_parts), None, failure)
        return
    tail = stream.end()
    text_parts.append(tail)
    accel = device_accelerator(str(device))
    summary = summarize(
        model=lm.spec, device=str(device), dtype=lm.dtype_name, mode=req.mode, finish_reason=reason,
        prompt_tokens=len(ids), token_times=token_times, queue_s=queue_s, tokenize_s=t_tok - queue_s,
        prefill_s=prefill_s, weight_bytes=lm.weight_bytes, kv_bytes_read=kv_read,
        bandwidth_bound=accel.bandwidth, bandwidth_source=f"{accel.name}: {accel.note or 'published figure'}",
    )
    yield Finished(clock.now(), reason, "".join(text_parts), summary)


def _does_not_fit(lm: LoadedModel, req: GenerationRequest, prompt_tokens: int, new_tokens: int, kvd,
                  mla_latent: bool) -> str | None:
    """Why this run cannot fit in the device's free memory, with the numbers; None when it can.

    Weights are already on the device; the run adds its cache at full length and the activations of its
    widest forward pass: the prefill with the cache, the last step without it (which re-reads everything).
    """
    total = prompt_tokens + new_tokens
    kv = transformers_cache_bytes(lm.arch, 1, total, kvd, mla_latent) if req.use_cache else 0
    eager = getattr(lm.model.config, "_attn_implementation", None) == "eager"
    act = activation_bytes(lm.arch, prompt_tokens if req.use_cache else total,
                           torch.finfo(lm.dtype).bits // 8, attention_scores=eager)
    free = free_bytes(lm.device)
    if kv + act <= free:
        return None
    return (f"this run cannot fit: it needs about {(kv + act) / GIB:,.2f} GiB beyond the weights (KV cache for "
            f"{total:,} tokens: {kv / GIB:,.2f} GiB; activations: {act / GIB:,.2f} GiB) and {lm.device.type} has "
            f"{free / GIB:,.2f} GiB free; ask for fewer tokens")


def run_to_end(lm: LoadedModel, req: GenerationRequest,
               cancel: threading.Event | None = None) -> tuple[list[TokenEvent], Finished]:
    """Consume a whole generation; returns its token events and its Finished event."""
    tokens, finished = [], None
    for event in generate(lm, req, cancel):
        if isinstance(event, TokenEvent):
            tokens.append(event)
        elif isinstance(event, Finished):
            finished = event
    return tokens, finished
