"""Small random instances of every causal-LM family transformers registers, and what their caches hold.

small_config(model_type) shrinks the family's own config class (CONFIG_MAPPING[model_type]) to a few layers
of a few dimensions; run_model(model_type) builds it on the CPU, feeds a prompt and two decode steps through
kvviz.engine.steps and measures the cache after each. The coverage test and the report below both use these.
This module knows transformers' config classes; it does not know kvviz's parser or memory model.

    python -m tests.calc.registry_models [/tmp/registry_report.txt] [model_type ...]
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from kvviz.engine import steps

logging.getLogger("transformers").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", module=r"transformers\..*")

PROMPT_LEN = 12
DECODE_STEPS = 2
MAX_PARAMS = 20_000_000
LAYERS = 4
# Prompt and decode tokens come from [FIRST_TOKEN, SPECIAL_FROM); every special id (image, audio, bos...) that
# the default config puts beyond the small vocabulary moves to SPECIAL_FROM or above, so a random prompt never
# asks a multimodal model for pixels.
FIRST_TOKEN = 3
SPECIAL_FROM = 200
VOCAB = 256

# Config keys that count layers (GPT-2's n_layer, BART's decoder_layers...): each gets the chosen layer count.
LAYER_KEYS = (
    "num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers", "encoder_layers",
    "num_decoder_layers", "num_encoder_layers",
)

# The small value of every size key some family's config has, whatever the family calls it.
SIZES: dict[str, int] = {
    # width
    "hidden_size": 64, "n_embd": 64, "d_model": 64, "emb_dim": 64, "embedding_dim": 64, "word_embed_proj_dim": 64,
    "attention_hidden_size": 64, "lru_width": 64, "backbone_hidden_size": 64,
    "embedding_size": 32, "input_embedding_size": 32, "output_embedding_size": 32,
    # attention heads
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4, "attention_heads": 4,
    "decoder_attention_heads": 4, "encoder_attention_heads": 4, "num_decoder_attention_heads": 4,
    "num_encoder_attention_heads": 4, "swa_num_attention_heads": 4,
    "num_key_value_heads": 2, "num_kv_heads": 2, "swa_num_key_value_heads": 2, "num_query_groups": 2,
    "head_dim": 16, "swa_head_dim": 16, "d_head": 16, "dim_head": 16, "attention_head_size": 16,
    "attention_head_dim": 16, "kv_channels": 16,
    # feed-forward
    "intermediate_size": 128, "ffn_dim": 128, "decoder_ffn_dim": 128, "encoder_ffn_dim": 128, "n_inner": 128,
    "ffn_hidden_size": 128, "dff": 128, "dim_ff": 128, "d_inner": 128, "feed_forward_size": 128,
    "intermediate_size_mlp": 128, "dense_intermediate_size": 128, "shared_intermediate_size": 128,
    # mixture of experts
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "shared_experts_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 32, "expert_ffn_hidden_size": 32,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "num_experts_per_token": 2, "moe_topk": 2, "moe_k": 2,
    "n_group": 1, "topk_group": 1, "num_expert_group": 1, "zero_expert_num": 2,
    "first_k_dense_replace": 1,
    # vocabulary and positions
    "vocab_size": VOCAB, "decoder_vocab_size": VOCAB, "vocab_size_per_layer_input": VOCAB,
    "unpadded_vocab_size": VOCAB,
    "max_position_embeddings": 512, "n_positions": 512, "n_ctx": 512, "max_seq_len": 512, "context_length": 512,
    "max_target_positions": 512, "model_max_length": 512, "original_max_position_embeddings": 256,
    # windows and chunks: 8, so a 12-token prompt overflows them
    "sliding_window": 8, "attention_chunk_size": 8, "sliding_window_size": 8, "attention_window_size": 8,
    "local_attention_window_len": 8, "window_size": 8, "local_attention": 8,
    # DeepSeek's latent attention and sparse indexer
    "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "qk_head_dim": 24,
    "v_head_dim": 16, "o_lora_rank": 16, "index_n_heads": 2, "index_head_dim": 16, "index_topk": 8,
    # Mamba, Mamba2 and linear attention: 8 heads of 16 = 2 × hidden
    "mamba_d_state": 16, "state_size": 16, "ssm_state_size": 16,
    "mamba_n_heads": 8, "mamba_num_heads": 8, "n_mamba_heads": 8,
    "mamba_d_head": 16, "mamba_head_dim": 16, "mamba_headdim": 16,
    "mamba_n_groups": 2, "n_groups": 2, "mamba_chunk_size": 8, "chunk_size": 8,
    "time_step_rank": 8, "mamba_dt_rank": 8, "mamba_d_ssm": 128,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "linear_num_heads": 4, "linear_head_dim": 16,
    # low ranks and side embeddings some families add
    "rotary_dim": 8, "hidden_size_per_layer_input": 16, "laurel_rank": 8, "gated_norm_rank": 8,
    "loop_gate_rank": 8, "adapter_rank": 8, "hc_lowrank": 8, "ple_embed_dim": 32, "router_hidden_size": 32,
    "pronunciation_embed_dim": 32, "shape_embed_dim": 32, "pronunciation_vocab_size": 32, "shape_vocab_size": 32,
    "encoder_hash_byte_group_vocab": VOCAB, "adapter_in_dim": 64, "adapter_input_size": 64, "adapter_out_dim": 64,
}

# Size keys whose None means "derive it" (head_dim = hidden_size / heads) rather than "off" (sliding_window,
# q_lora_rank, num_experts): they get the small size even when the default leaves them unset.
DERIVED = ("head_dim",)

# Per-family corrections where the generic shrink leaves a config that does not build or does not show the
# family's layer kinds. Keys are config fields of the family's own class (or of a sub-config, nested).
OVERRIDES: dict[str, dict[str, Any]] = {
    # the default is all Mamba, and transformers' cache then has no attention layer to read the length from
    "bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention", "linear_attention", "linear_attention"]},
    "jamba": {"attn_layer_period": 4, "attn_layer_offset": 2},
    # the index's heads must fit among one KV head's query heads (4 query and 2 KV heads here: 2; default 12)
    "kolibri1_1": {"index_num_heads": 2},
    # the defaults leave the MoE router or per-type RoPE undefined and do not build
    "cohere_compass_text": {
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": None},
    },
    "dbrx": {"attn_config": {"rope_theta": 10000.0, "kv_n_heads": 2, "clip_qkv": 8.0}, "ffn_config": {"moe_top_k": 2}},
    "deepseek_v2": {"num_experts_per_tok": 2},
    "dots1": {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1},
    "lfm2_moe": {"layer_types": ["conv", "conv", "full_attention", "conv"], "num_dense_layers": 1},
    "qwen4_exp_text": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
                       "indexer_compress_ratio": 4},
    # the default is all attention; LFM2's checkpoints interleave short convolutions
    "lfm2": {"full_attn_idxs": [2], "layer_types": ["conv", "conv", "full_attention", "conv"]},
    # per-family constraints the generic sizes break
    "dots3_note_text": {"head_dim": 32},  # a sliding layer's head_dim is its qk_nope + qk_rope head dims
    "dory": {"num_hidden_layers": 8, "n_input_layers": 2, "n_output_layers": 2},
    "gemma3n_text": {"num_hidden_layers": 10, "num_kv_shared_layers": 5},  # the last 5 layers reuse earlier KV
    "gpt_neo": {"attention_types": [[["global", "local"], 2]]},
    "mamba2": {"num_heads": 8},  # 8 heads × 16 = 2 × hidden_size
    "reformer": {"is_decoder": True, "axial_pos_embds_dim": [32, 32]},
    "xlm": {"causal": True},
    "xmod": {"default_language": "en_XX"},
    # two hybrid layers, as the shared transformer block is tied across them; its attention reads
    # [hidden, embeddings] concatenated, so twice the width
    "zamba": {"num_hidden_layers": 8, "attention_hidden_size": 128, "attention_head_dim": 32},
    "zaya": {"num_experts_per_tok": 1},
    "gemma4_assistant": {"text_config": {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0}},
    "musicgen": {"decoder": {"num_codebooks": 1}},
    "musicgen_melody": {"decoder": {"num_codebooks": 1}},
}
# Multimodal wrappers whose causal-LM class reads the text config: the same corrections, one level down.
for _wrapper, _text in (("dots3_note", "dots3_note_text"), ("qwen4_exp", "qwen4_exp_text"),
                        ("gemma3n", "gemma3n_text")):
    OVERRIDES[_wrapper] = {"text_config": OVERRIDES[_text]}


# Families whose causal-LM class is built from one sub-config of the family's config, which AutoModelForCausalLM
# does not hand over: MusicgenForCausalLM is the decoder of MusicgenConfig (fed one codebook, so that its input
# is [batch, seq] as any other LM's).
DECODER_OF = {"musicgen": "decoder", "musicgen_melody": "decoder"}

# Families the test cannot run, each with why.
NOT_COVERED: dict[str, str] = {
    # transformers' own bugs at 5.24
    "blt": "transformers bug: BltModel.forward builds DynamicCache(config=BltConfig), which raises AttributeError "
           "'BltConfig' object has no attribute 'num_hidden_layers' (its layer counts live in sub-configs)",
    "cpmant": "transformers bug: the first decode step after a prefill raises RuntimeError 'The size of tensor a (44) "
              "must match the size of tensor b (33) at non-singleton dimension 3' in CpmAntAttention, with the "
              "default config too and with the cache the model returns itself",
    # models that keep their state in something other than a transformers Cache
    "minimax": "MiniMaxForCausalLM refuses a DynamicCache ('MiniMax uses cache of its own and is not compatible "
               "with `cache` of type DynamicCache'); kvviz.engine.steps.new_cache builds a DynamicCache",
    "xlstm": "xLSTMForCausalLM needs its own xLSTMCache ('DynamicCache' object has no attribute 'rnn_state'); "
             "kvviz.engine.steps.new_cache builds a DynamicCache",
    "openai-gpt": "OpenAIGPTLMHeadModel has no KV cache: its forward takes none, so the DynamicCache stays empty",
    "reformer": "ReformerModelWithLMHead keeps past_buckets_states, not a transformers Cache: the DynamicCache "
                "stays empty",
    "rwkv": "RwkvForCausalLM keeps its recurrent state in its own `state` argument and output, not a transformers "
            "Cache: the DynamicCache stays empty",
    "xlnet": "XLNetLMHeadModel keeps `mems`, not a transformers Cache: the DynamicCache stays empty",
    "xlm": "XLMWithLMHeadModel takes the whole sequence at every step and slices off what its cache holds; a "
           "one-token decode step fails ('cannot reshape tensor of 0 elements into shape [1, 1, 0, -1]')",
    # models that cannot run alone here
    "gemma3n": "its vision tower is a TimmWrapperModel and timm is not installed; gemma3n_text covers the language "
               "model",
    "gemma4_assistant": "a speculative-decoding draft: its forward needs the target model's inputs_embeds and "
                        "shared_kv_states ('inputs_embeds and shared_kv_states cannot be None.')",
    "gemma4_unified_assistant": "a speculative-decoding draft: its forward needs the target model's inputs_embeds "
                                "and shared_kv_states ('inputs_embeds and shared_kv_states cannot be None.')",
}


# Covered families that keep state in their own modules rather than in the transformers Cache, where
# steps.cache_bytes cannot see it (run_model lists such tensors in RegistryRun.outside_cache).
STATE_OUTSIDE_CACHE: dict[str, str] = {
    "recurrent_gemma": "each recurrent block keeps conv1d_state [batch, lru_width, conv width - 1] and "
                       "rg_lru.recurrent_states [batch, lru_width] on the module; its cache layers stay empty",
}


class TooLarge(RuntimeError):
    """The shrunk config still describes more than MAX_PARAMS parameters."""


def _fields(cls: type) -> set[str]:
    # Only dataclass fields are constructor arguments: some config attributes (BambaConfig.layers_block_type)
    # are read-only properties computed from them.
    return {f.name for f in dataclasses.fields(cls) if f.init}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Lists of layer indices (LFM2's full_attn_idxs, Llama 4's moe_layers, Mllama's cross_attention_layers...):
# shrinking keeps the indices below the new layer count.
INDEX_LISTS = (
    "full_attn_idxs", "moe_layers", "mlp_only_layers", "hybrid_layer_ids", "cross_attention_layers",
    "attn_layer_indices", "global_attn_indexes",
)


def _layer_count(values: dict, fields: set[str]) -> int | None:
    counts = [values[key] for key in LAYER_KEYS if key in fields and _is_int(values.get(key))]
    return max(counts) if counts else None


def _is_kind_list(values: list) -> bool:
    """A list naming each layer's kind (strings, or 0/1 flags as no_rope_layers), not per-layer sizes."""
    return all(isinstance(v, str) or v in (0, 1) for v in values)


