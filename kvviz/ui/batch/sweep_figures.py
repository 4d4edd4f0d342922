"""Figures of a batch sweep (kvviz.engine.batch_sweep): measured against the roofline's prediction over B.

Plain functions from a sweep's DataFrame (one row per batch size, COLUMNS of kvviz.engine.batch_sweep) to
plotly specs drawn as kvviz.ui.figures draws them (JSON-ready dicts, axis titles with units, a transparent
background, mid-grey ink). Batch sizes double, so B is on a log axis; times and rates span decades, so they
are too. The batch where the step turns compute-bound and the one where memory runs out are drawn as labelled
vertical lines when they fall on the plotted range, and named in the panel's note when they do not. Vertical
and horizontal rules are line traces, not shapes, so they sit at data values on log axes. The only arithmetic
here is units (s to ms, bytes to MiB). Titles, axes, legend names and notes are in the language asked for (lang:
"en" or "zh", kvviz.i18n's batch catalogue). Knows no gradio, no model and nothing of how the sweep ran.
"""

from __future__ import annotations

import math

import pandas as pd

from kvviz.base.units import MIB
from kvviz.i18n import t
from kvviz.ui.figures import COLORS, INK, LOG_FULL, Figure, base_layout, empty

MEASURED, PREDICTED, PER_SEQ, LIMIT = COLORS[0], COLORS[1], COLORS[2], COLORS[3]
PANELS = ("step", "throughput", "prefill", "kv")


def title(panel: str, lang: str = "en") -> str:
    """A panel's title: 'Decode step time', 'Tokens/s, total and per sequence', ..."""
    return t(f"batch.panel.{panel}", lang)


def y_title(panel: str, lang: str = "en") -> str:
    """A panel's y axis, with its unit and scale: 'ms per decode step (log)', ..."""
    return t(f"batch.panel_y.{panel}", lang)


def x_title(lang: str = "en") -> str:
    return t("batch.panel.x", lang)


LOG_X = {"type": "log", "dtick": math.log10(2)}  # ticks at 1, 2, 4, 8, ...
LOG_Y = LOG_FULL


def _axis(title: str, **extra) -> dict:
    """One axis of a panel of the overview, as kvviz.ui.figures.base_layout styles its two."""
    return {**base_layout("", title, "")["xaxis"], **extra}


def _line(x: list, y: list, name: str, color: str, *, dash: str = "solid", markers: bool = True,
          hover: str = "%{y:,.3g}", **extra) -> dict:
    return {"type": "scatter", "mode": "lines+markers" if markers else "lines", "x": x, "y": y, "name": name,
            "line": {"color": color, "dash": dash, "width": 2 if markers else 1.5},
            "marker": {"color": color, "size": 7}, "hovertemplate": f"B=%{{x}}: {hover}<extra>{name}</extra>",
            **extra}


def _rule(b: float, y_lo: float, y_hi: float, text: str, name: str) -> dict:
    """A vertical line at batch b from y_lo to y_hi with `text` at its top: a line trace (data coordinates on
    log axes too)."""
    return {"type": "scatter", "mode": "lines+text", "x": [b, b], "y": [y_lo, y_hi], "text": ["", text],
            "textposition": "bottom left", "textfont": {"color": INK, "size": 11}, "name": name,
            "line": {"color": INK, "dash": "dot", "width": 1}, "hoverinfo": "skip", "cliponaxis": False}


def limits_in_range(frame: pd.DataFrame) -> dict[str, int | None]:
    """The compute-bound and memory-limit batches of the sweep, each None when it lies off the plotted range
    (beyond twice the largest batch measured), where the panel names it in its note instead."""
    top = 2 * frame["batch"].max()
    cb, mem = frame["compute_bound_batch"].iloc[0], frame["memory_limit_batch"].iloc[0]
    return {"compute_bound": None if pd.isna(cb) or cb > top else int(cb),
            "memory_limit": None if mem > top else int(mem)}


def _span(*columns: pd.Series) -> tuple[float, float]:
    values = pd.concat(columns)
    values = values[values > 0]
    return float(values.min()) / 1.5, float(values.max()) * 1.5


