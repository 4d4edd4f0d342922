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
    VllmError,
    command,
    environment,
    last_error_line,
    startup_facts,
    worker_threads,
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


def test_vllms_older_compile_cache_unless_the_caller_chose(monkeypatch):
    """vLLM 0.32's AOT compile cache never loads what it saved (every start compiled again): off, unless the
    caller set VLLM_USE_AOT_COMPILE themselves."""
    monkeypatch.delenv("VLLM_USE_AOT_COMPILE", raising=False)
    assert environment(ServerSpec(TINY, "tiny"))["VLLM_USE_AOT_COMPILE"] == "0"
    monkeypatch.setenv("VLLM_USE_AOT_COMPILE", "1")
    assert environment(ServerSpec(TINY, "tiny"))["VLLM_USE_AOT_COMPILE"] == "1"



def test_one_worker_computes_in_the_engine_cores_process_on_the_cpu_build(monkeypatch):
    """vLLM's CPU build with one worker: VLLM_ENABLE_V1_MULTIPROCESSING=0 (the worker in the engine core's
    process); with tensor, pipeline or data parallel ranks, with vLLM's per-step log asked for (its step times
    cover the model only in a worker process), on a CUDA machine, or where the caller set the variable, none from
    kvviz (the caller's value goes through as it is)."""
    import kvviz.serving.vllm as vllm

    key = "VLLM_ENABLE_V1_MULTIPROCESSING"
    monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(vllm, "has_cuda_gpu", lambda: False)
    assert environment(ServerSpec(TINY, "tiny"))[key] == "0"
    for ranks in ({"tensor_parallel": 2}, {"pipeline_parallel": 2}, {"data_parallel": 2},
                  {"extra_args": ("--enable-logging-iteration-details",)}):
        assert key not in environment(ServerSpec(TINY, "tiny", **ranks)), ranks
    assert environment(ServerSpec(TINY, "tiny", extra_args=("--max-num-seqs", "8")))[key] == "0"
    monkeypatch.setenv(key, "1")
    assert environment(ServerSpec(TINY, "tiny"))[key] == "1"
    monkeypatch.delenv(key)
    monkeypatch.setattr(vllm, "has_cuda_gpu", lambda: True)
    assert key not in environment(ServerSpec(TINY, "tiny"))

@pytest.mark.parametrize(("workers", "cpus", "threads"), [
    (1, 2, 1),  # these machines: one core computes, one is left to the engine core, API server and client
    (2, 2, 1),  # tp 2 on 2 cores: no core to spare, still one thread each
    (1, 16, 15), (4, 16, 3),  # vLLM's auto binding on 16 cores: 16 - 4 reserved = 12, 3 for each of 4 workers
    (1, 1, 1),
])
def test_each_worker_computes_on_the_cores_less_one_per_worker(workers, cpus, threads):
    assert worker_threads(workers, cpus) == threads


