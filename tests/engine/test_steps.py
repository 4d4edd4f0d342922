"""The engine's forward passes against the model's own forward over the whole sequence (naive vs cached)."""

from __future__ import annotations

import pytest
import torch

from kvviz.engine.admission import encode_prompt
from kvviz.engine.loading import load_model
from kvviz.engine.steps import (
    batch_step,
    cache_kwarg,
    decode_step,
    forward_kwargs,
    new_cache,
    prefill,
    uncached_step,
)
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


def _tiny_trocr():
    """A random TrOCR text decoder, built in memory: one of the transformers causal LMs (8 of 196 in 5.x) whose
    forward has no logits_to_keep (it swallows unknown keywords in **kwargs and computes every position's logits)."""
    from transformers import TrOCRConfig, TrOCRForCausalLM

    torch.manual_seed(0)
    config = TrOCRConfig(vocab_size=64, d_model=32, decoder_layers=2, decoder_attention_heads=2, decoder_ffn_dim=64,
                         max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                         decoder_start_token_id=1)
    return TrOCRForCausalLM(config).eval()


def _recording(model) -> list[dict]:
    """The keyword arguments of every forward call `model` gets from now on."""
    calls, forward = [], model.forward

    def record(*args, **kwargs):
        calls.append(kwargs)
        return forward(*args, **kwargs)

    model.forward = record
    return calls


def test_logits_to_keep_only_for_a_forward_that_takes_it(tiny_models):
    """Every step, the batch's included, asks for the last position alone only of a model whose forward has
    logits_to_keep, and gives the same logits as the model's plain forward either way."""
    trocr, qwen = _tiny_trocr(), load_model(str(tiny_models["qwen2"])).model
    assert "logits_to_keep" not in forward_kwargs(trocr, None), "the rule must read the model's forward signature"
    assert forward_kwargs(qwen, None)["logits_to_keep"] == 1
    ids = torch.tensor([[5, 9, 3, 7], [8, 4, 6, 11]])  # [2, 4], no padding: positions are the plain ones
    mask = torch.ones_like(ids)
    for model, keeps in ((trocr, False), (qwen, True)):
        calls = _recording(model)
        with torch.inference_mode():
            batched = batch_step(model, ids, mask, None)  # [2, vocab]
            single = uncached_step(model, ids[:1])  # [1, vocab]
            full = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[:, -1, :]
        assert [("logits_to_keep" in kw) for kw in calls[:2]] == [keeps, keeps], (
            f"{type(model).__name__}: logits_to_keep passed where the forward lacks it, or left out where it has it")
        torch.testing.assert_close(batched, full)
        torch.testing.assert_close(single, full[:1])