def step_traces(frame: pd.DataFrame, lang: str = "en") -> list[dict]:
    """Measured median decode step (bars: the fastest and slowest step) against the roofline's lower bound and
    its compute term alone; the compute-bound batch as a rule."""
    f = frame.sort_values("batch")
    b = f["batch"].tolist()
    ms = f["step_s"] * 1e3
    traces = [
        _line(b, ms.tolist(), t("batch.trace.step_measured", lang), MEASURED, hover="%{y:,.2f} ms",
              error_y={"type": "data", "symmetric": False, "color": MEASURED, "thickness": 1,
                       "array": (f["step_max_s"] * 1e3 - ms).tolist(),
                       "arrayminus": (ms - f["step_min_s"] * 1e3).tolist()}),
        _line(b, (f["step_s_predicted"] * 1e3).tolist(), t("batch.trace.step_roofline", lang),
              PREDICTED, dash="dash", hover="%{y:,.3f} ms"),
        _line(b, (f["step_compute_s_predicted"] * 1e3).tolist(), t("batch.trace.step_compute", lang), PREDICTED,
              dash="dot", markers=False, hover="%{y:,.3f} ms"),
    ]
    cb = limits_in_range(frame)["compute_bound"]
    if cb is not None:
        lo, hi = _span(ms, f["step_compute_s_predicted"] * 1e3, f["step_s_predicted"] * 1e3)
        traces.append(_rule(cb, lo, hi, t("batch.trace.compute_rule", lang, b=f"{cb:,}"),
                            t("batch.trace.compute_rule_name", lang)))
    return traces


def throughput_traces(frame: pd.DataFrame, lang: str = "en") -> list[dict]:
    """Tokens/s of the whole batch (B / step) and of each sequence (1 / step), measured and predicted."""
    f = frame.sort_values("batch")
    b = f["batch"].tolist()
    return [
        _line(b, f["tokens_per_s_total"].tolist(), t("batch.trace.total_measured", lang), MEASURED,
              hover="%{y:,.0f} tokens/s"),
        _line(b, f["tokens_per_s_total_predicted"].tolist(), t("batch.trace.total_roofline", lang), MEASURED,
              dash="dash", markers=False, hover="%{y:,.0f} tokens/s"),
        _line(b, f["tokens_per_s_per_seq"].tolist(), t("batch.trace.seq_measured", lang), PER_SEQ,
              hover="%{y:,.1f} tokens/s"),
        _line(b, f["tokens_per_s_per_seq_predicted"].tolist(), t("batch.trace.seq_roofline", lang), PER_SEQ,
              dash="dash", markers=False, hover="%{y:,.1f} tokens/s"),
    ]


def prefill_traces(frame: pd.DataFrame, lang: str = "en") -> list[dict]:
    """The batch's prefill (every sequence's time to first token) measured against prefill_estimate."""
    f = frame.sort_values("batch")
    b = f["batch"].tolist()
    return [_line(b, (f["prefill_s"] * 1e3).tolist(), t("batch.trace.prefill_measured", lang), MEASURED,
                  hover="%{y:,.1f} ms"),
            _line(b, (f["prefill_s_predicted"] * 1e3).tolist(), t("batch.trace.prefill_roofline", lang), PREDICTED,
                  dash="dash", hover="%{y:,.2f} ms")]


def kv_traces(frame: pd.DataFrame, lang: str = "en") -> list[dict]:
    """The cache's bytes after the last step, measured (markers) on the memory model's line, the KV budget as a
    ceiling, and the memory-limit batch as a rule when it falls on the plotted range."""
    f = frame.sort_values("batch")
    b = f["batch"].tolist()
    traces = [_line(b, (f["kv_bytes_predicted"] / MIB).tolist(), t("batch.trace.kv_predicted", lang), PREDICTED,
                    dash="dash", markers=False, hover="%{y:,.3f} MiB"),
              {**_line(b, (f["kv_bytes"] / MIB).tolist(), t("batch.trace.kv_measured", lang), MEASURED,
                       hover="%{y:,.3f} MiB"), "mode": "markers"}]
    budget = f["kv_budget_bytes"].iloc[0] / MIB
    mem = limits_in_range(frame)["memory_limit"]
    x_hi = max(b[-1], mem or 0)
    traces.append(_line([b[0], x_hi], [budget, budget], t("batch.trace.kv_budget", lang, gib=f"{budget / 1024:,.1f}"),
                        LIMIT, dash="dot", markers=False, hover="%{y:,.0f} MiB"))
    if mem is not None:
        lo = float(f["kv_bytes"].min()) / MIB / 1.5
        traces.append(_rule(mem, lo, budget, t("batch.trace.memory_rule", lang, b=f"{mem:,}"),
                            t("batch.trace.memory_rule_name", lang)))
    return traces


