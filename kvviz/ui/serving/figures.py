"""Figures of a load on a serving endpoint: a run's live series, its requests, and a sweep's curves.

Plain functions from kvviz.serving's data (RequestRecords, metrics Samples, a ServerView, a sweep_frame
DataFrame) to plotly specs, drawn the way kvviz.ui.figures draws (JSON-ready dicts, axis titles with units,
a transparent background, an empty-state message when there is nothing to draw). The only arithmetic here
turns what was measured into what is drawn: arrivals binned into tokens/s, a counter's deltas into a rate,
seconds into ms. The live figures are redrawn about once a second during a run, so they bin with numpy and
send plotly.js a few hundred points, never the raw arrivals. Knows no HTTP, no gradio, and nothing of how a
run is started; the Serving tab (kvviz.ui.serving.tab) decides when each figure is drawn. Every figure takes
lang ("en" or "zh") for its titles, axes, legend names and hover texts (kvviz.i18n.serving).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from kvviz.base.units import fmt_ms
from kvviz.engine.metrics import percentile
from kvviz.i18n import t
from kvviz.i18n.errors import translate
from kvviz.serving.loadgen import RunResult
from kvviz.serving.metrics_reader import Sample, ServerView, server_view
from kvviz.serving.record import RequestRecord
from kvviz.ui.figures import COLORS, GRID, INK, LOG_FULL, Figure, base_layout, empty, in_ms

# One colour per phase of a request, the same in every figure: waiting (HTTP, then the first token), streaming.
PHASE = {"accepted": "#72b7b2", "first": "#f58518", "stream": "#4c78a8", "failed": "#e45756"}
CLIENT, SERVER = COLORS[0], COLORS[1]
MAX_TICK_REQUESTS = 8  # token-arrival ticks are drawn when the timeline shows at most this many requests
ITL_BINS = 40


def _axis(title: str, **extra) -> dict:
    return {"gridcolor": GRID, "zerolinecolor": GRID, "linecolor": INK, "automargin": True,
            "title": {"text": title}, **extra}


def _note(text: str, x: float = 0.5, y: float = 1.0, **extra) -> dict:
    """A line of text placed on the paper (0-1 across the plot area), for subplot titles and caveats."""
    return {"text": text, "x": x, "y": y, "xref": "paper", "yref": "paper", "showarrow": False,
            "xanchor": "center", "yanchor": "bottom", "font": {"color": INK, "size": 12}, **extra}


def legend_on_top(layout: dict) -> None:
    """The legend between the title and the plot, in the traces' order (a stack's legend is otherwise reversed):
    on a short plot a legend below would sit on the x axis's title."""
    layout["legend"] = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0.0,
                        "traceorder": "normal"}
    layout["title"] |= {"y": 1.0, "yref": "container", "yanchor": "top", "pad": {"t": 12}}
    layout["margin"] = {**layout["margin"], "t": 110}  # the title, then up to two rows of legend


# --- a run, live -------------------------------------------------------------------------------------------


def arrival_times(records: Sequence[RequestRecord]) -> np.ndarray:
    """Every output chunk's arrival in seconds since the run's start (sent_s + the arrival after the send)."""
    parts = [r.sent_s + np.asarray(r.arrivals_s, dtype=float) for r in records if r.arrivals_s]
    return np.concatenate(parts) if parts else np.zeros(0)


def client_rate(arrivals_s: Sequence[float] | np.ndarray, bin_s: float = 1.0,
                end_s: float | None = None) -> tuple[list[float], list[float]]:
    """(bin centres, chunks per second) of the arrivals, in bins of bin_s from the run's start. end_s: the
    run's clock now (live) or its duration; the last bin, cut short by it, is divided by the time it covered,
    so a run in progress does not seem to slow down in its last second."""
    t = np.asarray(arrivals_s, dtype=float)
    if not t.size:
        return [], []
    counts = np.bincount(np.floor(t / bin_s).astype(np.int64))
    starts = np.arange(counts.size) * bin_s
    widths = np.full(counts.size, bin_s)
    if end_s is not None and end_s > starts[-1]:
        widths[-1] = min(bin_s, end_s - starts[-1])
    return (starts + widths / 2).tolist(), (counts / widths).tolist()


