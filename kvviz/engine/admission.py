"""Admission: whether a tokenized request may run, decided before any forward pass.

admit() checks the prompt against the host's token limit and the model's context, caps the new tokens
at what the context still holds, sizes a static-mode run's cache (and refuses a run longer than it), and
checks that the run fits in the device's free memory (the one fit rule, kvviz.engine.loading.check_fit). It
returns a Plan the loop follows, or a Refusal the loop reports as bad input. admit_batch() does the same for
a batch (kvviz.engine.batch) by the same rules, with its longest row for the prompt: the new-token limit, the
finish at that limit, the stop tokens and the fit are each decided once here for both. The request's own
values were checked when it was built (kvviz.engine.request); what is checked here needs the model and the
prompt's length in tokens. Nothing here runs the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvviz.base.units import GIB
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.memory import activation_bytes, static_cache_bytes, transformers_cache_bytes
from kvviz.engine.compiled import static_length, static_refusal
from kvviz.engine.loading import LoadedModel, check_fit, transformers_keeps_mla_latent
from kvviz.engine.request import BatchRequest, GenerationRequest
from kvviz.i18n import Said, said


@dataclass(frozen=True)
class Plan:
    """An admitted request: what the loop needs to run it."""

    prompt_ids: tuple[int, ...]
    max_tokens: int  # max_new_tokens, or fewer when the context ends first
    limit_reason: str  # the finish when max_tokens are made: "max_new_tokens" or "context_full"
    stop_ids: frozenset[int]  # tokens that end the run (EOS); empty when the request ignores EOS
    static_tokens: int | None = None  # the static mode's cache length (None in the other modes)


@dataclass(frozen=True)
class Refusal:
    """Why a request cannot run, in one line with the numbers: the asker's to fix, not a fault."""

    reason: str


def encode_prompt(lm: LoadedModel, prompt: str, chat_template: bool) -> tuple[list[int], bool]:
    """Token ids of the prompt, through the tokenizer's chat template when asked and when it has one."""
    tok = lm.tokenizer
    if chat_template and getattr(tok, "chat_template", None):
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True)
        return tok(text, add_special_tokens=False)["input_ids"], True
    return tok(prompt)["input_ids"], False


def eos_ids(lm: LoadedModel) -> frozenset[int]:
    """The token ids that end a generation: the tokenizer's EOS and the model's generation_config ones."""
    ids = {lm.tokenizer.eos_token_id}
    gen = getattr(lm.model, "generation_config", None)
    extra = getattr(gen, "eos_token_id", None) if gen is not None else None
    ids.update(extra if isinstance(extra, (list, tuple)) else [extra])
    return frozenset(i for i in ids if i is not None)


def admit(lm: LoadedModel, req: GenerationRequest, prompt_ids: list[int]) -> Plan | Refusal:
    """The plan for running `req` on `lm` with this tokenized prompt, or why it cannot run."""
    n = len(prompt_ids)
    if req.max_prompt_tokens is not None and n > req.max_prompt_tokens:
        return Refusal(said("admit.prompt_over_limit", n=n, limit=req.max_prompt_tokens))
    context = lm.context_length
    if context and n >= context:
        return Refusal(said("admit.prompt_over_context", n=n, context=context))
    max_tokens = new_token_limit(lm, req, n)
    static = static_cache_tokens(lm, req, n) if req.static else None
    refusal = static_refusal(lm.arch, n + max_tokens, static) if static is not None else None
    refusal = refusal or run_does_not_fit(lm, req.use_cache, n, max_tokens, static_tokens=static)
    if refusal:
        return Refusal(refusal)
    return Plan(prompt_ids=tuple(prompt_ids), max_tokens=max_tokens, limit_reason=limit_reason(req, max_tokens),
                stop_ids=stop_ids(lm, req), static_tokens=static)


def new_token_limit(lm: LoadedModel, req: GenerationRequest | BatchRequest, prompt_tokens: int) -> int:
    """The new tokens a run of `req` makes at most: max_new_tokens, or what the context still holds after
    prompt_tokens (a batch's longest row: every row is padded to it)."""
    context = lm.context_length
    return req.max_new_tokens if not context else min(req.max_new_tokens, context - prompt_tokens)


