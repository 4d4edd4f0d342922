"""Figures of the benchmark results: plotly figures from the CSV files the parts wrote, saved as interactive
HTML and as PNG.

`write_figures(results, out)` draws what `results` holds (a part's CSV in the folder itself or in a
sub-run folder such as results/tiny/; gpu*/ folders are separate runs and drawn on their own) and skips
parts that were not run. Each function takes the rows and returns a plotly Figure; nothing here measures.
This is the benchmark's only module that imports plotly (PNG export also needs kaleido and a chromium).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORS = {"kvviz": "#4c78a8", "generate": "#f58518", "plain": "#54a24b", "cached": "#4c78a8",
          "uncached": "#e45756", "static": "#54a24b", "app": "#4c78a8", "cli": "#f58518"}
TEMPLATE = "plotly_white"  # the saved PNGs are read on white pages


def _layout(fig: go.Figure, title: str, height: int = 450, width: int = 900) -> go.Figure:
    fig.update_layout(template=TEMPLATE, title={"text": title, "font": {"size": 15}}, height=height, width=width,
                      margin={"l": 70, "r": 30, "t": 70, "b": 60}, legend={"orientation": "h", "y": -0.15})
    return fig


def overhead_figure(rows: pd.DataFrame) -> go.Figure:
    """Part 1: each variant's tokens/s relative to model.generate's median, per model, every repeat shown."""
    rows = rows.assign(run=rows["model"] + " " + rows["dtype"] + ", " + rows["new_tokens"].astype(str) + " tokens")
    base = rows[rows["variant"] == "generate"].groupby("run")["tokens_per_s"].median()
    rows = rows.assign(relative=rows["tokens_per_s"] / rows["run"].map(base))
    fig = go.Figure()
    for variant, label in (("kvviz", "kvviz's instrumented loop"), ("generate", "model.generate (greedy)"),
                           ("plain", "the lesson's plain loop")):
        sel = rows[rows["variant"] == variant]
        med = sel.groupby("run", sort=False)[["relative", "tokens_per_s"]].median()
        fig.add_bar(x=med.index, y=med["relative"], name=label, marker_color=COLORS[variant], offsetgroup=variant,
                    text=[f"{v:.1f} tok/s" for v in med["tokens_per_s"]], textposition="inside",
                    insidetextanchor="start", textangle=-90)
        fig.add_scatter(x=sel["run"], y=sel["relative"], mode="markers", offsetgroup=variant, showlegend=False,
                        marker={"color": "black", "size": 5}, name=f"{label}, each repeat")
    fig.add_hline(y=0.97, line_dash="dash")
    fig.update_layout(barmode="group", scattermode="group", yaxis_title="tokens/s ÷ model.generate's median",
                      xaxis_title="model")
    return _layout(fig, "Loop overhead: median tokens/s relative to model.generate (dots: each repeat; "
                   "dashed: the 0.97 target)")


def payoff_figure(rows: pd.DataFrame) -> go.Figure:
    """Part 2: per-step latency against position and total time, cached and uncached, each prompt length."""
    runs = list(dict.fromkeys(zip(rows["model"], rows["prompt"], strict=True)))
    fig = make_subplots(rows=len(runs), cols=2, vertical_spacing=0.12, subplot_titles=[
        t for model, prompt in runs for t in (f"{model}, {prompt} prompt: time per step",
                                              f"{model}, {prompt} prompt: total time")])
    for r, (model, prompt) in enumerate(runs, start=1):
        run = rows[(rows["prompt"] == prompt) & (rows["model"] == model)]
        for mode in ("cached", "uncached"):
            m = run[run["mode"] == mode]
            decode = m[m["phase"] == "decode"]
            first = r == 1
            fig.add_scatter(x=decode["seq_len"], y=decode["dt_s"] * 1e3, mode="markers", name=f"{mode}, measured",
                            marker={"color": COLORS[mode], "size": 3}, legendgroup=mode, showlegend=first,
                            row=r, col=1)
            pred = decode[f"{mode}_lower_bound_s"]
            scale = float(pred @ decode["dt_s"] / (pred @ pred))
            fig.add_scatter(x=decode["seq_len"], y=scale * pred * 1e3, mode="lines", line={"color": "black",
                            "dash": "dash" if mode == "cached" else "dot", "width": 1},
                            name=f"{mode}, roofline shape (scaled)", legendgroup=mode, showlegend=first, row=r, col=1)
            fig.add_scatter(x=m["index"] + 1, y=m["t_s"], mode="lines", line={"color": COLORS[mode]},
                            name=f"{mode}, total", legendgroup=mode, showlegend=first, row=r, col=2)
        fig.update_xaxes(title_text="position (tokens in the sequence)", row=r, col=1)
        fig.update_yaxes(title_text="ms per decode step", rangemode="tozero", row=r, col=1)
        fig.update_xaxes(title_text="new tokens", row=r, col=2)
        fig.update_yaxes(title_text="seconds since the request", rangemode="tozero", row=r, col=2)
    return _layout(fig, "The cache's payoff: cached steps stay flat, uncached ones grow with the sequence",
                   height=330 * len(runs) + 120, width=1100)


def memory_figure(rows: pd.DataFrame) -> go.Figure:
    """Part 3: measured cache bytes (dots) on the predicted line, per family; the no-window figure dotted."""
    fams = list(dict.fromkeys(zip(rows["preset"], rows["family"], rows["layers"], strict=True)))
    cols = 2
    nrows = -(-len(fams) // cols)
    fig = make_subplots(rows=nrows, cols=cols, vertical_spacing=0.5 / nrows, horizontal_spacing=0.1,
                        subplot_titles=[f"{p} ({n} layers): {f}" for p, f, n in fams])
    window_shown = False
    for i, (preset, family, _) in enumerate(fams):
        g = rows[(rows["preset"] == preset) & (rows["family"] == family)].sort_values("seq_len")
        r, c = i // cols + 1, i % cols + 1
        first = i == 0
        if (g["no_window_bytes"] != g["predicted_bytes"]).any():
            fig.add_scatter(x=g["seq_len"], y=g["no_window_bytes"] / 2**20, mode="lines", name="without the window",
                            line={"color": "grey", "dash": "dot"}, legendgroup="nw", showlegend=not window_shown,
                            row=r, col=c)
            window_shown = True
        fig.add_scatter(x=g["seq_len"], y=g["predicted_bytes"] / 2**20, mode="lines", name="predicted",
                        line={"color": COLORS["cached"]}, legendgroup="p", showlegend=first, row=r, col=c)
        exact = g["exact"].astype(bool)
        fig.add_scatter(x=g["seq_len"], y=g["measured_bytes"] / 2**20, mode="markers", name="measured (exact)",
                        marker={"color": "black", "size": 6, "symbol": ["circle" if e else "x" for e in exact]},
                        legendgroup="m", showlegend=first, row=r, col=c)
        fig.update_xaxes(title_text="tokens in the cache's sequence", row=r, col=c)
        fig.update_yaxes(title_text="KV cache, MiB", rangemode="tozero", row=r, col=c)
    device, dtype = rows["device"].iloc[0], rows["dtype"].iloc[0]
    agree = "all equal" if rows["exact"].all() else f"{int((~rows['exact']).sum())} differ (×)"
    return _layout(fig, f"Memory truth on {device} in {dtype}: cache tensors measured against the prediction, "
                   f"{len(rows)} steps, {agree}", height=300 * nrows + 140, width=1100)


def hardware_figure(rows: pd.DataFrame) -> go.Figure:
    """Part 4: decode bandwidth and prefill FLOP/s achieved, as shares of the measured ceilings."""
    med = rows.groupby("model", sort=False).median(numeric_only=True)
    fig = go.Figure()
    fig.add_bar(x=med.index, y=med["decode_bandwidth_utilisation"] * 100, name="decode: bandwidth achieved",
                marker_color=COLORS["kvviz"], text=[f"{b / 1e9:.1f} GB/s" for b in med["decode_bandwidth"]])
    fig.add_bar(x=med.index, y=med["prefill_utilisation"] * 100, name="prefill: FLOP/s achieved",
                marker_color=COLORS["generate"], text=[f"{f / 1e9:.0f} GFLOP/s" for f in med["prefill_flop_per_s"]])
    fig.add_hline(y=100, line_dash="dash", annotation_text="the measured ceiling")
    fig.update_layout(barmode="group", yaxis_title="% of the measured ceiling", xaxis_title="model")
    return _layout(fig, "The hardware limit: how close decode and prefill run to what this machine measured")


def batch_figure(rows: pd.DataFrame) -> go.Figure:
    """The batch part: per model, the decode step, tokens/s, TTFT and KV bytes against B, measured beside the
    roofline (the app's panels, kvviz.ui.batch.sweep_figures.overview, on this module's white template)."""
    from kvviz.ui.batch.sweep_figures import overview

    fig = go.Figure(overview(rows))
    fig.update_layout(template=TEMPLATE, paper_bgcolor="white", plot_bgcolor="white", width=1500,
                      font={"color": "#444"})
    return fig


def calculator_figure(rows: pd.DataFrame) -> go.Figure:
    """Part 5: the calculator handler's latency per preset, p50 and p95 over all calls."""
    ms = rows.assign(ms=rows["seconds"] * 1e3)
    fig = go.Figure(go.Box(x=ms["preset"], y=ms["ms"], boxpoints="all", jitter=0.4, pointpos=0,
                           marker={"size": 3}, line={"color": COLORS["kvviz"]}, name="one call"))
    for q, dash in ((0.5, "dot"), (0.95, "dash")):
        fig.add_hline(y=ms["ms"].quantile(q), line_dash=dash, annotation_text=f"p{int(q * 100)} "
                      f"{ms['ms'].quantile(q):.1f} ms")
    fig.update_layout(yaxis_title="ms per slider move (handler, figures serialised)", xaxis_title="preset",
                      yaxis_rangemode="tozero")
    return _layout(fig, "Calculator responsiveness: handler latency per preset", width=1100)


