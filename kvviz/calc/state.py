"""The fixed-size state that linear-attention, Mamba and convolution layers keep instead of per-token KV.

Such a layer summarises the whole history in tensors whose size does not depend on how long the sequence
is: the last few inputs of its short causal convolution (`conv`) and a recurrent state (an SSM's hidden
state, or a delta-rule memory of keys by values). This module sizes both from the config, per mixer kind,
as transformers' modeling code allocates them (checked against real instances by the registry coverage
test); a kind it does not know is refused rather than guessed. It owns the State dataclass that arch.py's
Architecture carries; it knows configs, not bytes or devices, and it does not import the parser (arch.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvviz.calc.config_error import ConfigError


@dataclass(frozen=True)
class State:
    """The fixed-size state a linear-attention, Mamba or convolution layer keeps instead of per-token KV.

    Per layer and sequence: `conv` values of the short convolution's window and `recurrent` values of the
    recurrent (SSM or delta-rule) state, whatever the sequence's length; `layers` layers keep one each.
    """

    kind: str  # "Mamba", "Mamba-2", "gated DeltaNet", "short convolution", ...
    layers: int
    conv: int
    recurrent: int
    shapes: str  # the per-layer tensors, in words, for the app and the formula
    where: tuple[int, ...] = ()  # the indices of the layers that keep one

    @property
    def values_per_layer(self) -> int:
        return self.conv + self.recurrent


def _get(cfg: Any, *names: str) -> int:
    """The first of `names` the config sets to a positive int; ConfigError naming them all otherwise."""
    for name in names:
        value = getattr(cfg, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    raise ConfigError("state.linear_needs", names=" or ".join(repr(n) for n in names))


def _inner(cfg: Any, expand: str) -> int:
    """A Mamba mixer's inner width: config key `expand` × hidden_size channels."""
    factor = getattr(cfg, expand, None)
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor <= 0:
        raise ConfigError("state.mamba_needs", name=expand)
    return int(factor * _get(cfg, "hidden_size"))


def _mamba(layers: int, inner: int, d_state: int, kernel: int, heads: int = 1) -> State:
    """Mamba (S6): the convolution keeps `kernel` inputs of every inner channel; the SSM state is
    d_state values per inner channel (split over `heads` independent scans in Zamba, same count)."""
    ssm = f"{inner}, {d_state}" if heads == 1 else f"{heads}, {inner // heads}, {d_state}"
    return State("Mamba", layers, conv=inner * kernel, recurrent=inner * d_state,
                 shapes=f"conv [{inner}, {kernel}] + SSM [{ssm}]")


def _mamba2(layers: int, inner: int, groups: int, d_state: int, heads: int, head_dim: int, kernel: int) -> State:
    """Mamba-2 (SSD): the convolution runs over x, B and C (inner + 2 × groups × d_state channels); the SSM
    state is one head_dim × d_state matrix per head."""
    conv_dim = inner + 2 * groups * d_state
    return State("Mamba-2", layers, conv=conv_dim * kernel, recurrent=heads * head_dim * d_state,
                 shapes=f"conv [{conv_dim}, {kernel}] + SSM [{heads}, {head_dim}, {d_state}]")


def _delta_rule(kind: str, layers: int, k_heads: int, v_heads: int, dk: int, dv: int, kernel: int) -> State:
    """A delta-rule linear attention: the convolution runs over q, k and v (2 × k_heads × dk + v_heads × dv
    channels); the memory is one dk × dv matrix per value head (keys repeated to the value heads)."""
    conv_dim = 2 * k_heads * dk + v_heads * dv
    return State(kind, layers, conv=conv_dim * kernel, recurrent=v_heads * dk * dv,
                 shapes=f"conv [{conv_dim}, {kernel}] + memory [{v_heads}, {dk}, {dv}]")


def _delta_net(cfg: Any, layers: int) -> State:
    """Gated DeltaNet (Qwen3-Next, Qwen3.5, OLMo-Hybrid, Lara-Mini): key and value heads of their own sizes,
    linear_num_key_heads × linear_key_head_dim and linear_num_value_heads × linear_value_head_dim, a
    linear_conv_kernel_dim convolution."""
    return _delta_rule("gated DeltaNet", layers, _get(cfg, "linear_num_key_heads"),
                       _get(cfg, "linear_num_value_heads"), _get(cfg, "linear_key_head_dim"),
                       _get(cfg, "linear_value_head_dim"), _get(cfg, "linear_conv_kernel_dim"))


def _kimi_delta(cfg: Any, layers: int) -> State:
    """Kimi Delta Attention (Kimi-Linear, Bailing-Hybrid): q, k and v alike, linear_num_heads heads of
    linear_head_dim, so a linear_head_dim × linear_head_dim memory per head; a linear_conv_kernel_dim
    convolution."""
    heads, dim = _get(cfg, "linear_num_heads"), _get(cfg, "linear_head_dim")
    return _delta_rule("Kimi delta attention", layers, heads, heads, dim, dim, _get(cfg, "linear_conv_kernel_dim"))


