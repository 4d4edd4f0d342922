"""Every causal-LM family in transformers' registry, built small from its own config class and run through
kvviz.engine.steps: its cache grows as its layer kinds say, and kvviz's prediction (KV bytes at each step,
parameter count) equals what the instance holds. tests/calc/registry_models.py builds and measures."""

from __future__ import annotations

import functools
import itertools

import pytest
import torch

from kvviz.calc.arch import architecture_from_dict
from kvviz.calc.dtypes import KV_DTYPES
from kvviz.calc.memory import transformers_cache_bytes
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


@pytest.mark.parametrize("model_type", covered_types())
def test_kv_bytes_match_kvviz(model_type: str):
    """kvviz's transformers_cache_bytes equals the measured KV bytes after the prefill and each decode step."""
    run = _run(model_type)
    arch = architecture_from_dict(run.config)
    predicted = [transformers_cache_bytes(arch, batch=1, seq_len=n, dtype=KV_DTYPES["fp32"]) for n in run.seq_lens]
    measured = [c.kv for c in run.cached]
    assert predicted == measured, (
        f"{model_type}: kvviz predicts {predicted} KV bytes at {run.seq_lens} tokens, the cache holds {measured} "
        f"({', '.join(sorted(set(run.layer_classes)))})"
    )


@pytest.mark.parametrize("model_type", covered_types())
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