def app_figure(rows: pd.DataFrame) -> go.Figure:
    """Part 5: time per output token of the same generation in the app and from the CLI, relative to the CLI."""
    base = rows[rows["where"] == "cli"].groupby("model")["tpot_s"].median()
    rows = rows.assign(relative=rows["tpot_s"] / rows["model"].map(base))
    fig = go.Figure()
    for where, label in (("app", "in the app (gradio_client)"), ("cli", "from the CLI")):
        sel = rows[rows["where"] == where]
        med = sel.groupby("model", sort=False)[["relative", "tpot_s"]].median()
        fig.add_bar(x=med.index, y=med["relative"], name=label, marker_color=COLORS[where], offsetgroup=where,
                    text=[f"{v * 1e3:.2f} ms" for v in med["tpot_s"]], textposition="inside", insidetextanchor="start")
        fig.add_scatter(x=sel["model"], y=sel["relative"], mode="markers", offsetgroup=where, showlegend=False,
                        marker={"color": "black", "size": 5}, name=f"{label}, each repeat")
    fig.update_layout(barmode="group", scattermode="group", yaxis_title="TPOT ÷ the CLI's median TPOT",
                      xaxis_title="model")
    return _layout(fig, "The app decodes as fast as the CLI: time per output token (dots: each interleaved repeat)")


