"""The record of the machine a figure was measured on, which every measured result carries: the CPU's model and
ISA flags, the cores this process may use and the torch threads it ran with, torch's CPU kernel level, the load,
who else used the CPUs while it was measured, the bandwidths measured two ways, the GPU. The benchmarks and the
simulator's validation write it beside their results."""

from __future__ import annotations

import os
import platform
from functools import lru_cache

import torch

from kvviz.base.cpu import CpuUse, this_cpu, usable_cpus
from kvviz.calc.hardware import measure_device, stream_read_bandwidth


@lru_cache(maxsize=1)
def _bandwidths() -> dict:
    """Measured once per process: a plain streaming read (the physical ceiling) and torch.mv's fp32 matvec (what
    the engine's roofline uses), GB/s, on the CPU and on the GPU when there is one."""
    out = {"cpu_stream_read_gb_s": stream_read_bandwidth("cpu") / 1e9,
           "cpu_matvec_gb_s": measure_device("cpu", matmul_n=256, repeats=3).bandwidth / 1e9}
    if torch.cuda.is_available():
        out["gpu_stream_read_gb_s"] = stream_read_bandwidth("cuda") / 1e9
        out["gpu_matvec_gb_s"] = measure_device("cuda", matmul_n=256, repeats=3).bandwidth / 1e9
    return {k: round(v, 2) for k, v in out.items()}


_since = CpuUse()  # the CPU's use since this process started measuring, or since the last record was made


def machine() -> dict:
    """What the figures were measured on, and what they depend on: the CPU's model and ISA flags, the cores this
    process may use and the torch threads it ran with, torch's CPU kernel level, the load averages when the
    record was made (1, 5 and 15 minutes), who used the CPUs while it was measured (this run, other processes,
    the hypervisor's steal: shares of all CPU time since the previous record or the start), the bandwidths
    measured (a streaming read and torch.mv), the GPU."""
    global _since
    import transformers

    info = {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "platform": platform.platform(), **this_cpu(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "logical_cpus": os.cpu_count(),
            "usable_cpus": usable_cpus(),
            "cpu_threads": torch.get_num_threads(),
            "load_average": [round(x, 2) for x in os.getloadavg()], **_since.share(), **_bandwidths()}
    _since = CpuUse()
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    gpu_multiprocessors=props.multi_processor_count, cuda=torch.version.cuda)
    return info
