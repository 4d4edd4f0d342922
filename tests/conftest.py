"""Shared test set-up: no network, no analytics, helpers to write configs to disk and to start the app."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

REPO = Path(__file__).resolve().parent.parent


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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(*args: str, log: Path, env: dict[str, str] | None = None):
    """app.py started with `args` on a free loopback port, its output in `log`; yields the URL, then stops it."""
    import socket
    import subprocess
    import sys
    import time

    port = free_port()
    env = os.environ | {"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"} | (env or {})
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port), *args], cwd=REPO, env=env,
                                stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"app.py exited: {log.read_text()}")
                if time.monotonic() > deadline:
                    pytest.fail("app.py did not start listening within 120 s")
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
