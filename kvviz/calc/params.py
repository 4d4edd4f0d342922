"""Parameter count and weight bytes, from the model transformers builds for the config.

The model is built on the meta device (shapes only, no memory: even DeepSeek-V3 takes a second or two)
from the config through transformers' own classes, so the count is exact for every architecture it ships
(biases, norms, router and expert biases, attention sinks, tied embeddings counted once). Each parameter is
put in a component by where it sits in the module tree (embedding, attention, MLP, experts, state mixer,
norms, vision tower, lm_head) for the app's breakdown; matrices and vectors are counted apart because
quantised formats only pack matrices. A count is cached per config.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache

from kvviz.calc.arch import (
    Architecture,
    ConfigError,
    config_object,
    config_with_layers,
    decoder_config,
    quiet_transformers,
    text_part,
)
from kvviz.calc.dtypes import WEIGHT_DTYPES, DType
from kvviz.calc.formula import Formula
from kvviz.i18n import said


@dataclass(frozen=True)
class Component:
    """One kind of parameter summed over the model: matrix elements and vector elements (norms, biases)."""

    name: str
    matrix: int
    vector: int = 0

    @property
    def total(self) -> int:
        return self.matrix + self.vector


@dataclass(frozen=True)
class ParamCount:
    """The model's parameters by component.

    matmul_per_token: weight-matrix elements one token is multiplied by (attention, the MLP or the
    active experts, the state mixer, the output projection); a forward pass costs about 2 × this many
    FLOPs a token. active: the parameters one token uses (every routed expert but its top-k left out,
    and any vision or audio tower, which text decoding never runs).
    """

    components: tuple[Component, ...]
    matmul_per_token: int
    routed_expert_params: int
    moe_layers: int
    active: int

    @property
    def total(self) -> int:
        return sum(c.total for c in self.components)

    def get(self, name: str) -> Component:
        return next((c for c in self.components if c.name == name), Component(name, 0))

    @property
    def formula(self) -> Formula:
        parts = [c for c in self.components if c.total]
        return Formula(said("calc.label.params"), " + ".join(c.name for c in parts),
                       " + ".join(f"{c.total:,}" for c in parts), self.total, said("calc.unit.params"))


# Component rules, tried in order on a parameter's dotted name (as named_parameters gives it).
_VISION = re.compile(r"(^|\.)(vision|visual|vision_tower|vision_model|multi_modal_projector|mm_projector|audio"
                     r"|audio_tower|image_newline|patch_embed|embed_vision|embed_audio)(\.|_|$)")
_ROUTED = re.compile(r"\.(experts|block_sparse_moe\.experts|moe\.experts)\.")
_SHARED = re.compile(r"\.(shared_experts?|shared_mlp)(\.|_gate\.)")
_ROUTER = re.compile(r"\.(router|gate|moe_gate|w_gate)\.(weight|bias|e_score_correction_bias)$|\.router\.")
_NORM = re.compile(r"(norm|ln_\w+|layernorm)[^.]*\.(weight|bias)$|_norm$|\.ln\d?\.")
_STATE = re.compile(r"\.(mamba|mixer|linear_attn|conv|ssm|short_conv)\.")
_ATTN = re.compile(r"\.(self_attn|attn|attention|self_attention|mha)\.")
_MLP = re.compile(r"\.(mlp|feed_forward|ffn|block_sparse_moe|moe)\.")
_POSITION = re.compile(r"(wpe|position_embeddings|embed_positions)\.")


def _component(name: str, is_embedding: bool, is_output: bool) -> str:
    """Which component the parameter `name` belongs to."""
    if _VISION.search(name):
        return "vision/audio tower"
    if is_output:
        return "lm_head"
    if is_embedding:
        return "position embedding" if _POSITION.search(name) else "embedding"
    if _NORM.search(name):
        return "norms"
    for rule, component in ((_ROUTED, "routed experts"), (_SHARED, "shared experts"), (_ROUTER, "router")):
        if rule.search(name):
            return component
    for rule, component in ((_STATE, "state mixer"), (_ATTN, "attention"), (_MLP, "dense MLP")):
        if rule.search(name):
            return component
    return "other"


_ORDER = ("embedding", "position embedding", "attention", "state mixer", "dense MLP", "routed experts",
          "shared experts", "router", "norms", "other", "vision/audio tower", "lm_head")


def _meta_model(arch: Architecture):
    """The model transformers builds for `arch`'s config, on the meta device (shapes, no storage), with the
    calculator's changes (layers, KV heads, head_dim) applied to its text config."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    cfg = config_object(changed_config(arch))
    decoder_config(cfg)  # refuses a family without a decoder, as the parser did
    # The model transformers registers as the family's causal LM: a multimodal family's whole model where that
    # is what it registers (Gemma-3, with its vision tower), the language model where it registers that (Llama-4).
    with quiet_transformers(), torch.device("meta"):
        try:
            model = _first_that_builds((AutoModelForCausalLM, AutoModelForImageTextToText), cfg)
        except Exception as exc:
            raise ConfigError("config.cannot_build", model_type=arch.model_type,
                              why=str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__) from exc
    model.tie_weights()  # tied embeddings share one tensor; named_parameters then yields it once
    return model