def concurrency_figure(rows: pd.DataFrame) -> go.Figure:
    """Many clients at once: each job's wait in the queue and its run on the device, on one time axis."""
    fig = go.Figure()
    rows = rows.sort_values("client")
    label = rows["client"].astype(str) + " " + rows["kind"]
    done = rows["status"] == "finished"
    fig.add_bar(y=label[done], x=rows.loc[done, "queue_s"], base=rows.loc[done, "start_s"], orientation="h",
                name="waiting in the queue", marker_color="#bab0ac")
    fig.add_bar(y=label[done], x=rows.loc[done, "wall_s"] - rows.loc[done, "queue_s"],
                base=rows.loc[done, "start_s"] + rows.loc[done, "queue_s"], orientation="h", name="running",
                marker_color=COLORS["kvviz"])
    refused = rows[~done]
    if len(refused):
        fig.add_scatter(y=label[~done], x=refused["start_s"] + refused["wall_s"], mode="markers+text",
                        text=refused["status"], textposition="middle right", marker={"symbol": "x", "size": 9,
                        "color": COLORS["uncached"]}, name="told the queue is full")
    fig.update_layout(barmode="overlay", xaxis_title="seconds since the clients started", yaxis_title="client",
                      yaxis={"autorange": "reversed"})
    return _layout(fig, "Clients at once on one device: queue wait and run of each job", height=120 + 28 * len(rows))


