"""This machine's CPU as figures depend on it: its model, the ISA flags that decide which kernels run, and the
CPUs this process may use. Read from /proc/cpuinfo and the scheduler's affinity; platform's words where there
is no /proc. One place for the benchmarks' machine record and the simulator's calibration (what it is tied to).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile",
             "amx_bf16", "amx_int8")  # what decides which kernels a CPU step can run


def cpu_record(cpuinfo: str) -> dict:
    """The CPU's model and the ISA flags that matter, from /proc/cpuinfo's text (its first processor)."""
    fields = dict(line.split(":", 1) for line in cpuinfo.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    return {"cpu_model": fields.get("model name"), "isa": [f for f in ISA_FLAGS if f in flags]}


def this_cpu() -> dict:
    """cpu_record of this machine; platform's processor name and no flags where /proc/cpuinfo cannot be read."""
    try:
        return cpu_record(Path("/proc/cpuinfo").read_text())
    except OSError:
        return {"cpu_model": platform.processor() or None, "isa": []}


def cpu_name() -> str:
    """This CPU's model in words, the machine's architecture where none is known."""
    return this_cpu()["cpu_model"] or platform.machine()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), else all the machine has."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
