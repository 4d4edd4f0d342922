"""The engine's forward passes against the model's own forward over the whole sequence (naive vs cached)."""

from __future__ import annotations

import pytest
import torch

from kvviz.engine.admission import encode_prompt
from kvviz.engine.loading import load_model
from kvviz.engine.steps import cache_kwarg, decode_step, new_cache, prefill, uncached_step
from tests.tiny import FAMILIES

PROMPT = "用三句话解释 LLM 推理中的 KV Cache。"
STEPS = 12  # with the tiny models' window of 8, the sliding layers wrap around during these steps


def _naive_logits(model, sequence: torch.Tensor) -> torch.Tensor:
    """The model's plain forward over the whole sequence, no cache: the reference every step must match."""
    return model(input_ids=sequence, use_cache=False).logits[:, -1, :]  # [1, vocab]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_prefill_then_decode_steps_match_the_full_forward(tiny_models, family):
    """prefill + decode_step give, at every step, the logits the model gives when it reads the whole sequence
    again, and so the same greedy tokens, in every attention family (GQA, MHA, sliding windows, MLA)."""
    lm = load_model(str(tiny_models[family]))
    ids, _ = encode_prompt(lm, PROMPT, chat_template=True)
    sequence = torch.tensor([ids])  # [1, prompt_len]
    cache = new_cache(lm.model)
    with torch.inference_mode():
        logits = prefill(lm.model, sequence, cache)
        for step in range(STEPS):
            reference = _naive_logits(lm.model, sequence)
            assert logits.shape == reference.shape == (1, lm.arch.vocab_size)
            torch.testing.assert_close(logits, reference, rtol=1e-4, atol=1e-4,
                                       msg=lambda m, s=step: f"step {s}: the cache changed the logits\n{m}")
            token = logits.argmax(dim=-1, keepdim=True)  # [1, 1]
            assert int(token) == int(reference.argmax()), f"step {step}: the cached step chose another token"
            sequence = torch.cat([sequence, token], dim=1)
            logits = decode_step(lm.model, token, cache)


@pytest.mark.parametrize("family", ["qwen2", "deepseek_v3"])
def test_uncached_step_is_the_full_forward(tiny_models, family):
    """uncached_step re-reads the whole sequence: its logits are the full forward's, with nothing kept."""
    lm = load_model(str(tiny_models[family]))
    ids, _ = encode_prompt(lm, PROMPT, chat_template=True)
    sequence = torch.tensor([ids])
    with torch.inference_mode():
        for _ in range(4):
            logits = uncached_step(lm.model, sequence)
            torch.testing.assert_close(logits, _naive_logits(lm.model, sequence), rtol=1e-5, atol=1e-5)
            sequence = torch.cat([sequence, logits.argmax(dim=-1, keepdim=True)], dim=1)


def test_prefill_leaves_the_prompt_in_the_cache_and_each_decode_step_adds_one(tiny_models):
    """The cache holds prompt_len tokens after the prefill and one more after every decode step."""
    lm = load_model(str(tiny_models["llama"]))
    ids, _ = encode_prompt(lm, PROMPT, chat_template=True)
    cache = new_cache(lm.model)
    with torch.inference_mode():
        token = prefill(lm.model, torch.tensor([ids]), cache).argmax(dim=-1, keepdim=True)
        assert cache.get_seq_length() == len(ids)
        for step in range(1, 4):
            token = decode_step(lm.model, token, cache).argmax(dim=-1, keepdim=True)
            assert cache.get_seq_length() == len(ids) + step


def test_cache_kwarg_names_a_parameter_of_the_forward(tiny_models):
    """The cache goes in under a name the installed transformers' forward accepts."""
    import inspect

    lm = load_model(str(tiny_models["qwen2"]))
    assert cache_kwarg(lm.model) in inspect.signature(lm.model.forward).parameters
