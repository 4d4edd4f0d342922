"""The static mode's decode step: a cache preallocated for the whole run and a decode step compiled for it.

gpt-fast's recipe through transformers: a StaticCache holds every layer's keys and values for `length`
tokens from the first forward pass on, written in place, so a decode step always sees the same shapes at the
same addresses and torch.compile can turn it into one fixed program (on CUDA a CUDA graph, replayed without
launching kernels one by one from Python; on a CPU fused C++ kernels around the matrix kernels timed fastest on
the machine, on weights packed for them: kvviz.engine.regions). Per-step
Python and launch overhead go, and what is left of a step is reading the weights and the cache.

A compiled step is built once per (model, device, dtype, cache length) and kept beside the model for later
requests of the same shape (static_decoder); lengths come in buckets (static_length) so that requests of about
the same length share one. Compiling costs seconds to minutes, so it happens once, is measured, and the engine
reports it apart from the run's own times. The prefill stays eager: prompts vary in length, and one compile
per prompt length would cost more than it saves.

Requests on one device run one at a time (kvviz.engine.queueing), so one decoder's cache serves one run at a
time and is reset when the next one starts. This module knows models, caches and torch.compile; it does not
time runs, build events or decide when to stop (kvviz.engine.loop and kvviz.engine.meter do).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kvviz.base.errors import KvvizError, first_line
from kvviz.calc.arch import Architecture
from kvviz.engine import decode_attention, regions
from kvviz.engine.request import MAX_STATIC_TOKENS
from kvviz.engine.steps import forward_kwargs, new_static_cache, next_token_logits, prefill
from kvviz.i18n import Said, said

log = logging.getLogger(__name__)

SMALLEST_BUCKET = 64  # the smallest static length: shorter runs share one compiled step
WARM_CALLS = 3  # the first call compiles; under CUDA graphs the second records the graph and the third replays it


def compile_cache_dir() -> Path:
    """Where inductor keeps what it compiled, for this user on this machine: kvviz's folder in the user's cache
    (XDG_CACHE_HOME, else ~/.cache), not inductor's default under /tmp, which a reboot or a new container empties."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kvviz" / "inductor"