def limit_reason(req: GenerationRequest | BatchRequest, max_tokens: int) -> str:
    """How a run (a row) that makes max_tokens ends: context_full when the context cut max_new_tokens short."""
    return "context_full" if max_tokens < req.max_new_tokens else "max_new_tokens"


def stop_ids(lm: LoadedModel, req: GenerationRequest | BatchRequest) -> frozenset[int]:
    """The tokens that end a run (a row): the model's EOS ones, none when the request ignores EOS."""
    return frozenset() if req.ignore_eos else eos_ids(lm)


def static_cache_tokens(lm: LoadedModel, req: GenerationRequest, prompt_tokens: int) -> int:
    """The static cache's length for `req` after a prompt of prompt_tokens: the request's static_tokens, or the
    run's whole length (prompt + new tokens) in its bucket (kvviz.engine.compiled.static_length)."""
    if req.static_tokens is not None:
        return req.static_tokens
    return static_length(prompt_tokens + new_token_limit(lm, req, prompt_tokens), lm.context_length)


def run_does_not_fit(lm: LoadedModel, use_cache: bool, prompt_tokens: int, new_tokens: int,
                     batch: int = 1, static_tokens: int | None = None) -> Said | None:
    """Why this run (of `batch` sequences of prompt_tokens, padded alike) cannot fit in the device's free memory,
    with the numbers; None when it can. The one fit rule for a single run and a batch.

    Weights are already on the device; the run adds its cache at full length (a static cache at its
    static_tokens) and the activations of its widest forward pass: the prefill with the cache, the last step
    without it (which re-reads everything).
    """
    total = prompt_tokens + new_tokens
    dtype, latent = kv_dtype(lm.dtype_name), transformers_keeps_mla_latent()
    kv = (0 if not use_cache else transformers_cache_bytes(lm.arch, batch, total, dtype, latent)
          if static_tokens is None else static_cache_bytes(lm.arch, batch, static_tokens, dtype, latent))
    eager = getattr(lm.model.config, "_attn_implementation", None) == "eager"
    act = batch * activation_bytes(lm.arch, prompt_tokens if use_cache else total,
                                   torch.finfo(lm.dtype).bits // 8, attention_scores=eager)
    fit = check_fit(kv + act, lm.device)
    if fit.ok:
        return None
    sizes = dict(need=(kv + act) / GIB, kv=kv / GIB, act=act / GIB, device=lm.device.type, free=fit.free_bytes / GIB)
    if batch == 1:
        return said("fit.run", tokens=f"{total:,}", **sizes)
    return said("fit.batch", tokens=f"{batch:,} × {total:,}", **sizes)


@dataclass(frozen=True)
class BatchPlan:
    """An admitted batch: what the loop needs to run it."""

    prompt_ids: tuple[tuple[int, ...], ...]
    max_tokens: int  # max_new_tokens, or fewer when the context ends first (for the longest row)
    limit_reason: str  # a row's finish when max_tokens are made: "max_new_tokens" or "context_full"
    stop_ids: frozenset[int]  # tokens that end a row (EOS); empty when the request ignores EOS


def admit_batch(lm: LoadedModel, req: BatchRequest, prompt_ids: list[list[int]]) -> BatchPlan | Refusal:
    """The plan for this tokenized batch on `lm`, or why it cannot run: an empty row, the longest row against the
    host's prompt limit, the padded length against the context (which caps the new tokens), the whole batch's cache
    and widest pass against free memory."""
    empty = next((i for i, ids in enumerate(prompt_ids) if not ids), None)
    if empty is not None:
        return Refusal(said("admit.batch_row_empty", i=empty + 1))
    width, context = max(len(ids) for ids in prompt_ids), lm.context_length
    if req.max_prompt_tokens is not None and width > req.max_prompt_tokens:
        return Refusal(said("admit.batch_prompt_over_limit", n=width, limit=req.max_prompt_tokens))
    if context and width >= context:
        return Refusal(said("admit.batch_over_context", n=width, context=context))
    max_tokens = new_token_limit(lm, req, width)
    refusal = run_does_not_fit(lm, req.use_cache, width, max_tokens, batch=len(prompt_ids))
    if refusal:
        return Refusal(refusal)
    return BatchPlan(prompt_ids=tuple(tuple(ids) for ids in prompt_ids), max_tokens=max_tokens,
                     limit_reason=limit_reason(req, max_tokens), stop_ids=stop_ids(lm, req))