def serving_figure(rows: pd.DataFrame) -> go.Figure:
    """The serving part: the sweep's throughput against requests in flight, with vLLM's own benchmark and
    kvviz's engine (one at a time) as points; TTFT and TPOT p50/p99 against requests in flight; the
    trade-off of tokens/s per user (1 / TPOT) against total tokens/s."""
    sweep = rows[rows["source"] == "kvviz sweep"].sort_values("concurrency")
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=(
        "output tokens/s against requests in flight", "TTFT and TPOT", "tokens/s per user against total"))
    fig.add_scatter(x=sweep["concurrency"], y=sweep["output_tokens_per_s"], mode="lines+markers",
                    name="vLLM, measured by kvviz", marker_color=COLORS["kvviz"], row=1, col=1)
    for source, color, symbol in (("kvviz", COLORS["kvviz"], "circle-open"),
                                  ("vllm bench serve", COLORS["generate"], "diamond"),
                                  ("kvviz engine (one at a time)", COLORS["plain"], "square")):
        sel = rows[rows["source"] == source]
        name = "kvviz, rounds beside vLLM's benchmark" if source == "kvviz" else source
        fig.add_scatter(x=sel["concurrency"], y=sel["output_tokens_per_s"], mode="markers", name=name,
                        marker={"color": color, "size": 11, "symbol": symbol}, row=1, col=1)
    for metric, dash in (("ttft", "solid"), ("tpot", "dot")):
        for q in ("p50", "p99"):
            fig.add_scatter(x=sweep["concurrency"], y=sweep[f"{metric}_{q}_s"] * 1e3, mode="lines+markers",
                            name=f"{metric.upper()} {q}", line={"dash": dash, "width": 1 if q == "p99" else 2},
                            row=1, col=2)
    fig.add_scatter(x=sweep["output_tokens_per_s"], y=sweep["tokens_per_s_per_user"], mode="lines+markers+text",
                    text=[f"{c}" for c in sweep["concurrency"]], textposition="top center",
                    name="trade-off (labels: in flight)", marker_color=COLORS["kvviz"], showlegend=False, row=1, col=3)
    fig.update_xaxes(title_text="requests in flight", type="log", row=1, col=1)
    fig.update_xaxes(title_text="requests in flight", type="log", row=1, col=2)
    fig.update_yaxes(title_text="ms (log scale)", type="log", row=1, col=2)
    fig.update_xaxes(title_text="total output tokens/s", row=1, col=3)
    fig.update_yaxes(title_text="tokens/s per user (1 / TPOT p50)", row=1, col=3)
    return _layout(fig, "Serving tiny with vLLM: continuous batching's throughput, latency and trade-off",
                   height=460, width=1350)


SIM_METRICS = (("output_tokens_per_s", "output tokens/s", 1.0), ("tpot_p50_s", "TPOT p50 (ms, log)", 1e3),
               ("ttft_p50_s", "TTFT p50 (ms, log)", 1e3), ("e2e_p50_s", "E2E p50 (ms, log)", 1e3))
# The latencies on a log axis: a mix of 768-token prompts runs 10-100 times the others' TPOT, which a linear axis
# drew as a flat line at 0


