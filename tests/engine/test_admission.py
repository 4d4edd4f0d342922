"""Admission before any forward pass: the plan a request runs by, and the one memory-fit rule."""

from __future__ import annotations

import pytest
import torch

import kvviz.engine.loading as loading
from kvviz.engine.admission import Plan, Refusal, admit, encode_prompt
from kvviz.engine.loading import WEIGHTS_SHARE, check_fit, load_model
from kvviz.engine.request import GenerationRequest

CPU = torch.device("cpu")


@pytest.mark.parametrize("need,free,share,ok", [
    (1_000, 1_000, 1.0, True),  # exactly the free memory fits
    (1_001, 1_000, 1.0, False),
    (900, 1_000, WEIGHTS_SHARE, True),  # weights may take 0.9 of it when loading
    (901, 1_000, WEIGHTS_SHARE, False),
    (0, 0, 1.0, True),
])
def test_fit_rule(monkeypatch, need, free, share, ok):
    """need fits when need <= share x free; the result carries the free bytes it was weighed against."""
    monkeypatch.setattr(loading, "free_bytes", lambda device: free)
    fit = check_fit(need, CPU, share=share)
    assert fit.ok is ok and fit.free_bytes == free and fit.need_bytes == need


def test_plan_caps_the_new_tokens_at_the_context(short_context_model):
    """A 32-token context with a prompt of n tokens leaves 32 - n new ones: the plan says so and why it ends."""
    lm = load_model(str(short_context_model))
    ids, _ = encode_prompt(lm, "hi", chat_template=False)
    plan = admit(lm, GenerationRequest("hi", max_new_tokens=100, chat_template=False), ids)
    assert isinstance(plan, Plan)
    assert plan.max_tokens == 32 - len(ids) and plan.limit_reason == "context_full"
    assert plan.prompt_ids == tuple(ids)
    small = admit(lm, GenerationRequest("hi", max_new_tokens=3, chat_template=False), ids)
    assert small.max_tokens == 3 and small.limit_reason == "max_new_tokens"


def test_plan_stops_at_eos_unless_told_to_ignore_it(tiny_models):
    """The stop ids are the tokenizer's EOS (and the model's); ignore_eos empties them."""
    lm = load_model(str(tiny_models["qwen2"]))
    ids, _ = encode_prompt(lm, "hi", chat_template=False)
    assert lm.tokenizer.eos_token_id in admit(lm, GenerationRequest("hi"), ids).stop_ids
    assert admit(lm, GenerationRequest("hi", ignore_eos=True), ids).stop_ids == frozenset()


@pytest.mark.parametrize("kw,message", [
    (dict(max_prompt_tokens=1), "this demo allows 1"),
    (dict(max_new_tokens=4), None),
])
def test_prompt_limit_is_a_refusal(tiny_models, kw, message):
    """Over the host's prompt limit admission refuses, with the numbers; within it there is a plan."""
    lm = load_model(str(tiny_models["qwen2"]))
    ids, _ = encode_prompt(lm, "The KV cache", chat_template=False)
    result = admit(lm, GenerationRequest("The KV cache", chat_template=False, **kw), ids)
    if message is None:
        assert isinstance(result, Plan)
    else:
        assert isinstance(result, Refusal) and result.reason == f"the prompt has {len(ids)} tokens; {message}"
