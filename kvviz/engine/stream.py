"""kvviz's own matrix-vector kernel for a CPU decode step: one row of input times a weight, reading the weight front
to back at nearly a plain streaming read's speed, where oneDNN's and torch's kernels read it at half that or less.

Why. A decode step on a CPU is the weights read once; its speed is the bandwidth its products reach. On a 2-core
EPYC (AVX-512 BF16, no AMX), over the Qwen2.5-0.5B twin's products in bf16 (988 MB a pass), interleaved with a plain
streaming read (a.sum(), the physical ceiling) in 9 rounds: oneDNN's prepacked product read at 0.59 of the read just
before it, torch.mv at about 0.27, this kernel at 0.80; SmolLM2's fp32 products 0.46 (oneDNN) against 0.77. What
made the difference (stream_gemv.c): each thread walks its band of rows one row after the next, so the weight is
one sequential stream per core, which the hardware prefetcher follows, with x held in L1. Walking four rows side by
side (four streams a core, each a row of 1.8 KB long: the common way to share x's loads) read at 0.58 in bf16; a
software prefetch on top of the one-stream walk did not help (0.75-0.81).

The kernel is C with x86 intrinsics (stream_gemv.c), built here once per machine by the C compiler that inductor
uses anyway into kvviz's cache folder, and called through ctypes, which lets go of the GIL for the call.
-march=native picks its path (path() says which a build took): AVX-512 where the CPU has it, with AVX512-BF16's
dot product where it has that too and bf16 widened to fp32 where it does not; else AVX2 with FMA, in 256-bit
vectors, bf16 widened by a mask and a shift against x split once per product, with a software prefetch 1 KB ahead
(on a Zen 3 EPYC: 0.81-0.84 of the read, against 0.71-0.76 widened value by value; the one-stream walk is the same
on both). Its threads are torch's own: the library asks for
OpenMP, and the runtime it finds is the one torch loaded (libgomp.so.1), so a step's products and torch's
operators share one pool of threads. Where the CPU has neither AVX-512 nor AVX2 with FMA, there is no compiler or
the build fails, it is not on offer, and kvviz.engine.regions times the others only.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import torch
from torch import Tensor

from kvviz.base.cpu import this_cpu

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("stream_gemv.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
_FUNCTIONS = {torch.bfloat16: "kvviz_gemv_bf16", torch.float32: "kvviz_gemv_f32"}


def library_dir() -> Path:
    """Where the built kernel is kept, for this user on this machine (beside inductor's cache: XDG_CACHE_HOME, else
    ~/.cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kvviz" / "stream"


def compiler() -> str | None:
    """The C compiler: CC, else gcc, else cc, where one is on PATH."""
    named = os.environ.get("CC")
    return shutil.which(named) if named else shutil.which("gcc") or shutil.which("cc")


def build(out_dir: Path, extra_flags: tuple[str, ...] = ()) -> Path:
    """Build stream_gemv.c into `out_dir` (once for a given source, compiler, flags and CPU: the file's name says
    them) and return the library's path. Raises OSError or CalledProcessError where it cannot."""
    cc = compiler()
    if cc is None:
        raise OSError("no C compiler (CC, gcc or cc) on PATH")  # internal: library() logs it, the kernel stays off
    flags = (*FLAGS, *extra_flags)
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30,  # noqa: S603
                             check=True).stdout
    key = hashlib.sha256("\n".join([SOURCE.read_text(), version, " ".join(flags), str(this_cpu())]).encode())
    target = out_dir / f"stream_gemv-{key.hexdigest()[:16]}.so"
    if not target.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out_dir) as tmp:  # built aside, then renamed: other processes may race
            built = Path(tmp) / target.name
            subprocess.run([cc, *flags, "-o", str(built), str(SOURCE)], capture_output=True, text=True,  # noqa: S603
                           timeout=120, check=True)
            built.replace(target)
    return target


def load(path: Path) -> ctypes.CDLL:
    """The built library with its two functions' argument types set."""
    lib = ctypes.CDLL(str(path))
    for name in _FUNCTIONS.values():
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_long, ctypes.c_long, ctypes.c_int]
        fn.restype = ctypes.c_int  # 0, or -1: no memory for x's split (AVX2, bf16)
    lib.kvviz_gemv_path.argtypes = []
    lib.kvviz_gemv_path.restype = ctypes.c_char_p
    return lib


def supported_cpu() -> bool:
    """Whether this CPU runs the kernel: an x86-64 with AVX-512 (Foundation and BW: the masked bf16 loads) or
    with AVX2 and FMA."""
    isa = set(this_cpu()["isa"])
    return platform.machine() in ("x86_64", "AMD64") and ({"avx512f", "avx512bw"} <= isa or {"avx2", "fma"} <= isa)


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL | None:
    """The kernel built for this machine and loaded, once per process; None where it cannot run here (the reason
    logged once)."""
    if not supported_cpu():
        log.info("kvviz's streaming matrix-vector kernel needs an x86-64 CPU with AVX-512 or AVX2 and FMA; "
                 "not on offer")
        return None
    try:
        return load(build(library_dir()))
    except (OSError, subprocess.SubprocessError) as e:
        lines = str(getattr(e, "stderr", None) or e).strip().splitlines()  # a compiler's last line says why
        log.warning("kvviz's streaming matrix-vector kernel could not be built, so it is not on offer: %s",
                    lines[-1] if lines else type(e).__name__)
        return None


def path(lib: ctypes.CDLL | None = None) -> str | None:
    """Which of the kernel's paths a build (`lib`, else this machine's) compiled, as the build itself says:
    "avx512-bf16" (AVX512-BF16's dot product for bf16), "avx512" (bf16 widened to fp32), "avx2" (AVX2 and FMA,
    bf16 widened); None where there is no build here."""
    lib = lib or library()
    return None if lib is None else lib.kvviz_gemv_path().decode()


def available(dtype: torch.dtype) -> bool:
    """Whether the kernel can run a product of `dtype` weights here."""
    return dtype in _FUNCTIONS and library() is not None


def gemv(x: Tensor, weight: Tensor, bias: Tensor | None, lib: ctypes.CDLL | None = None) -> Tensor | None:
    """x @ weight.T + bias for one row of x ([..., in], in `weight`'s dtype), by the kernel (`lib`, else this
    machine's build), with torch's thread count; None where it does not apply (more than one row, another dtype,
    a weight or bias not contiguous, no kernel here): the caller takes another kernel."""
    lib = lib or library()
    rows, cols = weight.shape
    if (lib is None or weight.dtype not in _FUNCTIONS or x.dtype != weight.dtype or x.numel() != cols
            or not weight.is_contiguous() or (bias is not None and (bias.dtype != weight.dtype
                                                                    or not bias.is_contiguous()))):
        return None
    vector = x.reshape(-1).contiguous()
    out = torch.empty(rows, dtype=weight.dtype)
    status = getattr(lib, _FUNCTIONS[weight.dtype])(weight.data_ptr(), vector.data_ptr(),
                                                    None if bias is None else bias.data_ptr(), out.data_ptr(), rows,
                                                    cols, torch.get_num_threads())
    if status != 0:
        raise MemoryError(f"kvviz's matrix-vector kernel found no memory for a product of {cols} columns")
    return out.view(*x.shape[:-1], rows)