def simulator_figure(points: pd.DataFrame, lines: pd.DataFrame) -> go.Figure:
    """Part `simulator`: per model (columns) and metric (rows), the calibrated simulator's prediction for closed
    loops of each held-out mix (lines) and what vLLM measured (points: closed loops at their concurrency; open
    circles: the same load run a second time, where the results have it)."""
    models = list(dict.fromkeys(points["model"]))
    fig = make_subplots(rows=len(SIM_METRICS), cols=len(models), vertical_spacing=0.06, horizontal_spacing=0.08,
                        subplot_titles=[f"{m}: {label}" for _, label, _ in SIM_METRICS for m in models])
    palette = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2"]
    for col, model in enumerate(models, start=1):
        mine = lines[lines["model"] == model]
        for i, mix in enumerate(dict.fromkeys(mine["mix"])):
            color = palette[i % len(palette)]
            line = mine[mine["mix"] == mix]
            measured = points[(points["model"] == model) & (points["loop"] == "closed") & (points["kind"] ==
                              "held-out")]
            measured = measured[measured["load"].str.contains(f", {mix} x", regex=False)]
            for row, (name, _, scale) in enumerate(SIM_METRICS, start=1):
                first = row == 1 and col == 1
                fig.add_scatter(x=line["concurrency"], y=line[f"predicted_{name}"] * scale, mode="lines",
                                line={"color": color}, name=f"{mix}: predicted", legendgroup=mix,
                                showlegend=first, row=row, col=col)
                fig.add_scatter(x=measured["concurrency"], y=measured[f"measured_{name}"] * scale, mode="markers",
                                marker={"color": color, "size": 9}, name=f"{mix}: measured on vLLM",
                                legendgroup=mix, showlegend=first, row=row, col=col)
                if f"measured_again_{name}" in measured:  # the same load run again: how far it moves by itself
                    fig.add_scatter(x=measured["concurrency"], y=measured[f"measured_again_{name}"] * scale,
                                    mode="markers", marker={"color": color, "size": 9, "symbol": "circle-open"},
                                    name=f"{mix}: measured again", legendgroup=mix, showlegend=first, row=row,
                                    col=col)
    # Powers of two in full (the sweep's levels), not plotly's minor ticks that write 20 and 30 as "2" and "3"
    fig.update_xaxes(type="log", tickvals=[2 ** k for k in range(11)], tickformat=",~g")
    fig.update_xaxes(title_text="requests in flight (closed loop)", row=len(SIM_METRICS))
    for row, (_, label, _) in enumerate(SIM_METRICS, start=1):
        if label.endswith("log)"):
            fig.update_yaxes(type="log", tickformat=",~g", row=row)
    return _layout(fig, "The simulator against vLLM: predicted (lines, calibrated on other loads) and measured "
                   "(points; open: the same load again)", height=1100, width=1200)


def fast_figure(rows: pd.DataFrame) -> go.Figure:
    """Part `fast`: decode tokens/s of model.generate and kvviz's three modes, and the share of a plain streaming
    read's bandwidth (the physical ceiling) each reached, per model and dtype (bars: medians of the timed rounds;
    dots: each round). Results written before the streaming read was recorded per row draw the share of the
    matrix-vector bandwidth instead, and say so."""
    timed = rows[rows["repeat"] >= 0]
    name = timed["model"].str.replace("random:", "", regex=False)
    twin = timed["model"].str.startswith("random:")
    timed = timed.assign(run=name + twin.map({True: " twin", False: ""}) + "<br>" + timed["dtype"])
    stream = "share_of_stream_read" in timed and timed["share_of_stream_read"].notna().any()
    share = "share_of_stream_read" if stream else "bandwidth_utilisation"
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08, subplot_titles=[
        "decode tokens/s (log scale)",
        "of a streaming read's bandwidth" if stream else "of the measured matrix-vector bandwidth"])
    labels = {"generate": "model.generate", "cached": "cached", "uncached": "uncached",
              "static": "cached, static + compiled"}
    for variant, label in labels.items():
        sel = timed[timed["variant"] == variant]
        med = sel.groupby("run", sort=False)[["decode_tokens_per_s", share]].median()
        for col, key in ((1, "decode_tokens_per_s"), (2, share)):
            fig.add_bar(x=med.index, y=med[key], name=label, marker_color=COLORS[variant], offsetgroup=variant,
                        legendgroup=variant, showlegend=col == 1, row=1, col=col)
            fig.add_scatter(x=sel["run"], y=sel[key], mode="markers", offsetgroup=variant, legendgroup=variant,
                            showlegend=False, marker={"color": "black", "size": 4}, row=1, col=col)
    line = 0.7 if stream else 0.8
    fig.add_hline(y=line, line_dash="dash", row=1, col=2)
    # 1, 2 and 5 of every decade, written out whole: a run within one decade still reads
    fig.update_yaxes(type="log", tickvals=[m * 10.0**e for e in range(-1, 6) for m in (1, 2, 5)], tickformat="~g",
                     row=1, col=1)
    fig.update_yaxes(tickformat=".0%", rangemode="tozero", row=1, col=2)
    fig.update_xaxes(tickangle=0)
    fig.update_layout(barmode="group", scattermode="group",
                      legend={"orientation": "h", "x": 0, "y": -0.18, "yanchor": "top"})
    of = "a streaming read" if stream else "the bandwidth"
    return _layout(fig, "The static mode: a preallocated cache and a compiled decode step against the plain loops "
                   f"(dashed: {line:.0%} of {of})", height=500, width=1300)


