"""The fixed-size state that linear-attention, Mamba and convolution layers keep instead of per-token KV.

Such a layer summarises the whole history in tensors whose size does not depend on how long the sequence
is: the last few inputs of its short causal convolution (`conv`) and a recurrent state (an SSM's hidden
state, or a delta-rule memory of keys by values). This module sizes both from the config, per mixer kind,
as transformers' modeling code allocates them (checked against real instances by the registry coverage
test); a kind it does not know is refused rather than guessed. It knows configs, not bytes or devices.
"""

from __future__ import annotations

from typing import Any

from kvviz.calc.arch import ConfigError, State


def _get(cfg: Any, *names: str) -> int:
    """The first of `names` the config sets to a positive int; ConfigError naming them all otherwise."""
    for name in names:
        value = getattr(cfg, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    raise ConfigError(f"the config's linear layers need {' or '.join(repr(n) for n in names)}")


def _mamba(cfg: Any, layers: int, inner: int, d_state: int, kernel: int) -> State:
    """Mamba (S6): the convolution keeps `kernel` inputs of every inner channel; the SSM state is
    d_state values per inner channel."""
    return State("Mamba", layers, conv=inner * kernel, recurrent=inner * d_state,
                 shapes=f"conv [{inner}, {kernel}] + SSM [{inner}, {d_state}]")


def _mamba2(layers: int, inner: int, groups: int, d_state: int, heads: int, head_dim: int, kernel: int) -> State:
    """Mamba-2 (SSD): the convolution runs over x, B and C (inner + 2 × groups × d_state channels); the SSM
    state is one head_dim × d_state matrix per head."""
    conv_dim = inner + 2 * groups * d_state
    return State("Mamba-2", layers, conv=conv_dim * kernel, recurrent=heads * head_dim * d_state,
                 shapes=f"conv [{conv_dim}, {kernel}] + SSM [{heads}, {head_dim}, {d_state}]")


def _delta_net(cfg: Any, layers: int) -> State:
    """Gated DeltaNet (Qwen3-Next, Qwen3.5): the convolution runs over q, k and v; the memory is one
    key_dim × value_dim matrix per value head."""
    k_heads = _get(cfg, "linear_num_key_heads")
    v_heads = _get(cfg, "linear_num_value_heads")
    dk, dv = _get(cfg, "linear_key_head_dim"), _get(cfg, "linear_value_head_dim")
    kernel = _get(cfg, "linear_conv_kernel_dim")
    conv_dim = 2 * k_heads * dk + v_heads * dv
    return State("gated DeltaNet", layers, conv=conv_dim * kernel, recurrent=v_heads * dk * dv,
                 shapes=f"conv [{conv_dim}, {kernel}] + memory [{v_heads}, {dk}, {dv}]")


def _short_conv(cfg: Any, layers: int) -> State:
    """LFM2's gated short convolution: the last conv_L_cache inputs of every hidden channel, no recurrence."""
    hidden, kernel = _get(cfg, "hidden_size"), _get(cfg, "conv_L_cache")
    return State("short convolution", layers, conv=hidden * kernel, recurrent=0, shapes=f"conv [{hidden}, {kernel}]")


def layer_state(cfg: Any, layers: int) -> State:
    """The state each of `layers` linear layers of the text config `cfg` keeps; ConfigError for a mixer
    kvviz does not size."""
    family = cfg.model_type
    if family in ("mamba", "falcon_mamba"):
        return _mamba(cfg, layers, _get(cfg, "intermediate_size"), _get(cfg, "state_size"), _get(cfg, "conv_kernel"))
    if family == "jamba":
        inner = _get(cfg, "mamba_expand") * _get(cfg, "hidden_size")
        return _mamba(cfg, layers, inner, _get(cfg, "mamba_d_state"), _get(cfg, "mamba_d_conv"))
    if family == "mamba2":
        inner = int(cfg.expand * _get(cfg, "hidden_size"))
        return _mamba2(layers, inner, _get(cfg, "n_groups"), _get(cfg, "state_size"), _get(cfg, "num_heads"),
                       _get(cfg, "head_dim"), _get(cfg, "conv_kernel"))
    if family in ("bamba", "granitemoehybrid"):
        inner = _get(cfg, "mamba_expand") * _get(cfg, "hidden_size")
        heads = _get(cfg, "mamba_n_heads")
        return _mamba2(layers, inner, _get(cfg, "mamba_n_groups"), _get(cfg, "mamba_d_state"), heads,
                       inner // heads, _get(cfg, "mamba_d_conv"))
    if family == "nemotron_h":
        heads, head_dim = _get(cfg, "mamba_num_heads"), _get(cfg, "mamba_head_dim")
        return _mamba2(layers, heads * head_dim, _get(cfg, "n_groups"), _get(cfg, "ssm_state_size"), heads,
                       head_dim, _get(cfg, "conv_kernel"))
    if family in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe"):
        return _delta_net(cfg, layers)
    if family in ("lfm2", "lfm2_moe"):
        return _short_conv(cfg, layers)
    raise ConfigError(f"{family}'s linear-attention/state layers are not sized by kvviz yet: their per-sequence "
                      "state is unknown, so its memory cannot be answered exactly")
