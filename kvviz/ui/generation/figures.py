"""One generation run's figures: per-token latency, the KV cache's growth, cumulative time against the prediction,
each step's work, decode bandwidth, and the request's life cycle with TTFT split by cause.

Plain functions from a run's per-token DataFrame (and its phases) to a figure specification (kvviz.ui.figures);
the compare tab draws its modes with these too. Their text is in kvviz.i18n.generation.
"""

from __future__ import annotations

import pandas as pd

from kvviz.base.units import fmt_ms
from kvviz.engine.request import mode_label
from kvviz.i18n import t
from kvviz.ui.figures import COLORS, INK, PHASE_COLORS, Figure, base_layout, empty, hline, vline

OFF_SCALE = 3.0  # a first token this many times the slowest decode step would flatten the decode line


def token_latency(frame: pd.DataFrame, title: str | None = None, lang: str = "en") -> Figure:
    """Time from the previous token (ms) for each output token, prefill (the first token) apart from decode.

    frame: per-token rows (kvviz.engine.loop.TokenEvent fields) with a `mode` or `run` column to group by.
    The y axis is linear from zero, so that a step that grows with the sequence (decoding without the cache)
    is seen to grow. A first token more than OFF_SCALE times the slowest decode step (a long prompt, a model
    just loaded) would squash the decode line against zero: the axis then ends above the decode steps, and
    each such first token is written at the top edge with its time and an arrow, not drawn.
    """
    data, firsts = [], []
    key = "run" if "run" in frame and frame["run"].nunique() > 1 else "mode"
    for i, (name, group) in enumerate(frame.groupby(key, sort=False) if len(frame) else []):
        color = COLORS[i % len(COLORS)]
        label = t("fig.latency.run", lang, name=name) if key == "run" else mode_label(name, lang)
        decode = group[group["phase"] == "decode"]
        first = group[group["phase"] == "prefill"]
        data.append({"type": "scatter", "mode": "lines+markers", "x": decode["index"].tolist(),
                     "y": (decode["dt_s"] * 1e3).tolist(), "name": t("fig.latency.decode", lang, label=label),
                     "marker": {"size": 4},
                     "line": {"color": color, "width": 1.5},
                     "hovertemplate": t("fig.latency.hover_decode", lang)})
        if len(first):
            data.append({"type": "scatter", "mode": "markers", "x": first["index"].tolist(),
                         "y": (first["dt_s"] * 1e3).tolist(), "name": t("fig.latency.first", lang, label=label),
                         "marker": {"size": 12, "symbol": "diamond", "color": color},
                         "hovertemplate": t("fig.latency.hover_first", lang)})
            firsts += [(label, color, float(ms)) for ms in first["dt_s"] * 1e3]
    layout = base_layout(t("fig.latency.title", lang) if title is None else title, t("fig.latency.x", lang),
                         t("fig.latency.y", lang))
    layout["yaxis"] |= {"rangemode": "tozero"}
    decode_ms = frame.loc[frame["phase"] == "decode", "dt_s"] * 1e3 if len(frame) else pd.Series(dtype=float)
    if len(decode_ms) and any(ms > OFF_SCALE * decode_ms.max() for _, _, ms in firsts):
        top = 1.3 * float(decode_ms.max())
        layout["yaxis"] |= {"range": [0, top]}
        layout["annotations"] = [
            {"x": 0, "xref": "x", "y": 1, "yref": "paper", "yanchor": "top", "xanchor": "left", "yshift": -14 * k,
             "showarrow": False, "font": {"color": color, "size": 11},
             "text": t("fig.latency.off_scale", lang, label=label, ms=fmt_ms(ms / 1e3))}
            for k, (label, color, ms) in enumerate(f for f in firsts if f[2] > top)]
    return {"data": data, "layout": layout}


