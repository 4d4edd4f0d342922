"""Figures: plain functions from data (a DataFrame or a report) to a plotly figure specification.

A figure here is the JSON-ready dict plotly.js draws ({"data": [...], "layout": {...}}), built
without plotly's Python validation: the calculator redraws five of them on every slider move and
must answer within tens of milliseconds. `to_plotly` turns a spec into a plotly Figure (for export
and for tests, which validate every spec that way). Figures have axis titles with units and a
transparent background with mid-grey text, so they read in light and dark themes alike. Nothing here
computes the numbers it draws.
"""

from __future__ import annotations

import pandas as pd

from kvviz.engine.request import MODE_LABELS

INK = "#8a8f98"  # mid grey: legible on white and on near-black
GRID = "rgba(138, 143, 152, 0.25)"
COLORS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d"]

Figure = dict


def base_layout(title: str, x: str, y: str, height: int = 400, **extra) -> dict:
    """kvviz's figure layout: transparent, mid-grey ink, axis titles, the legend below the x axis's title."""
    axis = {"gridcolor": GRID, "zerolinecolor": GRID, "linecolor": INK, "automargin": True}
    return {
        "title": {"text": title, "font": {"size": 15}}, "height": height,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
        "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)", "font": {"color": INK},
        # Below the axis title, so long series names never run into the plot's title on a narrow plot.
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0.0},
        "xaxis": {**axis, "title": {"text": x}}, "yaxis": {**axis, "title": {"text": y}}, **extra,
    }


def vline(x: float, text: str, dash: str = "dash", top: bool = True) -> tuple[dict, dict]:
    """A vertical rule across the plot at data x, and its label at the top or bottom (linear axes only)."""
    shape = {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
             "line": {"color": INK, "dash": dash, "width": 1}}
    note = {"x": x, "xref": "x", "y": 1 if top else 0, "yref": "paper", "text": text, "showarrow": False,
            "xanchor": "right" if top else "left", "yanchor": "top" if top else "bottom",
            "font": {"color": INK, "size": 11}}
    return shape, note


def hline(y: float, text: str) -> tuple[dict, dict]:
    shape = {"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": y, "y1": y,
             "line": {"color": INK, "dash": "dash", "width": 1}}
    note = {"x": 0, "xref": "paper", "y": y, "yref": "y", "text": text, "showarrow": False,
            "xanchor": "left", "yanchor": "bottom", "font": {"color": INK, "size": 11}}
    return shape, note


def empty(message: str) -> Figure:
    """A blank figure that says why it is blank."""
    layout = base_layout("", "", "", height=200, annotations=[{"text": message, "showarrow": False, "x": 0.5, "y": 0.5,
                                                              "xref": "paper", "yref": "paper",
                                                              "font": {"color": INK, "size": 14}}])
    layout["xaxis"] |= {"visible": False}
    layout["yaxis"] |= {"visible": False}
    return {"data": [], "layout": layout}


def to_plotly(fig: Figure):
    """The spec as a validated plotly Figure (raises on any property plotly does not know)."""
    import plotly.graph_objects as go

    return go.Figure(fig)


def token_latency(frame: pd.DataFrame, title: str = "Per-token latency") -> Figure:
    """Time from the previous token (ms) for each output token, prefill (the first token) apart from decode.

    frame: per-token rows (kvviz.engine.loop.TokenEvent fields) with a `mode` or `run` column to group by.
    The y axis is logarithmic because the first token waits for the whole prompt.
    """
    data = []
    key = "run" if "run" in frame and frame["run"].nunique() > 1 else "mode"
    for i, (name, group) in enumerate(frame.groupby(key, sort=False) if len(frame) else []):
        color = COLORS[i % len(COLORS)]
        label = f"run {name}" if key == "run" else MODE_LABELS.get(name, str(name))
        decode = group[group["phase"] == "decode"]
        first = group[group["phase"] == "prefill"]
        data.append({"type": "scatter", "mode": "lines+markers", "x": decode["index"].tolist(),
                     "y": (decode["dt_s"] * 1e3).tolist(), "name": f"{label}: decode", "marker": {"size": 4},
                     "line": {"color": color, "width": 1.5},
                     "hovertemplate": "token %{x}: %{y:,.2f} ms<extra></extra>"})
        if len(first):
            data.append({"type": "scatter", "mode": "markers", "x": first["index"].tolist(),
                         "y": (first["dt_s"] * 1e3).tolist(), "name": f"{label}: first token (TTFT)",
                         "marker": {"size": 12, "symbol": "diamond", "color": color},
                         "hovertemplate": "first token after %{y:,.2f} ms (queue + prefill)<extra></extra>"})
    layout = base_layout(title, "output token index", "ms since the previous token (log)")
    layout["yaxis"] |= {"type": "log"}
    return {"data": data, "layout": layout}


