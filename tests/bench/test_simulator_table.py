"""`python -m kvviz.bench simulator`'s Markdown table, from rows written here: a point whose every request's output
reached the client in one read (no TPOT measured) reads "-" where its TPOT would be, the rest of its line intact."""

from __future__ import annotations

import pandas as pd

from kvviz.bench.simulator import markdown_table


def _row(load: str, measured_tpot_s: float | None) -> dict:
    row = {"model": "tiny", "load": load, "load_average_1m": 1.25}
    for name, measured, predicted in (("output_tokens_per_s", 400.0, 500.0), ("tpot_p50_s", measured_tpot_s, 0.004),
                                      ("ttft_p50_s", 0.020, 0.015), ("e2e_p50_s", 0.300, 0.330)):
        row[f"measured_{name}"], row[f"predicted_{name}"] = measured, predicted
        row[f"error_{name}"] = None if measured is None else predicted / measured - 1
    return row


def test_a_point_without_a_measured_tpot_reads_a_dash_and_its_other_figures():
    """Two points: TPOT 5 ms measured against 4 predicted (-20%), and none measured; 400 → 500 tok/s is +25%,
    TTFT 20 → 15 ms -25%, E2E 300 → 330 ms +10%."""
    points = pd.DataFrame([_row("closed 4", 0.005), _row("closed 3", None)])
    summary = {"mape": {"tiny": dict.fromkeys(("output_tokens_per_s", "tpot_p50_s", "ttft_p50_s", "e2e_p50_s"))},
               "held_out_points": {"tiny": 2}, "repeatability": {"tiny": {"points": 0}}}
    lines = markdown_table(points, summary).splitlines()
    assert lines[2] == "| tiny | closed 4 | 1.2 | 400 → 500 (+25%) | 5 → 4 (-20%) | 20 → 15 (-25%) | 300 → 330 (+10%) |"
    assert lines[3] == "| tiny | closed 3 | 1.2 | 400 → 500 (+25%) | - → 4 (-) | 20 → 15 (-25%) | 300 → 330 (+10%) |"
    assert lines[4] == "| **tiny: MAPE over 2 points** | | | - | - | - | - |"