def _prefix_covering(lists: Iterable[list], minimum: int) -> int:
    """The shortest prefix length (at least `minimum`) in which every value of every kind list appears."""
    n = minimum
    for values in lists:
        names = [str(v) for v in values]
        n = max(n, *(names.index(name) + 1 for name in set(names)))
    return n


def _kv_heads(values: dict, fields: set[str]) -> dict[str, int]:
    """KV-head counts that keep the family's attention kind: one KV head stays one (multi-query), latent
    attention (MLA) keeps as many as query heads, grouped-query gets SIZES' count."""
    out = {}
    for key in ("num_key_value_heads", "num_kv_heads", "swa_num_key_value_heads"):
        # None means as many as query heads; the family's attention code may divide by it all the same
        if key in fields and (_is_int(values.get(key)) or (key == "num_key_value_heads" and values[key] is None)):
            if values[key] == 1:
                out[key] = 1
            elif values.get("kv_lora_rank"):
                out[key] = SIZES["num_attention_heads"]
            else:
                out[key] = SIZES[key]
    return out


def _per_layer(values: dict, fields: set[str], layers: int, n: int) -> dict[str, list]:
    """Per-layer fields cut to `n` layers: index lists keep the indices below n, per-layer lists their first n
    entries (repeated if the default had fewer), per-layer sizes become the small size."""
    out: dict[str, list] = {}
    for name in sorted(fields):
        value = values.get(name)
        if not isinstance(value, (list, tuple)) or not value:
            continue
        if name in INDEX_LISTS:
            out[name] = [i for i in value if i < n]
        elif len(value) == layers:
            size = SIZES.get(name, SIZES.get(name.removesuffix("_per_layer")))
            out[name] = [size] * n if size and not _is_kind_list(value) else [value[i % layers] for i in range(n)]
    return out


