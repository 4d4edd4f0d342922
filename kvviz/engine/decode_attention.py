"""The compiled CPU step's attention for its one new token: in fp32, over the key-value heads as the cache holds
them. Knows transformers' attention interface; nothing of caches, kernels or torch.compile.

Why. transformers' sdpa attention repeats a grouped model's key-value heads out to the query heads whenever a mask
is passed (a static cache always passes one), and a bf16 one then runs torch's flash attention for CPU in bf16,
which on a CPU without bf16 instructions converts as it goes. Measured on a 2-core Zen 3 EPYC (AVX2 alone), one
query of the Qwen2.5-0.5B twin's shape (14 heads over 2 key-value heads of 64, 128 cached positions, masked): 150
us a call in bf16 with the heads repeated, 24 us in fp32 with the grouped heads read as they are (enable_gqa). In
the compiled step, 10 interleaved rounds of 64 tokens on two loaded copies of the twin in bf16: 1.04x decode
tokens/s (median; 0.99-1.12 by round).

So while a CPU step is traced (switched), a model whose configs ask for "sdpa" asks for decode_attention instead:
one query token on a CPU runs in fp32 with grouped heads; anything else (a prompt, a position bias, a softcap, a
GPU) goes to transformers' own sdpa attention unchanged. Outside the trace the model is as it was: the eager modes
(model.generate, the cached loop) keep transformers' attention.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "kvviz_decode"
SDPA = "sdpa"


def _one_query_on_cpu(query: Tensor, key: Tensor, value: Tensor, kwargs: dict) -> bool:
    """Whether decode_attention's own path applies: one query token on a CPU, query heads a whole multiple of the
    key-value heads, keys and values of one head size, and nothing sdpa would add (a position bias, a softcap)."""
    return (query.shape[2] == 1 and query.device.type == "cpu" and query.shape[1] % key.shape[1] == 0
            and key.shape[-1] == value.shape[-1]
            and all(kwargs.get(k) is None for k in ("position_bias", "softcap")))


def decode_attention(module: torch.nn.Module, query: Tensor, key: Tensor, value: Tensor,
                     attention_mask: Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                     **kwargs) -> tuple[Tensor, None]:
    """Attention as transformers' sdpa computes it; for one query token on a CPU, in fp32 over the grouped
    key-value heads. query: [batch, heads, 1, head_dim]; key, value: [batch, kv_heads, positions, head_dim];
    attention_mask: [batch, 1, 1, positions] (bool, or additive) or None. Returns [batch, 1, heads, head_dim]."""
    if not _one_query_on_cpu(query, key, value, kwargs):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    mask = attention_mask if attention_mask is None or attention_mask.dtype == torch.bool else attention_mask.float()
    out = F.scaled_dot_product_attention(query.float(), key.float(), value.float(), attn_mask=mask,
                                         dropout_p=dropout, scale=scaling, enable_gqa=query.shape[1] != key.shape[1])
    return out.to(query.dtype).transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, decode_attention)
AttentionMaskInterface.register(NAME, sdpa_mask)  # the masks sdpa gets: decode_attention reads them alike


@contextmanager
def switched(model: torch.nn.Module) -> Iterator[int]:
    """While a step of `model` is traced: every config of its modules that asks for sdpa asks for
    decode_attention. Yields how many configs changed; they ask for sdpa again afterwards (a compiled step keeps
    what was traced)."""
    configs = {id(c): c for m in model.modules()
               if getattr(c := getattr(m, "config", None), "_attn_implementation_internal", None) == SDPA}
    for config in configs.values():
        config._attn_implementation_internal = NAME  # the attribute itself: the property's setter recurses
    try:
        yield len(configs)
    finally:
        for config in configs.values():
            config._attn_implementation_internal = SDPA
