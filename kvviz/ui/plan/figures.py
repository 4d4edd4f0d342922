"""The Plan tab's figures: the predicted curves over load (throughput; TTFT and TPOT at p50 and p99; tokens/s per
user against total tokens/s), the knee and the SLO marked, measured points drawn over the lines.

Plain functions from a curve DataFrame (kvviz.ui.plan.predict.curve_row's columns, one row per load) and Marks
(what to mark, and how the curve was obtained, said in the title) to plotly specs, drawn as kvviz.ui.figures
draws. A measured frame has the same columns; its points are markers over the predicted lines. The only
arithmetic: seconds into ms. Knows no simulator, no gradio; every figure takes lang (kvviz.i18n.plan).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from kvviz.base.units import display_width
from kvviz.i18n import t
from kvviz.ui.figures import COLORS, Figure, base_layout, empty, hline, in_ms, vline

PREDICTED, MEASURED = COLORS[0], COLORS[3]
P50_P99 = (("p50", "solid", 2.0), ("p99", "dot", 1.5))


@dataclass(frozen=True)
class Marks:
    """What the figures mark: the loop (closed: load is requests in flight, else requests/s), the knee's rate and
    output tokens/s, the highest rate under the SLO (None: none held), the SLO's limits in seconds and
    percentiles, and how the curve was obtained (one line, in the figures' language)."""

    closed: bool
    knee_rate: float
    knee_tokens_per_s: float
    max_rate: float | None
    ttft_s: float
    ttft_percentile: float
    tpot_s: float
    tpot_percentile: float
    how: str


SUBTITLE_WIDTH = 46  # what a half-width figure's subtitle holds on one line, in Latin characters (plotly's titles
# do not wrap; a longer line is clipped at both edges)


def subtitle_lines(text: str, width: int = SUBTITLE_WIDTH) -> str:
    """A subtitle on as many lines as it needs, broken after its commas (", " or "，", not inside brackets), each
    line as full as fits: a part longer than the width keeps a line of its own."""
    parts, depth = [""], 0
    for i, c in enumerate(text):
        depth += (c in "(（") - (c in ")）")
        parts[-1] += c
        if depth == 0 and (c == "，" or (c == " " and text[i - 1] == ",")):
            parts.append("")
    lines = [""]
    for part in parts:
        if lines[-1] and display_width(lines[-1] + part) > width:
            lines.append("")
        lines[-1] += part
    return "<br>".join(line.rstrip() for line in lines)


def _top(marks: Marks) -> int:
    """The top margin: room for the title and each line of its subtitle, above the rules' labels."""
    return 70 + 16 * subtitle_lines(marks.how).count("<br>")


def _title(key: str, marks: Marks, lang: str) -> str:
    return f"{t(key, lang)}<br><sub>{subtitle_lines(marks.how)}</sub>"


def _x(marks: Marks, lang: str) -> str:
    return t("plan.fig.x_closed" if marks.closed else "plan.fig.x_open", lang)


def _has(frame: pd.DataFrame | None) -> bool:
    return frame is not None and len(frame) > 0


def _rate_rules(marks: Marks, lang: str) -> tuple[list, list]:
    """An open loop's knee and highest rate under the SLO as vertical rules (a closed loop's x is not a rate)."""
    if marks.closed:
        return [], []
    rules = [vline(marks.knee_rate, t("plan.fig.knee", lang, rate=marks.knee_rate))]
    if marks.max_rate and marks.max_rate != marks.knee_rate:  # at the knee, the knee's rule says it
        rules.append(vline(marks.max_rate, t("plan.fig.slo_rate", lang, rate=marks.max_rate), dash="dot",
                           top=False))
    return [s for s, _ in rules], [n for _, n in rules]


def _away_from_knee(curve: pd.DataFrame, measured: pd.DataFrame | None, marks: Marks) -> dict:
    """Where the saturated tokens/s label goes on its rule (near the plot's top, as the knee's rate label is, which
    ends at the knee's rule): the left end when the knee is in the right half of the loads drawn, else the right
    end. Always at the right end, it sat on the knee's label whenever the knee was near the right edge (Gemma 2 on an
    L4: knee 1.48/s of loads up to 1.75/s)."""
    loads = [*curve["load"].tolist(), *(measured["load"].tolist() if _has(measured) else [])]
    lo, hi = min(loads), max(loads)
    if not marks.closed and hi > lo and (marks.knee_rate - lo) / (hi - lo) > 0.5:
        return {"x": 0, "xanchor": "left"}
    return {"x": 1, "xanchor": "right"}


def throughput(curve: pd.DataFrame, marks: Marks, measured: pd.DataFrame | None = None, lang: str = "en") -> Figure:
    """Output tokens/s against load, predicted (line) and measured (markers); the knee's tokens/s as a rule."""
    if not _has(curve):
        return empty(t("plan.fig.none", lang))
    data = [{"type": "scatter", "mode": "lines+markers", "x": curve["load"].tolist(),
             "y": curve["output_tokens_per_s"].tolist(), "name": t("plan.fig.predicted", lang),
             "line": {"color": PREDICTED, "width": 2}, "marker": {"size": 6}}]
    if _has(measured):
        data.append({"type": "scatter", "mode": "markers", "x": measured["load"].tolist(),
                     "y": measured["output_tokens_per_s"].tolist(), "name": t("plan.fig.measured", lang),
                     "marker": {"color": MEASURED, "size": 11, "symbol": "x"}})
    shapes, notes = _rate_rules(marks, lang)
    knee_shape, knee_note = hline(marks.knee_tokens_per_s, t("plan.fig.knee_tokens", lang,
                                                            tokens=marks.knee_tokens_per_s))
    knee_note |= _away_from_knee(curve, measured, marks)
    layout = base_layout(_title("plan.fig.tput.title", marks, lang), _x(marks, lang), t("plan.fig.tput.y", lang),
                         shapes=[*shapes, knee_shape], annotations=[*notes, knee_note])
    layout["yaxis"] |= {"rangemode": "tozero"}
    layout["margin"]["t"] = _top(marks)
    return {"data": data, "layout": layout}


def latency(curve: pd.DataFrame, marks: Marks, metric: str, measured: pd.DataFrame | None = None,
            lang: str = "en") -> Figure:
    """TTFT or TPOT (metric "ttft" or "tpot") at p50 and p99 in ms against load, predicted and measured; the SLO's
    limit as a rule."""
    if not _has(curve):
        return empty(t("plan.fig.none", lang))
    name = metric.upper()
    data = []
    for q, dash, width in P50_P99:
        data.append({"type": "scatter", "mode": "lines+markers", "x": curve["load"].tolist(),
                     "y": in_ms(curve[f"{metric}_{q}_s"]), "name": t("plan.fig.predicted_q", lang, metric=name, q=q),
                     "line": {"color": PREDICTED, "dash": dash, "width": width}, "marker": {"size": 5}})
        if _has(measured):
            data.append({"type": "scatter", "mode": "markers", "x": measured["load"].tolist(),
                         "y": in_ms(measured[f"{metric}_{q}_s"]),
                         "name": t("plan.fig.measured_q", lang, metric=name, q=q),
                         "marker": {"color": MEASURED, "size": 10, "symbol": "x" if q == "p50" else "circle-open"}})
    limit, q = (marks.ttft_s, marks.ttft_percentile) if metric == "ttft" else (marks.tpot_s, marks.tpot_percentile)
    slo_shape, slo_note = hline(limit * 1000, t("plan.fig.slo_limit", lang, metric=name, q=f"{q:g}",
                                                ms=f"{limit * 1000:,.4g}"))
    shapes, notes = _rate_rules(marks, lang)
    layout = base_layout(_title(f"plan.fig.{metric}.title", marks, lang), _x(marks, lang),
                         t("plan.fig.ms", lang, metric=name), shapes=[*shapes, slo_shape],
                         annotations=[*notes, slo_note])
    layout["yaxis"] |= {"rangemode": "tozero"}
    layout["margin"]["t"] = _top(marks)
    return {"data": data, "layout": layout}


def tradeoff(curve: pd.DataFrame, marks: Marks, measured: pd.DataFrame | None = None, lang: str = "en") -> Figure:
    """Tokens/s per user (1 / TPOT p50) against total output tokens/s: each load a point, predicted and measured."""
    if not _has(curve):
        return empty(t("plan.fig.none", lang))
    data = [{"type": "scatter", "mode": "lines+markers", "x": curve["output_tokens_per_s"].tolist(),
             "y": curve["user_tokens_per_s"].tolist(), "name": t("plan.fig.predicted", lang),
             "text": [f"{x:,.3g}" for x in curve["load"]],
             "hovertemplate": t("plan.fig.tradeoff.hover", lang, unit=_x(marks, lang)),
             "line": {"color": PREDICTED, "width": 2}, "marker": {"size": 6}}]
    if _has(measured):
        data.append({"type": "scatter", "mode": "markers", "x": measured["output_tokens_per_s"].tolist(),
                     "y": measured["user_tokens_per_s"].tolist(), "name": t("plan.fig.measured", lang),
                     "marker": {"color": MEASURED, "size": 11, "symbol": "x"}})
    layout = base_layout(_title("plan.fig.tradeoff.title", marks, lang), t("plan.fig.tput.y", lang),
                         t("plan.fig.tradeoff.y", lang))
    layout["xaxis"] |= {"rangemode": "tozero"}
    layout["yaxis"] |= {"rangemode": "tozero"}
    layout["margin"]["t"] = _top(marks)
    return {"data": data, "layout": layout}
