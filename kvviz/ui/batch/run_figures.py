"""The figures of one batch run: its life cycle (the shared phases once, a row per sequence), each decode
pass with the rows still decoding, the batch's KV cache per pass against the memory model, and its shared TTFT
by cause. Plain functions from the run's data to a figure specification, in kvviz.ui.figures' style, their
titles, axes, legend names and hover texts in the language asked for (lang: "en" or "zh"); nothing here computes
the numbers it draws.
"""

from __future__ import annotations

import pandas as pd

from kvviz.base.units import fmt_ms
from kvviz.i18n import t
from kvviz.ui.figures import COLORS, GRID, INK, LOG_FULL, PHASE_COLORS, Figure, base_layout, empty, vline


def batch_lifecycle(summary, rows, tokens: pd.DataFrame, lang: str = "en") -> Figure:
    """A batched run on one time axis: the phases the rows share (queued, tokenized, one prefill) drawn once,
    then each row's decode from the shared first token to its own end, with its tokens as ticks.

    summary: kvviz.engine.batch.BatchSummary; rows: its RowResults; tokens: one row per token (t_s, row)."""
    t_acq = summary.queue_s
    t_tok = t_acq + summary.tokenize_s
    spans = [("queued", 0.0, t_acq), ("tokenize", t_acq, t_tok), ("prefill", t_tok, summary.ttft_s)]
    shared = t("batch.fig.shared", lang, size=summary.batch_size)
    names = {phase: t(f"batch.fig.phase.{phase}", lang) for phase, _, _ in spans}
    data = [{"type": "bar", "orientation": "h", "y": [shared], "x": [(end - start) * 1e3], "base": [start * 1e3],
             "name": t("batch.fig.phase_bar", lang, name=names[phase], ms=fmt_ms(end - start)),
             "marker": {"color": PHASE_COLORS[phase]},
             "hovertemplate": t("batch.fig.phase_hover", lang, name=names[phase])}
            for phase, start, end in spans]
    labels = [t("batch.fig.row", lang, row=r.row) for r in rows]
    data.append({"type": "bar", "orientation": "h", "y": labels, "x": [(r.end_s - r.ttft_s) * 1e3 for r in rows],
                 "base": [r.ttft_s * 1e3 for r in rows], "name": t("batch.fig.decode", lang),
                 "marker": {"color": PHASE_COLORS["decode"]},
                 "customdata": [[r.new_tokens, r.finish_reason] for r in rows],
                 "hovertemplate": t("batch.fig.decode_hover", lang)})
    if len(tokens):
        data.append({"type": "scatter", "mode": "markers",
                     "y": [t("batch.fig.row", lang, row=r) for r in tokens["row"]],
                     "x": (tokens["t_s"] * 1e3).tolist(), "name": t("batch.fig.tokens_out", lang),
                     "marker": {"symbol": "line-ns-open", "size": 10, "color": INK},
                     "hovertemplate": t("batch.fig.token_hover", lang)})
    shape, note = vline(summary.ttft_s * 1e3, t("batch.fig.first_token", lang, ms=fmt_ms(summary.ttft_s)),
                        top=False)
    layout = base_layout(t("batch.fig.lifecycle_title", lang), t("batch.fig.lifecycle_x", lang), "",
                         height=220 + 26 * len(rows), barmode="overlay", shapes=[shape], annotations=[note])
    layout["yaxis"] |= {"categoryorder": "array", "categoryarray": [*reversed(labels), shared]}
    layout["legend"] = {"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.02}
    end_s = max([r.end_s for r in rows] + [summary.ttft_s])
    if end_s > 0:  # from the batch's arrival: plotly's padding would start the axis below zero
        layout["xaxis"] |= {"range": [0, end_s * 1e3 * 1.03]}
    return {"data": data, "layout": layout}


def batch_steps(steps: pd.DataFrame, lang: str = "en") -> Figure:
    """Each forward pass of a batch: its time (ms; the prefill apart) and the rows still decoding."""
    if not len(steps):
        return empty(t("batch.fig.no_step", lang))
    decode, prefill = steps[steps["phase"] == "decode"], steps[steps["phase"] == "prefill"]
    data = [{"type": "scatter", "mode": "lines+markers", "x": decode["step"].tolist(),
             "y": (decode["dt_s"] * 1e3).tolist(), "name": t("batch.fig.decode_pass", lang), "marker": {"size": 4},
             "line": {"color": COLORS[0]}, "hovertemplate": t("batch.fig.step_hover", lang)},
            {"type": "scatter", "mode": "markers", "x": prefill["step"].tolist(),
             "y": (prefill["dt_s"] * 1e3).tolist(), "name": t("batch.fig.prefill_pass", lang),
             "marker": {"size": 12, "symbol": "diamond", "color": COLORS[1]},
             "hovertemplate": t("batch.fig.prefill_hover", lang)},
            {"type": "scatter", "mode": "lines", "x": steps["step"].tolist(), "y": steps["active_rows"].tolist(),
             "name": t("batch.fig.active_rows", lang), "yaxis": "y2",
             "line": {"color": INK, "dash": "dot", "shape": "hv"}}]
    layout = base_layout(t("batch.fig.steps_title", lang), t("batch.fig.steps_x", lang), t("batch.fig.steps_y", lang))
    layout["yaxis"] |= LOG_FULL
    layout["yaxis2"] = {"overlaying": "y", "side": "right", "title": {"text": t("batch.fig.rows_axis", lang)},
                        "rangemode": "tozero", "gridcolor": GRID, "linecolor": INK, "showgrid": False}
    return {"data": data, "layout": layout}


def batch_kv(steps: pd.DataFrame, lang: str = "en") -> Figure:
    """The batch's KV cache per pass, measured from its tensors against the memory model at batch B, and the
    part of it that holds padding."""
    if not len(steps) or not steps["kv_bytes"].any():
        return empty(t("batch.fig.no_kv", lang))
    mib = 2**20
    data = [{"type": "scatter", "mode": "lines", "x": steps["seq_len"].tolist(),
             "y": (steps["kv_bytes"] / mib).tolist(), "name": t("batch.fig.kv_measured", lang),
             "line": {"color": COLORS[0], "width": 3}},
            {"type": "scatter", "mode": "markers", "x": steps["seq_len"].tolist(),
             "y": (steps["kv_bytes_predicted"] / mib).tolist(), "name": t("batch.fig.kv_predicted", lang),
             "marker": {"color": COLORS[1], "size": 6, "symbol": "circle-open"}},
            {"type": "scatter", "mode": "lines", "x": steps["seq_len"].tolist(),
             "y": (steps["padding_bytes"] / mib).tolist(), "name": t("batch.fig.kv_padding", lang), "fill": "tozeroy",
             "line": {"color": COLORS[3]}}]
    return {"data": data, "layout": base_layout(t("batch.fig.kv_title", lang), t("batch.fig.kv_x", lang), "MiB")}


def batch_ttft_parts(summary, lang: str = "en") -> Figure:
    """A batch's shared TTFT by cause: queue wait, tokenizing every row, the one prefill pass for all rows.
    summary: kvviz.engine.batch.BatchSummary."""
    parts = [(t("batch.fig.part.queue", lang), summary.queue_s),
             (t("batch.fig.part.tokenize", lang), summary.tokenize_s),
             (t("batch.fig.part.prefill", lang, rows=summary.batch_size),
              summary.ttft_s - summary.queue_s - summary.tokenize_s)]
    ttft = summary.ttft_s or 1.0
    data = [{"type": "bar", "x": [name], "y": [value * 1e3], "name": name, "marker": {"color": color},
             "text": [f"{fmt_ms(value)} ({value / ttft:.0%})"], "textposition": "outside", "cliponaxis": False}
            for (name, value), color in zip(parts, ("#b279a2", "#72b7b2", "#f58518"), strict=True)]
    title = t("batch.fig.ttft_title", lang, ttft=fmt_ms(summary.ttft_s))
    return {"data": data, "layout": base_layout(title, "", "ms", showlegend=False)}
