"""The calculator's figures: one GPU's memory, the KV cache against sequence length, attention variants, the
sliding-window effect and the roofline. Plain functions from a report or a DataFrame to a figure
specification, in kvviz.ui.figures' style (its layout, colours and rules), its words in `lang` (English or
Chinese: kvviz.i18n.calculator); nothing here computes the numbers it draws.
"""

from __future__ import annotations

import math

import pandas as pd

from kvviz.base.units import GIB, fmt_seconds
from kvviz.calc.report import MemoryReport, accelerator_name
from kvviz.i18n import normalize, t
from kvviz.ui.figures import COLORS, INK, Figure, base_layout, hline, vline


def memory_bar(report: MemoryReport, lang: str = "en") -> Figure:
    """One GPU's weights + KV cache + reserve stacked against its memory and usable share: the whole model on one
    device, or with tp × pp > 1 the share of the GPU that fills first."""
    acc, cap, one = report.accelerator, report.capacity, report.parallel.binding
    gpus = report.parallel.gpus
    parts = [(t("calc.fig.weights", lang), one.weights_bytes), (t("calc.fig.kv", lang), one.kv.bytes),
             (t("calc.fig.reserve", lang), cap.reserve_bytes)]
    if one.kv.state_bytes:  # linear-attention / Mamba layers: a fixed state per sequence beside the KV
        parts.insert(2, (t("calc.fig.state", lang), one.kv.state_bytes))
    name = accelerator_name(acc, lang)
    label = name if gpus == 1 else t("calc.fig.one_of", lang, accel=name, gpus=f"{gpus:,}")
    data = [{"type": "bar", "orientation": "h", "y": [label], "x": [value / GIB], "name": name,
             "marker": {"color": color}, "hovertemplate": f"{name}: %{{x:,.2f}} GiB<extra></extra>"}
            for (name, value), color in zip(parts, COLORS, strict=False)]
    for bar in data:  # a slim bar leaves room above and below it for the two lines' labels
        bar["width"] = [0.5]
    # The two labels never meet: the usable line's below the bar and to its left, the device's above the bar
    # and to its right (the axis runs on past the device's memory to hold it).
    usable = vline(cap.usable_bytes / GIB, t("calc.fig.usable", lang, util=f"{cap.mem_util:g}"), top=False)
    usable[1].update(xanchor="right")
    device = vline(acc.memory_bytes / GIB, t("calc.fig.device_memory", lang), dash="solid")
    device[1].update(xanchor="left")
    end = max(acc.memory_bytes, sum(value for _, value in parts)) / GIB
    layout = base_layout(t("calc.fig.memory_title", lang), t("calc.fig.gib_axis", lang), "", height=260,
                         barmode="stack",
                         shapes=[usable[0], device[0]], annotations=[usable[1], device[1]])
    layout["xaxis"] |= {"range": [0, end * 1.25]}
    # A short plot: the legend goes top right, beside a left-aligned title, clear of the axis title.
    layout["title"] |= {"x": 0.0, "xanchor": "left"}
    layout["legend"] = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1.0}
    return {"data": data, "layout": layout}


def kv_curves(frame: pd.DataFrame, budget_bytes: int | None, one_gpu: bool = False, lang: str = "en",
              yours: tuple[int, int] | None = None) -> Figure:
    """KV cache against seq_len, one line per batch size, with the KV budget as a ceiling; one_gpu: the frame is
    one GPU's share of a deployment, and the budget that GPU's. yours: the user's (batch, seq_len), whose line
    the frame holds: drawn thicker, with their point marked and its size written beside it."""
    data = []
    for i, (batch, group) in enumerate(frame.groupby("batch")):
        mine = yours is not None and batch == yours[0]
        data.append({"type": "scatter", "mode": "lines", "x": group["seq_len"].tolist(),
                     "y": group["kv_gib"].tolist(),
                     "name": t("calc.fig.batch_yours" if mine else "calc.fig.batch", lang, batch=f"{batch:,}"),
                     "line": {"color": COLORS[i % len(COLORS)], "width": 3.5 if mine else 1.5},
                     "hovertemplate": "seq_len %{x:,}: %{y:,.3f} GiB<extra></extra>"})
    point = frame[(frame["batch"] == yours[0]) & (frame["seq_len"] == yours[1])] if yours else frame.iloc[:0]
    if len(point):
        gib = float(point["kv_gib"].iloc[0])
        data.append({"type": "scatter", "mode": "markers+text", "x": [yours[1]], "y": [gib],
                     "name": t("calc.fig.yours", lang, batch=f"{yours[0]:,}", seq_len=f"{yours[1]:,}",
                               gib=f"{gib:,.2f}"),
                     "marker": {"size": 11, "color": INK, "symbol": "circle-open", "line": {"width": 2}},
                     "text": [f"{gib:,.2f} GiB"], "textposition": "top left", "cliponaxis": False,
                     "hovertemplate": "seq_len %{x:,}: %{y:,.3f} GiB<extra></extra>"})
    extra = {}
    if budget_bytes:
        shape, note = hline(budget_bytes / GIB, t("calc.fig.budget_one_gpu" if one_gpu else "calc.fig.budget_device",
                                                  lang))
        extra = {"shapes": [shape], "annotations": [note]}
    return {"data": data, "layout": base_layout(t("calc.fig.curves_title", lang), t("calc.fig.seq_len_axis", lang),
                                                t("calc.fig.kv_one_gpu_axis" if one_gpu else "calc.fig.kv_axis", lang),
                                                **extra)}