TRACES = {"step": step_traces, "throughput": throughput_traces, "prefill": prefill_traces, "kv": kv_traces}


def panel_note(frame: pd.DataFrame, panel: str, lang: str = "en") -> str:
    """A line under a panel's title naming a limit the panel cannot show on its range ('' when none)."""
    limits = limits_in_range(frame)
    cb, mem = frame["compute_bound_batch"].iloc[0], int(frame["memory_limit_batch"].iloc[0])
    if panel == "step" and limits["compute_bound"] is None:
        return (t("batch.note.never_compute", lang) if pd.isna(cb) else
                t("batch.note.compute_beyond", lang, b=f"{int(cb):,}"))
    if panel == "kv" and limits["memory_limit"] is None:
        return t("batch.note.memory", lang, b=f"{mem:,}")
    return ""


def _single(frame: pd.DataFrame, panel: str, lang: str) -> Figure:
    if frame is None or frame.empty:
        return empty(t("batch.panel.empty", lang))
    note = panel_note(frame, panel, lang)
    text = title(panel, lang) + (f"<br><sup>{note}</sup>" if note else "")
    return {"data": TRACES[panel](frame, lang),
            "layout": _panel_layout(text, x_title(lang), y_title(panel, lang))}


def _panel_layout(title: str, x: str, y: str) -> dict:
    layout = base_layout(title, x, y)
    layout["xaxis"] |= LOG_X
    layout["yaxis"] |= LOG_Y
    layout["margin"] = {**layout["margin"], "t": 60}  # room for a note under the title
    return layout


def step_time(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """Decode step time against B, measured against the roofline, the compute-bound batch marked."""
    return _single(frame, "step", lang)


def throughput(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """Tokens/s in total and per sequence against B, measured and predicted."""
    return _single(frame, "throughput", lang)


def prefill_time(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """TTFT (the batch's prefill) against B, measured and predicted."""
    return _single(frame, "prefill", lang)


def kv_bytes(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """KV bytes against B, measured on the prediction, under the calculator's budget."""
    return _single(frame, "kv", lang)


def _axis_key(k: int, axis: str) -> str:
    return axis if k == 1 else f"{axis}{k}"


def overview(frame: pd.DataFrame, height_per_model: int = 380, lang: str = "en") -> Figure:
    """The four panels side by side for every model of the frame (one row each): what the benchmark saves and the
    app can show at once. Each model's limits are its own; the legend shows each kind of line once."""
    if frame is None or frame.empty:
        return empty(t("batch.panel.empty", lang))
    models = list(dict.fromkeys(frame["model"]))
    n, gap, vgap = len(models), 0.045, 0.16 / max(len(models), 1)
    layout = base_layout(t("batch.panel.overview", lang), "", "", height=height_per_model * n + 120,
                         annotations=[])
    layout["margin"] = {"l": 60, "r": 20, "t": 80, "b": 60}
    layout["legend"] = {"orientation": "h", "yanchor": "top", "y": -0.08 / n, "xanchor": "left", "x": 0.0}
    data, seen = [], set()
    for r, model in enumerate(models):
        f = frame[frame["model"] == model]
        top = 1 - r / n
        y_dom = [top - 1 / n + vgap, top - 0.06 / n]
        for c, panel in enumerate(PANELS):
            k = r * len(PANELS) + c + 1
            x_dom = [c / len(PANELS) + gap / 2, (c + 1) / len(PANELS) - gap / 2]
            for trace in TRACES[panel](f, lang):
                data.append({**trace, "xaxis": _axis_key(k, "x"), "yaxis": _axis_key(k, "y"),
                             "legendgroup": trace["name"], "showlegend": trace["name"] not in seen})
                seen.add(trace["name"])
            layout[_axis_key(k, "xaxis")] = _axis(x_title(lang), domain=x_dom, anchor=_axis_key(k, "y"), **LOG_X)
            layout[_axis_key(k, "yaxis")] = _axis(y_title(panel, lang), domain=y_dom, anchor=_axis_key(k, "x"), **LOG_Y)
            note = panel_note(f, panel, lang)
            text = f"{model}: {title(panel, lang)}" + (f"<br><sup>{note}</sup>" if note else "")
            layout["annotations"].append({
                "text": text, "x": sum(x_dom) / 2, "y": y_dom[1], "xref": "paper", "yref": "paper",
                "showarrow": False, "xanchor": "center", "yanchor": "bottom", "font": {"color": INK, "size": 12}})
    return {"data": data, "layout": layout}
