"""A model's architecture, as far as memory and compute are concerned, read from a Hugging Face config.

This module owns the Architecture dataclass and the one parser every source goes through: a preset
shipped in assets/, a user's config.json, a model folder, or a hub id. It reads what the memory
model needs (layers, query and KV heads, head_dim, per-layer attention type and window, DeepSeek's
latent attention) and what the parameter count needs (hidden size, MLP, experts, embeddings).
It does not compute bytes; memory.py and params.py do.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from kvviz.base.errors import first_line
from kvviz.base.hub import HubUnreachable, from_hub, source_kind
from kvviz.base.inputs import clip, shown

FULL = "full"
SLIDING = "sliding"

# How transformers names per-layer attention in `layer_types`, mapped to the two kinds the memory
# model distinguishes. Anything else (chunked, linear, mamba...) is refused rather than guessed.
_LAYER_TYPE_NAMES = {
    "full_attention": FULL,
    "full": FULL,
    "global": FULL,
    "sliding_attention": SLIDING,
    "sliding": SLIDING,
    "local": SLIDING,
}

# Config keys, with the older names some families use (GPT-2's n_layer, n_head, n_embd).
_ALIASES = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "vocab_size": ("vocab_size",),
}
_MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


class ConfigError(ValueError):
    """A config that cannot describe a model: missing key, bad value, unreachable source."""


@dataclass(frozen=True)
class MLA:
    """DeepSeek's multi-head latent attention: what a token leaves behind is one compressed vector."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None

    @property
    def latent_dim(self) -> int:
        """Values cached per token per layer by an engine that implements MLA (vLLM, SGLang)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's query and key once the latent is expanded."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True)
class MoE:
    """Mixture of experts: per MoE layer, a router, routed experts and always-on shared experts."""

    n_routed_experts: int
    num_experts_per_tok: int
    n_shared_experts: int
    moe_intermediate_size: int
    first_k_dense_replace: int  # the first k layers keep a dense MLP


@dataclass(frozen=True)
class LayerLayout:
    """Which parameters a decoder layer holds beside its projections (differs between families)."""

    norm: str  # "rms" (weight only) or "layer" (weight and bias)
    norms_per_layer: int
    qkv_bias: bool
    o_bias: bool
    qk_norm: bool
    gated_mlp: bool
    mlp_bias: bool
    learned_positions: bool


@dataclass(frozen=True)
class Architecture:
    """Everything kvviz needs to know about a decoder-only transformer.

    The weight-side fields (hidden_size, intermediate_size, vocab_size, layout) are None when the
    architecture was given as raw dimensions; then only the KV cache can be computed.
    """

    name: str
    model_type: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    layer_types: tuple[str, ...]
    sliding_window: int | None = None
    mla: MLA | None = None
    moe: MoE | None = None
    hidden_size: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool = False
    layout: LayerLayout | None = None
    source: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def attention_kind(self) -> str:
        """MHA (one KV head per query head), GQA (groups share one), MQA (one for all) or MLA."""
        if self.mla is not None:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def n_sliding(self) -> int:
        return sum(kind == SLIDING for kind in self.layer_types)

    @property
    def has_weights(self) -> bool:
        """Whether the weight-side fields are known, so parameters can be counted."""
        return self.hidden_size is not None and self.layout is not None

    def with_kv_heads(self, kv_heads: int, name: str | None = None) -> Architecture:
        """The same model with another number of KV heads (plain attention, no latent)."""
        return replace(self, num_kv_heads=kv_heads, mla=None, name=name or self.name)


def _layout_for(model_type: str, cfg: Any) -> tuple[LayerLayout, tuple[str, ...]]:
    """The layer layout transformers builds for this family, and a note when it is assumed."""
    attention_bias = bool(getattr(cfg, "attention_bias", False))
    mlp_bias = bool(getattr(cfg, "mlp_bias", False))
    rms = dict(norm="rms", norms_per_layer=2, qk_norm=False, gated_mlp=True, learned_positions=False)
    known = {
        "llama": LayerLayout(**rms, qkv_bias=attention_bias, o_bias=attention_bias, mlp_bias=mlp_bias),
        "mistral": LayerLayout(**rms, qkv_bias=False, o_bias=False, mlp_bias=False),
        "mixtral": LayerLayout(**rms, qkv_bias=False, o_bias=False, mlp_bias=False),
        "qwen2": LayerLayout(**rms, qkv_bias=True, o_bias=False, mlp_bias=False),
        "qwen3": LayerLayout(**{**rms, "qk_norm": True}, qkv_bias=attention_bias, o_bias=attention_bias,
                             mlp_bias=False),
        "gemma": LayerLayout(**rms, qkv_bias=attention_bias, o_bias=attention_bias, mlp_bias=False),
        "gemma2": LayerLayout(**{**rms, "norms_per_layer": 4}, qkv_bias=attention_bias,
                              o_bias=attention_bias, mlp_bias=False),
        "deepseek_v2": LayerLayout(**rms, qkv_bias=False, o_bias=False, mlp_bias=False),
        "deepseek_v3": LayerLayout(**rms, qkv_bias=False, o_bias=False, mlp_bias=False),
        "gpt2": LayerLayout(norm="layer", norms_per_layer=2, qkv_bias=True, o_bias=True, qk_norm=False,
                            gated_mlp=False, mlp_bias=True, learned_positions=True),
    }
    if model_type in known:
        return known[model_type], ()
    guess = LayerLayout(**rms, qkv_bias=attention_bias, o_bias=attention_bias, mlp_bias=mlp_bias)
    return guess, (f"model_type {model_type!r} is not one kvviz knows: the parameter count assumes a "
                   "Llama-like layer (RMSNorm, gated MLP); the KV cache does not depend on it",)


def _first(raw: dict, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if raw.get(key) is not None:
            return raw[key]
    return None


# No real config comes near these; a larger value (a typo, or a config made to exhaust memory) is refused
# before anything sized by it is built.
MAX_LAYERS = 10_000
MAX_CONFIG_INT = 2**31 - 1


def _positive_int(value: Any, key: str) -> int:
    """value as an int > 0 (and within reason), or ConfigError naming the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and (
        not math.isfinite(value) or value != int(value)
    )) or int(value) <= 0:
        raise ConfigError(f"config key {key!r} must be a positive integer, got {shown(value)}")
    high = MAX_LAYERS if key in ("num_hidden_layers", "layers") else MAX_CONFIG_INT
    if value > high:
        raise ConfigError(f"config key {key!r} is {shown(value)}; kvviz takes at most {high:,}")
    return int(value)


