"""kvviz.bench.parallel_serving's pure parts: the summary's medians and spread, the reading's words chosen by the
numbers (not by what theory expects), the table, and the CPU a process group spent. No vLLM here: the measured
run is the committed results/parallel/serving.json."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd

from kvviz.bench.parallel_serving import group_cpu_s, markdown, reading, summarize

TP1, TP2, DP2 = "tp1 pp1 dp1", "tp2 pp1 dp1", "tp1 pp1 dp2"


def rows(layout: str, concurrency: int, tokens_per_s: list[float], tpot_s: float) -> list[dict]:
    return [{"layout": layout, "concurrency": concurrency, "output_tokens_per_s": tps, "ttft_p50_s": 0.05,
             "ttft_p99_s": 0.09, "tpot_p50_s": tpot_s, "tpot_p99_s": tpot_s * 2, "itl_p50_s": tpot_s,
             "itl_p99_s": tpot_s * 3, "server_cpu_ms_per_token": 4.0, "completed": 8, "requests": 8,
             "load_average_before": 1.0, "load_average_after": 2.0} for tps in tokens_per_s]


def record(layout: str, ranks: list[tuple[str, int]]) -> dict:
    return {"layout": layout, "ranks": [{"rank": r, "kv_space_gib": 1.0, "kv_tokens": n} for r, n in ranks],
            "engines": {}, "bytes_per_token_per_rank": 512, "kv_heads_per_rank": 1, "stage_layers": [4],
            "ready_s": 40.0}


def frame() -> tuple[pd.DataFrame, list[dict]]:
    """tp1 against two layouts: tp2 faster per token at 1 in flight (10 ms against 20 ms) but slower at 8
    (100 against 300 tokens/s); dp2 slower at 1 (25 ms) and the most tokens/s at 8 (medians of 380, 400, 900)."""
    data = (rows(TP1, 1, [50, 40, 60], 0.020) + rows(TP1, 8, [300, 290, 310], 0.025)
            + rows(TP2, 1, [90, 100, 95], 0.010) + rows(TP2, 8, [100, 90, 110], 0.070)
            + rows(DP2, 1, [40, 38, 39], 0.025) + rows(DP2, 8, [380, 400, 900], 0.020))
    records = [record(TP1, [("0", 1_048_576)]), record(TP2, [("TP0", 2_097_152), ("TP1", 2_097_152)]),
               record(DP2, [("DP0", 1_048_576), ("DP1", 1_048_576)])]
    return pd.DataFrame(data), records


def test_summary_medians_and_spread():
    data, records = frame()
    s = summarize(data, records)
    tps = s[DP2]["levels"][8]["output_tokens_per_s"]
    assert (tps["median"], tps["min"], tps["max"], tps["n"]) == (400, 380, 900, 3)
    assert s[TP2]["ranks"][1] == {"rank": "TP1", "kv_space_gib": 1.0, "kv_tokens": 2_097_152}
    assert s[TP1]["load_average_1m"]["median"] == 1.5, "the load average over the runs, before and after each"


def test_reading_follows_the_numbers():
    """Each comparison word and the winners come from the medians: tp2 is 'faster' at 1 in flight (0.50× tp1's
    TPOT), dp2 'slower' (1.25×); the lowest TPOT is tp2's, the most tokens/s dp2's, so no 'no split paid'."""
    data, records = frame()
    text = reading(summarize(data, records))
    tp2 = text[text.index("tp2 (load average"):]
    assert "its TPOT was 10.0 ms, 0.50× tp1's (faster)" in tp2
    assert "0.33× tp1's" in tp2, "tp2's 100 tokens/s against tp1's 300"
    dp2 = text[text.index("dp2 (load average"):]
    assert "1.25× tp1's (slower)" in dp2 and "1.33× tp1's" in dp2
    assert "Lowest TPOT with 1 in flight: tp2; most tokens/s with 8: dp2." in text
    assert "no split paid" not in text


def test_reading_when_tp1_wins_both():
    """When tp1 has both the lowest TPOT and the most tokens/s, the reading says no split paid for itself."""
    data, records = frame()
    slow = data.assign(output_tokens_per_s=data["output_tokens_per_s"].where(data["layout"] == TP1, 1.0),
                       tpot_p50_s=data["tpot_p50_s"].where(data["layout"] == TP1, 1.0))
    assert "no split paid for its communication" in reading(summarize(slow, records))
    assert "没有哪种切分" in reading(summarize(slow, records), "zh")


def test_markdown_has_a_row_per_layout_and_level():
    data, records = frame()
    s = summarize(data, records)
    result = {"command": "python -m kvviz.bench.parallel_serving", "machine": {"cpu_model": "x", "isa": []},
              "results": {"layouts": s, "reading": {"en": reading(s), "zh": reading(s, "zh")},
                          "load_average_before": [1, 1, 1], "load_average_after": [2, 2, 2]}}
    table = [line for line in markdown(result).splitlines() if line.startswith("| tp") or line.startswith("| dp")]
    assert len(table) == 6
    assert table[-1].startswith("| dp2 | 8 | 400 (380-900) |")
    assert "TP0 2,097,152 · TP1 2,097,152" in table[2]


SPINNERS = """
import subprocess, sys, time
SPIN = "import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass\\n"
child = subprocess.Popen([sys.executable, "-c", SPIN + "print('child', flush=True)\\ntime.sleep(60)"])
exec(SPIN)
print("leader", flush=True)
time.sleep(60)
"""


def test_group_cpu_counts_every_process_of_the_group():
    """A group of its own (a leader and the child it starts, as vLLM's API server starts its engine) that spent
    0.3 s of CPU in each process: the sum counts both, and nothing of this process's group. The group is its own
    so that no other process ending mid-test can take its CPU out of the sum (as pytest's other workers did)."""
    leader = subprocess.Popen([sys.executable, "-c", SPINNERS], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert sorted(leader.stdout.readline().strip() for _ in range(2)) == ["child", "leader"]  # both spun
        spent = group_cpu_s(leader.pid)
        members = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _group_of(p) == leader.pid]
        assert len(members) == 2
        assert 0.55 <= spent < 0.6 + 2 * 0.5  # 0.3 + 0.3 spun, plus each interpreter's start-up (well under 0.5 s)
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


def _group_of(proc: Path) -> int | None:
    try:
        return os.getpgid(int(proc.name))
    except (ProcessLookupError, ValueError):
        return None
