"""Shared test set-up: no network, no analytics, and helpers to write configs to disk."""

from __future__ import annotations

import json
import os
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