def test_the_thread_count_goes_to_vllm_unless_the_caller_set_one(monkeypatch):
    """On the CPU build the server's OMP_NUM_THREADS is worker_threads' count for its workers (tp × pp × dp);
    a caller's own OMP_NUM_THREADS is kept; with a CUDA GPU (its build) none is set, vLLM sets its workers'."""
    import kvviz.serving.vllm as vllm

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(vllm, "usable_cpus", lambda: 8)
    monkeypatch.setattr(vllm, "has_cuda_gpu", lambda: False)
    assert environment(ServerSpec(TINY, "tiny"))["OMP_NUM_THREADS"] == "7"
    assert environment(ServerSpec(TINY, "tiny", tensor_parallel=2))["OMP_NUM_THREADS"] == "3"
    assert environment(ServerSpec(TINY, "tiny", tensor_parallel=2, pipeline_parallel=2))["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert environment(ServerSpec(TINY, "tiny"))["OMP_NUM_THREADS"] == "5"
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(vllm, "has_cuda_gpu", lambda: True)
    assert "OMP_NUM_THREADS" not in environment(ServerSpec(TINY, "tiny"))


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


def _tensor_elements(weights: Path) -> int:
    """Elements in a safetensors file, read from its header (8-byte length, then JSON): not from kvviz's count."""
    raw = weights.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    total = 0
    for name, entry in header.items():
        if name != "__metadata__":
            n = 1
            for dim in entry["shape"]:
                n *= dim
            total += n
    return total


@pytest.fixture
def cpu_build(monkeypatch):
    """The memory check as on a machine without a GPU (where vLLM's CPU build runs)."""
    import kvviz.serving.vllm as vllm

    monkeypatch.setattr(vllm, "has_cuda_gpu", lambda: False)


def test_the_memory_a_start_needs_is_counted_from_the_weights_and_the_kv_space(cpu_build, vllm_auto_dtype):
    """tiny's weights at 2 bytes each, as many elements as its safetensors file holds (its lm_head is tied to the
    embedding, stored once), once per data-parallel engine; KV: 4 GiB for each of 2 × 2 × 2 = 8 workers."""
    from kvviz.serving.vllm import check_memory, memory_need

    elements = _tensor_elements(TINY / "model.safetensors")
    spec = ServerSpec(TINY, "tiny", kv_space_gib=4, tensor_parallel=2, pipeline_parallel=2, data_parallel=2)
    assert memory_need(spec) == (elements * 2 * 2, 32 * 2**30)
    need = elements * 4 + 32 * 2**30
    check_memory(spec, available=need)  # exactly enough: it may start
    # 32 GiB = 34.360 GB; tiny's 5.1 M elements x 2 B x 2 engines = 0.0205 GB; one byte short of the sum
    with pytest.raises(VllmError, match=r"^tiny cannot start on this machine: it needs 34.380 GB of memory "
                                        r"\(0.0205 GB of weights in 16 bits for 2 engine\(s\), 34.360 GB of KV space "
                                        r"for 8 worker\(s\)\) and 34.380 GB is available$"):
        check_memory(spec, available=need - 1)


def test_a_twin_too_big_for_the_machine_is_refused_before_vllm_starts(cpu_build, vllm_auto_dtype, tmp_path):
    """DeepSeek-V3 has 671 B parameters (its technical report): 1.34 TB in 16 bits, refused in one line by the
    app's engine before any process starts; the engine stays stopped."""
    from kvviz.serving.local import STOPPED, LocalEngine
    from kvviz.serving.vllm import memory_need

    folder = model_folder("random:deepseek-v3", root=tmp_path)
    weights, kv = memory_need(ServerSpec(folder.path, folder.name, dummy=True))
    assert weights == pytest.approx(671e9 * 2, rel=0.002) and kv == 2**30
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").write_text("")  # an environment that is there, never run
    engine = LocalEngine(venv=tmp_path / "venv")
    with pytest.raises(VllmError, match=r"^random-deepseek-v3 cannot start on this machine: it needs 1,343.\d+ GB"):
        engine.start("random:deepseek-v3")
    assert engine.status().state == STOPPED


def test_in_fp32_the_weights_take_4_bytes_and_the_refusal_says_32_bits(cpu_build, vllm_fp32):
    """tiny at 4 bytes a parameter, one engine: 5.1 M elements x 4 B = 0.0205 GB; KV 1 GiB = 1.074 GB."""
    from kvviz.serving.vllm import check_memory, memory_need

    elements = _tensor_elements(TINY / "model.safetensors")
    spec = ServerSpec(TINY, "tiny")
    assert memory_need(spec) == (elements * 4, 2**30)
    with pytest.raises(VllmError, match=r"\(0.0205 GB of weights in 32 bits for 1 engine\(s\), 1.074 GB of KV space"):
        check_memory(spec, available=elements * 4 + 2**30 - 1)
    assert memory_need(ServerSpec(TINY, "tiny", extra_args=("--dtype", "bfloat16")))[0] == elements * 2


def test_kvviz_asks_for_fp32_where_the_cpu_has_no_bf16_instructions(cpu_build, monkeypatch):
    """Unset, the CPU decides (its flags: kvviz.base.cpu.lacks_bf16); KVVIZ_VLLM_CPU_DTYPE=auto leaves vLLM's
    choice and =fp32 asks for fp32 anywhere; a dtype in the options given is theirs; a bad value is one line."""
    import kvviz.serving.vllm as vllm
    from kvviz.base.errors import InputError

    monkeypatch.delenv(vllm.DTYPE_ENV, raising=False)

    def dtype_of(*extra: str) -> list[str]:
        cmd = command(ServerSpec(TINY, "tiny", extra_args=extra), Path("python"))
        return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--dtype"]

    for lacks, expected in ((True, ["float32"]), (False, [])):
        monkeypatch.setattr(vllm, "lacks_bf16", lambda lacks=lacks: lacks)
        assert dtype_of() == expected
    assert dtype_of("--dtype", "bfloat16") == ["bfloat16"]  # the caller's own choice, not a second --dtype
    monkeypatch.setenv(vllm.DTYPE_ENV, "fp32")
    assert dtype_of() == ["float32"]
    monkeypatch.setattr(vllm, "lacks_bf16", lambda: True)
    monkeypatch.setenv(vllm.DTYPE_ENV, "auto")
    assert dtype_of() == []
    monkeypatch.setenv(vllm.DTYPE_ENV, "bf17")
    with pytest.raises(InputError, match=r"^KVVIZ_VLLM_CPU_DTYPE=bf17 is not a dtype kvviz asks of vLLM's CPU build: "
                                         r"fp32, or auto"):
        command(ServerSpec(TINY, "tiny"), Path("python"))


def test_the_status_line_says_why_kvviz_asked_for_fp32(cpu_build, monkeypatch):
    """The reason follows the cause: the CPU's flags, the environment variable, or nothing where kvviz asked
    nothing (vLLM's choice, the caller's --dtype); in both languages, inside the ready line."""
    import kvviz.serving.vllm as vllm
    from kvviz.i18n import said
    from kvviz.serving.local import READY, EngineStatus
    from kvviz.serving.vllm import StartupFacts, VllmServer

    monkeypatch.delenv(vllm.DTYPE_ENV, raising=False)
    monkeypatch.setattr(vllm, "lacks_bf16", lambda: True)
    server = VllmServer(ServerSpec(TINY, "tiny"), None, None, -1, Path("log"))
    server.facts = StartupFacts(524_288, "float32")
    server.dtype_why = vllm.cpu_dtype_why(server.spec.extra_args)
    status = EngineStatus(READY, "tiny", TINY, "http://127.0.0.1:8011", 35.0, 524_288, 1, dtype=server.dtype_text())
    assert status.line().endswith("in float32, which kvviz asked for: this CPU has no bf16 instructions, and vLLM's "
                                  "default bf16 would run in software, several times slower)")
    assert status.line().render("zh").endswith("数据类型 float32，由 kvviz 指定：此 CPU 没有 bf16 指令，"
                                               "vLLM 默认的 bf16 只能用软件计算，会慢数倍）")
    assert vllm.cpu_dtype_why(("--dtype", "float32")) is None  # the caller's choice: no reason of kvviz's
    monkeypatch.setenv(vllm.DTYPE_ENV, "fp32")
    assert vllm.cpu_dtype_why() == said("vllm.status.fp32_env", name="KVVIZ_VLLM_CPU_DTYPE")
    assert str(vllm.cpu_dtype_why()) == "KVVIZ_VLLM_CPU_DTYPE=fp32 says so"
    monkeypatch.setenv(vllm.DTYPE_ENV, "auto")
    server.dtype_why = vllm.cpu_dtype_why()
    assert server.dtype_why is None and server.dtype_text() == "float32"  # vLLM's own choice: the type alone


def test_a_quantised_checkpoint_is_not_counted_at_16_bits(tmp_path):
    from kvviz.serving.vllm import memory_need

    config = json.loads((TINY / "config.json").read_text()) | {"quantization_config": {"quant_method": "awq"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert memory_need(ServerSpec(tmp_path, "awq")) is None
