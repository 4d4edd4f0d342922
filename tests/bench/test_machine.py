"""Every benchmark result records the machine it was measured on: the CPU's model and the ISA flags that decide
its kernels, the cores and threads, the load, and the bandwidth measured two ways."""

from __future__ import annotations

import json

from kvviz.base.cpu import cpu_record
from kvviz.bench.common import machine, write_results

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_tile amx_bf16

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_tile amx_bf16
"""


def test_the_cpu_record_reads_the_model_and_the_flags_that_matter():
    """By hand from the text above: the model name, and of ISA_FLAGS those listed (no VNNI, no AMX int8), in
    ISA_FLAGS' order; flags that decide nothing (sse, fpu) left out."""
    assert cpu_record(CPUINFO) == {"cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
                                   "isa": ["avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_tile",
                                           "amx_bf16"]}
    assert cpu_record("") == {"cpu_model": None, "isa": []}


def test_a_result_carries_the_machine(tmp_path):
    """A part's JSON holds the machine: threads within the usable cores, three load averages, both bandwidths
    measured (positive), and the streaming read no slower than a third of the matvec (both read memory once)."""
    write_results(tmp_path, "probe", __import__("pandas").DataFrame({"x": [1]}), {"ok": True}, ["probe"])
    record = json.loads((tmp_path / "probe.json").read_text())["machine"]
    assert record == machine()  | {"load_average": record["load_average"]}
    assert 1 <= record["cpu_threads"] and record["usable_cpus"] <= record["logical_cpus"]
    assert len(record["load_average"]) == 3
    assert record["cpu_stream_read_gb_s"] > 0 and record["cpu_matvec_gb_s"] > 0
    assert record["cpu_stream_read_gb_s"] > record["cpu_matvec_gb_s"] / 3