def _first_that_builds(classes: tuple, cfg):
    """The model the first auto class that knows this config builds; the last class's error otherwise."""
    for cls in classes[:-1]:
        try:
            return cls.from_config(cfg)
        except ValueError:  # this auto class has no model for the config's type
            continue
    return classes[-1].from_config(cfg)


def changed_config(arch: Architecture) -> dict:
    """`arch`'s config.json dict with the calculator's layers, KV heads and head_dim written into its text part
    where they differ, so transformers derives the rest (layer pattern, Jamba's attention period) as it would
    for a config that said so."""
    raw = json.loads(arch.config)
    if decoder_config(config_object(raw)).num_hidden_layers != arch.num_layers:
        raw = config_with_layers(raw, arch.num_layers)
    if arch.mla is None and not arch.expanded_kv_heads and arch.model_type != "falcon":
        part = text_part(raw)
        if part.get("num_key_value_heads", arch.num_kv_heads) != arch.num_kv_heads:
            part["num_key_value_heads"] = arch.num_kv_heads
        if part.get("head_dim") not in (None, arch.head_dim):
            part["head_dim"] = arch.head_dim
    return raw


def count_params(arch: Architecture) -> ParamCount:
    """Count the parameters of `arch` component by component; ConfigError if its weights are unknown."""
    if not arch.has_weights:
        raise ConfigError("config.no_weights")
    return _count(arch)


@lru_cache(maxsize=64)
def _count(arch: Architecture) -> ParamCount:
    model = _meta_model(arch)
    inputs = model.get_input_embeddings()
    output = model.get_output_embeddings()
    embedding_ids = {id(m.weight) for m in model.modules() if type(m).__name__.endswith("Embedding")
                     and hasattr(m, "weight")}
    if inputs is not None:
        embedding_ids.add(id(inputs.weight))
    output_id = id(output.weight) if output is not None else None
    tied = inputs is not None and output is not None and output.weight is inputs.weight
    sums: dict[str, list[int]] = {}
    layers_with_experts = set()
    for name, p in model.named_parameters():
        part = _component(name, id(p) in embedding_ids, id(p) == output_id and not tied)
        entry = sums.setdefault(part, [0, 0])
        entry[0 if p.dim() >= 2 else 1] += p.numel()
        if part == "routed experts":
            layers_with_experts.add(re.sub(r"\.experts\..*", "", name))
    components = tuple(Component(n, *sums[n]) for n in _ORDER if n in sums) + tuple(
        Component(n, *v) for n, v in sums.items() if n not in _ORDER)
    count = ParamCount(components, 0, sums.get("routed experts", [0, 0])[0], len(layers_with_experts), 0)
    return _with_per_token(count, arch, output)