def _special_ids(values: dict, fields: set[str]) -> dict[str, Any]:
    """Token-id fields moved inside the small vocabulary, to distinct ids at SPECIAL_FROM and above."""
    out: dict[str, Any] = {}
    free = iter(range(VOCAB - 1, SPECIAL_FROM - 1, -1))
    for name in sorted(fields):
        if not name.endswith(("_token_id", "_token_index", "_token_ids")):
            continue
        value = values.get(name)
        if _is_int(value) and value >= SPECIAL_FROM:
            out[name] = next(free)
        elif isinstance(value, (list, tuple)) and any(_is_int(v) and v >= SPECIAL_FROM for v in value):
            out[name] = [next(free) if _is_int(v) and v >= SPECIAL_FROM else v for v in value]
    return out


def _per_layer_config(values: dict, small: dict[str, Any], n: int) -> dict[str, dict[str, Any]]:
    """A heterogeneous config's per-layer overrides (Gemma 4's wider full-attention heads...), kept for the
    first n layers and scaled as the global value was: 512 against a global 256 becomes 2 × the small size."""
    out = {}
    for index, overrides in (values.get("per_layer_config") or {}).items():
        if int(index) >= n:
            continue
        out[index] = {
            key: max(1, round(small[key] * value / values[key])) if key in small and _is_int(value) else value
            for key, value in overrides.items()
        }
    return out


