"""The figures of one batch run: its life cycle (the shared phases once, a row per sequence), each decode
pass with the rows still decoding, the batch's KV cache per pass against the memory model, and its shared TTFT
by cause. Plain functions from the run's data to a figure specification, in kvviz.ui.figures' style; nothing
here computes the numbers it draws.
"""

from __future__ import annotations

import pandas as pd

from kvviz.ui.figures import COLORS, GRID, INK, PHASE_COLORS, Figure, base_layout, empty, vline


def batch_lifecycle(summary, rows, tokens: pd.DataFrame) -> Figure:
    """A batched run on one time axis: the phases the rows share (queued, tokenized, one prefill) drawn once,
    then each row's decode from the shared first token to its own end, with its tokens as ticks.

    summary: kvviz.engine.batch.BatchSummary; rows: its RowResults; tokens: one row per token (t_s, row)."""
    t_acq = summary.queue_s
    t_tok = t_acq + summary.tokenize_s
    spans = [("queued", 0.0, t_acq), ("tokenize", t_acq, t_tok), ("prefill", t_tok, summary.ttft_s)]
    shared = f"batch of {summary.batch_size} (shared)"
    data = [{"type": "bar", "orientation": "h", "y": [shared], "x": [(end - start) * 1e3], "base": [start * 1e3],
             "name": f"{name} {(end - start) * 1e3:,.2f} ms", "marker": {"color": PHASE_COLORS[name]},
             "hovertemplate": f"{name}: %{{base:,.2f}} → %{{x:,.2f}} ms long<extra></extra>"}
            for name, start, end in spans]
    labels = [f"row {r.row}" for r in rows]
    data.append({"type": "bar", "orientation": "h", "y": labels, "x": [(r.end_s - r.ttft_s) * 1e3 for r in rows],
                 "base": [r.ttft_s * 1e3 for r in rows], "name": "decode (each row to its own end)",
                 "marker": {"color": PHASE_COLORS["decode"]},
                 "customdata": [[r.new_tokens, r.finish_reason] for r in rows],
                 "hovertemplate": "%{y}: %{customdata[0]} tokens, ended by %{customdata[1]}<extra></extra>"})
    if len(tokens):
        data.append({"type": "scatter", "mode": "markers", "y": [f"row {r}" for r in tokens["row"]],
                     "x": (tokens["t_s"] * 1e3).tolist(), "name": "tokens out",
                     "marker": {"symbol": "line-ns-open", "size": 10, "color": INK},
                     "hovertemplate": "token at %{x:,.2f} ms<extra></extra>"})
    shape, note = vline(summary.ttft_s * 1e3, f" every row's first token {summary.ttft_s * 1e3:,.1f} ms", top=False)
    layout = base_layout("A batch's life cycle: shared phases once, then one row per sequence",
                     "ms since the batch arrived", "", height=220 + 26 * len(rows), barmode="overlay",
                     shapes=[shape], annotations=[note])
    layout["yaxis"] |= {"categoryorder": "array", "categoryarray": [*reversed(labels), shared]}
    layout["legend"] = {"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.02}
    return {"data": data, "layout": layout}


def batch_steps(steps: pd.DataFrame) -> Figure:
    """Each forward pass of a batch: its time (ms; the prefill apart) and the rows still decoding."""
    if not len(steps):
        return empty("no step yet")
    decode, prefill = steps[steps["phase"] == "decode"], steps[steps["phase"] == "prefill"]
    data = [{"type": "scatter", "mode": "lines+markers", "x": decode["step"].tolist(),
             "y": (decode["dt_s"] * 1e3).tolist(), "name": "decode pass", "marker": {"size": 4},
             "line": {"color": COLORS[0]}, "hovertemplate": "step %{x}: %{y:,.2f} ms<extra></extra>"},
            {"type": "scatter", "mode": "markers", "x": prefill["step"].tolist(),
             "y": (prefill["dt_s"] * 1e3).tolist(), "name": "prefill (every row's prompt)",
             "marker": {"size": 12, "symbol": "diamond", "color": COLORS[1]},
             "hovertemplate": "prefill: %{y:,.2f} ms<extra></extra>"},
            {"type": "scatter", "mode": "lines", "x": steps["step"].tolist(), "y": steps["active_rows"].tolist(),
             "name": "rows still decoding (right axis)", "yaxis": "y2", "line": {"color": INK, "dash": "dot",
                                                                                   "shape": "hv"}}]
    layout = base_layout("Each forward pass of the batch", "step (0 = prefill)", "ms per pass (log)")
    layout["yaxis"] |= {"type": "log"}
    layout["yaxis2"] = {"overlaying": "y", "side": "right", "title": {"text": "rows"}, "rangemode": "tozero",
                        "gridcolor": GRID, "linecolor": INK, "showgrid": False}
    return {"data": data, "layout": layout}


def batch_kv(steps: pd.DataFrame) -> Figure:
    """The batch's KV cache per pass, measured from its tensors against the memory model at batch B, and the
    part of it that holds padding."""
    if not len(steps) or not steps["kv_bytes"].any():
        return empty("no KV cache (an uncached batch keeps none)")
    mib = 2**20
    data = [{"type": "scatter", "mode": "lines", "x": steps["seq_len"].tolist(),
             "y": (steps["kv_bytes"] / mib).tolist(), "name": "measured (cache tensors)",
             "line": {"color": COLORS[0], "width": 3}},
            {"type": "scatter", "mode": "markers", "x": steps["seq_len"].tolist(),
             "y": (steps["kv_bytes_predicted"] / mib).tolist(), "name": "predicted (B × seq_len × layers × 2 × ...)",
             "marker": {"color": COLORS[1], "size": 6, "symbol": "circle-open"}},
            {"type": "scatter", "mode": "lines", "x": steps["seq_len"].tolist(),
             "y": (steps["padding_bytes"] / mib).tolist(), "name": "of which padding", "fill": "tozeroy",
             "line": {"color": COLORS[3]}}]
    return {"data": data, "layout": base_layout("KV cache of the whole batch, per pass", "positions per row (padded)",
                                            "MiB")}


def batch_ttft_parts(summary) -> Figure:
    """A batch's shared TTFT by cause: queue wait, tokenizing every row, the one prefill pass for all rows.
    summary: kvviz.engine.batch.BatchSummary."""
    parts = [("queue", summary.queue_s), ("tokenize", summary.tokenize_s),
             (f"prefill ({summary.batch_size} rows)", summary.ttft_s - summary.queue_s - summary.tokenize_s)]
    ttft = summary.ttft_s or 1.0
    data = [{"type": "bar", "x": [name], "y": [value * 1e3], "name": name, "marker": {"color": color},
             "text": [f"{value * 1e3:,.2f} ms ({value / ttft:.0%})"], "textposition": "outside", "cliponaxis": False}
            for (name, value), color in zip(parts, ("#b279a2", "#72b7b2", "#f58518"), strict=True)]
    return {"data": data, "layout": base_layout(f"The batch's TTFT {summary.ttft_s * 1e3:,.1f} ms, by cause", "", "ms",
                                            showlegend=False)}