def server_rate(samples: Sequence[Sample], bin_s: float = 1.0) -> tuple[list[float], list[float]]:
    """(bin centres, tokens per second) from the server's generation_tokens counter: the counter read at each
    bin's edges (interpolated linearly between samples) and differenced, over the bins the samples span."""
    kept = [(s.t_s, s.generation_tokens) for s in samples if s.generation_tokens is not None]
    if len(kept) < 2:
        return [], []
    t, tokens = np.array(kept, dtype=float).T
    # the run starts just after the first sample (loadgen waits for it), so the bins start at 0 like the client's
    edges = np.arange(0.0, t[-1] + 1e-9, bin_s)
    if t[-1] - edges[-1] > bin_s / 4:  # the run's last part of a bin: a shorter bin, not left out
        edges = np.append(edges, t[-1])
    if edges.size < 2:
        return [], []
    counter = np.interp(edges, t, tokens)
    return ((edges[:-1] + edges[1:]) / 2).tolist(), (np.diff(counter) / np.diff(edges)).tolist()


def throughput_over_time(arrivals_s: Sequence[float] | np.ndarray, samples: Sequence[Sample], bin_s: float = 1.0,
                         end_s: float | None = None, lang: str = "en") -> Figure:
    """Output tokens/s over the run: the client's (output chunks received per bin, one token each on vLLM) and
    the server's (its generation_tokens counter's growth per bin)."""
    cx, cy = client_rate(arrivals_s, bin_s, end_s)
    sx, sy = server_rate(samples, bin_s)
    if not cx and not sx:
        return empty(t("serving.fig.no_output", lang))
    data = [{"type": "scatter", "mode": "lines+markers", "x": cx, "y": cy, "name": t("serving.fig.tput.client", lang),
             "line": {"color": CLIENT, "width": 2, "shape": "hvh"}, "marker": {"size": 4},
             "hovertemplate": t("serving.fig.tput.client_hover", lang)},
            {"type": "scatter", "mode": "lines+markers", "x": sx, "y": sy,
             "name": t("serving.fig.tput.server", lang), "line": {"color": SERVER, "width": 2, "dash": "dot"},
             "marker": {"size": 4}, "hovertemplate": t("serving.fig.tput.server_hover", lang)}]
    layout = base_layout(t("serving.fig.tput.title", lang, bin=f"{bin_s:g}"), t("serving.fig.run_clock", lang),
                         t("serving.fig.output_tps", lang))
    layout["yaxis"] |= {"rangemode": "tozero"}
    return {"data": data, "layout": layout}


def _series(samples: Sequence[Sample], name: str, scale: float = 1.0) -> tuple[list[float], list[float]]:
    kept = [(s.t_s, getattr(s, name)) for s in samples if getattr(s, name) is not None]
    return [t for t, _ in kept], [v * scale for _, v in kept]


def requests_over_time(samples: Sequence[Sample], lang: str = "en") -> Figure:
    """The server's running and waiting requests, and the client's requests in flight, at each sample."""
    if not samples:
        return empty(t("serving.fig.req.no_samples", lang))
    lines = [("running", SERVER, "solid"), ("waiting", COLORS[3], "solid"), ("in_flight", CLIENT, "dot")]
    data = []
    for name, color, dash in lines:
        x, y = _series(samples, name)
        if x:
            data.append({"type": "scatter", "mode": "lines", "x": x, "y": y, "name": t(f"serving.fig.req.{name}", lang),
                         "line": {"color": color, "dash": dash, "width": 2, "shape": "hv"},
                         "hovertemplate": t(f"serving.fig.req.{name}_hover", lang)})
    layout = base_layout(t("serving.fig.req.title", lang), t("serving.fig.run_clock", lang),
                         t("serving.fig.req.y", lang))
    few = max((y for trace in data for y in trace["y"]), default=0) <= 8
    layout["yaxis"] |= {"rangemode": "tozero"} | ({"dtick": 1} if few else {})  # whole requests, not 0.5
    return {"data": data, "layout": layout}


