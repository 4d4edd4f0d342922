"""Every benchmark result records the machine it was measured on: the CPU's model and the ISA flags that decide
its kernels, the cores and threads, the load, and the bandwidth measured two ways."""

from __future__ import annotations

import json

import pytest

from kvviz.base.cpu import cpu_record, lacks_bf16
from kvviz.bench.common import write_results
from kvviz.calc.machine import machine

pytestmark = pytest.mark.alone  # times what the machine does: run with nothing beside it (README)

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


def test_a_cpu_lacks_bf16_without_avx512_bf16_or_amx_bf16():
    """The Xeon above has both; an AVX2 EPYC's flags (Zen 3, as /proc/cpuinfo lists them) have neither; one of
    the two is enough; off x86 the flags are not read (False: nothing worked around)."""
    epyc = "model name\t: AMD EPYC\nflags\t\t: fpu sse sse2 avx avx2 fma bmi2 vaes vpclmulqdq\n"
    assert lacks_bf16(CPUINFO, "x86_64") is False
    assert lacks_bf16(epyc, "x86_64") is True
    assert lacks_bf16(epyc.replace("avx2", "avx2 avx512f avx512_bf16"), "x86_64") is False
    assert lacks_bf16(epyc.replace("avx2", "avx2 amx_bf16"), "AMD64") is False
    assert lacks_bf16(epyc, "aarch64") is False


def test_a_result_carries_the_machine(tmp_path):
    """A part's JSON holds the machine: threads within the usable cores, three load averages, both bandwidths
    measured (positive), and the streaming read no slower than a third of the matvec (both read memory once)."""
    write_results(tmp_path, "probe", __import__("pandas").DataFrame({"x": [1]}), {"ok": True}, ["probe"])
    record = json.loads((tmp_path / "probe.json").read_text())["machine"]
    moving = ("load_average", "cpu_share_this_run", "cpu_share_others", "cpu_share_steal")
    assert {k: v for k, v in record.items() if k not in moving} == {
        k: v for k, v in machine().items() if k not in moving}
    assert 1 <= record["cpu_threads"] and record["usable_cpus"] <= record["logical_cpus"]
    assert len(record["load_average"]) == 3
    assert record["cpu_stream_read_gb_s"] > 0 and record["cpu_matvec_gb_s"] > 0
    assert record["cpu_stream_read_gb_s"] > record["cpu_matvec_gb_s"] / 3


STAT = """cpu  1000 50 200 5000 30 7 3 40 0 0
cpu0 500 25 100 2500 15 3 2 20 0 0
"""


def test_proc_stat_is_read_as_busy_steal_and_all():
    """By hand from the line above: busy = user 1000 + nice 50 + system 200 + irq 7 + softirq 3 = 1260; steal 40;
    all = busy + idle 5000 + iowait 30 + steal 40 = 6330 (guest time is inside user already)."""
    from kvviz.base.cpu import stat_ticks

    assert stat_ticks(STAT) == {"busy": 1260, "steal": 40, "all": 6330}


def _burn(seconds: float) -> None:
    import time

    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_cpu_use_tells_this_run_from_other_processes():
    """A busy second in this process counts as this run's; a busy second in a process this one has not waited
    for counts as others'. On 2 CPUs a busy second on one is about half the CPU time of that second: each share
    is asked to reach 0.15 (room for a machine busy with something else), and this run's share while it only
    sleeps to stay under 0.1."""
    import subprocess
    import sys
    import time

    from kvviz.base.cpu import CpuUse

    use = CpuUse()
    _burn(1.0)
    mine = use.share()
    assert mine["cpu_share_this_run"] >= 0.15, mine
    other = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 1.5\n"
                              "while time.process_time() < end: pass"])
    try:
        time.sleep(0.3)  # the child starts
        use = CpuUse()
        time.sleep(1.0)
        theirs = use.share()
    finally:
        other.wait()
    assert theirs["cpu_share_others"] >= 0.15 and theirs["cpu_share_this_run"] < 0.1, theirs
