"""Helpers the tests share: the repository's root and the app started on a free loopback port."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
