"""Accelerators: the published figures of common GPUs, and a measurement of the CPU kvviz runs on.

A GPU preset is a vendor's data-sheet figure (memory in GB = 10^9 bytes, bandwidth, dense 16-bit
tensor FLOP/s). A CPU has no data sheet worth trusting, so it is measured on request: memory
bandwidth with a large matrix-vector product, compute with a large matmul, and the result says
it was measured. What it says of a device (the measured CPU's name, a note, where a bandwidth figure came from) it
says as keyed texts (kvviz.i18n.said), rendered in the reader's language where they are shown. This module knows
nothing of models.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kvviz.base.device import Stopwatch, sync
from kvviz.base.errors import InputError
from kvviz.i18n import Said, said


@dataclass(frozen=True)
class Accelerator:
    """What bounds inference on a device: memory size, memory bandwidth and peak matmul rate."""

    key: str
    name: str  # a GPU's model name; the measured CPU's is a keyed text ("this CPU, 2 cores")
    memory_bytes: int
    bandwidth: float  # bytes per second
    peak_flops: float  # FLOP per second, dense, in peak_dtype
    peak_dtype: str
    default_dtype: str  # the 16-bit format the device runs best (fp16 where there is no bf16)
    note: str = ""  # a keyed text: a data sheet's caveat, or how the device was measured
    measured: bool = False

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte above which a kernel is compute-bound on this device (peak / bandwidth)."""
        return self.peak_flops / self.bandwidth


def _gpu(key: str, name: str, mem_gb: float, bw_tbs: float, tflops: float, note: Said | str = "",
         dtype: str = "bf16") -> Accelerator:
    return Accelerator(key, name, int(mem_gb * 1e9), bw_tbs * 1e12, tflops * 1e12, dtype, dtype, note)


ACCELERATORS: dict[str, Accelerator] = {
    a.key: a
    for a in (
        _gpu("h100-sxm", "H100 SXM", 80, 3.35, 989),
        _gpu("h100-pcie", "H100 PCIe", 80, 2.0, 756),
        _gpu("h200", "H200", 141, 4.8, 989),
        _gpu("a100-80gb-sxm", "A100 80GB SXM", 80, 2.039, 312),
        _gpu("a100-80gb-pcie", "A100 80GB PCIe", 80, 1.935, 312),
        _gpu("a100-40gb", "A100 40GB", 40, 1.555, 312),
        _gpu("l4", "L4", 24, 0.300, 121),
        _gpu("rtx-4090", "RTX 4090", 24, 1.008, 165, said("calc.accel.rtx_4090")),
        _gpu("a10g", "A10G", 24, 0.600, 70, said("calc.accel.a10g")),
        _gpu("t4", "T4", 16, 0.320, 65, said("calc.accel.t4"), dtype="fp16"),
        _gpu("mi300x", "MI300X", 192, 5.3, 1307),
    )
}
DEFAULT_ACCELERATOR = "h100-sxm"


def accelerator_names() -> list[str]:
    """Keys accepted by get_accelerator: the GPU presets, then 'cpu' (measured)."""
    return [*ACCELERATORS, "cpu"]


def get_accelerator(key: str) -> Accelerator:
    """The preset called `key`, or this machine's CPU measured now when key is 'cpu'."""
    name = str(key).strip().lower()
    if name == "cpu":
        return measure_cpu()
    if name not in ACCELERATORS:
        raise InputError("input.unknown_choice", name="accelerator", value=repr(key),
                         choices=", ".join(accelerator_names()))
    return ACCELERATORS[name]


def _physical_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _best_seconds(fn, repeats: int, device) -> float:
    fn()  # warm-up: first touch of the pages, thread-pool start, kernel selection
    sync(device)
    best = float("inf")
    for _ in range(repeats):
        watch = Stopwatch(device)
        fn()
        best = min(best, watch.elapsed())
    return best


def measure_device(device: str = "cpu", matvec_mib: int = 256, matmul_n: int = 2048, repeats: int = 5) -> Accelerator:
    """Measure a device with torch: bandwidth = matrix bytes / matvec time, compute = 2n^3 / matmul time.

    The matrix-vector product reads every byte of a `matvec_mib` MiB matrix once and does almost no
    arithmetic per byte, so its speed is the memory bandwidth a decode step can reach. The CPU is
    measured in fp32 (what kvviz runs there); a GPU in bf16.
    """
    import torch

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    cols = 4096
    rows = matvec_mib * 2**20 // (torch.finfo(dtype).bits // 8 * cols)
    a = torch.randn(rows, cols, device=dev, dtype=dtype)
    x = torch.randn(cols, device=dev, dtype=dtype)
    bandwidth = a.numel() * a.element_size() / _best_seconds(lambda: torch.mv(a, x), repeats, dev)
    m = torch.randn(matmul_n, matmul_n, device=dev, dtype=dtype)
    flops = 2 * matmul_n**3 / _best_seconds(lambda: torch.mm(m, m), repeats, dev)
    dtype_name = "bf16" if cuda else "fp32"
    if cuda:
        name, memory = torch.cuda.get_device_name(dev), torch.cuda.get_device_properties(dev).total_memory
        note = said("calc.accel.measured", dtype=dtype_name, mib=matvec_mib, n=matmul_n, k=repeats)
    else:
        name, memory = said("calc.accel.this_cpu", n=os.cpu_count()), _physical_memory_bytes()
        note = said("calc.accel.measured_cpu", threads=torch.get_num_threads(), dtype=dtype_name, mib=matvec_mib,
                    n=matmul_n, k=repeats)
    return Accelerator(dev.type, name, memory, bandwidth, flops, dtype_name, dtype_name, note=note, measured=True)


def bandwidth_source(accel: Accelerator) -> Said:
    """Where `accel`'s bandwidth figure comes from, "<device>: <how>": its note, or the data sheet."""
    return said("calc.accel.source", name=accel.name, how=accel.note or said("calc.accel.published"))


def stream_read_bandwidth(device: str = "cpu", mib: int = 512, repeats: int = 5) -> float:
    """Bytes per second of a plain streaming read: the sum of a `mib` MiB fp32 tensor (every byte read once, one
    add per four bytes), best of `repeats`. The physical ceiling a decode step's weight reads are held to; a
    matrix-vector product (measure_device) can fall short of it when its kernel does not stream."""
    import torch

    dev = torch.device(device)
    a = torch.ones(mib * 2**20 // 4, device=dev, dtype=torch.float32)
    return a.numel() * 4 / _best_seconds(lambda: a.sum(), repeats, dev)


def measure_cpu(matvec_mib: int = 256, matmul_n: int = 2048, repeats: int = 5) -> Accelerator:
    """This machine's CPU, measured now (see measure_device)."""
    return measure_device("cpu", matvec_mib, matmul_n, repeats)


_MEASURED: dict[str, Accelerator] = {}


def device_accelerator(device: str) -> Accelerator:
    """The roofline figures for a torch device: a GPU preset when its name matches one, else measured once."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev).lower()
        for accel in ACCELERATORS.values():
            words = accel.name.lower().replace("gb", " gb").split()
            if all(w in name for w in words if w not in ("gb",)):
                return accel
    key = str(dev)
    if key not in _MEASURED:
        _MEASURED[key] = measure_device(key, matvec_mib=128, matmul_n=1024, repeats=3)
    return _MEASURED[key]