def kv_usage_over_time(samples: Sequence[Sample], lang: str = "en") -> Figure:
    """The server's KV-cache usage (%) beside kvviz's prediction for the requests then in flight."""
    mx, my = _series(samples, "kv_usage", 100)
    if not mx:
        return empty(t("serving.fig.kv.none", lang))
    px, py = _series(samples, "predicted_kv_usage", 100)
    data = [{"type": "scatter", "mode": "lines", "x": mx, "y": my, "name": t("serving.fig.kv.used", lang),
             "line": {"color": SERVER, "width": 2, "shape": "hv"},
             "hovertemplate": t("serving.fig.kv.used_hover", lang)}]
    if px:
        data.append({"type": "scatter", "mode": "markers", "x": px, "y": py,
                     "name": t("serving.fig.kv.predicted", lang),
                     "marker": {"color": CLIENT, "size": 6, "symbol": "circle-open"},
                     "hovertemplate": t("serving.fig.kv.predicted_hover", lang)})
    title = t("serving.fig.kv.title" if px else "serving.fig.kv.title_unknown", lang)
    layout = base_layout(title, t("serving.fig.run_clock", lang), t("serving.fig.kv.y", lang))
    layout["yaxis"] |= {"rangemode": "tozero"}
    return {"data": data, "layout": layout}


# --- a run's requests ---------------------------------------------------------------------------------------


def request_phases(r: RequestRecord) -> tuple[float, float, float, float]:
    """(sent, accepted, first token, done) of a completed request, in seconds since the run's start; a
    missing time (no accepted_s, no e2e_s) collapses onto the one before it."""
    accepted = r.sent_s + (r.accepted_s if r.accepted_s is not None else 0.0)
    first = r.sent_s + r.ttft_s
    done = r.sent_s + (r.e2e_s if r.e2e_s is not None else (r.arrivals_s[-1] if r.arrivals_s else r.ttft_s))
    return r.sent_s, accepted, first, done


def _segments(done: list[RequestRecord], lang: str = "en") -> list[dict]:
    spans = [request_phases(r) for r in done]
    names = [(key, i, t(f"serving.fig.phase.{key}", lang)) for i, key in enumerate(("accepted", "first", "stream"))]
    return [{"type": "bar", "orientation": "h", "y": [r.index for r in done],
             "x": [s[i + 1] - s[i] for s in spans], "base": [s[i] for s in spans], "name": label,
             "marker": {"color": PHASE[key]}, "customdata": [(s[i + 1] - s[i]) * 1e3 for s in spans],
             "hovertemplate": t("serving.fig.phase.hover", lang, label=label)}
            for key, i, label in names]


def _ticks(done: list[RequestRecord], lang: str = "en") -> dict:
    x = [r.sent_s + a for r in done for a in r.arrivals_s]
    y = [r.index for r in done for _ in r.arrivals_s]
    return {"type": "scatter", "mode": "markers", "x": x, "y": y, "name": t("serving.fig.tick", lang),
            "marker": {"symbol": "line-ns-open", "size": 10, "color": INK},
            "hovertemplate": t("serving.fig.tick.hover", lang)}


def _failures(failed: list[RequestRecord], lang: str = "en") -> dict:
    x = [r.sent_s + (r.e2e_s or (r.arrivals_s[-1] if r.arrivals_s else 0.0)) for r in failed]
    why = [translate(r.error, lang) if r.error else t("serving.fig.failed.none", lang) for r in failed]
    return {"type": "scatter", "mode": "markers", "x": x, "y": [r.index for r in failed],
            "name": t("serving.fig.failed", lang), "marker": {"symbol": "x", "size": 10, "color": PHASE["failed"]},
            "customdata": [w[:120] for w in why],
            "hovertemplate": t("serving.fig.failed.hover", lang)}