def _with_per_token(count: ParamCount, arch: Architecture, output) -> ParamCount:
    """The count with what one token uses: matmul_per_token and active parameters."""
    vocab_matrix = output.weight.numel() if output is not None else 0
    idle_experts = 0
    if arch.moe is not None:
        idle_experts = count.routed_expert_params * (1 - arch.moe.num_experts_per_tok / arch.moe.n_routed_experts)
    tower = count.get("vision/audio tower")
    skip = ("embedding", "position embedding", "lm_head", "vision/audio tower")
    matmul = sum(c.matrix for c in count.components if c.name not in skip) + vocab_matrix - idle_experts
    active = count.total - idle_experts - tower.total
    return replace(count, matmul_per_token=int(matmul), active=int(active))


_KEEP_16BIT = ("embedding", "position embedding", "lm_head")


def weight_bytes(count: ParamCount, dtype: DType) -> int:
    """Bytes of the weights in `dtype`.

    Float formats store every parameter at their width. The 8- and 4-bit formats pack the layer
    matrices (with group scales for int8/int4) and keep vectors, embeddings and lm_head in bf16, as
    GPTQ, AWQ and fp8 checkpoints do.
    """
    if dtype.bits >= 16:
        return math.ceil(count.total * dtype.bits / 8)
    bf16 = WEIGHT_DTYPES["bf16"]
    packed = sum(c.matrix for c in count.components if c.name not in _KEEP_16BIT)
    kept = count.total - packed
    scales = 0 if dtype.group_size is None else math.ceil(packed / dtype.group_size) * dtype.group_overhead_bytes
    return math.ceil(packed * dtype.bits / 8) + scales + math.ceil(kept * bf16.bits / 8)


def experts_touched(arch: Architecture, batch: int) -> float:
    """Expected routed experts one MoE layer reads for `batch` tokens, if routing were uniform:
    E × (1 - (1 - k/E)^batch)."""
    if arch.moe is None:
        return 0.0
    e, k = arch.moe.n_routed_experts, arch.moe.num_experts_per_tok
    return e * (1 - (1 - k / e) ** batch)


def _param_bytes(params: float, dtype: DType, packed: bool) -> float:
    """Bytes of `params` parameters stored as weight_bytes stores them (packed matrix or kept in bf16)."""
    if dtype.bits >= 16:
        return params * dtype.bits / 8
    if not packed:
        return params * 2
    scales = 0 if dtype.group_size is None else params / dtype.group_size * dtype.group_overhead_bytes
    return params * dtype.bits / 8 + scales


def weight_bytes_read_per_step(arch: Architecture, count: ParamCount, dtype: DType, batch: int) -> float:
    """Weight bytes one decode step must read for `batch` sequences.

    Everything resident is read except the rows of an untied embedding table (and position table)
    that no token looks up, the routed experts no token is sent to (expected value, uniform routing),
    and a vision or audio tower (text decoding never runs it).
    """
    unread_rows = 0.0
    embedding, positions = count.get("embedding"), count.get("position embedding")
    if not arch.tie_word_embeddings and arch.vocab_size:
        unread_rows += embedding.matrix * max(1 - batch / arch.vocab_size, 0)
    if positions.matrix and arch.max_position_embeddings:
        unread_rows += positions.matrix * max(1 - batch / arch.max_position_embeddings, 0)
    unread_experts = 0.0
    if arch.moe is not None:
        idle_fraction = 1 - experts_touched(arch, batch) / arch.moe.n_routed_experts
        unread_experts = count.get("routed experts").matrix * idle_fraction
    tower = count.get("vision/audio tower")
    skipped = (_param_bytes(unread_rows, dtype, packed=False) + _param_bytes(unread_experts, dtype, packed=True)
               + _param_bytes(tower.matrix, dtype, packed=True) + _param_bytes(tower.vector, dtype, packed=False))
    return weight_bytes(count, dtype) - skipped
