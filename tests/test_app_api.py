"""The running app, over HTTP, as gradio_client sees it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
from gradio_client import Client

from .conftest import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_url():
    """app.py started on a free loopback port, as a user would start it."""
    port = _free_port()
    env = os.environ | {"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"app.py exited: {proc.stdout.read()}")
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("app.py did not start listening within 120 s")
    yield url
    proc.terminate()
    proc.wait(30)


def test_kv_memory_api(app_url):
    """/kv_memory answers the lesson's example with 32 GiB and all its figures."""
    client = Client(app_url, verbose=False)
    out = client.predict("llama-2-7b", "", 16, 4096, 32, 32, 128, "bf16", "h100-sxm", 0.9, 16, api_name="/kv_memory")
    summary, formula, *plots, details = out
    assert details["kv_cache_bytes"] == 34_359_738_368
    assert "32.000 GiB" in summary and "= 16 × 4096 × 32 × 2 × 32 × 128 × 2" in formula
    assert len(plots) == 5


def test_kv_memory_api_bad_input_keeps_serving(app_url):
    """A bad request gets a clear error and the next request is answered."""
    client = Client(app_url, verbose=False)
    with pytest.raises(Exception, match="kv_heads must divide"):
        client.predict("llama-3-8b", "", 1, 100, 32, 3, 128, "bf16", "h100-sxm", 0.9, 16, api_name="/kv_memory")
    out = client.predict("llama-3-8b", "", 1, 8192, 32, 8, 128, "bf16", "h100-sxm", 0.9, 16, api_name="/kv_memory")
    assert out[-1]["kv_cache_bytes"] == 2**30
