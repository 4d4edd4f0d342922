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


X86 = ("x86_64", "amd64")
BF16_ISA = ("avx512_bf16", "amx_bf16")  # x86 instructions that compute on bf16 values themselves


def lacks_bf16(cpuinfo: str | None = None, arch: str | None = None) -> bool:
    """Whether this is an x86 CPU without bf16 instructions (neither AVX512-BF16 nor AMX-BF16): torch and vLLM's
    CPU build then compute bf16 in software, every operand converted to fp32 and back. cpuinfo, arch: another
    machine's /proc/cpuinfo text and platform.machine(), for a test. False off x86 (ARM's bf16 is not read here)
    and where /proc/cpuinfo cannot be read: what is not known to be missing is not worked around."""
    if (arch or platform.machine()).lower() not in X86:
        return False
    try:
        text = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
    except OSError:
        return False
    return not set(cpu_record(text)["isa"]) & set(BF16_ISA)


def cpu_name() -> str:
    """This CPU's model in words, the machine's architecture where none is known."""
    return this_cpu()["cpu_model"] or platform.machine()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), else all the machine has."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def stat_ticks(stat: str) -> dict[str, int]:
    """The machine's CPU time so far from /proc/stat's text (its first, all-CPU line), in clock ticks: busy
    (user, nice, system, irq, softirq), steal (taken by the hypervisor for other guests) and all of it."""
    fields = [int(x) for x in stat.splitlines()[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return {"busy": user + nice + system + irq + softirq, "steal": steal,
            "all": user + nice + system + idle + iowait + irq + softirq + steal}


class CpuUse:
    """Who used this machine's CPUs from now until share() is read: this process (and the children it waited
    for), every other process, and the hypervisor (steal). A benchmark's figures are its own only when the
    others' shares are near zero; load averages alone miss steal, which a shared host takes unseen inside the
    guest. Shares of all the CPU time that passed; None where /proc/stat cannot be read."""

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[dict[str, int], float] | None:
        try:
            ticks = stat_ticks(Path("/proc/stat").read_text())
        except (OSError, ValueError, IndexError):
            return None
        t = os.times()
        return ticks, t.user + t.system + t.children_user + t.children_system

    def share(self) -> dict:
        now = self._read()
        if self._start is None or now is None:
            return {"cpu_share_this_run": None, "cpu_share_others": None, "cpu_share_steal": None}
        (t0, own0), (t1, own1) = self._start, now
        hz = os.sysconf("SC_CLK_TCK")
        total = max(t1["all"] - t0["all"], 1)
        own = (own1 - own0) * hz
        busy = t1["busy"] - t0["busy"]
        return {"cpu_share_this_run": round(min(own / total, 1.0), 3),
                "cpu_share_others": round(max(busy - own, 0) / total, 3),
                "cpu_share_steal": round((t1["steal"] - t0["steal"]) / total, 3)}


def mem_available() -> int | None:
    """Bytes of memory the kernel says a new allocation can have now (Linux's MemAvailable: free pages plus
    the cache it can drop); None where /proc/meminfo cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