def request_timeline(records: Sequence[RequestRecord], max_requests: int = 64, lang: str = "en") -> Figure:
    """Each request's life through HTTP, one row per request (the first max_requests by index): sent, response
    accepted, first token, done, as stacked segments on the run's clock; each output chunk as a tick when few
    requests are shown; failed requests as a cross where they ended."""
    shown = sorted(records, key=lambda r: r.index)[:max_requests]
    if not shown:
        return empty(t("serving.fig.timeline.none", lang))
    done = [r for r in shown if r.ok]
    failed = [r for r in shown if not r.ok]
    data = _segments(done, lang) if done else []
    if done and len(shown) <= MAX_TICK_REQUESTS:
        data.append(_ticks(done, lang))
    if failed:
        data.append(_failures(failed, lang))
    more = t("serving.fig.timeline.more", lang, shown=len(shown), total=len(records)) \
        if len(records) > len(shown) else ""
    layout = base_layout(t("serving.fig.timeline.title", lang, more=more), t("serving.fig.run_clock", lang),
                         t("serving.fig.timeline.y", lang), height=min(900, 240 + 16 * len(shown)),
                         barmode="stack", bargap=0.25)
    layout["yaxis"] |= {"autorange": "reversed"} | ({"dtick": 1} if len(shown) <= 16 else {})
    legend_on_top(layout)
    return {"data": data, "layout": layout}


def log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2, 5, 10, 20, 50... from lo to hi (every digit where that gives fewer than two): labels a log axis
    prints at full size, where plotly's own minor labels come out tiny."""
    start, end = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for digits in ((1, 2, 5), range(1, 10)):
        ticks = [m * 10.0**k for k in range(start, end + 1) for m in digits if lo <= m * 10.0**k <= hi]
        if len(ticks) >= 2:
            break
    return ticks


def _itl_histogram(records: Sequence[RequestRecord]) -> tuple[list[float], list[int], list[float]]:
    """(bin centres in ms, counts, bin widths in ms) of every gap between chunks, in log-spaced bins."""
    gaps = np.array([g for r in records if r.ok for g in r.itl_s], dtype=float) * 1e3
    gaps = gaps[gaps > 0]
    if not gaps.size:
        return [], [], []
    lo, hi = gaps.min(), gaps.max()
    edges = np.geomspace(lo, hi * 1.0001, ITL_BINS + 1) if hi > lo * 1.01 else np.array([lo * 0.99, hi * 1.01])
    counts, edges = np.histogram(gaps, bins=edges)
    return np.sqrt(edges[:-1] * edges[1:]).tolist(), counts.tolist(), np.diff(edges).tolist()


def ttft_itl(records: Sequence[RequestRecord], lang: str = "en") -> Figure:
    """Left: each completed request's TTFT against when it was sent. Right: how the gaps between output chunks
    (ITL) spread, every request's pooled, on a log scale (a prefill joining the batch shows as the long tail)."""
    done = [r for r in records if r.ok]
    if not done:
        return empty(t("serving.fig.no_completed", lang))
    x, counts, widths = _itl_histogram(done)
    gaps = [g for r in done for g in r.itl_s]
    itl = t("serving.fig.itl", lang) if not gaps else \
        t("serving.fig.itl.percentiles", lang, p50=fmt_ms(percentile(gaps, 50)),
          p99=fmt_ms(percentile(gaps, 99)))
    data = [{"type": "scatter", "mode": "markers", "x": [r.sent_s for r in done], "y": [r.ttft_s * 1e3 for r in done],
             "name": t("serving.fig.ttft.name", lang), "marker": {"color": PHASE["first"], "size": 7},
             "customdata": [r.index for r in done],
             "hovertemplate": t("serving.fig.ttft.hover", lang)},
            {"type": "bar", "x": x, "y": counts, "width": widths, "name": t("serving.fig.itl.name", lang),
             "marker": {"color": PHASE["stream"]}, "xaxis": "x2", "yaxis": "y2",
             "hovertemplate": t("serving.fig.itl.hover", lang)}]
    layout = base_layout(t("serving.fig.ttft.title", lang), t("serving.fig.ttft.x", lang),
                         t("serving.fig.ttft.y", lang),
                         annotations=[_note(t("serving.fig.ttft.note", lang), 0.22), _note(itl, 0.78)])
    layout["xaxis"] |= {"domain": [0.0, 0.44]}
    layout["yaxis"] |= {"rangemode": "tozero"}
    layout["xaxis2"] = _axis(t("serving.fig.itl.x", lang), domain=[0.56, 1.0], anchor="y2", type="log")
    if x:  # the range in log10 units, as plotly takes a log axis's range
        lo, hi = min(x) / 1.15, max(x) * 1.15
        layout["xaxis2"] |= {"range": [math.log10(lo), math.log10(hi)], "tickvals": log_ticks(lo, hi)}
    layout["yaxis2"] = _axis(t("serving.fig.itl.y", lang), anchor="x2", rangemode="tozero")
    return {"data": data, "layout": layout}


