"""vLLM's launcher without starting vLLM (its set-up: tests/serving/test_setup.py): the command line and
environment, the start-up log read, model folders for twins, and the checks on a server's spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvviz.serving.models import model_folder
from kvviz.serving.vllm import (
    TINY,
    ServerSpec,
    command,
    environment,
    last_error_line,
    startup_facts,
)


def test_the_command_line_and_environment():
    spec = ServerSpec(TINY, "tiny", port=8123, max_model_len=512, kv_space_gib=2, dummy=True, tensor_parallel=2)
    cmd = command(spec, Path("/venv/bin/python"))
    assert cmd[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(cmd)
    for part in ("--served-model-name tiny", "--port 8123", "--max-model-len 512", "--load-format dummy",
                 "--tensor-parallel-size 2"):
        assert part in joined
    assert "--pipeline-parallel-size" not in joined, "sizes of 1 are vLLM's default: not passed"
    env = environment(spec)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert (env["VLLM_CPU_OMP_THREADS_BIND"], env["HF_HUB_OFFLINE"]) == ("nobind", "1")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("port", 0, "port"), ("kv_space_gib", 1.5, "KV space"), ("model_dir", Path("/nonexistent"), "config.json")])
def test_a_bad_spec_is_refused(field, value, message):
    kwargs = {"model_dir": TINY, "name": "tiny"} | {field: value}
    with pytest.raises(ValueError, match=message):
        ServerSpec(**kwargs)


def test_the_startup_log_is_read():
    log = ("(EngineCore pid=1) INFO [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
           "model='assets/tiny', dtype=torch.bfloat16, max_seq_len=1024\n"
           "(EngineCore pid=1) INFO [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, "
           "Maximum concurrency for 1,024 tokens per request: 1024.00x\n")
    facts = startup_facts(log)
    assert (facts.kv_capacity_tokens, facts.dtype) == (1_048_576, "bfloat16")
    assert startup_facts("nothing here").kv_capacity_tokens is None


def test_a_failed_start_is_told_by_its_error_line():
    log = "INFO starting\nTraceback (most recent call last):\n  File x\nValueError: max_model_len is too large\n"
    assert last_error_line(log) == "ValueError: max_model_len is too large"


def test_a_twin_folder_holds_the_presets_config_and_a_tokenizer(tmp_path):
    folder = model_folder("random:qwen3-0.6b@2", root=tmp_path)
    config = json.loads((folder.path / "config.json").read_text())
    assert folder.dummy and folder.name == "random-qwen3-0.6b-2l"
    assert config["num_hidden_layers"] == 2 and config["head_dim"] == 128
    assert (folder.path / "tokenizer.json").is_file()


@pytest.mark.parametrize("spec", ["random:nope", "random:gpt2@x", "random:gpt2@99", "/no/such/folder"])
def test_a_bad_model_spec_is_refused(spec, tmp_path):
    with pytest.raises(ValueError):
        model_folder(spec, root=tmp_path)