def kv_growth(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """KV-cache bytes measured from the cache tensors against the memory model's prediction, per step."""
    mib = 2**20
    data = [{"type": "scatter", "mode": "lines", "x": frame["seq_len"].tolist(),
             "y": (frame["kv_bytes"] / mib).tolist(), "name": t("fig.kv.measured", lang),
             "line": {"color": COLORS[0], "width": 2}},
            {"type": "scatter", "mode": "markers", "x": frame["seq_len"].tolist(),
             "y": (frame["kv_bytes_predicted"] / mib).tolist(), "name": t("fig.kv.predicted", lang),
             "marker": {"color": COLORS[1], "size": 7, "symbol": "circle-open"}}]
    if "cuda_allocated_bytes" in frame and frame["cuda_allocated_bytes"].notna().any():
        data.append({"type": "scatter", "mode": "lines", "x": frame["seq_len"].tolist(),
                     "y": (frame["cuda_allocated_bytes"] / mib).tolist(), "name": t("fig.kv.cuda", lang),
                     "line": {"color": COLORS[2], "dash": "dot"}})
    layout = base_layout(t("fig.kv.title", lang), t("fig.seq_len", lang), t("fig.kv.y", lang))
    layout["yaxis"] |= {"rangemode": "tozero"}  # bytes: a static cache's flat line stays above zero
    return {"data": data, "layout": layout}


def cumulative_time(frame: pd.DataFrame, prediction: pd.DataFrame | None = None, lang: str = "en") -> Figure:
    """Seconds since the request against tokens generated, one line per mode; with the cache it is a
    straight line, without it a parabola. The roofline prediction (lower bound) is dashed beside it."""
    data = []
    for i, (mode, group) in enumerate(frame.groupby("mode", sort=False)):
        label = mode_label(mode, lang)
        data.append({"type": "scatter", "mode": "lines", "x": (group["index"] + 1).tolist(),
                     "y": group["t_s"].tolist(), "name": t("fig.cumulative.measured", lang, label=label),
                     "line": {"color": COLORS[i]}})
        if prediction is not None and len(prediction):
            column = f"{mode}_lower_bound_s"
            data.append({"type": "scatter", "mode": "lines", "x": (prediction["index"] + 1).tolist(),
                         "y": prediction[column].cumsum().tolist(),
                         "name": t("fig.cumulative.bound", lang, label=label),
                         "line": {"color": COLORS[i], "dash": "dash"}})
    return {"data": data, "layout": base_layout(t("fig.cumulative.title", lang), t("fig.cumulative.x", lang),
                                                t("fig.cumulative.y", lang))}


def step_work(prediction: pd.DataFrame, lang: str = "en") -> Figure:
    """The memory model's FLOPs per step in each mode that ran: flat with the cache, growing without; the static
    mode's steps attend over the whole preallocated cache, so they are flat at the cache's full length."""
    modes = [m for m in ("cached", "uncached", "static") if f"{m}_flops" in prediction]
    data = [{"type": "scatter", "mode": "lines", "x": prediction["seq_len"].tolist(),
             "y": (prediction[f"{m}_flops"] / 1e9).tolist(),
             "name": t("fig.work.name", lang, label=mode_label(m, lang)),
             "line": {"color": COLORS[i], "dash": "dot" if m == "static" else "solid"}} for i, m in enumerate(modes)]
    return {"data": data,
            "layout": base_layout(t("fig.work.title", lang), t("fig.seq_len", lang), t("fig.work.y", lang))}


def decode_bandwidth(runs, lang: str = "en") -> Figure:
    """Each mode's decode bandwidth (bytes a step reads × steps per second) against the device's limit, dashed.

    runs: kvviz.engine.compare.ModeRun, in the order to draw; a mode without a bandwidth figure (too few tokens
    for a decode rate) is drawn as a labelled gap."""
    labels = [mode_label(run.mode, lang) for run in runs]
    achieved = [(run.summary.bandwidth_achieved or 0) / 1e9 for run in runs]
    text = [t("fig.bandwidth.share", lang, share=run.summary.bandwidth_utilisation) if run.summary.bandwidth_utilisation
            else "n/a" for run in runs]
    data = [{"type": "bar", "x": labels, "y": achieved, "text": text, "textposition": "outside",
             "marker": {"color": [COLORS[i % len(COLORS)] for i in range(len(runs))]},
             "hovertemplate": "%{x}: %{y:,.2f} GB/s<extra></extra>", "showlegend": False}]
    layout = base_layout(t("fig.bandwidth.title", lang), t("fig.bandwidth.x", lang), "GB/s")
    limit = next((run.summary.bandwidth_bound for run in runs if run.summary.bandwidth_bound), None)
    if limit:
        shape, note = hline(limit / 1e9, t("fig.bandwidth.limit", lang, limit=limit / 1e9))
        layout |= {"shapes": [shape], "annotations": [note]}
        layout["yaxis"] |= {"range": [0, max([limit / 1e9, *achieved]) * 1.2]}
    return {"data": data, "layout": layout}




def lifecycle(phases: dict[str, float], frame: pd.DataFrame, lang: str = "en") -> Figure:
    """The request's life on one time axis: queued, tokenized, prefill, then each decode token as a tick."""
    t_acq = phases.get("device acquired", 0.0)
    t_tok = phases.get("tokenized", t_acq)
    t_pre = phases.get("prefill done", t_tok)
    t_end = frame["t_s"].iloc[-1] if len(frame) else phases.get("finished", t_pre)
    spans = [("queued", 0.0, t_acq), ("tokenize", t_acq, t_tok), ("prefill", t_tok, t_pre),
             ("decode", t_pre, t_end)]
    names = {name: t(f"fig.phase.{name}", lang) for name in PHASE_COLORS}
    data = [{"type": "bar", "orientation": "h", "y": [t("fig.life.request", lang)], "x": [(end - start) * 1e3],
             "base": [start * 1e3], "name": t("fig.life.span", lang, name=names[name], ms=fmt_ms(end - start)),
             "marker": {"color": PHASE_COLORS[name]}, "hovertemplate": t("fig.life.hover", lang, name=names[name])}
            for name, start, end in spans]
    if len(frame):
        data.append({"type": "scatter", "mode": "markers", "y": [t("fig.life.tokens", lang)] * len(frame),
                     "x": (frame["t_s"] * 1e3).tolist(), "name": t("fig.life.tokens_out", lang),
                     "marker": {"symbol": "line-ns-open", "size": 14, "color": INK},
                     "hovertemplate": t("fig.life.hover_token", lang)})
    ttft = frame["t_s"].iloc[0] * 1e3 if len(frame) else None
    first = None if ttft is None else vline(ttft, t("fig.life.first", lang, ms=fmt_ms(ttft / 1e3)))
    shapes, notes = ([], []) if first is None else ([first[0]], [first[1]])
    layout = base_layout(t("fig.life.title", lang), t("fig.life.x", lang), "", height=320, barmode="overlay",
                         shapes=shapes, annotations=notes)
    # A short plot: a legend below it would sit on the x axis's title, so the phases are listed at the right,
    # one per line, where plotly widens the margin to fit them.
    layout["legend"] = {"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.02}
    if t_end > 0:  # time starts at the request's arrival: plotly's padding would start the axis below zero
        layout["xaxis"] |= {"range": [0, t_end * 1e3 * 1.03]}
    return {"data": data, "layout": layout}


def ttft_parts(phases: dict[str, float], frame: pd.DataFrame, lang: str = "en") -> Figure:
    """TTFT split into its causes: queue wait, tokenization, prefill (and the first sampling step)."""
    if not len(frame):
        return empty(t("fig.ttft.none", lang))
    t_acq = phases.get("device acquired", 0.0)
    t_tok = phases.get("tokenized", t_acq)
    ttft = frame["t_s"].iloc[0]
    parts = [(t("fig.ttft.queue", lang), t_acq), (t("fig.ttft.tokenize", lang), t_tok - t_acq),
             (t("fig.ttft.prefill", lang), ttft - t_tok)]
    data = [{"type": "bar", "x": [name], "y": [value * 1e3], "name": name,
             "marker": {"color": color}, "text": [f"{fmt_ms(value)} ({value / ttft:.0%})"],
             "textposition": "outside", "cliponaxis": False}
            for (name, value), color in zip(parts, ("#b279a2", "#72b7b2", "#f58518"), strict=True)]
    return {"data": data, "layout": base_layout(t("fig.ttft.title", lang, ms=fmt_ms(ttft)), "", "ms", showlegend=False)}