def client_phase_means(records: Sequence[RequestRecord]) -> dict[str, float] | None:
    """The mean completed request as the client clocked it, in seconds: sent → accepted, accepted → first
    token, first token → done; None without a completed request."""
    spans = [request_phases(r) for r in records if r.ok]
    if not spans:
        return None
    n = len(spans)
    return {"sent → accepted": sum(a - s for s, a, _, _ in spans) / n,
            "accepted → first token": sum(f - a for _, a, f, _ in spans) / n,
            "first token → done": sum(d - f for _, _, f, d in spans) / n}


def _stack_bar(row: str, parts: dict[str, float], colors: Sequence[str], legendgroup: str,
               lang: str = "en") -> list[dict]:
    """One bar of stacked parts; each part's ms in its legend entry (a thin segment has no room for text).
    legendgroup ("client" or "server") names the bar's side; parts' names are keys of serving.fig.mean.*."""
    who = t(f"serving.fig.who.{legendgroup}", lang)
    bars = []
    for (name, value), color in zip(parts.items(), colors, strict=False):
        part = t(f"serving.fig.mean.{name}", lang)
        bars.append({"type": "bar", "orientation": "h", "y": [row], "x": [value * 1e3],
                     "name": t("serving.fig.stack.name", lang, who=who, part=part, ms=fmt_ms(value)),
                     "marker": {"color": color}, "legendgroup": legendgroup,
                     "hovertemplate": t("serving.fig.stack.hover", lang, who=who, part=part)})
    return bars


def client_vs_server(records: Sequence[RequestRecord], view: ServerView | None, lang: str = "en") -> Figure:
    """The mean request as the client measured it (sent → accepted → first token → done) above the server's
    own mean queue, prefill and decode times (vLLM's request-time histograms), in ms; the server's mean TTFT
    as a diamond on its bar. Without the histograms, the client's bar alone and a note that says so."""
    client = client_phase_means(records)
    if client is None:
        return empty(t("serving.fig.no_completed", lang))
    c_row, s_row = t("serving.fig.row.client", lang), t("serving.fig.row.server", lang)
    client = dict(zip(("accepted", "first", "stream"), client.values(), strict=True))  # its parts' keys
    data = _stack_bar(c_row, client, [PHASE["accepted"], PHASE["first"], PHASE["stream"]], "client", lang)
    notes = []
    if view is not None and view.queue_mean_s is not None:
        server = {"queued": view.queue_mean_s, "prefill": view.prefill_mean_s or 0.0,
                  "decode": view.decode_mean_s or 0.0}
        data += _stack_bar(s_row, server, [COLORS[5], COLORS[1], COLORS[0]], "server", lang)
        if view.ttft_mean_s is not None:
            data.append({"type": "scatter", "mode": "markers", "y": [s_row], "x": [view.ttft_mean_s * 1e3],
                         "name": t("serving.fig.server_ttft", lang, ms=fmt_ms(view.ttft_mean_s)),
                         "legendgroup": "server",
                         "marker": {"symbol": "diamond", "size": 12, "color": INK},
                         "hovertemplate": t("serving.fig.server_ttft.hover", lang)})
    else:
        notes.append(_note(t("serving.fig.no_histograms", lang), 0.5, 1.0, xanchor="center", yanchor="bottom"))
    layout = base_layout(t("serving.fig.means.title", lang), t("serving.fig.means.x", lang), "",
                         height=300, barmode="stack", annotations=notes)
    layout["yaxis"] |= {"autorange": "reversed"}
    layout["legend"] = {"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.02,
                        "traceorder": "grouped"}
    return {"data": data, "layout": layout}


# --- a sweep ------------------------------------------------------------------------------------------------