def _values(config: PreTrainedConfig, fields: set[str]) -> dict[str, Any]:
    """The config's field values, a heterogeneous config's per-layer ones (Gemma 4's head_dim) at their global
    value, and its per-layer overrides under "per_layer_config"."""
    config.allow_global_per_layer_attribute_access = True
    values = {name: getattr(config, name, None) for name in fields}
    values["per_layer_config"] = config.to_dict().get("per_layer_config")
    return values


def _shrunk(cls: type, overrides: dict[str, Any]) -> PreTrainedConfig:
    """An instance of config class `cls` with every size key small, its sub-configs shrunk the same way."""
    fields = _fields(cls)
    subs = getattr(cls, "sub_configs", {})
    flat = {k: v for k, v in overrides.items() if k not in subs}
    try:
        default = cls()
    except Exception:  # a default that fails its own validation (Gemma 4's assistant): read the overridden one
        default = cls(**overrides)
    values = _values(default, fields)
    kw: dict[str, Any] = {
        name: SIZES[name] for name in fields
        # 0 is "off" (Gemma 4's per-layer inputs), None is "off" unless DERIVED
        if name in SIZES and ((_is_int(values.get(name)) and values[name] > 0)
                              or (name in DERIVED and values.get(name) is None))
    }
    kw.update(_kv_heads(values, fields))
    if values.get("kv_lora_rank") and values.get("head_dim") == values.get("qk_rope_head_dim"):
        kw["head_dim"] = SIZES["qk_rope_head_dim"]  # latent attention's head_dim is its RoPE part (LongCat)
    layers = _layer_count(values, fields)
    if layers is not None:
        given = [flat[key] for key in LAYER_KEYS if key in flat]
        given += [len(flat[key]) for key in ("layer_types", "layers_block_type") if key in flat]
        kinds = [v for name, v in _per_layer(values, fields, layers, layers).items()
                 if name not in INDEX_LISTS and _is_kind_list(v)]
        n = given[0] if given else _prefix_covering(kinds, LAYERS)
        kw.update({key: n for key in LAYER_KEYS if key in fields and _is_int(values.get(key))})
        kw.update(_per_layer(values, fields, layers, n))
        if values.get("per_layer_config"):
            kw["per_layer_config"] = _per_layer_config(values, kw, n)
    kw.update(_special_ids(values, fields))
    if "is_decoder" in fields:
        kw["is_decoder"] = True  # BERT-style classes attend causally only as decoders
    for name in subs:
        sub = getattr(default, name, None)
        if isinstance(sub, PreTrainedConfig):
            kw[name] = _shrunk(type(sub), overrides.get(name, {}))
    kw = {k: v for k, v in kw.items() if k in fields or k == "per_layer_config"}
    return cls(**{**kw, **flat})  # an override may name a key the class does not declare (DBRX's rope_theta)


