"""Tensor, pipeline and data parallelism: what each GPU holds, against arithmetic done by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvviz.calc.arch import architecture_from_dims
from kvviz.calc.dtypes import kv_dtype, weight_dtype
from kvviz.calc.hardware import ACCELERATORS
from kvviz.calc.parallel import (
    Parallelism,
    attention_kept_whole,
    deploy,
    gpu_architecture,
    gpu_components,
    kv_heads_per_gpu,
    stage_components,
    stage_layers,
    tp_choices,
)
from kvviz.calc.params import Component, count_params
from kvviz.calc.presets import load_preset
from kvviz.calc.report import MemoryQuery, as_dict, memory_report, render_text

BF16 = kv_dtype("bf16")
H100 = ACCELERATORS["h100-sxm"]
GIB = 2**30

# Llama-3-70B, by hand from its config: 80 layers, hidden 8192, 64 query heads and 8 KV heads of 128,
# intermediate 28672, vocab 128256, untied embeddings, RMSNorm (weight only).
EMBEDDING = 128_256 * 8_192  # 1,050,673,152, and as many in lm_head
ATTENTION_LAYER = 8192 * 8192 + 2 * 8192 * 1024 + 8192 * 8192  # q, k and v (8 heads × 128), o: 150,994,944
MLP_LAYER = 3 * 8192 * 28672  # gate, up, down: 704,643,072
NORMS = 80 * 2 * 8192 + 8192  # two per layer and the final one: 1,318,912


def _deploy(name: str, par: Parallelism, batch: int = 8, seq_len: int = 8192):
    arch = load_preset(name)
    return deploy(arch, count_params(arch), par, H100, BF16, weight_dtype("bf16"), batch, seq_len)


@pytest.mark.parametrize("kv_heads,tp,expected", [
    (8, 1, 8), (8, 2, 4), (8, 8, 1),
    (8, 16, 1), (8, 64, 1),  # past kv_heads GPUs each keeps one head, copied tp / kv_heads times
    (128, 8, 16), (1, 4, 1),
])
def test_kv_heads_per_gpu(kv_heads, tp, expected):
    """vLLM's rule, max(1, kv_heads // tp): whole heads split, then one head each once tp passes kv_heads."""
    assert kv_heads_per_gpu(kv_heads, tp) == expected