def _normalised(raw: dict) -> Any:
    """The transformers config object for this model_type, so its defaults apply (Gemma-2's layer
    pattern, Qwen2 dropping sliding_window when use_sliding_window is false); the raw dict otherwise."""
    from types import SimpleNamespace

    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = raw["model_type"]
    if model_type not in CONFIG_MAPPING:
        return SimpleNamespace(**raw)
    fields = {k: v for k, v in raw.items() if k != "model_type"}
    quiet = logging.getLogger("transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # rope-validation chatter is not the user's problem here
    try:
        return AutoConfig.for_model(model_type, **fields)
    except Exception as exc:  # transformers raises many kinds for a malformed config
        reason = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        raise ConfigError(f"transformers rejects this {model_type} config: {reason[-1]}") from exc
    finally:
        quiet.setLevel(level)


def _layer_types(cfg: Any, raw: dict, num_layers: int) -> tuple[tuple[str, ...], int | None]:
    """Per-layer attention kind and the sliding window, as transformers would build the model."""
    window = getattr(cfg, "sliding_window", None)
    if raw.get("use_sliding_window") is False:
        window = None  # Qwen2 ships a sliding_window value it does not use
    declared = getattr(cfg, "layer_types", None)
    if declared:
        if len(declared) != num_layers:
            raise ConfigError(f"layer_types lists {len(declared)} layers but num_hidden_layers is {num_layers}")
        unknown = sorted({t for t in declared if t not in _LAYER_TYPE_NAMES})
        if unknown:
            raise ConfigError(f"unsupported attention layer type(s) {', '.join(unknown)}: kvviz models full "
                              "and sliding-window attention")
        kinds = tuple(_LAYER_TYPE_NAMES[t] for t in declared)
        if SLIDING in kinds and window is None:
            raise ConfigError("layer_types has sliding layers but the config gives no sliding_window")
    else:
        kinds = (SLIDING if window is not None else FULL,) * num_layers
    if SLIDING not in kinds:
        return kinds, None
    return kinds, _positive_int(window, "sliding_window")


def architecture_from_dict(raw: dict, name: str = "", source: str = "") -> Architecture:
    """Parse a config.json dict into an Architecture; ConfigError names whatever is missing or wrong."""
    if not isinstance(raw, dict):
        raise ConfigError("a config must be a JSON object")
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError("config is missing the key 'model_type'")
    values = {}
    for key, aliases in _ALIASES.items():
        value = _first(raw, aliases)
        if value is None:
            raise ConfigError(f"config is missing the key {key!r}")
        values[key] = _positive_int(value, key)
    mla = _mla(raw)
    layers, heads, hidden = values["num_hidden_layers"], values["num_attention_heads"], values["hidden_size"]
    if raw.get("head_dim") is None and mla is None:
        _head_dim_from_hidden(hidden, heads)  # refuse before transformers is asked to normalise the config
    cfg = _normalised(raw)
    kv_heads = _positive_int(getattr(cfg, "num_key_value_heads", None) or heads, "num_key_value_heads")
    if heads % kv_heads:
        raise ConfigError(f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv_heads})")
    head_dim = _positive_int(raw.get("head_dim") or getattr(cfg, "head_dim", None)
                             or _head_dim_from_hidden(hidden, heads), "head_dim")
    kinds, window = _layer_types(cfg, raw, layers)
    layout, notes = _layout_for(model_type, cfg)
    intermediate = _first(raw, ("intermediate_size", "n_inner")) or (4 * hidden if model_type == "gpt2" else None)
    if intermediate is None:
        raise ConfigError("config is missing the key 'intermediate_size'")
    max_pos = _first(raw, ("max_position_embeddings", "n_positions", "max_sequence_length"))
    return Architecture(
        name=name or raw.get("_name_or_path") or model_type, model_type=model_type,
        num_layers=layers, num_heads=heads, num_kv_heads=kv_heads,
        head_dim=mla.qk_head_dim if mla else head_dim, v_head_dim=mla.v_head_dim if mla else head_dim,
        layer_types=kinds, sliding_window=window, mla=mla, moe=_moe(raw, model_type),
        hidden_size=hidden, intermediate_size=_positive_int(intermediate, "intermediate_size"),
        vocab_size=values["vocab_size"],
        max_position_embeddings=_positive_int(max_pos, "max_position_embeddings") if max_pos else None,
        tie_word_embeddings=bool(getattr(cfg, "tie_word_embeddings", raw.get("tie_word_embeddings", False))),
        layout=layout, source=source, notes=notes,
    )