def small_config(model_type: str) -> PreTrainedConfig:
    """The family's own config class with a few layers of small dimensions (OVERRIDES applied last), as a
    config.json of the family would hold it: a multimodal or audio family's whole config, sub-configs shrunk."""
    return _shrunk(CONFIG_MAPPING[model_type], OVERRIDES.get(model_type, {}))


def _instantiate(model_type: str, config: PreTrainedConfig) -> torch.nn.Module:
    """The family's causal LM for `config`, as AutoModelForCausalLM.from_config builds it (which hands a
    multimodal wrapper's text config to a text-only class); a DECODER_OF family's decoder class directly."""
    import transformers

    if model_type in DECODER_OF:
        cls = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
        return cls._from_config(getattr(config, DECODER_OF[model_type]), dtype=torch.float32)
    return transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def param_count(model: torch.nn.Module) -> int:
    """Parameters of `model`, each shared tensor once (tied embeddings count once)."""
    return sum(p.numel() for p in model.parameters())


def param_groups(model: torch.nn.Module) -> dict[str, int]:
    """Parameters by the first two parts of their name (model.language_model, model.vision_tower, lm_head...),
    each shared tensor counted once, under the first name that holds it."""
    groups: dict[str, int] = {}
    for name, p in model.named_parameters():  # named_parameters() yields a tied tensor once
        group = ".".join(name.split(".")[:2]) if name.startswith("model.") else name.split(".")[0]
        groups[group] = groups.get(group, 0) + p.numel()
    return groups