def persist_compile_cache() -> None:
    """Point inductor at compile_cache_dir() unless TORCHINDUCTOR_CACHE_DIR is set already (by the user, or by
    inductor itself once it has compiled in this process). With its FX graph cache there, a later process pays
    only the tracing: on tiny, 59 s for the first compile of a shape against 16 s in a new process afterwards
    (2 busy cores)."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(compile_cache_dir()))


def _compile_key(model: torch.nn.Module, length: int) -> str:
    """What a compile is told apart by on this machine: the model, device, dtype, cache length and (on a CPU)
    the thread count, as static_decoder keys its decoders."""
    device, dtype, length, threads = _decoder_key(model, length)
    name = getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__
    return f"{name}|{device}|{dtype}|{length}|{threads}"


def _decoder_key(model: torch.nn.Module, length: int) -> tuple[str, torch.dtype, int, int]:
    """A compiled step's shape: device, dtype, cache length and (on a CPU) the thread count, which inductor
    writes into the kernels it compiles."""
    param = next(model.parameters())
    threads = torch.get_num_threads() if param.device.type == "cpu" else 0
    return str(param.device), param.dtype, length, threads


def _times_file() -> Path:
    return compile_cache_dir().parent / "compile_times.json"


def last_compile_s(model: torch.nn.Module, length: int) -> float | None:
    """Seconds the last compile of this step took on this machine (compile_times.json beside the compile cache),
    None when none is recorded: what the page says to expect before it compiles again."""
    try:
        return float(json.loads(_times_file().read_text())[_compile_key(model, length)])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _record_compile_s(model: torch.nn.Module, length: int, seconds: float) -> None:
    """Keep how long this compile took; a record that cannot be written costs only the next estimate."""
    path = _times_file()
    try:
        times = json.loads(path.read_text()) if path.exists() else {}
        times = times if isinstance(times, dict) else {}
        times[_compile_key(model, length)] = round(seconds, 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(times, indent=1, sort_keys=True))
    except (OSError, ValueError):
        pass


def has_decoder(model: torch.nn.Module, length: int) -> bool:
    """Whether this process holds a compiled step for `model` at `length` already (no compile to wait for)."""
    with _DECODERS_LOCK:
        return _decoder_key(model, length) in _DECODERS.get(model, {})


class StaticCacheFull(KvvizError, RuntimeError):
    """A static-mode run asked for more positions than its cache was allocated with."""


def static_length(tokens: int, context: int | None = None) -> int:
    """The static cache's length for a run of `tokens` tokens (prompt + new): the next power of two from
    SMALLEST_BUCKET up, and no longer than the model's context. Powers of two keep the number of compiled
    steps small (one per bucket) at the cost of at most twice the cache a run needs."""
    length = max(SMALLEST_BUCKET, 1 << max(tokens - 1, 0).bit_length())
    return min(length, context) if context else length


def static_refusal(arch: Architecture, needed: int, cache_tokens: int) -> Said | None:
    """Why a run of `needed` tokens (prompt + new) of a model of `arch` cannot run on a static cache of
    cache_tokens; None when it can.

    Models with sliding-window or chunked layers are refused: transformers' static window layer counts its
    length in a Python int, so the compiled step is recompiled at every token until torch.compile gives up and
    runs it eagerly (measured on tiny Mistral and Gemma-2 models: 8 compiles, then eager). Models with linear-
    attention, Mamba or convolution state have not been checked here and are refused too.
    """
    if arch.n_sliding:
        return said("static.windowed", name=arch.name, n=arch.n_sliding)
    if arch.state is not None:
        return said("static.state", name=arch.name, kind=arch.state.kind)
    if needed > MAX_STATIC_TOKENS:
        return said("static.too_long", needed=needed, most=MAX_STATIC_TOKENS)
    if needed > cache_tokens:
        return said("static.too_short", needed=needed, length=cache_tokens)
    return None


@dataclass(frozen=True)
class CompileSettings:
    """How torch.compile is asked to build the step on one kind of device, and the words for it. `inductor` is
    set in inductor's config while the step compiles (some settings, as freezing, are read from there when dynamo
    traces: passed as a torch.compile option they arrive too late). `packs`: the step is traced with the linears
    prepacked and the decoder layers as one region (kvviz.engine.regions.compiling)."""

    kwargs: dict = field(hash=False)
    label: str
    inductor: dict = field(default_factory=dict, hash=False)
    packs: bool = False


# inductor checks every external kernel's output size, stride and alignment at every call unless told not to: on
# a CPU step of ~100 custom-operator calls (kvviz.engine.regions) that is 1.04x decode tokens/s on the Qwen2.5-0.5B
# twin in bf16 without the checks (10 interleaved rounds, two loaded copies, a 2-core Zen 3 EPYC: 0.997-1.093 by
# round). The operators' shapes are their fake implementations', which tests/engine/test_regions.py checks.
UNCHECKED = {"size_asserts": False, "alignment_asserts": False}
GCC_KNOWS_EVERY_ISA = 11  # the first GCC with every x86 ISA flag inductor passes (-mamx-tile and -mamx-bf16 came in 11)


def trusts_isa(version_text: str, dumped: str) -> bool:
    """Whether inductor may take the CPU's ISA flags on trust, from what the C++ compiler says of itself (`CXX
    --version`'s text, `CXX -dumpversion`'s): yes for GCC 11 or newer, which compiles code for every ISA
    inductor picks from those flags. Otherwise (clang, an older GCC, an answer not understood) inductor checks
    each ISA itself by building a test program with it, as it does by default."""
    if "clang" in version_text.lower() or not any(w in version_text for w in ("g++", "GCC", "gcc")):
        return False
    major = dumped.strip().split(".")[0]
    return major.isdigit() and int(major) >= GCC_KNOWS_EVERY_ISA


_ISA_TRUSTED: bool | None = None


def compiler_trusts_isa() -> bool:
    """trusts_isa for the compiler inductor calls on this machine (asked once per process: about 10 ms).

    Why it matters: before its first CPU compile in a process inductor checks every x86 ISA the CPU reports
    (AVX2, AVX-512, AVX-512 VNNI and BF16, AMX) by compiling a test program with torch's headers and loading it
    in a fresh Python: 11 s of a 48 s first compile on a 2-core EPYC with an empty cache (each later process
    still pays 1.2 s of loading). Only the compiler can fail those checks, so with a compiler known to pass
    them they are skipped, and the ISA inductor picks is the same (torch's own CPU capability decides it)."""
    global _ISA_TRUSTED
    if _ISA_TRUSTED is None:
        import platform

        from torch._inductor import config

        cxx = config.cpp.cxx[1] or "g++"
        try:
            asked = [subprocess.run([cxx, flag], capture_output=True, text=True, timeout=30,  # noqa: S603 (inductor's own compiler)
                                    check=False).stdout
                     for flag in ("--version", "-dumpversion")]
        except (OSError, subprocess.SubprocessError):
            asked = ["", ""]
        _ISA_TRUSTED = platform.machine() in ("x86_64", "AMD64") and trusts_isa(*asked)
    return _ISA_TRUSTED


def compile_settings(device: torch.device) -> CompileSettings:
    """The compile for `device`. CUDA: CUDA graphs (what mode="reduce-overhead" asks for), so a step is one graph
    launch instead of hundreds of kernel launches from Python. CPU: inductor, with the linear layers calling
    the kernel measured fastest on this machine (oneDNN, MKL or torch.mv) on weights kvviz prepacks, and the
    decoder layers traced once for all (kvviz.engine.regions; the patching is the decoder's, done while it
    compiles). Elsewhere (mps) inductor's default.

    Everywhere the guards on the model's modules are skipped: dynamo would otherwise check hundreds of module
    attributes before every call (0.2-0.4 ms a step measured on the CPU, a tenth of tiny's step). It is safe here
    because a decoder serves one model, in eval mode, whose weights never change.

    On a CPU this replaced inductor's freezing (weights made constants and prepacked by inductor, the linears that
    read one input concatenated): on a 2-core EPYC the Qwen2.5-0.5B twin's bf16 step compiled in 34-46 s that way
    and in 15-19 s this way, its step about 2 ms slower (30.5 against 28.5 ms: the Python around the operators),
    SmolLM2's fp32 step 6 ms faster (docs/benchmarks.md). Without any prepacking a bf16 step ran 12x slower.
    inductor's C++ wrapper (cpp_wrapper), which would remove that Python, cannot yet generate a nested region;
    what is left of it is trimmed: no size and alignment checks after each operator (UNCHECKED), and the new
    token's attention in fp32 over the cached key-value heads (kvviz.engine.decode_attention, while traced).
    Where the C++ compiler is known to build for every ISA the CPU reports, inductor takes them on trust
    (compiler_trusts_isa) instead of test-compiling each."""
    skip = {"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}
    if device.type == "cuda":
        return CompileSettings({"options": {"triton.cudagraphs": True, **skip}}, "reduce-overhead (CUDA graphs)")
    if device.type == "cpu":
        trusted = {"cpp.vec_isa_ok": True} if compiler_trusts_isa() else {}
        return CompileSettings({"options": skip}, "inductor, linears on the kernel timed fastest, one layer traced "
                               "for all, the new token's attention in fp32 over grouped heads",
                               {"post_grad_custom_pre_pass": regions.GROUP_LINEARS, **UNCHECKED, **trusted},
                               packs=True)
    return CompileSettings({"options": skip}, "inductor default")


# The child's whole program: a two-operation function compiled as inductor compiles a CPU step (the same ISA setting),
# so that its one C++ kernel asks for the same precompiled header as the step's kernels do (the header's key is
# the compiler's command line, which names the ISA and the flags, not the kernel).
_HEADER_CHILD = """
import sys, torch
from torch._inductor import config
with config.patch({"cpp.vec_isa_ok": True} if sys.argv[1] == "1" else {}):
    torch.compile(lambda x: x * 2 + 1, dynamic=False)(torch.randn(1024))
"""


def header_built() -> bool:
    """Whether inductor's precompiled C++ header is on this machine already, built since this torch was installed
    (inductor keeps it under its default folder whatever TORCHINDUCTOR_CACHE_DIR says, one per compiler command
    line). A header left by another torch is not counted: the step would build its own."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    installed = Path(torch.__file__).stat().st_mtime
    folder = Path(default_cache_dir()) / "precompiled_headers"
    return any(h.stat().st_mtime > installed for h in folder.glob("*.gch"))


def prebuild_header() -> subprocess.Popen | None:
    """Start building inductor's precompiled header in a child process, so that it is built on the second core
    while this process traces the step on the first; None where there is nothing to build (the header is there,
    or inductor is told not to precompile it) or the child cannot start.

    Why: before the first C++ kernel of a compile inductor precompiles torch's kernel header (once per machine and
    torch, about 150 MB), and waits for it: 6.6 s of a first compile on a 2-core EPYC, 8.7 s on a 2-core Xeon, at a
    point where the other core has nothing to do (dynamo's tracing runs on one). The child compiles a two-operation
    function the way the step compiles, which builds the same header under inductor's file lock: if the step
    reaches its first kernel first, it waits on the lock for the child's build instead of starting its own, and
    nothing is built twice. The child is not waited for; a thread reaps it."""
    from torch._inductor import config

    if not config.cpp_cache_precompile_headers or header_built():
        return None
    trusted = "1" if compiler_trusts_isa() else "0"
    try:
        child = subprocess.Popen([sys.executable, "-c", _HEADER_CHILD, trusted],  # noqa: S603 (this Python, our code)
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as exc:
        log.info("inductor's header is built by the compile itself (%s)", first_line(exc))
        return None
    threading.Thread(target=child.wait, name="kvviz-header-reaper", daemon=True).start()
    return child


def _count(group: str, name: str) -> int:
    from torch._dynamo.utils import counters

    return int(counters[group][name])


def compiled_graphs() -> int:
    """Graphs torch.compile has built in this process so far (dynamo's count): a reused step adds none."""
    return _count("stats", "unique_graphs")


class StaticDecoder:
    """A compiled decode step and the static cache it runs on, for one model, device, dtype and cache length.

    Building one compiles it (the caller times that: kvviz.engine.meter); graphs is how many graphs the compile
    built (1 for a model traced whole), packed how many linear layers it calls on prepacked weights (on a CPU:
    all of them). prefill() resets the cache and reads the prompt eagerly; decode() runs the compiled step for one
    token; uses counts the runs it served.
    """

    def __init__(self, model: torch.nn.Module, length: int) -> None:
        self.length = length
        self.device = next(model.parameters()).device
        self.settings = compile_settings(self.device)
        self.cache = new_static_cache(model, length)
        self._kwargs = forward_kwargs(model, self.cache)
        self._position = 0  # tokens in the cache
        self.uses = 0
        self._cuda = self.device.type == "cuda"
        # One compiled program per decoder, with its own recompile budget: dynamic=False specialises it to this
        # cache's shapes, which never change.
        graphs = compiled_graphs()
        self.shared_region = self.settings.packs  # the decoder layers traced once for all (a CPU step)
        try:
            self.packed = self._warm_up(model, reuse=self.shared_region)
        except Exception as exc:  # any failure to trace the shared region: compile the general way
            if not self.shared_region:
                raise
            log.info("the decoder layers' shared region did not compile (%s); each layer is traced", first_line(exc))
            self.shared_region = False
            self.packed = self._warm_up(model, reuse=False)
        self.graphs = compiled_graphs() - graphs

    def _warm_up(self, model: torch.nn.Module, reuse: bool) -> int:
        """Allocate the cache with an eager one-token prefill (so no compiled program traces the allocation),
        compile the step (on a CPU with the decoder layers traced once for all where reuse is asked and they
        allow it: kvviz.engine.regions) and run it WARM_CALLS times, then empty the cache again. The linears it
        calls on prepacked weights."""
        # isolate_recompiles is torch 2.13's; older releases (the GPU machine's 2.11) compile without it
        isolate = {"isolate_recompiles": True} if "isolate_recompiles" in inspect.signature(
            torch.compile).parameters else {}
        self._step = torch.compile(next_token_logits, dynamic=False, **isolate, **self.settings.kwargs)
        self.reset()
        token = torch.zeros((1, 1), dtype=torch.long, device=self.device)  # [1, 1]
        prefill(model, token, self.cache)
        self._position = 1
        patched = regions.compiling(model, reuse=reuse) if self.settings.packs else contextlib.nullcontext(0)
        attention = decode_attention.switched(model) if self.settings.packs else contextlib.nullcontext(0)
        with torch._inductor.config.patch(self.settings.inductor), patched as packed, attention:
            for _ in range(WARM_CALLS):
                logits = self.decode(model, token)
        logits[0, 0].item()  # waits for the device: the warm-up is done when this returns
        self.reset()
        return packed

    def reset(self) -> None:
        """Empty the cache (zeroed in place: its addresses are part of the compiled program)."""
        self.cache.reset()
        self._position = 0

    def prefill(self, model: torch.nn.Module, prompt_ids: torch.Tensor) -> torch.Tensor:
        """Reset the cache and read the whole prompt ([1, prompt_len]) into it, eagerly. Logits [1, vocab]."""
        self.reset()
        self._check_room(prompt_ids.shape[1])
        self.uses += 1
        logits = prefill(model, prompt_ids, self.cache)
        self._position = prompt_ids.shape[1]
        return logits

    def decode(self, model: torch.nn.Module, token: torch.Tensor) -> torch.Tensor:
        """The compiled step: feed `token` ([1, 1]); attention reads the cache, which is written in place.
        Logits [1, vocab]; under CUDA graphs they live in the graph's output buffer until the next step."""
        self._check_room(1)
        if self._cuda:
            torch.compiler.cudagraph_mark_step_begin()  # the previous step's outputs may be overwritten now
        logits = self._step(model, token, **self._kwargs)
        self._position += 1
        return logits

    def _check_room(self, tokens: int) -> None:
        if self._position + tokens > self.length:
            raise StaticCacheFull("static.full", length=self.length, written=self._position, more=tokens)


# Decoders live beside their model and go with it: keyed weakly by the model, then by (device, dtype, length,
# CPU threads). The thread count is part of the shape on a CPU: inductor writes it into the kernels it compiles.
_DECODERS: weakref.WeakKeyDictionary[torch.nn.Module, dict[tuple[str, torch.dtype, int, int], StaticDecoder]] = (
    weakref.WeakKeyDictionary())
_DECODERS_LOCK = threading.Lock()


def static_decoder(model: torch.nn.Module, length: int) -> tuple[StaticDecoder, bool]:
    """The decoder for `model` with a static cache of `length` tokens, and whether it was reused: built and
    compiled on first use (seconds to minutes), handed out again to every later request of the same shape."""
    key = _decoder_key(model, length)
    with _DECODERS_LOCK:
        decoders = _DECODERS.setdefault(model, {})
        if key in decoders:
            return decoders[key], True
        persist_compile_cache()
        started = time.perf_counter()
        if key[0] == "cpu":
            prebuild_header()
        decoder = StaticDecoder(model, length)
        _record_compile_s(model, length, time.perf_counter() - started)
        decoders[key] = decoder
        return decoder, False


def decoder_lengths(model: torch.nn.Module) -> list[int]:
    """The cache lengths of the compiled steps this process holds for `model`, shortest first."""
    with _DECODERS_LOCK:
        return sorted(key[2] for key in _DECODERS.get(model, {}))


def forget_decoders() -> None:
    """Drop every compiled step and static cache, and torch.compile's own record of them (benchmarks and tests
    free memory with it between models)."""
    with _DECODERS_LOCK:
        _DECODERS.clear()
    torch._dynamo.reset()
    regions.forget_packed()