def _head_dim_from_hidden(hidden: int, heads: int) -> int:
    """hidden_size / num_attention_heads, the head_dim of a config that gives none; ConfigError if it is not whole."""
    if hidden % heads:
        raise ConfigError(f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads}) "
                          "and the config gives no head_dim")
    return hidden // heads


def _mla(raw: dict) -> MLA | None:
    """DeepSeek's multi-head latent attention sizes, when the config has them (all of them, or ConfigError)."""
    present = [k for k in _MLA_KEYS if raw.get(k) is not None]
    if not present:
        return None
    if len(present) != len(_MLA_KEYS):
        missing = next(k for k in _MLA_KEYS if raw.get(k) is None)
        raise ConfigError(f"config has multi-head latent attention keys but is missing {missing!r}")
    return MLA(*(_positive_int(raw[k], k) for k in _MLA_KEYS),
               q_lora_rank=_positive_int(raw["q_lora_rank"], "q_lora_rank") if raw.get("q_lora_rank") else None)


def _moe(raw: dict, model_type: str) -> MoE | None:
    """DeepSeek-style experts (routed + shared, dense first layers) or Mixtral-style (routed only)."""
    if raw.get("n_routed_experts"):
        return MoE(
            n_routed_experts=_positive_int(raw["n_routed_experts"], "n_routed_experts"),
            num_experts_per_tok=_positive_int(raw.get("num_experts_per_tok"), "num_experts_per_tok"),
            n_shared_experts=int(raw.get("n_shared_experts") or 0),
            moe_intermediate_size=_positive_int(raw.get("moe_intermediate_size"), "moe_intermediate_size"),
            first_k_dense_replace=int(raw.get("first_k_dense_replace") or 0),
        )
    if raw.get("num_local_experts"):
        return MoE(
            n_routed_experts=_positive_int(raw["num_local_experts"], "num_local_experts"),
            num_experts_per_tok=_positive_int(raw.get("num_experts_per_tok"), "num_experts_per_tok"),
            n_shared_experts=0,
            moe_intermediate_size=_positive_int(raw.get("intermediate_size"), "intermediate_size"),
            first_k_dense_replace=0,
        )
    return None


