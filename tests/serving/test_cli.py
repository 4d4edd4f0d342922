"""`python -m kvviz.serving` as a person runs it, against the test server on 127.0.0.1: a run's JSON, a
sweep's levels, and one line with exit status 2 for anything unusable (never a traceback, never the key)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO
from tests.serving.fake_server import MODEL, fake_server


def serving(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvviz.serving", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=os.environ | (env or {}))


def test_run_prints_one_json_object():
    """4 requests of 3 tokens at 2 in flight: 12 output tokens, every request with its record."""
    with fake_server(ttft_s=0.05, itl_s=0.01, tokens=3) as (url, _):
        proc = serving("run", "--url", url, "--model", MODEL, "--concurrency", "2", "--requests", "4",
                       "--output-tokens", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stats"]["completed"] == 4 and out["stats"]["output_tokens"] == 12
    assert len(out["requests"]) == 4 and out["server"]["samples"], "the server's /metrics were polled"
    assert "estimated" in proc.stderr, "without a tokenizer the prompt lengths are said to be estimates"


def test_sweep_prints_a_line_per_level():
    with fake_server(ttft_s=0.02, itl_s=0.0, tokens=2) as (url, _):
        proc = serving("sweep", "--url", url, "--model", MODEL, "--max-concurrency", "4", "--per-level", "1",
                       "--output-tokens", "2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines if line.startswith("c=")][:2] == ["c=1", "c=2"]
    assert sum(line.strip().startswith("client:") for line in lines) == sum(line.startswith("c=") for line in lines), \
        "every level says what the client itself cost"
    assert lines[-1].startswith("sweep "), "the sweep says why it stopped"


@pytest.mark.parametrize(("behaviour", "args", "message"), [
    ({"api_key": "sk-right"}, ["--api-key", "sk-wrong"], "HTTP 401: the server refused the API key"),
    ({"mode": "plain_json"}, [], "not a stream"),
    ({}, ["--concurrency", "0"], "concurrency must be between"),
    ({}, ["--prompt-file", "/no/such/prompts.jsonl"], "no prompt file"),
    ({}, ["--bogus"], "unrecognized arguments"),
])
def test_unusable_input_is_one_line_and_status_2(behaviour, args, message):
    with fake_server(**behaviour) as (url, _):
        proc = serving("run", "--url", url, "--model", MODEL, "--requests", "1", *args)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error:") and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "sk-wrong" not in proc.stderr + proc.stdout
    if "HTTP 401" in message:  # the command line's advice stays on the command line
        assert "(set KVVIZ_API_KEY or pass --api-key)" in proc.stderr, proc.stderr


def test_start_without_vllms_environment_says_how_to_build_it(tmp_path):
    proc = serving("start", "tiny", "--venv", str(tmp_path / "none"))
    assert proc.returncode == 2 and "python -m kvviz.serving setup" in proc.stderr
