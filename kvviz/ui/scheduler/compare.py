"""The same load on the local vLLM and in the simulator: the server's running and waiting counts and KV usage
over time (its /metrics, as kvviz.serving.metrics_reader samples them) against the simulator's, step by step.

Both series are put on one clock, seconds from the load's start. The server's samples are stamped from when
polling began, which is one scrape before the load starts (the load generator waits for the first sample), so
they are moved back by that first scrape's duration. The simulator's clock starts at its first arrival; each
step's counts hold from its start to its end (running counts the requests that finish at the step's end, which
ran in it), and everything is 0 while the engine is idle and after the last step. KV usage is blocks in use over
the pool's blocks, as vLLM's kv_cache_usage_perc counts it (cached blocks nobody holds count as free). Knows no
gradio.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from kvviz.i18n import t
from kvviz.serving.metrics_reader import Sample
from kvviz.sim.simulate import StepTrace
from kvviz.ui.figures import COLORS, GRID, INK, Figure, base_layout, empty

COLUMNS = ["source", "t_s", "running", "waiting", "kv_usage"]
VLLM, SIM = "vllm", "sim"
SHOWN = ("running", "waiting", "kv_usage")


def server_series(samples: Sequence[Sample]) -> pd.DataFrame:
    """The server's samples that have all three series, on the load's clock."""
    if not samples:
        return pd.DataFrame(columns=COLUMNS)
    shift = samples[0].scrape_s or 0.0
    rows = [(VLLM, s.t_s - shift, s.running, s.waiting, s.kv_usage) for s in samples
            if None not in (s.running, s.waiting, s.kv_usage)]
    return pd.DataFrame(rows, columns=COLUMNS)


def sim_series(trace: Sequence[StepTrace], num_blocks: int) -> pd.DataFrame:
    """One row per simulated step at its start, and one of all 0 at the end of each step that the next does not
    follow at once (the engine idle until the next arrival) and of the last."""
    rows = []
    for i, s in enumerate(trace):
        after = trace[i + 1] if i + 1 < len(trace) else None
        rows.append((SIM, s.start_s, s.running, s.waiting, s.kv_blocks_used / num_blocks))
        end = s.start_s + s.duration_s
        if after is None or after.start_s > end + 1e-9:
            rows.append((SIM, end, 0, 0, 0.0))
    return pd.DataFrame(rows, columns=COLUMNS)


def merged(samples: Sequence[Sample], trace: Sequence[StepTrace], num_blocks: int) -> pd.DataFrame:
    """Both series in one frame (source: "vllm" or "sim")."""
    parts = [f for f in (server_series(samples), sim_series(trace, num_blocks)) if not f.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def peaks(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per source, the highest running, waiting and KV usage it showed."""
    return {source: {name: float(part[name].max()) for name in SHOWN}
            for source, part in frame.groupby("source")}


def comparison_figure(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """Three panels over time (running, waiting, KV usage %), the server's samples over the simulator's steps."""
    if frame.empty:
        return empty(t("scheduler.fig.none", lang))
    style = {VLLM: {"mode": "lines+markers", "line": {"color": COLORS[1], "width": 2, "shape": "hv"},
                    "marker": {"size": 4}},
             SIM: {"mode": "lines", "line": {"color": COLORS[0], "width": 2, "shape": "hv", "dash": "dot"}}}
    data = []
    for row, name in enumerate(SHOWN, start=1):
        scale = 100 if name == "kv_usage" else 1
        for source, part in frame.groupby("source", sort=False):
            data.append({"type": "scatter", "x": part["t_s"].tolist(), "y": (part[name] * scale).tolist(),
                         "name": t(f"scheduler.fig.{source}", lang), "legendgroup": source, "showlegend": row == 1,
                         "xaxis": "x", "yaxis": "y" if row == 1 else f"y{row}", **style[source]})
    layout = base_layout(t("scheduler.fig.title", lang), t("scheduler.fig.x", lang), "", height=520)
    axis = {"gridcolor": GRID, "zerolinecolor": GRID, "linecolor": INK, "automargin": True, "rangemode": "tozero"}
    for row, name in enumerate(SHOWN, start=1):
        top = 1 - (row - 1) / 3
        layout["yaxis" if row == 1 else f"yaxis{row}"] = {**axis, "domain": [top - 0.28, top],
                                                          "title": {"text": t(f"scheduler.fig.{name}", lang)},
                                                          "anchor": "x"}
    layout["xaxis"]["anchor"] = f"y{len(SHOWN)}"  # the time axis under the lowest panel, shared by all three
    layout["legend"] = {"orientation": "h", "yanchor": "bottom", "y": 1.04, "xanchor": "left", "x": 0.0}
    return {"data": data, "layout": layout}