def kv_growth(frame: pd.DataFrame) -> Figure:
    """KV-cache bytes measured from the cache tensors against the memory model's prediction, per step."""
    mib = 2**20
    data = [{"type": "scatter", "mode": "lines", "x": frame["seq_len"].tolist(),
             "y": (frame["kv_bytes"] / mib).tolist(), "name": "measured (cache tensors)",
             "line": {"color": COLORS[0], "width": 2}},
            {"type": "scatter", "mode": "markers", "x": frame["seq_len"].tolist(),
             "y": (frame["kv_bytes_predicted"] / mib).tolist(), "name": "predicted (memory model)",
             "marker": {"color": COLORS[1], "size": 7, "symbol": "circle-open"}}]
    if "cuda_allocated_bytes" in frame and frame["cuda_allocated_bytes"].notna().any():
        data.append({"type": "scatter", "mode": "lines", "x": frame["seq_len"].tolist(),
                     "y": (frame["cuda_allocated_bytes"] / mib).tolist(), "name": "CUDA allocator (whole run)",
                     "line": {"color": COLORS[2], "dash": "dot"}})
    return {"data": data, "layout": base_layout("KV cache per step: measured and predicted", "sequence length (tokens)",
                                            "KV cache (MiB, 2^20 bytes)")}


def cumulative_time(frame: pd.DataFrame, prediction: pd.DataFrame | None = None) -> Figure:
    """Seconds since the request against tokens generated, one line per mode; with the cache it is a
    straight line, without it a parabola. The roofline prediction (lower bound) is dashed beside it."""
    data = []
    for i, (mode, group) in enumerate(frame.groupby("mode", sort=False)):
        label = MODE_LABELS.get(mode, mode)
        data.append({"type": "scatter", "mode": "lines", "x": (group["index"] + 1).tolist(),
                     "y": group["t_s"].tolist(), "name": f"{label}: measured", "line": {"color": COLORS[i]}})
        if prediction is not None and len(prediction):
            column = f"{mode}_lower_bound_s"
            data.append({"type": "scatter", "mode": "lines", "x": (prediction["index"] + 1).tolist(),
                         "y": prediction[column].cumsum().tolist(), "name": f"{label}: roofline lower bound",
                         "line": {"color": COLORS[i], "dash": "dash"}})
    return {"data": data, "layout": base_layout("Total time: linear with the cache, quadratic without",
                                            "tokens generated", "seconds since the request")}


def step_work(prediction: pd.DataFrame) -> Figure:
    """The memory model's FLOPs per step in each mode that ran: flat with the cache, growing without; the static
    mode's steps attend over the whole preallocated cache, so they are flat at the cache's full length."""
    modes = [m for m in ("cached", "uncached", "static") if f"{m}_flops" in prediction]
    data = [{"type": "scatter", "mode": "lines", "x": prediction["seq_len"].tolist(),
             "y": (prediction[f"{m}_flops"] / 1e9).tolist(), "name": f"{MODE_LABELS[m]} (predicted)",
             "line": {"color": COLORS[i], "dash": "dot" if m == "static" else "solid"}} for i, m in enumerate(modes)]
    return {"data": data,
            "layout": base_layout("Work per step (predicted)", "sequence length (tokens)", "GFLOP per step")}