def loadgen_figure(rows: pd.DataFrame) -> go.Figure:
    """Part `loadgen`: what kvviz's client read against the timed server's construction at each concurrency, as
    relative errors of TTFT p50 and output tokens/s (every repeat a dot, the medians a line, the targets dashed),
    and the client's own CPU per token."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "error against the construction", "client CPU per output token"))
    for key, label, color in (("ttft_error", "TTFT p50", COLORS["kvviz"]),
                              ("throughput_error", "output tokens/s", COLORS["generate"])):
        med = rows.groupby("concurrency")[key].median()
        fig.add_scatter(x=med.index, y=med.values, mode="lines", name=f"{label} (median)", line_color=color,
                        row=1, col=1)
        fig.add_scatter(x=rows["concurrency"], y=rows[key], mode="markers", name=f"{label} (each repeat)",
                        marker={"color": color, "size": 6}, row=1, col=1)
    for bound in (0.05, -0.05, 0.03, -0.03):
        fig.add_hline(y=bound, line_dash="dash", line_width=1, row=1, col=1)
    med = rows.groupby("concurrency")["client_cpu_us_per_token"].median()
    fig.add_scatter(x=med.index, y=med.values, mode="lines+markers", name="client CPU µs/token (median)",
                    marker_color=COLORS["plain"], row=1, col=2)
    fig.update_xaxes(title_text="requests in flight", type="log")
    fig.update_yaxes(tickformat=".0%", row=1, col=1)
    fig.update_yaxes(title_text="µs per token", rangemode="tozero", row=1, col=2)
    return _layout(fig, "kvviz's load generator against a server of known timings (dashed: ±5% TTFT, ±3% "
                   "throughput)", height=460, width=1200)


def parallel_serving_figure(rows: pd.DataFrame) -> go.Figure:
    """The same load on each parallel layout (results/parallel/serving.csv): output tokens/s, TPOT p50 and TTFT
    p50 against requests in flight, a line through each layout's medians, every run a dot."""
    keys = (("output_tokens_per_s", "output tokens/s", 1.0), ("tpot_p50_s", "TPOT p50 (ms)", 1e3),
            ("ttft_p50_s", "TTFT p50 (ms)", 1e3))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[title for _, title, _ in keys])
    palette = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2")
    for i, (layout, runs) in enumerate(rows.groupby("layout", sort=False)):
        color = palette[i % len(palette)]
        for col, (key, _, scale) in enumerate(keys, start=1):
            med = runs.groupby("concurrency")[key].median() * scale
            fig.add_scatter(x=med.index, y=med.values, mode="lines+markers", name=layout, legendgroup=layout,
                            showlegend=col == 1, line={"color": color}, row=1, col=col)
            fig.add_scatter(x=runs["concurrency"], y=runs[key] * scale, mode="markers", legendgroup=layout,
                            showlegend=False, marker={"color": color, "size": 5, "opacity": 0.5}, row=1, col=col)
    fig.update_xaxes(title_text="requests in flight", type="log", tickvals=sorted(rows["concurrency"].unique()))
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, "The same load on parallel layouts of one model (lines: medians; dots: each run)",
                   height=430, width=1200)


