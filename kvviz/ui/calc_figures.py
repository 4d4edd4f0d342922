"""The calculator's figures: one GPU's memory, the KV cache against sequence length, attention variants, the
sliding-window effect and the roofline. Plain functions from a report or a DataFrame to a figure
specification, in kvviz.ui.figures' style (its layout, colours and rules); nothing here computes the numbers
it draws.
"""

from __future__ import annotations

import math

import pandas as pd

from kvviz.base.units import GIB, fmt_seconds
from kvviz.calc.report import MemoryReport
from kvviz.ui.figures import COLORS, INK, Figure, base_layout, hline, vline


def memory_bar(report: MemoryReport) -> Figure:
    """One GPU's weights + KV cache + reserve stacked against its memory and usable share: the whole model on one
    device, or with tp × pp > 1 the share of the GPU that fills first."""
    acc, cap, one = report.accelerator, report.capacity, report.parallel.binding
    gpus = report.parallel.gpus
    parts = [("weights", one.weights_bytes), ("KV cache", one.kv.bytes), ("runtime reserve", cap.reserve_bytes)]
    if one.kv.state_bytes:  # linear-attention / Mamba layers: a fixed state per sequence beside the KV
        parts.insert(2, ("linear-layer state", one.kv.state_bytes))
    label = acc.name if gpus == 1 else f"one {acc.name} of {gpus:,}"
    data = [{"type": "bar", "orientation": "h", "y": [label], "x": [value / GIB], "name": name,
             "marker": {"color": color}, "hovertemplate": f"{name}: %{{x:,.2f}} GiB<extra></extra>"}
            for (name, value), color in zip(parts, COLORS, strict=False)]
    usable = vline(cap.usable_bytes / GIB, f"usable ({cap.mem_util:g} × memory) ", top=False)
    device = vline(acc.memory_bytes / GIB, "device memory ", dash="solid")
    layout = base_layout("What fits on the device", "GiB (2^30 bytes)", "", height=260, barmode="stack",
                     shapes=[usable[0], device[0]], annotations=[usable[1], device[1]])
    # A short plot: the legend goes top right, beside a left-aligned title, clear of the axis title.
    layout["title"] |= {"x": 0.0, "xanchor": "left"}
    layout["legend"] = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1.0}
    return {"data": data, "layout": layout}


def kv_curves(frame: pd.DataFrame, budget_bytes: int | None, one_gpu: bool = False) -> Figure:
    """KV cache against seq_len, one line per batch size, with the KV budget as a ceiling; one_gpu: the frame is
    one GPU's share of a deployment, and the budget that GPU's."""
    data = [{"type": "scatter", "mode": "lines", "x": group["seq_len"].tolist(), "y": group["kv_gib"].tolist(),
             "name": f"batch {batch}", "hovertemplate": "seq_len %{x:,}: %{y:,.3f} GiB<extra></extra>"}
            for batch, group in frame.groupby("batch")]
    extra = {}
    if budget_bytes:
        shape, note = hline(budget_bytes / GIB, "KV budget on one GPU" if one_gpu else "KV budget on this device")
        extra = {"shapes": [shape], "annotations": [note]}
    return {"data": data, "layout": base_layout("KV cache grows linearly with sequence length and batch",
                                            "seq_len (tokens)", "KV cache on one GPU (GiB)" if one_gpu else
                                            "KV cache (GiB)", **extra)}


def attention_bars(frame: pd.DataFrame) -> Figure:
    """The same model's cache under each attention shape."""
    bar = {"type": "bar", "x": frame["attention"].tolist(), "y": frame["kv_gib"].tolist(),
           "marker": {"color": COLORS[: len(frame)]}, "textposition": "outside", "cliponaxis": False,
           "text": [f"{g:,.2f} GiB ({r:.1%} of MHA)" for g, r in zip(frame["kv_gib"], frame["vs_mha"], strict=True)],
           "hovertemplate": "%{x}: %{y:,.3f} GiB<extra></extra>"}
    return {"data": [bar], "layout": base_layout("Same model, other attention shapes", "attention", "KV cache (GiB)")}


def window_curves(frame: pd.DataFrame, window: int, span: str = "window") -> Figure:
    """KV cache with the sliding window (or the chunk, span="chunk") applied, against an engine that ignores it."""
    data = [{"type": "scatter", "mode": "lines", "x": g["seq_len"].tolist(), "y": g["kv_gib"].tolist(),
             "name": variant} for variant, g in frame.groupby("variant", sort=False)]
    shape, note = vline(window, f"{span} {window:,}", dash="dot")
    title = ("Sliding-window layers stop growing at the window" if span == "window" else
             "Chunked layers keep at most one chunk")
    return {"data": data, "layout": base_layout(title, "seq_len (tokens)", "KV cache (GiB)", shapes=[shape],
                                            annotations=[note])}


def roofline(report: MemoryReport) -> Figure:
    """Attainable FLOP/s against arithmetic intensity (log-log), with prefill and decode placed on it."""
    acc = report.accelerator
    phases = [p for p in (report.prefill, report.decode) if p is not None]
    lo = min([0.1, *[p.intensity / 4 for p in phases]])
    hi = max([acc.ridge_point * 20, *[p.intensity * 4 for p in phases]])
    xs = [lo * (hi / lo) ** (i / 40) for i in range(41)]
    roof = [min(acc.peak_flops, acc.bandwidth * x) for x in xs]
    data = [{"type": "scatter", "mode": "lines", "x": xs, "y": roof, "name": f"{acc.name} roof",
             "line": {"color": INK}, "hovertemplate": "%{x:,.1f} FLOP/B → %{y:.3g} FLOP/s<extra></extra>"},
            {"type": "scatter", "mode": "lines", "x": [acc.ridge_point] * 2, "y": [min(roof), acc.peak_flops],
             "name": f"ridge {acc.ridge_point:,.0f} FLOP/B", "line": {"color": INK, "dash": "dot", "width": 1}}]
    for p, color in zip(phases, COLORS, strict=False):
        right_half = p.intensity > math.sqrt(lo * hi)
        data.append({"type": "scatter", "mode": "markers+text", "x": [p.intensity], "y": [p.flops / p.lower_bound_s],
                     "name": p.phase, "marker": {"size": 12, "color": color},
                     "textposition": "bottom left" if right_half else "bottom right",
                     "text": [f"{p.phase} ≥ {fmt_seconds(p.lower_bound_s)} ({p.bound}-bound)"],
                     "hovertemplate": f"{p.phase}: %{{x:,.1f}} FLOP/B, %{{y:.3g}} FLOP/s<extra></extra>"})
    layout = base_layout("Roofline: prefill is compute-bound, decode memory-bound", "arithmetic intensity (FLOP/byte)",
                     "attainable FLOP/s")
    layout["xaxis"] |= {"type": "log"}
    layout["yaxis"] |= {"type": "log", "range": [math.log10(min(roof)) - 0.3, math.log10(acc.peak_flops) + 0.5],
                        "exponentformat": "SI"}
    return {"data": data, "layout": layout}