def decode_bandwidth(runs) -> Figure:
    """Each mode's decode bandwidth (bytes a step reads × steps per second) against the device's limit, dashed.

    runs: kvviz.engine.compare.ModeRun, in the order to draw; a mode without a bandwidth figure (too few tokens
    for a decode rate) is drawn as a labelled gap."""
    labels = [run.label for run in runs]
    achieved = [(run.summary.bandwidth_achieved or 0) / 1e9 for run in runs]
    text = [f"{run.summary.bandwidth_utilisation:.0%} of the limit" if run.summary.bandwidth_utilisation
            else "n/a" for run in runs]
    data = [{"type": "bar", "x": labels, "y": achieved, "text": text, "textposition": "outside",
             "marker": {"color": [COLORS[i % len(COLORS)] for i in range(len(runs))]},
             "hovertemplate": "%{x}: %{y:,.2f} GB/s<extra></extra>", "showlegend": False}]
    layout = base_layout("Decode bandwidth: achieved against the device's limit", "mode", "GB/s")
    limit = next((run.summary.bandwidth_bound for run in runs if run.summary.bandwidth_bound), None)
    if limit:
        shape, note = hline(limit / 1e9, f"limit {limit / 1e9:,.1f} GB/s")
        layout |= {"shapes": [shape], "annotations": [note]}
        layout["yaxis"] |= {"range": [0, max([limit / 1e9, *achieved]) * 1.2]}
    return {"data": data, "layout": layout}


PHASE_COLORS = {"queued": "#b279a2", "tokenize": "#72b7b2", "prefill": "#f58518", "decode": "#4c78a8"}


def lifecycle(phases: dict[str, float], frame: pd.DataFrame) -> Figure:
    """The request's life on one time axis: queued, tokenized, prefill, then each decode token as a tick."""
    t_acq = phases.get("device acquired", 0.0)
    t_tok = phases.get("tokenized", t_acq)
    t_pre = phases.get("prefill done", t_tok)
    t_end = frame["t_s"].iloc[-1] if len(frame) else phases.get("finished", t_pre)
    spans = [("queued", 0.0, t_acq), ("tokenize", t_acq, t_tok), ("prefill", t_tok, t_pre),
             ("decode", t_pre, t_end)]
    data = [{"type": "bar", "orientation": "h", "y": ["request"], "x": [(end - start) * 1e3],
             "base": [start * 1e3], "name": f"{name} {(end - start) * 1e3:,.2f} ms",
             "marker": {"color": PHASE_COLORS[name]},
             "hovertemplate": f"{name}: %{{base:,.2f}} → %{{x:,.2f}} ms long<extra></extra>"}
            for name, start, end in spans]
    if len(frame):
        data.append({"type": "scatter", "mode": "markers", "y": ["tokens"] * len(frame),
                     "x": (frame["t_s"] * 1e3).tolist(), "name": "tokens out",
                     "marker": {"symbol": "line-ns-open", "size": 14, "color": INK},
                     "hovertemplate": "token at %{x:,.2f} ms<extra></extra>"})
    ttft = frame["t_s"].iloc[0] * 1e3 if len(frame) else None
    shapes, notes = ([], []) if ttft is None else map(list, zip(vline(ttft, f"first token {ttft:,.1f} ms "),
                                                                strict=True))
    layout = base_layout("Request life cycle", "ms since the request arrived", "", height=320, barmode="overlay",
                     shapes=shapes, annotations=notes)
    # A short plot: a legend below it would sit on the x axis's title, so the phases are listed at the right,
    # one per line, where plotly widens the margin to fit them.
    layout["legend"] = {"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.02}
    return {"data": data, "layout": layout}


def ttft_parts(phases: dict[str, float], frame: pd.DataFrame) -> Figure:
    """TTFT split into its causes: queue wait, tokenization, prefill (and the first sampling step)."""
    if not len(frame):
        return empty("no token yet")
    t_acq = phases.get("device acquired", 0.0)
    t_tok = phases.get("tokenized", t_acq)
    ttft = frame["t_s"].iloc[0]
    parts = [("queue", t_acq), ("tokenize", t_tok - t_acq), ("prefill + first sample", ttft - t_tok)]
    data = [{"type": "bar", "x": [name], "y": [value * 1e3], "name": name,
             "marker": {"color": color}, "text": [f"{value * 1e3:,.2f} ms ({value / ttft:.0%})"],
             "textposition": "outside", "cliponaxis": False}
            for (name, value), color in zip(parts, ("#b279a2", "#72b7b2", "#f58518"), strict=True)]
    return {"data": data, "layout": base_layout(f"TTFT {ttft * 1e3:,.1f} ms, by cause", "", "ms", showlegend=False)}
