"""What every benchmark part shares: the prompts, the description of the machine, and writing a part's rows
(CSV) and summary (JSON, with the machine and the command). Timed regions sync the device through
kvviz.base.device, as the engine does.

Nothing under kvviz.bench except figures.py imports more than torch, transformers, pandas and kvviz's
core, so the measuring parts run on a GPU machine with nothing else installed.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import pandas as pd
import torch

from kvviz.base.cpu import CpuUse, this_cpu, usable_cpus

LESSON_PROMPT = "用三句话解释 LLM 推理中的 KV Cache。"
LONG_PROMPT = (
    "The KV cache keeps every layer's keys and values, so that decoding a token does not recompute the "
    "history of the sequence. Prefill reads the whole prompt at once; decode produces one token at a time. "
) * 8  # about 430 tokens of the bundled model: with 512 new ones it stays inside its 1,024 context


@lru_cache(maxsize=1)
def _bandwidths() -> dict:
    """Measured once per process: a plain streaming read (the physical ceiling) and torch.mv's fp32 matvec (what
    the engine's roofline uses), GB/s, on the CPU and on the GPU when there is one."""
    from kvviz.calc.hardware import measure_device, stream_read_bandwidth

    out = {"cpu_stream_read_gb_s": stream_read_bandwidth("cpu") / 1e9,
           "cpu_matvec_gb_s": measure_device("cpu", matmul_n=256, repeats=3).bandwidth / 1e9}
    if torch.cuda.is_available():
        out["gpu_stream_read_gb_s"] = stream_read_bandwidth("cuda") / 1e9
        out["gpu_matvec_gb_s"] = measure_device("cuda", matmul_n=256, repeats=3).bandwidth / 1e9
    return {k: round(v, 2) for k, v in out.items()}


_since = CpuUse()  # the CPU's use since this process started measuring, or since the last result was written


def machine() -> dict:
    """What the figures were measured on, and what they depend on: the CPU's model and ISA flags, the cores this
    process may use and the torch threads it ran with, torch's CPU kernel level, the load averages when the
    result was written (1, 5 and 15 minutes), who used the CPUs while it was measured (this run, other
    processes, the hypervisor's steal: shares of all CPU time since the previous result or the start), the
    bandwidths measured (a streaming read and torch.mv), the GPU."""
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
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def command(argv: Sequence[str] | None) -> str:
    return "python -m kvviz.bench " + " ".join(sys.argv[1:] if argv is None else argv)


def write_results(out: Path, tag: str, frame: pd.DataFrame, summary: dict, argv: Sequence[str] | None) -> None:
    """out/<tag>.csv holds every measured row; out/<tag>.json the summary, the machine and the command."""
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / f"{tag}.csv", index=False)
    (out / f"{tag}.json").write_text(json.dumps(
        {"machine": machine(), "command": command(argv), "results": summary}, indent=2) + "\n")
    print(json.dumps({tag: summary}, indent=2), flush=True)