_THIS_MODEL = " (this model)"  # how kvviz.calc.curves.attention_variants marks the model's own shape


def _attention_name(name: str, lang: str) -> str:
    if normalize(lang) == "en" or not name.endswith(_THIS_MODEL):
        return name
    return t("calc.fig.this_model", lang, attention=name.removesuffix(_THIS_MODEL))


def attention_bars(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """The same model's cache under each attention shape."""
    bar = {"type": "bar", "x": [_attention_name(a, lang) for a in frame["attention"]], "y": frame["kv_gib"].tolist(),
           "marker": {"color": COLORS[: len(frame)]}, "textposition": "outside", "cliponaxis": False,
           "text": [t("calc.fig.vs_mha", lang, gib=f"{g:,.2f}", share=f"{r:.1%}")
                    for g, r in zip(frame["kv_gib"], frame["vs_mha"], strict=True)],
           "hovertemplate": "%{x}: %{y:,.3f} GiB<extra></extra>"}
    layout = base_layout(t("calc.fig.attention_title", lang), t("calc.fig.attention_axis", lang),
                         t("calc.fig.kv_axis", lang))
    return {"data": [bar], "layout": layout}


# kvviz.calc.curves.window_effect's variants, by the key of their name.
_VARIANTS = {"window applied": "calc.fig.window_applied",
             "window ignored (every layer keeps every token)": "calc.fig.window_ignored"}


def window_curves(frame: pd.DataFrame, window: int, span: str = "window", lang: str = "en") -> Figure:
    """KV cache with the sliding window (or the chunk, span="chunk") applied, against an engine that ignores it."""
    data = [{"type": "scatter", "mode": "lines", "x": g["seq_len"].tolist(), "y": g["kv_gib"].tolist(),
             "name": t(_VARIANTS[variant], lang) if variant in _VARIANTS else variant}
            for variant, g in frame.groupby("variant", sort=False)]
    shape, note = vline(window, t(f"calc.fig.span.{span}", lang, window=f"{window:,}"), dash="dot")
    title = t("calc.fig.window_title" if span == "window" else "calc.fig.chunk_title", lang)
    return {"data": data, "layout": base_layout(title, t("calc.fig.seq_len_axis", lang), t("calc.fig.kv_axis", lang),
                                                shapes=[shape], annotations=[note])}


def flops_tick(flops: float) -> str:
    """A decade of FLOP/s in one notation, tera for everything from 10^12 up (10 T, 1,000 T), giga below
    (plotly's own SI ticks wrote 100T beside 10^15)."""
    return f"{flops / 1e12:,g} T" if flops >= 1e12 else f"{flops / 1e9:,g} G"


def roofline(report: MemoryReport, lang: str = "en") -> Figure:
    """Attainable FLOP/s against arithmetic intensity (log-log), with prefill and decode placed on it."""
    acc = report.accelerator
    phases = [p for p in (report.prefill, report.decode) if p is not None]
    lo = min([0.1, *[p.intensity / 4 for p in phases]])
    hi = max([acc.ridge_point * 20, *[p.intensity * 4 for p in phases]])
    xs = [lo * (hi / lo) ** (i / 40) for i in range(41)]
    roof = [min(acc.peak_flops, acc.bandwidth * x) for x in xs]
    data = [{"type": "scatter", "mode": "lines", "x": xs, "y": roof,
             "name": t("calc.fig.roof", lang, accel=accelerator_name(acc, lang)),
             "line": {"color": INK}, "hovertemplate": "%{x:,.1f} FLOP/B → %{y:.3g} FLOP/s<extra></extra>"},
            {"type": "scatter", "mode": "lines", "x": [acc.ridge_point] * 2, "y": [min(roof), acc.peak_flops],
             "name": t("calc.fig.ridge", lang, ridge=f"{acc.ridge_point:,.0f}"),
             "line": {"color": INK, "dash": "dot", "width": 1}}]
    for p, color in zip(phases, COLORS, strict=False):
        right_half = p.intensity > math.sqrt(lo * hi)
        phase = t(f"calc.phase.{p.phase}", lang)
        data.append({"type": "scatter", "mode": "markers+text", "x": [p.intensity], "y": [p.flops / p.lower_bound_s],
                     "name": phase, "marker": {"size": 12, "color": color},
                     "textposition": "bottom left" if right_half else "bottom right",
                     "text": [t("calc.fig.phase_point", lang, phase=phase, time=fmt_seconds(p.lower_bound_s),
                                bound=t(f"calc.bound.{p.bound}", lang))],
                     "hovertemplate": f"{phase}: %{{x:,.1f}} FLOP/B, %{{y:.3g}} FLOP/s<extra></extra>"})
    layout = base_layout(t("calc.fig.roofline_title", lang), t("calc.fig.intensity_axis", lang),
                         t("calc.fig.flops_axis", lang))
    layout["xaxis"] |= {"type": "log", "dtick": 1, "tickformat": ",~g"}  # decades, written in full
    low, high = math.log10(min(roof)) - 0.3, math.log10(acc.peak_flops) + 0.5
    decades = [10.0 ** k for k in range(math.ceil(low), math.floor(high) + 1)]
    layout["yaxis"] |= {"type": "log", "range": [low, high], "tickvals": decades,
                        "ticktext": [flops_tick(v) for v in decades]}
    return {"data": data, "layout": layout}
