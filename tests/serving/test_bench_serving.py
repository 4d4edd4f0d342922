"""`python -m kvviz.bench serving --quick`: vLLM started on tiny, kvviz's sweep, vLLM's own benchmark on the
same server and load, both clients on the timed server, kvviz's engine one at a time; results and figure written
like every other part."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from kvviz.bench.cli import main as bench_main
from kvviz.serving.vllm import cpu_fp32

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_serving_part_runs_in_quick_mode(tmp_path):
    assert bench_main(["serving", "--quick", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "serving-quick.json").read_text())
    assert saved["command"].startswith("python -m kvviz.bench serving --quick")
    res = saved["results"]
    assert set(res["sweep_output_tokens_per_s"]) == {"1", "2"}
    assert res["kvviz_output_tokens_per_s"] > 0 and res["vllm_bench_output_tokens_per_s"] > 0
    assert len(res["kvviz_over_vllm_bench_each_round"]) == 1
    assert res["vllm_kv_capacity_tokens"] == (524_288 if cpu_fp32() else 1_048_576)  # tiny: 2,048 or 1,024 B/token
    rows = pd.read_csv(tmp_path / "serving-quick.csv")
    rows = rows[rows["round"].isna() | (rows["round"] == 1)].set_index("source", drop=False)
    assert {"kvviz sweep", "vllm bench serve", "kvviz engine (one at a time)"} <= set(rows["source"])
    # each side counts what was sent: 4 requests of 32 tokens at 2 in flight, all completed
    for source in ("vllm bench serve", "kvviz"):
        row = rows.loc[source]
        assert (row["concurrency"], row["completed"], row["failed"], row["output_tokens"]) == (2, 4, 0, 128), source
    # the same requests to both clients against the timed server, where the truth is known: 8 in flight, 8 requests
    # of 32 tokens, each row with its errors against the construction (TTFT 300 ms)
    for source in ("kvviz, timed server", "vllm bench serve, timed server"):
        row = rows.loc[source]
        assert (row["concurrency"], row["completed"], row["output_tokens"]) == (8, 8, 256), source
        assert row["ttft_error"] == pytest.approx(row["ttft_p50_s"] / 0.3 - 1) and row["client_cpu_us_per_token"] > 0
    timed = res["timed_server"]["levels"]["8"]
    assert set(timed) == {"kvviz", "vllm_bench"} and timed["kvviz"]["ttft_error"]["n"] == 1
    assert res["finding"].startswith("Against the timed server")
    assert bench_main(["figures", "--quick", "--out", str(tmp_path), "--no-png"]) == 0
    assert (tmp_path / "figures" / "serving.html").is_file()