def _levels_axis(frame: pd.DataFrame) -> dict:
    """Requests in flight on a log-2 axis, ticked at the sweep's own levels."""
    levels = [int(c) for c in frame["concurrency"]]
    return {"type": "log", "tickvals": levels, "ticktext": [str(c) for c in levels]}


def sweep_throughput(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """Output tokens/s against requests in flight, each point labelled with its completed requests/s (with the
    same tokens per request the two curves are one curve, so requests/s rides on it as text)."""
    if frame is None or not len(frame):
        return empty(t("serving.fig.no_sweep", lang))
    f = frame.sort_values("concurrency")
    data = [{"type": "scatter", "mode": "lines+markers+text", "x": f["concurrency"].tolist(),
             "y": f["output_tokens_per_s"].tolist(), "text": [f"{r:,.1f} req/s" for r in f["requests_per_s"]],
             "textposition": ["top right", *["top left"] * (len(f) - 1)], "cliponaxis": False,
             "name": t("serving.fig.sweep_tput.name", lang),
             "line": {"color": CLIENT, "width": 2}, "marker": {"size": 8},
             "hovertemplate": t("serving.fig.sweep_tput.hover", lang)}]
    layout = base_layout(t("serving.fig.sweep_tput.title", lang), t("serving.fig.levels.x", lang),
                         t("serving.fig.output_tps", lang))
    layout["xaxis"] |= _levels_axis(f)
    layout["yaxis"] |= {"rangemode": "tozero"}
    return {"data": data, "layout": layout}


def sweep_latency(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """TTFT and TPOT, p50 and p99, in ms against requests in flight; log y when they span more than 20×."""
    if frame is None or not len(frame):
        return empty(t("serving.fig.no_sweep", lang))
    f = frame.sort_values("concurrency")
    data = []
    for metric, color in (("ttft", PHASE["first"]), ("tpot", PHASE["stream"])):
        for q, dash, width in (("p50", "solid", 2), ("p99", "dot", 1.5)):
            data.append({"type": "scatter", "mode": "lines+markers", "x": f["concurrency"].tolist(),
                         "y": in_ms(f[f"{metric}_{q}_s"].tolist()), "name": f"{metric.upper()} {q}",
                         "line": {"color": color, "dash": dash, "width": width}, "marker": {"size": 6},
                         "hovertemplate": t("serving.fig.latency.hover", lang, metric=metric.upper(), q=q)})
    values = [v for trace in data for v in trace["y"] if v is not None and v > 0]
    log = bool(values) and max(values) / min(values) > 20
    layout = base_layout(t("serving.fig.latency.title", lang), t("serving.fig.levels.x", lang),
                         t("serving.fig.latency.log", lang) if log else "ms")
    layout["xaxis"] |= _levels_axis(f)
    layout["yaxis"] |= LOG_FULL if log else {"rangemode": "tozero"}
    return {"data": data, "layout": layout}


def sweep_tradeoff(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """Each user's decode speed (tokens/s per user, 1 / TPOT p50) against the server's total output tokens/s,
    one point per level labelled with its requests in flight: up and left is fast for one user, right is
    throughput for all."""
    if frame is None or "tokens_per_s_per_user" not in frame:
        return empty(t("serving.fig.no_sweep", lang))
    f = frame.dropna(subset=["tokens_per_s_per_user"]).sort_values("concurrency")
    if not len(f):
        return empty(t("serving.fig.tradeoff.none", lang))
    data = [{"type": "scatter", "mode": "lines+markers+text", "x": f["output_tokens_per_s"].tolist(),
             "y": f["tokens_per_s_per_user"].tolist(),
             "text": [t("serving.fig.tradeoff.level", lang, concurrency=int(c)) for c in f["concurrency"]],
             "textposition": "top center", "cliponaxis": False, "name": t("serving.fig.tradeoff.name", lang),
             "line": {"color": CLIENT, "width": 2}, "marker": {"size": 9},
             "hovertemplate": t("serving.fig.tradeoff.hover", lang)}]
    layout = base_layout(t("serving.fig.tradeoff.title", lang), t("serving.fig.tradeoff.x", lang),
                         t("serving.fig.tradeoff.y", lang), showlegend=False)
    layout["xaxis"] |= {"rangemode": "tozero"}
    layout["yaxis"] |= {"rangemode": "tozero"}
    return {"data": data, "layout": layout}


def _bar_text(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:,.1f} {unit}"


def prefix_cache(without: RunResult, with_: RunResult, lang: str = "en") -> Figure:
    """The same load twice, without and with a shared prompt prefix: the client's TTFT p50 and the server's mean
    prefill time side by side, in ms; the prefix cache's hit rate (the server's) in the title."""
    views = [server_view(without.samples), server_view(with_.samples)]
    data = []
    names = (t("serving.fig.prefix.without", lang), t("serving.fig.prefix.with", lang))
    bars = [t("serving.fig.prefix.ttft", lang), t("serving.fig.prefix.prefill", lang)]
    for result, view, name, color in zip((without, with_), views, names, (COLORS[7], COLORS[2]), strict=True):
        y = in_ms([result.stats.ttft.p50, view.prefill_mean_s if view else None])
        data.append({"type": "bar", "x": bars, "y": y, "name": name,
                     "marker": {"color": color}, "text": [_bar_text(v, "ms") for v in y], "textposition": "outside",
                     "cliponaxis": False, "hovertemplate": t("serving.fig.prefix.hover", lang, name=name)})
    rates = [v.prefix_hit_rate if v else None for v in views]
    said = t("serving.fig.prefix.sep", lang).join(
        t(f"serving.fig.prefix.rate_{n}", lang, rate=f"{r:.0%}")
        for n, r in zip(("without", "with"), rates, strict=True) if r is not None)
    title = t("serving.fig.prefix.title", lang, said=said) if said else t("serving.fig.prefix.title_none", lang)
    layout = base_layout(title, "", "ms", barmode="group")
    layout["yaxis"] |= {"rangemode": "tozero"}
    return {"data": data, "layout": layout}


# (column, its panel's label: a catalogue key or, for an acronym, the label itself, scale, unit)
ENGINE_PANELS = (("output_tokens_per_s", "serving.fig.output_tps", 1.0, "tokens/s"),
                 ("ttft_p50_s", "TTFT p50", 1e3, "ms"), ("tpot_p50_s", "TPOT p50", 1e3, "ms"))


def engine_vs_server(frame: pd.DataFrame, lang: str = "en") -> Figure:
    """One bar per row's `source` (kvviz's engine one request at a time, vLLM batching...) in three panels:
    output tokens/s, TTFT p50 (ms), TPOT p50 (ms)."""
    if frame is None or not len(frame) or "source" not in frame:
        return empty(t("serving.fig.engine.none", lang))
    data, annotations, layout_axes = [], [], {}
    width = 1 / len(ENGINE_PANELS)
    for p, (column, label, scale, unit) in enumerate(ENGINE_PANELS, start=1):
        label = t(label, lang) if label.startswith("serving.") else label
        suffix = "" if p == 1 else str(p)
        for i, row in enumerate(frame.itertuples(index=False)):
            value = getattr(row, column)
            value = None if value is None or pd.isna(value) else value * scale
            data.append({"type": "bar", "x": [label], "y": [value], "name": str(row.source),
                         "legendgroup": str(row.source), "showlegend": p == 1,
                         "marker": {"color": COLORS[i % len(COLORS)]}, "text": [_bar_text(value, unit)],
                         "textposition": "outside", "cliponaxis": False, "xaxis": f"x{suffix}", "yaxis": f"y{suffix}",
                         "hovertemplate": f"{row.source}: %{{y:,.1f}} {unit}<extra></extra>"})
        lo, hi = (p - 1) * width + 0.04, p * width - 0.04
        layout_axes[f"xaxis{suffix}"] = _axis("", domain=[lo, hi], anchor=f"y{suffix}", showticklabels=False)
        layout_axes[f"yaxis{suffix}"] = _axis(unit, anchor=f"x{suffix}", rangemode="tozero")
        annotations.append(_note(label, (lo + hi) / 2))
    layout = base_layout(t("serving.fig.engine.title", lang), "", "", barmode="group", annotations=annotations)
    layout["margin"] = {**layout["margin"], "t": 80}
    return {"data": data, "layout": layout | layout_axes}
