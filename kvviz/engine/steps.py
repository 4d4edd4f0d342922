"""The forward passes of generation, one small function per phase (as gpt-fast's prefill / decode_one_token).

    prefill(model, prompt_ids, cache)    the whole prompt in one pass; fills the cache
    decode_step(model, token, cache)     one new token; the cache supplies every earlier one
    uncached_step(model, sequence)       no cache: the whole sequence again, every step
    new_static_cache(model, length)      a cache preallocated for `length` tokens (the static mode's; its
                                         compiled decode step lives in kvviz.engine.compiled)
    batch_step(model, ids, mask, cache)  B left-padded rows at once (kvviz.engine.batch): the prefill, a decode
                                         step or an uncached step of all of them, by what goes in

The single-sequence steps return the logits of the next token only ([1, vocab]); sample() picks it. In
transformers one forward serves all of them: what differs is what goes in (the prompt, one token, everything)
and whether a cache comes along. Every forward pass here takes its keyword arguments from forward_kwargs, the
one place that decides the cache's argument and whether the model computes the last position's logits alone.
This module knows models and caches; it does not time, measure, tokenize or decide when to stop
(kvviz.engine.loop and kvviz.engine.batch do).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import torch

from kvviz.engine.request import GenerationRequest


@functools.cache
def _forward_parameters(model_class: type) -> frozenset[str]:
    # Read once per model class: inspecting a signature costs more than a tiny model's whole decode step.
    return frozenset(inspect.signature(model_class.forward).parameters)


def cache_kwarg(model: torch.nn.Module) -> str:
    """The forward argument that takes the cache: `cache` in recent transformers, `past_key_values` before."""
    return "cache" if "cache" in _forward_parameters(type(model)) else "past_key_values"


def new_cache(model: torch.nn.Module):
    """An empty transformers DynamicCache shaped for `model` (sliding-window layers included)."""
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def new_static_cache(model: torch.nn.Module, length: int):
    """A transformers StaticCache for `length` tokens of one sequence. Every layer's tensors are allocated whole
    at the first forward pass and written in place after it, so their shapes and addresses never change: what a
    compiled step (and a CUDA graph) needs."""
    from transformers import StaticCache

    return StaticCache(config=model.config, max_cache_len=length)


@dataclass(frozen=True)
class CacheBytes:
    """What a transformers Cache holds, measured from its tensors.

    kv: the per-token keys and values (and DeepSeek-V3.2's indexer keys), which grow with the sequence;
    state: the fixed-size conv and recurrent states of linear-attention, Mamba and convolution layers,
    one set per sequence whatever its length.
    """

    kv: int
    state: int

    @property
    def total(self) -> int:
        return self.kv + self.state


def _tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def cache_bytes(cache) -> CacheBytes:
    """The bytes of every tensor `cache` holds, layer by layer, per-token KV apart from fixed-size state."""
    kv = state = 0
    for layer in cache.layers:
        kv += _tensor_bytes(getattr(layer, name, None) for name in ("keys", "values", "indexer_keys"))
        for name in ("conv_states", "recurrent_states"):
            state += _tensor_bytes((getattr(layer, name, None) or {}).values())
    return CacheBytes(kv=kv, state=state)


def cache_nbytes(cache) -> int:
    """Bytes held by a transformers Cache: its per-token keys and values and any fixed-size state."""
    return cache_bytes(cache).total


def forward_kwargs(model: torch.nn.Module, cache) -> dict:
    """The keyword arguments of a forward pass that computes logits for the last position only, with `cache`
    (None: without one). Worked out once per run: the compiled decode step (kvviz.engine.compiled) takes them as
    they are, so it traces no signature inspection."""
    kw = {"logits_to_keep": 1} if "logits_to_keep" in _forward_parameters(type(model)) else {}
    if cache is not None:
        kw[cache_kwarg(model)] = cache
    return {"use_cache": cache is not None, **kw}


def next_token_logits(model: torch.nn.Module, input_ids: torch.Tensor, **kwargs) -> torch.Tensor:
    """One forward pass over `input_ids` ([1, n]) with forward_kwargs; the last position's logits [1, vocab]."""
    return model(input_ids=input_ids, **kwargs).logits[:, -1, :]


def _next_token_logits(model: torch.nn.Module, input_ids: torch.Tensor, cache) -> torch.Tensor:
    return next_token_logits(model, input_ids, **forward_kwargs(model, cache))


def prefill(model: torch.nn.Module, prompt_ids: torch.Tensor, cache) -> torch.Tensor:
    """Read the whole prompt in one pass, leaving every layer's keys and values in `cache` (None keeps nothing,
    as an uncached run's first step). Compute-heavy: prompt_len positions at once. Logits [1, vocab]."""
    # prompt_ids: [1, prompt_len]; after the pass the cache holds prompt_len tokens
    return _next_token_logits(model, prompt_ids, cache)


def decode_step(model: torch.nn.Module, token: torch.Tensor, cache) -> torch.Tensor:
    """Feed the one token just sampled; attention reads the earlier ones from `cache`, which grows by one.
    Memory-bound: the step reads all the weights and the cache to compute one position. Logits [1, vocab]."""
    # token: [1, 1]; the cache holds seq_len - 1 tokens before the pass and seq_len after
    return _next_token_logits(model, token, cache)


def uncached_step(model: torch.nn.Module, sequence: torch.Tensor) -> torch.Tensor:
    """A step without a cache: the prompt and every token so far go through the model again, a prefill of
    seq_len tokens each time, so a step's work grows with the sequence. Logits [1, vocab]."""
    # sequence: [1, seq_len]
    return _next_token_logits(model, sequence, None)


def position_ids(mask: torch.Tensor) -> torch.Tensor:
    """Each position's index among its row's real tokens: cumsum(mask) - 1, clamped at 0 (padding says 0).
    mask [B, S] -> [B, S]; a row's first real token is at 0 however much padding precedes it."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def batch_step(model: torch.nn.Module, input_ids: torch.Tensor, mask: torch.Tensor, cache) -> torch.Tensor:
    """One forward pass of a left-padded batch; the logits of each row's last position, [B, vocab].

    input_ids [B, n] are the newest n positions (the whole padded sequence at prefill or without a cache, the one
    token just sampled when decoding with it); mask [B, S] covers every position so far, cached ones included.
    """
    positions = position_ids(mask)[:, -input_ids.shape[1]:]  # [B, n]
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, **forward_kwargs(model, cache))
    return out.logits[:, -1, :]  # [B, vocab]


def sample(logits: torch.Tensor, req: GenerationRequest, generator: torch.Generator | None) -> torch.Tensor:
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
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)  # [1, 1]
