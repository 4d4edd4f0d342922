"""Shared test set-up: no network, no analytics, helpers to write configs to disk and to start the app."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# The tests never see this machine's converted models (~/.cache/kvviz): whether SmolLM2 was fetched here before
# would change the default model under them. Tests that want a converted model make their own cache.
_EMPTY_CACHE = tempfile.mkdtemp(prefix="kvviz-test-cache-")
atexit.register(shutil.rmtree, _EMPTY_CACHE, ignore_errors=True)
os.environ["KVVIZ_CACHE"] = _EMPTY_CACHE


# README's test command runs the tests on two pytest-xdist workers, whole files each, in the order collected
# (--dist loadfile --no-loadscope-reorder), then the tests marked `alone` one at a time. The order below puts the
# heavy files first, so that the run does not end on one worker with one long file left.
HEAVY_FIRST = ("vllm", "slow", "browser")


def pytest_collection_modifyitems(config, items):
    """Files that start vLLM first, then the slow ones, then those that drive a browser, then the rest; each file's
    own order is kept (a browser file's tests may walk one page in turn)."""
    rank: dict[Path, int] = {}
    for item in items:
        mine = next((i for i, mark in enumerate(HEAVY_FIRST) if item.get_closest_marker(mark)), len(HEAVY_FIRST))
        rank[item.path] = min(rank.get(item.path, mine), mine)
    items.sort(key=lambda item: rank[item.path])


@pytest.fixture
def vllm_auto_dtype(monkeypatch):
    """vLLM's CPU build as it chooses its dtype itself (bf16 for an fp32, fp16 or bf16 checkpoint), whatever
    this machine's CPU: for figures worked out by hand in bf16. Unset, kvviz asks for fp32 on a CPU without bf16
    instructions (kvviz.serving.vllm.cpu_fp32); the variable reaches the commands a test runs too."""
    from kvviz.serving.vllm import DTYPE_ENV

    monkeypatch.setenv(DTYPE_ENV, "auto")


@pytest.fixture
def vllm_fp32(monkeypatch):
    """vLLM's CPU build asked for fp32, as kvviz asks it on a CPU without bf16 instructions."""
    from kvviz.serving.vllm import DTYPE_ENV

    monkeypatch.setenv(DTYPE_ENV, "fp32")


@pytest.fixture
def write_config(tmp_path: Path):
    """Write a config dict as <tmp>/<name>/config.json and return the folder."""

    def write(config: dict, name: str = "model") -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
        return folder

    return write


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """Folders of tiny saved models, one per attention family, sharing one trained tokenizer."""
    from .tiny import FAMILIES, build_model, train_tokenizer

    root = tmp_path_factory.mktemp("tiny")
    tokenizer = train_tokenizer(root / "tokenizer")
    return {family: build_model(root / family, family, tokenizer) for family in FAMILIES}


@pytest.fixture(scope="session")
def short_context_model(tmp_path_factory) -> Path:
    """A tiny Qwen2 whose context is 32 tokens, for prompts that do not fit."""
    from .tiny import build_model, train_tokenizer

    root = tmp_path_factory.mktemp("short")
    return build_model(root / "model", "qwen2", train_tokenizer(root / "tokenizer"), max_position_embeddings=32)
