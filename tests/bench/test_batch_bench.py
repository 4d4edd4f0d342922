"""The batch part end to end in its quick mode: its rows, its summary with the machine's load, its figure."""

from __future__ import annotations

import json

import pandas as pd

from kvviz.bench.cli import main as bench_main
from kvviz.bench.figures import FIGURES, batch_figure, write_figures


def test_batch_part_quick_writes_rows_summary_and_figure(tmp_path):
    """`python -m kvviz.bench batch --quick`: tiny at B = 1, 2, 4, every cache as predicted, tokens/s = B / step,
    the load average kept, and the figure drawn from the CSV alone."""
    assert bench_main(["batch", "--quick", "--out", str(tmp_path)]) == 0
    rows = pd.read_csv(tmp_path / "batch-quick.csv")
    assert list(rows["batch"]) == [1, 2, 4] and set(rows["model"]) == {"tiny"}
    assert (rows["kv_bytes"] == rows["kv_bytes_predicted"]).all()
    assert (rows["tokens_per_s_total"] - rows["batch"] / rows["step_s"]).abs().max() < 1e-6
    assert (rows["prompt_tokens"] == 16).all() and (rows["new_tokens"] == 8).all()
    saved = json.loads((tmp_path / "batch-quick.json").read_text())
    assert saved["command"].startswith("python -m kvviz.bench batch --quick")
    result = saved["results"]
    assert len(result["load_average_before"]) == 3 and len(result["load_average_after"]) == 3
    assert result["models"]["tiny"]["kv_exact"] is True and result["models"]["tiny"]["batches"] == [1, 2, 4]
    assert result["measured"]["bandwidth_gb_s"] > 0
    assert "batch" in FIGURES
    written = write_figures(tmp_path, tmp_path / "figures", png=False, quick=True)
    assert tmp_path / "figures" / "batch.html" in written
    fig = batch_figure(rows)  # a validated plotly Figure from the saved rows
    assert len([t for t in fig.data if t.name == "measured step (median)"]) == 1