def save_figure(fig: go.Figure, stem: Path, png: bool = True) -> list[Path]:
    """fig as stem.html (plotly.js saved beside it, so the page opens offline) and, with png, stem.png."""
    if png and "BROWSER_PATH" not in os.environ and Path("/usr/bin/chromium").exists():
        os.environ["BROWSER_PATH"] = "/usr/bin/chromium"  # kaleido's renderer: Debian's chromium
    fig.write_html(stem.with_suffix(".html"), include_plotlyjs="directory")
    written = [stem.with_suffix(".html")]
    if png:
        fig.write_image(stem.with_suffix(".png"), scale=1)
        written.append(stem.with_suffix(".png"))
    return written


def _gather(results: Path, name: str) -> pd.DataFrame | None:
    """A part's rows (name.csv) from the folder and its sub-run folders (not gpu*/ runs or figures/)."""
    runs = sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith(("gpu", "figures")))
    paths = [results / f"{name}.csv", *(run / f"{name}.csv" for run in runs)]
    frames = []
    for path in paths:
        if path.exists():
            frame = pd.read_csv(path)
            if name.startswith(("app", "payoff")) and "model" not in frame:  # older rows: the model is in the JSON
                frame = frame.assign(model=json.loads(path.with_suffix(".json").read_text())["results"]["model"])
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else None


FIGURES: dict[str, Callable[[pd.DataFrame], go.Figure]] = {
    "overhead": overhead_figure, "payoff": payoff_figure, "memory": memory_figure, "hardware": hardware_figure,
    "batch": batch_figure, "calculator": calculator_figure, "app": app_figure, "concurrency": concurrency_figure,
    "concurrency-hosted": concurrency_figure, "serving": serving_figure, "fast": fast_figure,
    "loadgen": loadgen_figure,
}


@contextmanager
def one_renderer() -> Iterator[None]:
    """Every PNG written inside drawn by one chromium (kaleido's sync server), stopped at the end. Without it
    kaleido starts a chromium for each figure: 4.2 s a PNG against 0.8 s on a 2-core Xeon (five small figures)."""
    import kaleido

    kaleido.start_sync_server(silence_warnings=True)
    try:
        with warnings.catch_warnings():  # plotly's note that a running server keeps its own options
            warnings.filterwarnings("ignore", message="The kopts argument is ignored if using a server")
            yield
    finally:
        kaleido.stop_sync_server(silence_warnings=True)


def write_figures(results: Path, out: Path, png: bool = True, quick: bool = False) -> list[Path]:
    """Every figure whose part has results, as out/<part>.html (interactive; plotly.js saved once beside them,
    so the pages open offline) and, with png, out/<part>.png (all drawn by one_renderer). quick: draw the quick
    runs' <part>-quick.csv."""
    out.mkdir(parents=True, exist_ok=True)
    if png and "BROWSER_PATH" not in os.environ and Path("/usr/bin/chromium").exists():
        os.environ["BROWSER_PATH"] = "/usr/bin/chromium"  # kaleido's renderer: Debian's chromium
    drawn = []
    for part, draw in FIGURES.items():
        rows = _gather(results, f"{part}-quick" if quick else part)
        if rows is not None:
            fig = draw(rows)
            fig.write_html(out / f"{part}.html", include_plotlyjs="directory")
            drawn.append((out / f"{part}", fig))
    written = [stem.with_suffix(".html") for stem, _ in drawn]
    if png and drawn:
        with one_renderer():
            for stem, fig in drawn:
                fig.write_image(stem.with_suffix(".png"), scale=1)
                written.append(stem.with_suffix(".png"))
    return written


def write_simulator_figure(folder: Path, tag: str, png: bool = True) -> list[Path]:
    """folder/<tag>.html (and .png) from folder/<tag>.csv and folder/<tag>-lines.csv (the simulator part)."""
    if png and "BROWSER_PATH" not in os.environ and Path("/usr/bin/chromium").exists():
        os.environ["BROWSER_PATH"] = "/usr/bin/chromium"
    fig = simulator_figure(pd.read_csv(folder / f"{tag}.csv"), pd.read_csv(folder / f"{tag}-lines.csv"))
    fig.write_html(folder / f"{tag}.html", include_plotlyjs="directory")  # plotly.min.js beside it: opens offline
    written = [folder / f"{tag}.html"]
    if png:
        fig.write_image(folder / f"{tag}.png", scale=1)
        written.append(folder / f"{tag}.png")
    return written
