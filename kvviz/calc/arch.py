"""A model's architecture, as far as memory and compute are concerned, read through transformers' config classes.

This module owns the Architecture dataclass and the one parser every source goes through: a preset
shipped in assets/, a user's config.json, a model folder, or a hub id. The config goes through the
config class transformers ships for its model_type, so the class's defaults, attribute map and
`layer_types` apply, and a multimodal config gives its text part. What each layer caches is what
transformers' own cache builds for it (cache_utils.get_layer_types_and_kwargs): per-token keys and values
for full, sliding-window or chunked attention, a fixed-size state for linear-attention, Mamba and
convolution layers (state.py sizes it), or nothing (an MLP-only layer, a layer reusing another's KV).
It does not compute bytes or count parameters; memory.py and params.py do. ConfigError, its error, lives in
config_error.py, so that state.py can raise it without importing this module back.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from kvviz.base.errors import first_line
from kvviz.base.hub import HubUnreachable, from_hub, source_kind
from kvviz.base.inputs import clip, shown
from kvviz.calc.config_error import ConfigError
from kvviz.calc.state import State, layer_state
from kvviz.i18n import Said, said, t

FULL = "full"
SLIDING = "sliding"
CHUNKED = "chunked"  # Llama-4's local layers: attention within fixed chunks, at most `chunk` tokens kept
NONE = "none"  # keeps no per-token KV: a linear-attention/Mamba/conv layer, an MLP-only layer, a KV-sharing layer
WINDOWED = (SLIDING, CHUNKED)

# transformers' cache layer types (cache_utils.DYNAMIC_LAYER_TYPE_MAPPING) -> (per-token KV kind, keeps a state)
_CACHE_LAYER_TYPES = {
    "full_attention": (FULL, False),
    "sliding_attention": (SLIDING, False),
    "chunked_attention": (CHUNKED, False),
    "conv": (NONE, True),
    "linear_attention": (NONE, True),
    "hybrid": (FULL, True),
    "hybrid_sliding": (SLIDING, True),
    "dummy": (NONE, False),
}
_MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
# The size keys a config must have, checked for sane values before transformers sees them (it would accept
# 2.5 layers or "two" heads silently); their older names (GPT-2's n_layer...) reach the same attribute.
_SIZE_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "num_attention_heads", "n_head", "num_key_value_heads",
              "num_kv_heads", "hidden_size", "n_embd", "d_model", "head_dim", "intermediate_size", "vocab_size",
              "sliding_window", "attention_chunk_size", "max_position_embeddings", *_MLA_KEYS)
# Keys that, when a config leaves them out, take the config class's default: named in the architecture's notes.
_DEFAULTED_KEYS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim",
                   "intermediate_size", "vocab_size")


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
    """Mixture of experts: how many routed experts a MoE layer has and how many each token is sent to."""

    n_routed_experts: int
    num_experts_per_tok: int


@dataclass(frozen=True)
class Architecture:
    """Everything kvviz needs to know about a decoder-only model.

    layer_types gives each layer's per-token KV kind (full, sliding, chunked, none); `state` the fixed-size
    state some layers keep instead of (or beside) it. `config` is the config as JSON, from which params.py
    builds the model on the meta device; it is empty when the architecture was given as raw dimensions, and
    then only the KV cache can be computed. expanded_kv_heads: the heads transformers keeps where it stores
    keys and values broadcast to every query head (Falcon-40B's layout), None where it keeps num_kv_heads.
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
    chunk_size: int | None = None
    mla: MLA | None = None
    moe: MoE | None = None
    state: State | None = None
    expanded_kv_heads: int | None = None
    hidden_size: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool = False
    config: str = field(default="", repr=False)
    source: str = ""
    notes: tuple[Said, ...] = field(default=())  # what the reader should know of the config, as keyed texts
    # What the calculator's sliders changed from the model as read ("kv_heads=4"): data beside the name, never in it.
    modified: tuple[str, ...] = ()

    def shown_name(self, lang: object = "en") -> str:
        """The name as the calculator's summary and the reports show it: with what the sliders modified, in `lang`."""
        return t("calc.sum.modified", lang, name=self.name, what=", ".join(self.modified)) if self.modified \
            else self.name

    @property
    def attention_kind(self) -> str:
        """MHA (one KV head per query head), GQA (groups share one), MQA (one for all) or MLA."""
        if self.kv_layers == 0:
            return "none"
        if self.mla is not None:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def n_sliding(self) -> int:
        """Layers that keep at most a window of tokens (sliding-window or chunked attention)."""
        return sum(kind in WINDOWED for kind in self.layer_types)

    @property
    def kv_layers(self) -> int:
        """Layers that keep per-token keys and values."""
        return sum(kind != NONE for kind in self.layer_types)

    @property
    def has_weights(self) -> bool:
        """Whether the full config is known, so parameters can be counted."""
        return bool(self.config)

    def window_of(self, kind: str) -> int | None:
        """Tokens a layer of `kind` keeps at most: the sliding window, the chunk, or None (all of them)."""
        return {SLIDING: self.sliding_window, CHUNKED: self.chunk_size}.get(kind)

    def sliced(self, start: int, stop: int) -> Architecture:
        """Layers start..stop-1 alone (a pipeline stage): their kinds, and the state of those keeping one."""
        state = self.state
        if state is not None:
            where = tuple(i - start for i in state.where if start <= i < stop)
            state = replace(state, layers=len(where), where=where) if where else None
        return replace(self, num_layers=stop - start, layer_types=self.layer_types[start:stop], state=state)

    def with_kv_heads(self, kv_heads: int, name: str | None = None) -> Architecture:
        """The same model with another number of KV heads (plain attention, no latent)."""
        return replace(self, num_kv_heads=kv_heads, mla=None, expanded_kv_heads=None, name=name or self.name)


# No real config comes near these; a larger value (a typo, or a config made to exhaust memory) is refused
# before anything sized by it is built.
MAX_LAYERS = 10_000
MAX_CONFIG_INT = 2**31 - 1


def _positive_int(value: Any, key: str) -> int:
    """value as an int > 0 (and within reason), or ConfigError naming the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and (
        not math.isfinite(value) or value != int(value)
    )) or int(value) <= 0:
        raise ConfigError("config.not_positive", key=key, value=shown(value))
    high = MAX_LAYERS if key in ("num_hidden_layers", "n_layer", "num_layers", "layers") else MAX_CONFIG_INT
    if value > high:
        raise ConfigError("config.too_big", key=key, value=shown(value), most=high)
    return int(value)


_OFF_WHEN_ZERO = ("sliding_window", "attention_chunk_size")  # Qwen2-MoE ships sliding_window 0 for "no window"


def _check_sizes(raw: dict) -> None:
    """ConfigError for a size key (at the top or in text_config) that is present but not a sane positive int
    (a per-layer list, as some families give intermediate_size, is left to transformers)."""
    for part in (raw, raw.get("text_config")):
        if not isinstance(part, dict):
            continue
        for key in _SIZE_KEYS:
            value = part.get(key)
            if value is None or isinstance(value, list) or (key in _OFF_WHEN_ZERO and value == 0):
                continue
            _positive_int(value, key)


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Keep transformers' config-validation chatter (rope warnings...) off the user's screen while inside."""
    log = logging.getLogger("transformers")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


# Falcon's first hub configs (custom code, 2023) name the family RefinedWebModel (7B) or RefinedWeb (40B) and use
# the original key names; vLLM reads them with its own RWConfig (vllm/transformers_utils/configs/falcon.py), whose
# attribute map is this one. RefinedWeb is the 40B layout, transformers' new_decoder_architecture.
_LEGACY_FALCON = {"RefinedWebModel": {}, "RefinedWeb": {"new_decoder_architecture": True}}
_LEGACY_FALCON_KEYS = {"n_layer": "num_hidden_layers", "n_head": "num_attention_heads", "n_head_kv": "num_kv_heads",
                       "n_embed": "hidden_size"}


def _renamed_legacy(raw: dict) -> dict:
    """A config in Falcon's original custom-code form, renamed to the in-library falcon config; others unchanged."""
    extra = _LEGACY_FALCON.get(raw.get("model_type"))
    if extra is None:
        return raw
    renamed = {_LEGACY_FALCON_KEYS.get(k, k): v for k, v in raw.items()}
    return {**renamed, **extra, "model_type": "falcon"}


def config_object(raw: dict) -> Any:
    """The transformers config object for this config.json dict; ConfigError for an unknown model_type or a
    config its class rejects."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    raw = _renamed_legacy(raw)
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError("config.no_model_type")
    if model_type not in CONFIG_MAPPING:
        raise ConfigError("config.unknown_model_type", model_type=shown(model_type))
    fields = {k: v for k, v in raw.items() if k != "model_type"}
    with quiet_transformers():
        try:
            return CONFIG_MAPPING[model_type](**fields)
        except Exception as exc:  # transformers raises many kinds for a malformed config
            reason = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
            raise ConfigError("config.rejected", model_type=model_type, why=clip(reason[-1], 400)) from exc


def text_part(raw: dict) -> dict:
    """The dict that holds the language model's sizes: a multimodal config's text_config, else the config itself."""
    return raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw


_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")


def config_with_layers(raw: dict, layers: int) -> dict:
    """A copy of the config dict with `layers` layers: the layer count written where the config keeps it and an
    explicit layer_types list cut (or its pattern repeated), so transformers derives the rest as for a real
    config of that depth."""
    raw = json.loads(json.dumps(raw))
    part = text_part(raw)
    present = [k for k in _LAYER_KEYS if k in part]
    for key in present or ["num_hidden_layers"]:
        part[key] = layers
    types = part.get("layer_types")
    if isinstance(types, list) and types and len(types) != layers:
        part["layer_types"] = [types[i % len(types)] for i in range(layers)]
    return raw


def decoder_config(cfg: Any) -> Any:
    """The part of a config that describes the text decoder (a multimodal model's text_config); ConfigError for a
    family transformers has no causal-LM class for (encoder-only, or encoder-decoder only: T5). A seq2seq family
    that has one (BART's BartForCausalLM) is read as that decoder."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    text = cfg.get_text_config(decoder=True)
    known = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
    if cfg.model_type not in known and text.model_type not in known:
        if getattr(cfg, "is_encoder_decoder", False):
            raise ConfigError("config.encoder_decoder", model_type=cfg.model_type)
        raise ConfigError("config.encoder_only", model_type=cfg.model_type)
    return text


def _layer_kinds(text: Any, num_layers: int) -> tuple[tuple[str, ...], tuple[bool, ...], int | None, int | None]:
    """Each layer's per-token KV kind and whether it keeps a state, as transformers' cache builds them, with
    the sliding window and the chunk (None where no layer uses one)."""
    from transformers.cache_utils import get_layer_types_and_kwargs

    with quiet_transformers():
        try:
            types, kwargs = get_layer_types_and_kwargs(text)
        except Exception as exc:
            raise ConfigError("config.layer_types_unreadable", why=first_line(exc)) from exc
    if len(types) != num_layers:
        raise ConfigError("config.layer_types_count", n=len(types), layers=num_layers)
    unknown = sorted({t for t in types if t not in _CACHE_LAYER_TYPES})
    if unknown:
        raise ConfigError("config.unsupported_layer_types", types=", ".join(unknown))
    kinds = tuple(_CACHE_LAYER_TYPES[t][0] for t in types)
    states = tuple(_CACHE_LAYER_TYPES[t][1] for t in types)
    windows = {}
    for kind, kw in zip(kinds, kwargs, strict=True):
        if kind in WINDOWED:
            what = "sliding_window" if kind == SLIDING else "attention_chunk_size"
            if kw.get("sliding_window") is None:
                raise ConfigError("config.no_window", kind=kind, what=what)
            windows.setdefault(kind, set()).add(_positive_int(kw["sliding_window"], what))
    if any(len(w) > 1 for w in windows.values()):
        raise ConfigError("config.windows_differ")
    window = next(iter(windows.get(SLIDING, {None})))
    chunk = next(iter(windows.get(CHUNKED, {None})))
    return kinds, states, window, chunk


def _kv_heads(text: Any, heads: int) -> tuple[int, int | None]:
    """(KV heads an engine keeps, heads transformers keeps when it broadcasts them, else None).

    Falcon's original layout (multi_query) keeps one KV head; its new decoder layout (Falcon-40B) has
    num_kv_heads, which transformers broadcasts to every query head before caching.
    """
    if text.model_type == "falcon":
        if getattr(text, "new_decoder_architecture", False):
            return _positive_int(text.num_kv_heads, "num_kv_heads"), heads
        return (1 if getattr(text, "multi_query", False) else heads), None
    kv = getattr(text, "num_key_value_heads", None) or heads
    return _positive_int(kv, "num_key_value_heads"), None


def _same_kv_shape_everywhere(text: Any, kinds: tuple[str, ...], kv_heads: int, head_dim: int) -> None:
    """ConfigError when layers override the KV heads or head_dim (a heterogeneous config, e.g. Gemma-4's global
    layers): kvviz models one KV shape for every attention layer."""
    per_layer = getattr(text, "per_layer_config", None)
    if per_layer is None:
        return
    for i, (kind, layer) in enumerate(zip(kinds, per_layer, strict=False)):
        if kind == NONE or layer is text:
            continue
        heads = getattr(layer, "num_key_value_heads", kv_heads) or kv_heads
        dim = getattr(layer, "head_dim", head_dim) or head_dim
        if (heads, dim) != (kv_heads, head_dim):
            raise ConfigError("config.layer_kv_shape", i=i, heads=heads, dim=dim, kv_heads=kv_heads, head_dim=head_dim)


def _defaulted(raw: dict, text: Any) -> tuple[Said, ...]:
    """A note naming the size keys the config left to its class's defaults, with the values they took."""
    nested = raw.get("text_config")
    given = nested if isinstance(nested, dict) and text.model_type != raw.get("model_type") else raw
    attribute_map = getattr(type(text), "attribute_map", {}) or {}
    missing = [k for k in _DEFAULTED_KEYS if given.get(k) is None and given.get(attribute_map.get(k, k)) is None
               and isinstance(getattr(text, k, None), int)]
    if "head_dim" in missing and (getattr(text, "kv_lora_rank", None) or text.head_dim * text.num_attention_heads
                                  == text.hidden_size):
        missing.remove("head_dim")  # hidden_size / heads, what a config without head_dim means anyway
    if not missing:
        return ()
    values = ", ".join(f"{k}={getattr(text, k)}" for k in missing)
    return (said("calc.note.defaults", cls=type(text).__name__, values=values),)


# Families whose cache the config alone does not describe: kvviz refuses them by name rather than answer wrongly.
# The registry coverage test (tests/calc/test_registry_coverage.py) checks each refusal is still needed.
NOT_MODELLED = {
    "mimo_v2_flash": "its sliding-window layers keep twice num_key_value_heads, a factor set in transformers' "
                     "modelling code, not in the config",
    "longcat_flash": "each decoder layer holds two attention blocks with their own cache layers",
    "dory": "its looped layers are cached once per loop, a count the layer list does not give",
    "mllama": "its cross-attention layers cache the image's keys and values, whose size depends on the image",
    "recurrent_gemma": "its recurrent blocks keep their state on the modules, outside transformers' cache",
    "musicgen": "a text-to-audio model whose causal LM transformers builds from its decoder sub-config alone",
    "musicgen_melody": "a text-to-audio model whose causal LM transformers builds from its decoder sub-config alone",
}


def architecture_from_dict(raw: dict, name: str = "", source: str = "") -> Architecture:
    """Parse a config.json dict into an Architecture; ConfigError names whatever is missing or wrong."""
    if not isinstance(raw, dict):
        raise ConfigError("config.not_object")
    _check_sizes(raw)
    cfg = config_object(raw)
    text = decoder_config(cfg)
    for family in {cfg.model_type, text.model_type} & set(NOT_MODELLED):
        raise ConfigError("config.not_modelled", family=family, why=NOT_MODELLED[family])
    try:
        return _architecture(raw, cfg, text, name, source)
    except ConfigError:
        raise
    except Exception as exc:  # a heterogeneous config refuses global reads of per-layer values, and the like
        if type(exc).__name__ == "AmbiguousGlobalPerLayerAttributeError":
            raise ConfigError("config.per_layer", model_type=cfg.model_type) from exc
        raise ConfigError("config.unreadable", model_type=cfg.model_type, why=first_line(exc)[:300]) from exc


def _architecture(raw: dict, cfg: Any, text: Any, name: str, source: str) -> Architecture:
    """The Architecture of an accepted config: what each layer caches, the KV shape, the state, the weights' sizes."""
    layers = _positive_int(getattr(text, "num_hidden_layers", None), "num_hidden_layers")
    hidden = _positive_int(getattr(text, "hidden_size", None), "hidden_size")
    kinds, states, window, chunk = _layer_kinds(text, layers)
    heads = getattr(text, "num_attention_heads", None)
    if heads is None and all(kind == NONE for kind in kinds):
        heads = 1  # no attention layer (a pure Mamba model): the head counts never enter a formula
    heads = _positive_int(heads, "num_attention_heads")
    mla = _mla(text)
    kv_heads, expanded = _kv_heads(text, heads)
    if heads % kv_heads:
        raise ConfigError("config.heads_not_multiple", heads=heads, kv_heads=kv_heads)
    head_dim = getattr(text, "head_dim", None) or _head_dim_from_hidden(hidden, heads)
    head_dim = _positive_int(head_dim, "head_dim")
    if mla is None:
        _same_kv_shape_everywhere(text, kinds, kv_heads, head_dim)
        swa = (getattr(text, "swa_num_key_value_heads", None), getattr(text, "swa_head_dim", None))
        if swa != (None, None) and swa != (kv_heads, head_dim) and SLIDING in kinds:
            raise ConfigError("config.sliding_kv_shape", heads=swa[0], dim=swa[1], kv_heads=kv_heads, head_dim=head_dim)
    state = None
    if any(states):
        where = tuple(i for i, keeps in enumerate(states) if keeps)
        state = replace(layer_state(text, len(where)), where=where)
    max_pos = getattr(text, "max_position_embeddings", None) or getattr(text, "n_positions", None)
    intermediate = getattr(text, "intermediate_size", None)
    return Architecture(
        name=name or raw.get("_name_or_path") or cfg.model_type, model_type=cfg.model_type,
        num_layers=layers, num_heads=heads, num_kv_heads=kv_heads,
        head_dim=mla.qk_head_dim if mla else head_dim, v_head_dim=mla.v_head_dim if mla else head_dim,
        layer_types=kinds, sliding_window=window, chunk_size=chunk, mla=mla, moe=_moe(text), state=state,
        expanded_kv_heads=expanded, hidden_size=hidden,
        intermediate_size=intermediate if isinstance(intermediate, int) and intermediate > 0 else None,
        vocab_size=_positive_int(getattr(text, "vocab_size", None), "vocab_size"),
        max_position_embeddings=_positive_int(max_pos, "max_position_embeddings") if max_pos else None,
        tie_word_embeddings=bool(getattr(text, "tie_word_embeddings", False)
                                 or getattr(cfg, "tie_word_embeddings", False)),
        config=json.dumps(raw, sort_keys=True, default=str), source=source, notes=_defaulted(raw, text),
    )


def _head_dim_from_hidden(hidden: int, heads: int) -> int:
    """hidden_size / num_attention_heads, the head_dim of a config that gives none; ConfigError if it is not whole."""
    if hidden % heads:
        raise ConfigError("config.no_head_dim", hidden=hidden, heads=heads)
    return hidden // heads


def _mla(text: Any) -> MLA | None:
    """DeepSeek's multi-head latent attention sizes, when the config has them (all of them, or ConfigError)."""
    present = [k for k in _MLA_KEYS if getattr(text, k, None) is not None]
    if not present or getattr(text, "kv_lora_rank", None) is None:
        return None
    if len(present) != len(_MLA_KEYS):
        missing = next(k for k in _MLA_KEYS if getattr(text, k, None) is None)
        raise ConfigError("config.mla_missing", missing=missing)
    q_lora = getattr(text, "q_lora_rank", None)
    return MLA(*(_positive_int(getattr(text, k), k) for k in _MLA_KEYS),
               q_lora_rank=_positive_int(q_lora, "q_lora_rank") if q_lora else None)


# The names families give the routed-expert count and the experts per token.
_EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_k", "top_k")


def _moe(text: Any) -> MoE | None:
    """The routed experts and experts per token, under whichever names the family uses; None for a dense model."""
    experts = next((getattr(text, k) for k in _EXPERT_KEYS if isinstance(getattr(text, k, None), int)
                    and getattr(text, k) > 1), None)
    if experts is None:
        return None
    top_k = next((getattr(text, k) for k in _TOP_K_KEYS if isinstance(getattr(text, k, None), int)), None)
    if top_k is None:
        return None
    return MoE(n_routed_experts=experts, num_experts_per_tok=_positive_int(top_k, "num_experts_per_tok"))


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
        raise ConfigError("dims.heads_not_multiple", heads=heads, kv_heads=kv_heads)
    if isinstance(sliding_layers, bool) or not isinstance(sliding_layers, int) or not 0 <= sliding_layers <= layers:
        raise ConfigError("dims.sliding_layers", layers=layers)
    if sliding_layers and not sliding_window:
        raise ConfigError("dims.no_window")
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
            raise ConfigError("config.folder_without_config", folder=clip(str(source), 120))
    if path_kind(path) == "file":
        try:
            return json.loads(path.read_text(encoding="utf-8")), str(path)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ConfigError("config.not_json", path=clip(str(path), 120), why=str(exc)) from exc
    text = str(source).strip()
    if source_kind(text) != "hub":
        raise ConfigError("config.no_such_path", path=clip(str(source), 120))
    return _hub_config_dict(text), f"hub:{text}"


def _hub_config_dict(repo_id: str) -> dict:
    from transformers import AutoConfig

    try:
        config = from_hub(partial(AutoConfig.from_pretrained, repo_id, trust_remote_code=False), repo_id, "config")
    except HubUnreachable as exc:
        raise exc.recast(ConfigError) from exc
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError("config.hub_failed", repo=repo_id, why=first_line(exc)) from exc
    return config.to_dict()


def architecture_from_source(source: str | Path, name: str = "") -> Architecture:
    """Parse a config.json path, a model folder or a hub id."""
    raw, where = load_config_dict(source)
    return architecture_from_dict(raw, name=name or str(source), source=where)