def build_small_model(model_type: str, config: PreTrainedConfig | None = None) -> torch.nn.Module:
    """A random fp32 instance of the family's causal-LM class for `config` (default: small_config) on the CPU,
    in eval mode; TooLarge if the config describes more than MAX_PARAMS parameters (checked on the meta device,
    before allocating)."""
    config = config or small_config(model_type)
    with torch.device("meta"):
        n = param_count(_instantiate(model_type, config))
    if n > MAX_PARAMS:
        raise TooLarge(f"{model_type}: {n:,} parameters when shrunk")
    torch.manual_seed(0)
    return _instantiate(model_type, config).eval()


@dataclass(frozen=True)
class RegistryRun:
    """One family's small instance, run: what its cache held after the prefill and after each decode step."""

    model_type: str
    model_class: str
    seconds: float
    config: dict  # small_config(model_type).to_dict(): the family's config.json, which kvviz's parser reads
    params: int
    param_groups: dict[str, int]
    layer_classes: tuple[str, ...]  # type(layer).__name__ of cache.layers
    prefill_shapes: tuple[dict[str, str], ...]  # per cache layer: tensor name -> shape (and dtype for states)
    cached: tuple[steps.CacheBytes, ...]  # after the prefill, then after each decode step
    seq_lens: tuple[int, ...]  # tokens seen at each measurement
    outside_cache: dict[str, str]  # tensors the model's own modules kept after the prefill: name -> shape


def _shape(t: torch.Tensor) -> str:
    return "x".join(map(str, t.shape))


def _layer_shapes(layer) -> dict[str, str]:
    shapes = {}
    for name in ("keys", "values", "indexer_keys"):
        t = getattr(layer, name, None)
        if isinstance(t, torch.Tensor):
            shapes[name] = _shape(t)
    for name in ("conv_states", "recurrent_states"):
        for key, t in (getattr(layer, name, None) or {}).items():
            if isinstance(t, torch.Tensor):
                shapes[f"{name}[{key}]"] = f"{_shape(t)} {str(t.dtype).removeprefix('torch.')}"
    return shapes


def _module_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Tensors held as plain attributes of the model's modules (not parameters, not buffers)."""
    return {
        f"{name}.{attr}": value
        for name, module in model.named_modules()
        for attr, value in vars(module).items()
        if isinstance(value, torch.Tensor)
    }