@pytest.mark.parametrize("tp,per_token", [
    (1, 80 * 2 * 8 * 128 * 2),  # 327,680: all 8 KV heads
    (8, 80 * 2 * 1 * 128 * 2),  # 40,960: one head per GPU
    (16, 80 * 2 * 1 * 128 * 2),  # 40,960: still one head per GPU, each head on 2 GPUs
])
def test_llama3_70b_kv_per_gpu(tp, per_token):
    """Llama-3-70B's KV bytes per token on one GPU: layers × 2 (K and V) × KV heads per GPU × head_dim × 2 bytes."""
    d = _deploy("llama-3-70b", Parallelism(tp=tp))
    assert d.binding.kv.bytes_per_token == per_token
    assert d.binding.kv.bytes == 8 * 8192 * per_token  # batch 8 × seq_len 8192
    assert d.kv_heads_per_gpu == max(1, 8 // tp)


def test_llama3_70b_on_8_gpus():
    """tp=8: every matrix and the vocabulary split eight ways, the norms whole on every GPU:
    131,334,144 (embedding) + 1,509,949,440 (attention) + 7,046,430,720 (MLP) + 1,318,912 (norms) + 131,334,144
    (lm_head) = 8,820,367,360 parameters, 17,640,734,720 bytes in bf16. The budget is 80e9 × 0.9 − that −
    1 GiB = 53,285,523,456 B; a token costs 40,960 B on one GPU, so the pool holds ⌊53,285,523,456 / (16 × 40,960)⌋
    = 81,307 blocks = 1,300,912 token slots, and ⌊53,285,523,456 / (8192 × 40,960)⌋ = 158 sequences of 8192."""
    d = _deploy("llama-3-70b", Parallelism(tp=8))
    params = EMBEDDING // 8 + 80 * ATTENTION_LAYER // 8 + 80 * MLP_LAYER // 8 + NORMS + EMBEDDING // 8
    assert params == 8_820_367_360
    assert d.binding.params == params and d.binding.weights_bytes == 2 * params == 17_640_734_720
    assert d.per_gpu.kv_budget_bytes == 72_000_000_000 - 17_640_734_720 - GIB == 53_285_523_456
    assert d.per_gpu.token_slots == 1_300_912 and d.per_gpu.max_batch == 158
    assert d.gpus == 8 and d.token_slots == 1_300_912 and d.max_batch == 158


def test_llama3_70b_on_16_gpus_copies_the_kv_heads():
    """tp=16 > 8 KV heads: each GPU keeps the K and V projections of its one head whole (80 × 2 × 8192 × 128 =
    167,772,160) beside a sixteenth of q and o (80 × 2 × 8192 × 8192 / 16 = 671,088,640)."""
    arch = load_preset("llama-3-70b")
    assert attention_kept_whole(arch, 16, 80) == (80 * 2 * 8192 * 128 * 8, 80 * 2 * 8192 * 128)
    d = _deploy("llama-3-70b", Parallelism(tp=16))
    attention = 80 * 2 * 8192 * 8192 // 16 + 80 * 2 * 8192 * 128
    assert attention == 838_860_800
    params = 2 * EMBEDDING // 16 + attention + 80 * MLP_LAYER // 16 + NORMS
    assert d.binding.params == params == 4_494_729_216


def test_llama3_70b_in_4_pipeline_stages():
    """pp=4 on 80 layers: 20 layers a GPU, 20 × 2 × 8 × 128 × 2 = 81,920 KV bytes a token. A layer holds
    150,994,944 + 704,643,072 + 2 × 8192 = 855,654,400 parameters; the first stage adds the embedding, the last the
    final norm and lm_head, so the last is the heaviest and fills first."""
    d = _deploy("llama-3-70b", Parallelism(pp=4))
    layer = ATTENTION_LAYER + MLP_LAYER + 2 * 8192
    assert layer == 855_654_400
    assert [s.layers for s in d.stages] == [20, 20, 20, 20]
    assert [s.params for s in d.stages] == [20 * layer + EMBEDDING, 20 * layer, 20 * layer,
                                            20 * layer + 8192 + EMBEDDING]
    assert {s.kv.bytes_per_token for s in d.stages} == {20 * 2 * 8 * 128 * 2} == {81_920}
    assert d.binding.index == 3 and d.per_gpu.weights_bytes == 2 * (20 * layer + 8192 + EMBEDDING)


def test_deepseek_v3_keeps_the_whole_latent_on_every_gpu():
    """DeepSeek-V3 at tp=8: each GPU caches the whole 512 + 64 = 576-value latent of its 61 layers, 61 × 576 × 2 =
    70,272 bytes a token, as on one GPU; there are no KV heads to split."""
    one, eight = _deploy("deepseek-v3", Parallelism()), _deploy("deepseek-v3", Parallelism(tp=8))
    assert eight.binding.kv.bytes_per_token == one.binding.kv.bytes_per_token == 61 * 576 * 2 == 70_272
    assert eight.kv_heads_per_gpu is None


def test_deepseek_v3_attention_share():
    """vLLM keeps MLA's down-projections whole on every GPU: 61 × 7168 × (1536 + 576) = 923,467,776. The rest of
    attention (q_b, kv_b, o), 61 × (1536 × 128 × 192 + 512 × 128 × 256 + 128 × 128 × 7168) = 10,489,954,304, is split
    eight ways: 1,311,244,288 + 923,467,776 = 2,234,712,064 per GPU."""
    arch = load_preset("deepseek-v3")
    whole = 61 * 7168 * (1536 + 576)
    split = 61 * (1536 * 128 * 192 + 512 * 128 * 256 + 128 * 128 * 7168)
    assert attention_kept_whole(arch, 8, 61) == (whole, whole) == (923_467_776, 923_467_776)
    share = gpu_components(arch, (Component("attention", whole + split),), 8, 61)
    assert share == (Component("attention", split // 8 + whole),) and split // 8 + whole == 2_234_712_064


def test_deepseek_v3_stages_follow_its_dense_first_layers():
    """61 layers in 4 stages: 15, 15, 16, 15 (vLLM puts the extra layer on the last stage but one). The first stage
    holds DeepSeek-V3's three dense layers, so it is lighter than a stage of MoE layers only; the 16-layer stage
    fills first."""
    d = _deploy("deepseek-v3", Parallelism(tp=8, pp=4))
    assert [s.layers for s in d.stages] == [15, 15, 16, 15]
    assert d.stages[0].weights_bytes < min(s.weights_bytes for s in d.stages[1:])
    assert d.binding.index == 2 and d.binding.kv.bytes_per_token == 16 * 576 * 2


@pytest.mark.parametrize("layers,pp,expected", [
    (80, 4, (20, 20, 20, 20)),
    (61, 4, (15, 15, 16, 15)),  # the remainder, one layer, to the stage before the last
    (10, 4, (2, 3, 3, 2)),  # two left over: the middle stages
    (7, 4, (2, 2, 2, 1)),  # three: every stage but the last
    (5, 5, (1, 1, 1, 1, 1)),
])
def test_stage_layers_as_vllm_splits_them(layers, pp, expected):
    """layers // pp each, the remainder one apiece from the last stage but one backwards; none over ⌈layers / pp⌉."""
    assert stage_layers(layers, pp) == expected
    assert sum(expected) == layers and max(expected) == -(-layers // pp)


@pytest.mark.parametrize("name", ["llama-3-70b", "deepseek-v3", "gpt2", "gemma-2-9b"])
@pytest.mark.parametrize("pp", [1, 3])
def test_stages_hold_the_whole_model_once(name, pp):
    """At tp=1 the stages' parameters add up to the model's, component by component; with tied embeddings and
    pp > 1 the last stage holds one more copy of the embedding (vLLM builds it there for the output projection)."""
    arch = load_preset(name)
    full = count_params(arch)
    d = deploy(arch, full, Parallelism(pp=pp), H100, BF16, weight_dtype("bf16"), 1, 100)
    extra = full.get("embedding").total if arch.tie_word_embeddings and pp > 1 else 0
    assert sum(s.params for s in d.stages) == full.total + extra


def test_tied_embeddings_on_the_last_stage():
    """GPT-2 (tied) in two stages: the first holds the token and position tables, the last its own token table
    (50257 × 768 = 38,597,376) for the output projection, and no position table."""
    arch = load_preset("gpt2")
    counts = {n: count_params(arch.sliced(0, n)) for n in (0, 6, 12)}
    first = {c.name: c.total for c in stage_components(arch, counts, Parallelism(pp=2), 0, 0, 6)}
    last = {c.name: c.total for c in stage_components(arch, counts, Parallelism(pp=2), 1, 6, 12)}
    assert first["embedding"] == last["embedding"] == 50257 * 768 == 38_597_376
    assert first["position embedding"] == 1024 * 768 and last["position embedding"] == 0


def test_a_stage_keeps_the_state_of_its_own_layers():
    """Jamba-1.5-Mini: 32 layers, attention on every 8th from layer 4 (4, 12, 20, 28), Mamba on the other 28. In two
    stages of 16 each GPU keeps 2 attention layers' KV and 14 layers' Mamba state."""
    arch = load_preset("jamba-1.5-mini")
    for start, stop in ((0, 16), (16, 32)):
        share = gpu_architecture(arch, 1, start, stop)
        assert (share.kv_layers, share.state.layers) == (2, 14)


def test_unknown_components_are_whole_on_every_gpu():
    """A component kvviz does not place (here "other", outside the layers) is held whole by every stage and GPU."""
    arch = architecture_from_dims(4, 2, 64, heads=4)
    real = count_params(load_preset("gpt2"))  # a count whose components are replaced by made-up ones
    cut = {n: replace(real, components=(Component("attention", 100 * n), Component("other", 7))) for n in (0, 2, 4)}
    for index, (start, stop) in enumerate([(0, 2), (2, 4)]):
        parts = stage_components(arch, cut, Parallelism(tp=2, pp=2), index, start, stop)
        assert gpu_components(arch, parts, 2, 2) == (Component("attention", 100), Component("other", 7))


def test_data_parallelism_multiplies_the_deployment_only():
    """dp=3 leaves every GPU's share as it is and holds three times the tokens and sequences."""
    one, three = _deploy("llama-3-70b", Parallelism(tp=8)), _deploy("llama-3-70b", Parallelism(tp=8, dp=3))
    assert three.binding == one.binding and three.per_gpu == one.per_gpu
    assert (three.gpus, three.token_slots, three.max_batch) == (24, 3 * one.token_slots, 3 * one.max_batch)


def test_one_gpu_is_the_single_device_answer():
    """tp = pp = dp = 1 is exactly the one-device report: the same weights, cache and capacity."""
    r = memory_report(load_preset("llama-3-8b"), MemoryQuery(batch=64, seq_len=8192))
    assert r.parallel.binding.weights_bytes == r.weights_bytes == 16_060_522_496
    assert r.capacity.kv_budget_bytes == 54_865_735_680 and r.capacity.max_batch == 51  # as test_capacity_roofline


@pytest.mark.parametrize("arch,par,message", [
    (load_preset("llama-3-70b"), Parallelism(tp=3),
     "tp 3 does not divide the model's 64 query heads (each GPU holds whole heads); this model takes "
     "tp = 1, 2, 4, 8, 16, 32 or 64"),
    (architecture_from_dims(2, 6, 64, heads=24), Parallelism(tp=4), "tp 4 does not divide the model's 6 KV heads"),
    (architecture_from_dims(2, 8, 64, heads=24), Parallelism(tp=12),
     "tp 12 is more than the model's 8 KV heads but not a multiple of them"),
    (load_preset("llama-3-70b"), Parallelism(pp=81), "pp 81 is more than the model's 80 layers"),
])
def test_a_split_the_model_cannot_take_is_one_sentence(arch, par, message):
    """tp must divide the query heads and split or copy the KV heads evenly; pp at most one stage per layer."""
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        deploy(arch, None, par, H100, BF16, weight_dtype("bf16"), 1, 10)


def test_tp_choices():
    """Llama-3-70B (64 heads, 8 KV heads) takes every power of two up to 64; a 24-head, 8-KV-head model no 12."""
    assert tp_choices(load_preset("llama-3-70b")) == [1, 2, 4, 8, 16, 32, 64]
    assert tp_choices(architecture_from_dims(2, 8, 64, heads=24)) == [1, 2, 4, 8, 24]


@pytest.mark.parametrize("field,value,message", [
    ("tp", 0, "tp must be between 1 and 1,024"), ("pp", -1, "pp must be between 1"),
    ("dp", 1.5, "dp must be a whole number"), ("tp", True, "tp must be a whole number"),
])
def test_query_refuses_bad_counts(field, value, message):
    """tp, pp and dp are checked like every other number of the query."""
    with pytest.raises(ValueError, match=message):
        memory_report(load_preset("gpt2"), MemoryQuery(**{field: value}))


def test_report_json_and_text_say_per_gpu_and_in_all():
    """The report carries one GPU's weights and KV, the GPUs in all and the deployment's capacity, in JSON and text."""
    r = memory_report(load_preset("llama-3-70b"), MemoryQuery(batch=8, seq_len=8192, tp=8, dp=2))
    par = as_dict(r)["parallel"]
    assert (par["tp"], par["pp"], par["dp"], par["gpus"], par["kv_heads_per_gpu"]) == (8, 1, 2, 16, 1)
    assert par["per_gpu"]["weights_bytes"] == 17_640_734_720 and par["per_gpu"]["kv_bytes_per_token"] == 40_960
    assert par["deployment"] == {"gpus": 16, "replicas": 2, "weights_bytes": par["deployment"]["weights_bytes"],
                                 "token_slots": 2 * 1_300_912, "max_batch": 2 * 158}
    assert as_dict(r)["capacity"]["token_slots"] == 1_300_912  # one GPU's
    text = render_text(r)
    assert "Deployment: tp 8 × pp 1 × dp 2 = 16 GPUs (H100 SXM)" in text
    assert "= 80 × 2 × 1 × 128 × 2" in text and "Capacity on one H100 SXM of 16" in text
    assert "2 replicas hold 2,601,824 token slots and 316 sequences of seq_len 8,192 at once" in text