def architecture_from_dims(
    layers: int,
    kv_heads: int,
    head_dim: int,
    heads: int | None = None,
    sliding_window: int | None = None,
    sliding_layers: int = 0,
    name: str = "custom",
) -> Architecture:
    """An architecture given only by the KV-cache dimensions (no weights known).

    The first `sliding_layers` layers use the window; the rest attend to everything.
    """
    layers, kv_heads, head_dim = (_positive_int(value, key) for value, key in
                                  ((layers, "layers"), (kv_heads, "kv_heads"), (head_dim, "head_dim")))
    heads = kv_heads if heads is None else _positive_int(heads, "heads")
    if heads % kv_heads:
        raise ConfigError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    if isinstance(sliding_layers, bool) or not isinstance(sliding_layers, int) or not 0 <= sliding_layers <= layers:
        raise ConfigError(f"sliding_layers must be between 0 and layers ({layers})")
    if sliding_layers and not sliding_window:
        raise ConfigError("sliding layers need a sliding_window")
    if sliding_layers:
        sliding_window = _positive_int(sliding_window, "sliding_window")
    kinds = (SLIDING,) * sliding_layers + (FULL,) * (layers - sliding_layers)
    return Architecture(name=name, model_type="custom", num_layers=layers, num_heads=heads,
                        num_kv_heads=kv_heads, head_dim=head_dim, v_head_dim=head_dim, layer_types=kinds,
                        sliding_window=sliding_window if sliding_layers else None, source="dimensions")


def path_kind(path: Path) -> str | None:
    """"dir" or "file" for what `path` names here; None for nothing, or a name the OS cannot look up
    at all (too long, a NUL byte), which Path.is_dir() reports by raising."""
    try:
        return "dir" if path.is_dir() else "file" if path.is_file() else None
    except (OSError, ValueError):
        return None


def load_config_dict(source: str | Path) -> tuple[dict, str]:
    """The raw config dict from a config.json path, a model folder, or a hub id, and where it came from."""
    path = Path(str(source)).expanduser()
    if path_kind(path) == "dir":
        path = path / "config.json"
        if path_kind(path) != "file":
            raise ConfigError(f"folder {clip(str(source), 120)} has no config.json")
    if path_kind(path) == "file":
        try:
            return json.loads(path.read_text(encoding="utf-8")), str(path)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ConfigError(f"cannot read {clip(str(path), 120)} as JSON: {exc}") from exc
    text = str(source).strip()
    if source_kind(text) != "hub":
        raise ConfigError(f"no such file or folder: {clip(str(source), 120)}")
    return _hub_config_dict(text), f"hub:{text}"


def _hub_config_dict(repo_id: str) -> dict:
    from transformers import AutoConfig

    try:
        config = from_hub(partial(AutoConfig.from_pretrained, repo_id, trust_remote_code=False), repo_id, "config")
    except HubUnreachable as exc:
        raise ConfigError(str(exc)) from exc
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot load the config of {repo_id!r} from the hub: {first_line(exc)}") from exc
    return config.to_dict()


def architecture_from_source(source: str | Path, name: str = "") -> Architecture:
    """Parse a config.json path, a model folder or a hub id."""
    raw, where = load_config_dict(source)
    return architecture_from_dict(raw, name=name or str(source), source=where)
