"""Every causal-LM family in transformers' registry, built small from its own config class and run through
kvviz.engine.steps: its cache grows as its layer kinds say, and kvviz's prediction (KV bytes at each step,
parameter count) equals what the instance holds. tests/calc/registry_models.py builds and measures."""

from __future__ import annotations

import functools
import itertools

import pytest
import torch

from kvviz.calc.arch import ConfigError, architecture_from_dict
from kvviz.calc.dtypes import KV_DTYPES
from kvviz.calc.memory import state_bytes, transformers_kv_bytes
from kvviz.calc.params import count_params
from tests.calc.registry_models import (
    NOT_COVERED,
    OVERRIDES,
    STATE_OUTSIDE_CACHE,
    RegistryRun,
    covered_types,
    registry_types,
    run_model,
)

# 184 foreign families warn about their defaults (rope scaling, token ids, deprecated kwargs): noise here.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    # Tiny matrices: a second thread only adds hand-offs, and CI's cores are shared with other jobs.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@functools.cache
def _run(model_type: str) -> RegistryRun:
    """One build and run per family, shared by the tests below."""
    return run_model(model_type)


def test_every_registry_type_is_covered_or_explained():
    """A new transformers release that adds a causal LM fails here until it is covered or given a reason."""
    registry = set(registry_types())
    unexplained = sorted(registry - set(covered_types()) - set(NOT_COVERED))
    assert not unexplained, f"neither covered nor in NOT_COVERED: {unexplained}"
    stale = sorted((set(NOT_COVERED) | set(OVERRIDES)) - registry)
    assert not stale, f"NOT_COVERED or OVERRIDES name types transformers no longer registers: {stale}"
    assert all(reason.strip() for reason in NOT_COVERED.values()), "every NOT_COVERED entry says why"


@pytest.mark.parametrize("model_type", covered_types())
def test_cache_grows_as_the_layers_say(model_type: str):
    """Prefill then two decode steps: the cache holds something, its fixed-size state stays fixed and its KV
    grows by the same bytes each step (nothing once every layer is sliding or chunked and full)."""
    run = _run(model_type)
    kv = [c.kv for c in run.cached]
    state = [c.state for c in run.cached]
    assert kv[0] + state[0] > 0, f"{model_type}: empty cache after the prefill (state kept elsewhere?)"
    assert len(set(state)) == 1, f"{model_type}: conv/recurrent state changed size between steps: {state}"
    steps = [b - a for a, b in itertools.pairwise(kv)]
    assert min(steps) >= 0, f"{model_type}: KV bytes shrank: {kv}"
    assert len(set(steps)) == 1, f"{model_type}: uneven KV growth per token {steps} (a window still filling?)"
    assert bool(run.outside_cache) == (model_type in STATE_OUTSIDE_CACHE), (
        f"{model_type}: tensors kept on the modules, out of the cache's sight: {run.outside_cache or 'none'} "
        "(update STATE_OUTSIDE_CACHE)"
    )


# Families that run here but whose cache kvviz does not model: kvviz refuses each with a ConfigError naming why
# (docs/architectures.md). Each refusal is checked, so one that starts answering must then match the measurement.
_INDEXED = "indexed_attention"  # DeepSeek-V3.2-style sparse attention: an indexer key cache beside the KV
_STATE = "not sized by kvviz"  # a linear-attention or Mamba mixer whose state kvviz has no formula for
KVVIZ_REFUSES = {
    **dict.fromkeys(["axk2", "deepseek_v32", "dots3_note", "dots3_note_text", "glm_moe_dsa", "hy_v4", "kolibri1_1",
                     "qwen4_exp", "qwen4_exp_text"], _INDEXED),
    "deepseek_v4": "compressed_sparse_attention",
    # Inkling's short convolutions keep fp32 windows in a bf16 model, of per-layer widths (kvviz.calc.state.UNSIZED)
    **dict.fromkeys(["inkling2_loop_text", "inkling2_text", "inkling_text"], _STATE),
    **dict.fromkeys(["gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text"], "one KV shape"),
    **dict.fromkeys(["dory", "longcat_flash", "mimo_v2_flash", "mllama", "musicgen", "musicgen_melody",
                     "recurrent_gemma"], "kvviz does not model"),
}
MODELLED = [t for t in covered_types() if t not in KVVIZ_REFUSES]


@pytest.mark.parametrize("model_type", sorted(KVVIZ_REFUSES))
def test_kvviz_refuses_what_it_does_not_model(model_type: str):
    """A family kvviz does not model is refused by name, never answered with a wrong figure."""
    with pytest.raises(ConfigError, match=KVVIZ_REFUSES[model_type]):
        architecture_from_dict(_run(model_type).config)


def test_the_named_families_are_modelled():
    """Issue 15's families all run and are predicted exactly (their tests are among the parametrized ones)."""
    named = {"gemma3", "gemma3_text", "llama4", "llama4_text", "qwen3_next", "jamba", "falcon", "qwen3_moe",
             "gpt_oss", "olmo2", "cohere", "cohere2", "mistral", "mixtral", "phi3", "llama", "qwen2", "deepseek_v3"}
    assert named <= set(MODELLED), sorted(named - set(MODELLED))


@pytest.mark.parametrize("model_type", MODELLED)
def test_kv_bytes_match_kvviz(model_type: str):
    """kvviz's transformers_kv_bytes equals the measured KV bytes after the prefill and each decode step, and its
    state_bytes the fixed-size state of the linear/Mamba layers."""
    run = _run(model_type)
    arch = architecture_from_dict(run.config)
    predicted = [transformers_kv_bytes(arch, batch=1, seq_len=n, dtype=KV_DTYPES["fp32"]) for n in run.seq_lens]
    measured = [c.kv for c in run.cached]
    assert predicted == measured, (
        f"{model_type}: kvviz predicts {predicted} KV bytes at {run.seq_lens} tokens, the cache holds {measured} "
        f"({', '.join(sorted(set(run.layer_classes)))})"
    )
    state = state_bytes(arch, batch=1, conv_elem_bytes=4)  # an fp32 run: the convolution window in fp32 too
    assert state == run.cached[0].state, (
        f"{model_type}: kvviz predicts {state:,} bytes of linear-layer state, the cache holds {run.cached[0].state:,}"
    )


@pytest.mark.parametrize("model_type", MODELLED)
def test_param_count_matches_kvviz(model_type: str):
    """kvviz's count_params equals the instance's parameters (each tied tensor once)."""
    run = _run(model_type)
    predicted = count_params(architecture_from_dict(run.config)).total
    assert predicted == run.params, (
        f"{model_type}: kvviz counts {predicted:,} parameters, the instance has {run.params:,} {run.param_groups}"
    )


@pytest.mark.parametrize("model_type", sorted(NOT_COVERED))
def test_not_covered_still_cannot_run(model_type: str):
    """A NOT_COVERED family still fails or leaves the cache empty; once it runs, it belongs in the coverage."""
    try:
        run = _run(model_type)
    except Exception:  # any failure keeps the entry honest
        return
    assert run.cached[0].total == 0, f"{model_type} now runs and fills the cache: remove it from NOT_COVERED"
