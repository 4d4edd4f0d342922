"""kvviz.engine.decode_attention: one query token's attention in fp32 over grouped heads equals attention worked
in float64 by hand (heads repeated, masked, softmax); everything else is transformers' sdpa, unchanged; the switch
lasts only while a step is traced."""

from __future__ import annotations

import math

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from kvviz.engine import decode_attention as da
from kvviz.engine.loading import load_model


class Attn(torch.nn.Module):
    """What transformers' attention functions read from the calling module."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, True


def by_hand(q, k, v, mask, scale):
    """softmax(q k^T * scale + mask) v in float64, the key-value heads repeated for their query heads; a bool mask
    keeps the True positions. [batch, heads, 1, dim] out as [batch, 1, heads, dim]."""
    groups = q.shape[1] // k.shape[1]
    k, v = (t.double().repeat_interleave(groups, dim=1) for t in (k, v))
    scores = q.double() @ k.transpose(-1, -2) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask.double()
    return (scores.softmax(-1) @ v).transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("heads", "kv_heads"), [(14, 2), (4, 4)])
@pytest.mark.parametrize("mask_kind", ["bool", "additive", "none"])
def test_one_query_matches_attention_by_hand(dtype, heads, kv_heads, mask_kind):
    """Grouped or not, masked by a bool or an additive mask or not at all: the output is float64 attention rounded
    once to the dtype (fp32 inside: within a bf16 step of it)."""
    torch.manual_seed(0)
    q = torch.randn(1, heads, 1, 64).to(dtype)
    k, v = (torch.randn(1, kv_heads, 40, 64).to(dtype) for _ in range(2))
    keep = torch.arange(40) < 27  # a static cache's filled positions
    mask = {"bool": keep.view(1, 1, 1, 40),
            "additive": torch.where(keep, 0.0, -1e9).view(1, 1, 1, 40).to(dtype), "none": None}[mask_kind]
    out, weights = da.decode_attention(Attn(heads // kv_heads), q, k, v, mask, scaling=0.125)
    expected = by_hand(q, k, v, mask, 0.125)
    assert out.dtype == dtype and out.shape == (1, 1, heads, 64) and weights is None
    tol = 1e-5 if dtype == torch.float32 else 8e-3
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)


def test_what_is_not_one_query_on_a_cpu_goes_to_sdpa_unchanged():
    """A prompt (several queries), a position bias and keys and values of different sizes are transformers' sdpa
    attention's, bit for bit."""
    torch.manual_seed(1)
    module = Attn(2)
    cases = [(torch.randn(1, 4, 5, 16), torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16), {}),
             (torch.randn(1, 4, 1, 16), torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16),
              {"position_bias": torch.randn(1, 4, 1, 6)}),
             (torch.randn(1, 4, 1, 24), torch.randn(1, 2, 6, 24), torch.randn(1, 2, 6, 16), {})]
    for q, k, v, extra in cases:
        ours, _ = da.decode_attention(module, q, k, v, None, scaling=0.25, **extra)
        theirs, _ = sdpa_attention_forward(module, q, k, v, None, scaling=0.25, **extra)
        assert torch.equal(ours, theirs)


def test_the_switch_lasts_while_traced_and_gives_sdpas_logits(tiny_models):
    """switched() makes every config that asked for sdpa ask for decode_attention, and puts it back afterwards,
    even when the block raises; a one-token forward pass under it gives the logits sdpa gives (fp32)."""
    lm = load_model(str(tiny_models["qwen2"]))
    model, ids = lm.model, torch.tensor([[5, 17, 42, 7]])
    assert model.config._attn_implementation == da.SDPA
    with torch.no_grad():
        out = model(ids, use_cache=True)
        step = ids[:, -1:] + 1
        plain = model(step, past_key_values=out.past_key_values, use_cache=True).logits
        out = model(ids, use_cache=True)
        with da.switched(model) as changed:
            assert changed >= 1 and model.config._attn_implementation == da.NAME
            ours = model(step, past_key_values=out.past_key_values, use_cache=True).logits
    assert model.config._attn_implementation == da.SDPA
    torch.testing.assert_close(ours, plain, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError), da.switched(model):
        raise RuntimeError("a failed trace")
    assert model.config._attn_implementation == da.SDPA, "a failure left the model on decode_attention"
