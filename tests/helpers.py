"""Helpers the tests share: the repository's root and the app started as a user starts it, offline."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from kvviz.ui import serve
from kvviz.ui.serve import ServedApp

REPO = Path(__file__).resolve().parent.parent
__all__ = ["REPO", "ServedApp", "running_app"]


def running_app(*args: str, log: Path, env: dict[str, str] | None = None,
                **options: float) -> AbstractContextManager[ServedApp]:
    """kvviz.ui.serve.running_app with the hub offline, the log kept in `log`, and tiny the default model: the
    tests see no converted SmolLM2 (an empty KVVIZ_CACHE, and serve fetches nothing at start) unless `env` says."""
    quiet = {"HF_HUB_OFFLINE": "1", "KVVIZ_CACHE": str(log.parent / "kvviz-cache-empty")}
    return serve.running_app(*args, log=log, env=quiet | (env or {}), **options)
