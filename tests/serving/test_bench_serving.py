"""`python -m kvviz.bench serving --quick`: vLLM started on tiny, kvviz's sweep, vLLM's own benchmark on the
same server and load, kvviz's engine one at a time; results and figure written like every other part."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from kvviz.bench.cli import main as bench_main

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_serving_part_runs_in_quick_mode(tmp_path):
    assert bench_main(["serving", "--quick", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "serving-quick.json").read_text())
    assert saved["command"].startswith("python -m kvviz.bench serving --quick")
    res = saved["results"]
    assert set(res["sweep_output_tokens_per_s"]) == {"1", "2"}
    assert res["kvviz_output_tokens_per_s"] > 0 and res["vllm_bench_output_tokens_per_s"] > 0
    assert len(res["kvviz_over_vllm_bench_each_round"]) == 1
    assert res["vllm_kv_capacity_tokens"] == 1_048_576
    rows = pd.read_csv(tmp_path / "serving-quick.csv")
    rows = rows[rows["round"].isna() | (rows["round"] == 1)].set_index("source", drop=False)
    assert {"kvviz sweep", "vllm bench serve", "kvviz engine (one at a time)"} <= set(rows["source"])
    # each side counts what was sent: 4 requests of 32 tokens at 2 in flight, all completed
    for source in ("vllm bench serve", "kvviz"):
        row = rows.loc[source]
        assert (row["concurrency"], row["completed"], row["failed"], row["output_tokens"]) == (2, 4, 0, 128), source
    assert bench_main(["figures", "--quick", "--out", str(tmp_path), "--no-png"]) == 0
    assert (tmp_path / "figures" / "serving.html").is_file()