def _short_conv(cfg: Any, layers: int) -> State:
    """LFM2's gated short convolution: the last conv_L_cache inputs of every hidden channel, no recurrence."""
    hidden, kernel = _get(cfg, "hidden_size"), _get(cfg, "conv_L_cache")
    return State("short convolution", layers, conv=hidden * kernel, recurrent=0, shapes=f"conv [{hidden}, {kernel}]")


def _cca(cfg: Any, layers: int) -> State:
    """ZAYA's compressed convolutional attention, beside its KV: two stacked convolutions (widths cca_time0 and
    cca_time1) over the concatenated q and k projections keep the last (cca_time0 - 1) + (cca_time1 - 1) inputs
    of (num_attention_heads + num_key_value_heads) × head_dim channels; the value path keeps the previous
    token's delayed value projection, num_key_value_heads × head_dim / 2 values. That one is no recurrence
    (a one-token delay) and transformers keeps it in the activations' dtype, so it counts with the window."""
    heads, kv_heads, dim = _get(cfg, "num_attention_heads"), _get(cfg, "num_key_value_heads"), _get(cfg, "head_dim")
    channels, window = (heads + kv_heads) * dim, _get(cfg, "cca_time0") - 1 + _get(cfg, "cca_time1") - 1
    delayed = kv_heads * dim // 2
    return State("convolutional attention", layers, conv=channels * window + delayed, recurrent=0,
                 shapes=f"conv [{channels}, {window}] + delayed value [{delayed}]")


# Mixers whose state is known but that kvviz's State cannot hold as it is: refused with why, not guessed.
_INKLING = ("its four short convolutions per layer keep their windows in fp32 whatever the model's dtype (kvviz counts "
            "a window in the activations' dtype), and the key and value ones are as wide as the layer's KV heads, "
            "which can differ between sliding (swa_num_key_value_heads × swa_head_dim) and full layers")
UNSIZED = dict.fromkeys(("inkling_text", "inkling2_text", "inkling2_loop_text"), _INKLING)


def layer_state(cfg: Any, layers: int) -> State:
    """The state each of `layers` linear layers of the text config `cfg` keeps; ConfigError for a mixer
    kvviz does not size."""
    family = cfg.model_type
    if family in ("mamba", "falcon_mamba"):
        return _mamba(layers, _get(cfg, "intermediate_size"), _get(cfg, "state_size"), _get(cfg, "conv_kernel"))
    if family == "jamba":
        return _mamba(layers, _inner(cfg, "mamba_expand"), _get(cfg, "mamba_d_state"), _get(cfg, "mamba_d_conv"))
    if family == "zamba":  # Mamba-1 split into n_mamba_heads scans of their own
        return _mamba(layers, _inner(cfg, "mamba_expand"), _get(cfg, "mamba_d_state"), _get(cfg, "mamba_d_conv"),
                      heads=_get(cfg, "n_mamba_heads"))
    if family == "mamba2":
        inner = int(cfg.expand * _get(cfg, "hidden_size"))
        return _mamba2(layers, inner, _get(cfg, "n_groups"), _get(cfg, "state_size"), _get(cfg, "num_heads"),
                       _get(cfg, "head_dim"), _get(cfg, "conv_kernel"))
    if family == "falcon_h1":  # mamba_d_ssm, when set, is the inner width instead of mamba_expand × hidden_size
        unset = getattr(cfg, "mamba_d_ssm", None) is None
        inner = _inner(cfg, "mamba_expand") if unset else _get(cfg, "mamba_d_ssm")
        return _mamba2(layers, inner, _get(cfg, "mamba_n_groups"), _get(cfg, "mamba_d_state"),
                       _get(cfg, "mamba_n_heads"), _get(cfg, "mamba_d_head"), _get(cfg, "mamba_d_conv"))
    if family == "zamba2":
        return _mamba2(layers, _inner(cfg, "mamba_expand"), _get(cfg, "mamba_ngroups"), _get(cfg, "mamba_d_state"),
                       _get(cfg, "n_mamba_heads"), _get(cfg, "mamba_headdim"), _get(cfg, "mamba_d_conv"))
    if family in ("bamba", "granitemoehybrid"):
        inner, heads = _inner(cfg, "mamba_expand"), _get(cfg, "mamba_n_heads")
        return _mamba2(layers, inner, _get(cfg, "mamba_n_groups"), _get(cfg, "mamba_d_state"), heads,
                       inner // heads, _get(cfg, "mamba_d_conv"))
    if family == "nemotron_h":
        heads, head_dim = _get(cfg, "mamba_num_heads"), _get(cfg, "mamba_head_dim")
        return _mamba2(layers, heads * head_dim, _get(cfg, "n_groups"), _get(cfg, "ssm_state_size"), heads,
                       head_dim, _get(cfg, "conv_kernel"))
    if family in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe", "olmo_hybrid",
                  "lara_mini"):
        return _delta_net(cfg, layers)
    if family in ("kimi_linear", "bailing_hybrid"):
        return _kimi_delta(cfg, layers)
    if family in ("lfm2", "lfm2_moe", "lfm3"):
        return _short_conv(cfg, layers)
    if family == "zaya":
        return _cca(cfg, layers)
    if family in UNSIZED:
        raise ConfigError("state.unsized", family=family, why=UNSIZED[family])
    raise ConfigError("state.not_yet_sized", family=family)