def _new_module_tensors(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> dict[str, str]:
    """What a forward pass left in the modules themselves (RecurrentGemma keeps its recurrent state there)."""
    return {name: _shape(t) for name, t in after.items() if name not in before or before[name].shape != t.shape}


@torch.no_grad()
def run_model(model_type: str) -> RegistryRun:
    """Build the family's small instance and run a PROMPT_LEN-token prefill and DECODE_STEPS decode steps
    through kvviz.engine.steps, measuring the cache after each pass."""
    start = time.perf_counter()
    config = small_config(model_type)
    model = build_small_model(model_type, config)
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(FIRST_TOKEN, SPECIAL_FROM, (1, PROMPT_LEN), generator=generator)  # [1, PROMPT_LEN]
    before = _module_tensors(model)
    cache = steps.new_cache(model)
    logits = steps.prefill(model, prompt, cache)
    cached = [steps.cache_bytes(cache)]
    shapes = tuple(_layer_shapes(layer) for layer in cache.layers)
    outside = _new_module_tensors(before, _module_tensors(model))
    for _ in range(DECODE_STEPS):
        # argmax keeps the run deterministic; folding it below SPECIAL_FROM keeps image and audio ids out
        token = FIRST_TOKEN + logits.argmax(dim=-1, keepdim=True) % (SPECIAL_FROM - FIRST_TOKEN)  # [1, 1]
        logits = steps.decode_step(model, token, cache)
        cached.append(steps.cache_bytes(cache))
    return RegistryRun(
        model_type=model_type,
        model_class=type(model).__name__,
        seconds=time.perf_counter() - start,
        config=config.to_dict(),
        params=param_count(model),
        param_groups=param_groups(model),
        layer_classes=tuple(type(layer).__name__ for layer in cache.layers),
        prefill_shapes=shapes,
        cached=tuple(cached),
        seq_lens=tuple(PROMPT_LEN + i for i in range(DECODE_STEPS + 1)),
        outside_cache=outside,
    )


def registry_types() -> list[str]:
    """Every model type transformers maps to a causal-LM class, sorted."""
    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def covered_types() -> list[str]:
    """The registry's model types this module runs: all but NOT_COVERED."""
    return [t for t in registry_types() if t not in NOT_COVERED]


# ---- the report: one line per model type, for whoever derives kvviz's formulas from these runs ----

# Config keys worth a glance besides SIZES and LAYER_KEYS: convolution widths and expansion factors.
REPORT_KEYS = (
    "mamba_expand", "expand", "mamba_d_conv", "conv_kernel", "linear_conv_kernel_dim", "conv_L_cache",
    "n_shared_experts", "num_kv_shared_layers", "n_input_layers", "n_output_layers", "n_recurrent_layers",
    "n_recurrent_loops", "index_topk", "num_codebooks",
)


def _runs(items: list) -> str:
    """[a, a, a, b] as 'a×3, b': consecutive repeats collapsed."""
    out: list[list] = []
    for item in items:
        if out and out[-1][0] == item:
            out[-1][1] += 1
        else:
            out.append([item, 1])
    return ", ".join(f"{item}×{n}" if n > 1 else str(item) for item, n in out)


def _config_sizes(config: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in config.items():
        if isinstance(value, dict) and "model_type" in value:
            out += _config_sizes(value, f"{prefix}{key}.")
        elif (key in SIZES or key in LAYER_KEYS or key in REPORT_KEYS) and _is_int(value):
            out.append(f"{prefix}{key}={value}")
        elif isinstance(value, (list, tuple)) and value and _is_kind_list(list(value)) and len(value) > 2:
            out.append(f"{prefix}{key}=[{_runs([str(v) for v in value])}]")
        elif key == "per_layer_config" and value:
            out.append(f"{prefix}per_layer_config={value}")
    return out


def report_line(run: RegistryRun) -> str:
    """One line: the run's cache layers, their tensors after the prefill, the bytes at each step, the sizes."""
    layers = _runs([f"{cls}({' '.join(f'{k}={v}' for k, v in shapes.items())})"
                    for cls, shapes in zip(run.layer_classes, run.prefill_shapes, strict=True)])
    steps_bytes = " ".join(f"@{n}:kv={c.kv},state={c.state}" for n, c in zip(run.seq_lens, run.cached, strict=True))
    outside = f" | OUTSIDE THE CACHE after prefill: {run.outside_cache}" if run.outside_cache else ""
    return (f"{run.model_type} | covered | {run.seconds:.2f}s | {run.model_class} | params={run.params} "
            f"{run.param_groups} | "
            f"bytes {steps_bytes} | cache layers: {layers}{outside} | config: {' '.join(_config_sizes(run.config))}")


def write_report(path: str, types: list[str]) -> None:
    """Run every type in `types` (NOT_COVERED ones are listed with their reason) and write one line each."""
    with open(path, "w", encoding="utf-8") as out:
        for model_type in types:
            if model_type in NOT_COVERED:
                line = f"{model_type} | NOT covered: {NOT_COVERED[model_type]}"
            else:
                start = time.perf_counter()
                try:
                    line = report_line(run_model(model_type))
                except Exception as e:  # the report lists what failed rather than stopping
                    line = (f"{model_type} | FAILED | {time.perf_counter() - start:.2f}s | "
                            f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
            out.write(line + "\n")
            print(line[:160], flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)  # tiny matrices: one thread is faster, above all on a shared machine
    write_report(sys.argv[1] if len(sys.argv) > 1 else str(Path(tempfile.gettempdir()) / "registry_report.txt"),
                 sys.argv[2:] or registry_types())
