"""What the Serving tab says: a run's table and the server's view of it, what a sweep's curves teach, what a
shared prefix saved, and one history row per run.

Pure functions from kvviz.serving's results (a RunResult, a sweep_frame DataFrame, the server's samples) to
markdown and flat dicts; every number in a sentence comes from the data given, so each can be checked
without a browser or a server. The lesson's questions 5 and 6 are answered with the sweep's own numbers.
Nothing here imports gradio or plotly, measures anything, or knows how the page lays the text out.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from kvviz.serving.loadgen import RunResult
from kvviz.serving.metrics_reader import ServerView, server_view
from kvviz.serving.stats import Distribution, RunStats

# A level within this share of the sweep's best throughput counts as saturated (kvviz.serving.sweep's default
# saturation_gain: a level that adds less than 5% has stopped growing).
SATURATION_SHARE = 0.05
Q5 = "TTFT、TPOT、throughput 分别衡量什么?它们之间有哪些常见权衡?"
Q6 = "如果一个服务首 token 很慢但后续 token 很快,你会优先检查哪些环节?"


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds with one decimal ('12.3 ms'), or n/a."""
    return "n/a" if seconds is None or pd.isna(seconds) else f"{seconds * 1e3:,.1f} ms"


def pct(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percentage ('12.5%'), or n/a."""
    return "n/a" if fraction is None or pd.isna(fraction) else f"{fraction * 100:.{digits}f}%"


# --- one run ------------------------------------------------------------------------------------------------


def _latency_row(name: str, d: Distribution) -> str:
    return f"| {name} | {ms(d.mean)} | {ms(d.p50)} | {ms(d.p90)} | {ms(d.p99)} |"


def stats_markdown(s: RunStats) -> str:
    """The run's counts and rates, then its latencies (mean, p50, p90, p99) as a table."""
    return "\n".join([
        "| completed | failed | output tokens/s | requests/s | goodput (requests/s within the SLO) | duration |",
        "|---|---|---|---|---|---|",
        f"| {s.completed} of {s.requests} | {s.failed} | {s.output_tokens_per_s:,.1f} | {s.requests_per_s:,.2f} | "
        f"{s.goodput_requests_per_s:,.2f} (TTFT ≤ {ms(s.slo.ttft_s)}, TPOT ≤ {ms(s.slo.tpot_s)}) | "
        f"{s.duration_s:,.2f} s |",
        "",
        "| latency | mean | p50 | p90 | p99 |",
        "|---|---|---|---|---|",
        _latency_row("TTFT (time to first token)", s.ttft),
        _latency_row("TPOT (time per output token)", s.tpot),
        _latency_row("ITL (gap between chunks)", s.itl),
        _latency_row("E2E (whole request)", s.e2e),
    ])


def kv_sentence(view: ServerView) -> str | None:
    """The peak KV-cache usage the server reported, beside kvviz's predicted peak."""
    if view.max_kv_usage is None:
        return None
    predicted = "" if view.max_predicted_kv_usage is None else \
        f" (kvviz predicted {pct(view.max_predicted_kv_usage, 2)})"
    return f"peak KV-cache usage {pct(view.max_kv_usage, 2)}{predicted}"


def server_markdown(result: RunResult) -> str | None:
    """The run as the server saw it (its /metrics): where a request's time went, its TTFT beside the client's,
    prefix-cache hits, preemptions, peak KV usage against kvviz's prediction; None without two samples."""
    view = server_view(result.samples)
    if view is None:
        return None
    parts = []
    if view.queue_mean_s is not None:
        parts.append(f"per request, queued {ms(view.queue_mean_s)}, prefill {ms(view.prefill_mean_s)}, "
                     f"decode {ms(view.decode_mean_s)}")
    if view.ttft_mean_s is not None:
        parts.append(f"TTFT mean {ms(view.ttft_mean_s)} on the server against {ms(result.stats.ttft.mean)} at the "
                     "client (the difference: HTTP, tokenization and streaming)")
    if view.prefix_hit_rate is not None:
        parts.append(f"prefix-cache hits {pct(view.prefix_hit_rate)} of the prompt tokens looked up")
    if view.preemptions is not None:
        parts.append(f"{view.preemptions:,.0f} preemptions")
    if view.max_waiting is not None:
        parts.append(f"at most {view.max_running or 0:,.0f} running and {view.max_waiting:,.0f} waiting")
    parts.append(kv_sentence(view))
    said = [p for p in parts if p]
    return f"**The server's view** (its /metrics): {'; '.join(said)}." if said else None


def run_markdown(result: RunResult) -> str:
    """A finished run: its table, the server's view when it had one, and why requests failed when some did."""
    lines = [stats_markdown(result.stats)]
    server = server_markdown(result)
    if server:
        lines += ["", server]
    if result.metrics_error:
        lines += ["", f"The server's metrics could not be read: {result.metrics_error}"]
    if result.stats.first_error:
        lines += ["", f"**{result.stats.failed} request(s) failed**; the first: {result.stats.first_error}"]
    if result.cancelled:
        lines += ["", "*Cancelled: the requests in flight were recorded as failed.*"]
    return "\n".join(lines)


# --- a sweep ------------------------------------------------------------------------------------------------


def saturation_level(frame: pd.DataFrame, share: float = SATURATION_SHARE) -> int:
    """The fewest requests in flight whose throughput came within `share` of the sweep's best."""
    f = frame.sort_values("concurrency")
    best = f["output_tokens_per_s"].max()
    return int(f[f["output_tokens_per_s"] >= (1 - share) * best]["concurrency"].iloc[0])


def _row(frame: pd.DataFrame, concurrency: int) -> pd.Series:
    return frame[frame["concurrency"] == concurrency].iloc[0]


def q5_markdown(frame: pd.DataFrame) -> str:
    """What TTFT, TPOT and throughput measure, and how this sweep traded them, from its first level to its best."""
    f = frame.sort_values("concurrency")
    first = f.iloc[0]
    best = int(f.loc[f["output_tokens_per_s"].idxmax(), "concurrency"])
    top = _row(f, best) if best != int(first["concurrency"]) else f.iloc[-1]  # the best, else the last level
    gain = f"{top['output_tokens_per_s'] / first['output_tokens_per_s']:.1f}×" if first["output_tokens_per_s"] \
        else "from nothing"
    users = ""
    if pd.notna(first["tokens_per_s_per_user"]) and pd.notna(top["tokens_per_s_per_user"]):
        users = (f" (each user's decode speed from {first['tokens_per_s_per_user']:,.0f} to "
                 f"{top['tokens_per_s_per_user']:,.0f} tokens/s)")
    return (f"**Q5: what TTFT, TPOT and throughput measure, and how they trade** ({Q5}) TTFT is how long a user "
            "waits for the first token (queueing + prefill); TPOT is how fast the rest streams to that user (one "
            "decode step); throughput is what the server produces for everyone together. "
            f"From {int(first['concurrency'])} to {int(top['concurrency'])} in flight, total output throughput went "
            f"from {first['output_tokens_per_s']:,.0f} to {top['output_tokens_per_s']:,.0f} tokens/s "
            f"({gain}) while each user's TPOT p50 went from {ms(first['tpot_p50_s'])} to "
            f"{ms(top['tpot_p50_s'])}{users} and TTFT p50 from {ms(first['ttft_p50_s'])} to "
            f"{ms(top['ttft_p50_s'])}. {_tpot_reading(first['tpot_p50_s'], top['tpot_p50_s'])}")


def _tpot_reading(before: float | None, after: float | None) -> str:
    """What the TPOT change says about batching, only as far as the numbers say it."""
    if before is None or after is None or pd.isna(before) or pd.isna(after):
        return "Batching shares each read of the weights among more requests, so a server makes more tokens per step."
    if after > before * 1.05:
        return ("Batching shares each read of the weights among more requests, so the server makes more tokens "
                f"per step while each step, and so each user's next token, takes longer ({after / before:.1f}× "
                "the TPOT): throughput bought with each user's speed.")
    return ("Batching shares each read of the weights among more requests, so the server makes more tokens per step; "
            "here each user's TPOT did not grow with it: the steps were still bound by fixed costs per step "
            "(scheduling, the read of the weights), not by the batch, so batching was nearly free. Past that point "
            "a step's work grows with the batch and TPOT rises.")


def saturation_markdown(frame: pd.DataFrame) -> str:
    """Where throughput stopped growing, or that it had not yet at the sweep's last level."""
    f = frame.sort_values("concurrency")
    level, last = saturation_level(f), int(f["concurrency"].iloc[-1])
    at = _row(f, level)
    if level == last:
        return (f"Throughput was still growing at the sweep's last level ({last} in flight, "
                f"{at['output_tokens_per_s']:,.0f} tokens/s): the server was not saturated yet.")
    best = f.loc[f["output_tokens_per_s"].idxmax()]
    return (f"Throughput stopped growing at about {level} in flight ({at['output_tokens_per_s']:,.0f} tokens/s): "
            f"the best level, {int(best['concurrency'])} in flight, made {best['output_tokens_per_s']:,.0f} "
            f"tokens/s, {best['output_tokens_per_s'] / at['output_tokens_per_s'] - 1:.1%} more, while TTFT p50 "
            f"went from {ms(at['ttft_p50_s'])} to {ms(best['ttft_p50_s'])}. Past saturation more requests in "
            "flight only wait longer.")


def views_by_level(results: Sequence[RunResult]) -> dict[int, ServerView]:
    """Each level's server view (from its own samples), by requests in flight; levels without one left out."""
    views = {r.load.concurrency: server_view(r.samples) for r in results}
    return {c: v for c, v in views.items() if v is not None}


def q6_markdown(frame: pd.DataFrame, results: Sequence[RunResult]) -> str:
    """Why the first token got slower with load while the later ones did not (much): the server's queue, its
    prefill time and its scheduling, with the levels' own numbers."""
    f = frame.sort_values("concurrency")
    first, last = f.iloc[0], f.iloc[-1]
    text = (f"**Q6: first token slow, later tokens fast: what to check first** ({Q6}) Queueing, prefill and "
            "scheduling, which TTFT includes and TPOT does not. Here TTFT p50 grew from "
            f"{ms(first['ttft_p50_s'])} at {int(first['concurrency'])} in flight to {ms(last['ttft_p50_s'])} at "
            f"{int(last['concurrency'])} (p99 {ms(last['ttft_p99_s'])}), TPOT p50 from {ms(first['tpot_p50_s'])} "
            f"to {ms(last['tpot_p50_s'])}.")
    views = views_by_level(results)
    if not views:
        return text + " The server's metrics were not read, so its queue cannot be seen here."
    queued = {c: v.max_waiting for c, v in views.items() if v.max_waiting}
    if queued:
        said = ", ".join(f"{c} in flight (up to {w:,.0f})" for c, w in sorted(queued.items()))
        text += f" The server had requests waiting at {said}: they queued before their prefill."
    else:
        text += (" The server never had a request waiting, so the growth is not its queue: a new request's "
                 "prefill shares the scheduler's steps with the others' decode.")
    top = views.get(int(last["concurrency"]))
    if top is not None and top.queue_mean_s is not None:
        text += (f" At {int(last['concurrency'])} in flight the server's mean request queued "
                 f"{ms(top.queue_mean_s)} and was prefilled in {ms(top.prefill_mean_s)}; a long prompt lengthens "
                 "the prefill, and the scheduler's batch limits (max-num-seqs, the token budget per step) the queue.")
    return text


def sweep_markdown(frame: pd.DataFrame, results: Sequence[RunResult]) -> str:
    """What the sweep's curves say about the lesson's questions 5 and 6, with this sweep's numbers."""
    if frame is None or not len(frame):
        return "No sweep yet."
    if len(frame) == 1:
        return (f"One level only ({int(frame['concurrency'].iloc[0])} in flight): the trade-offs of questions 5 and "
                "6 show from two levels on.")
    return "\n\n".join([q5_markdown(frame), saturation_markdown(frame), q6_markdown(frame, results)])


# --- a shared prefix, and the history ------------------------------------------------------------------------


def _change(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return f"from {ms(before)} to {ms(after)}"
    relative = f", {after / before - 1:+.0%}" if before else ""
    return f"from {ms(before)} to {ms(after)} ({(after - before) * 1e3:+,.1f} ms{relative})"


def prefix_markdown(without: RunResult, with_: RunResult) -> str:
    """What a shared prompt prefix saved: the server's prefix-cache hit rate, the client's TTFT p50 and the
    server's mean prefill, without and with it."""
    a, b = server_view(without.samples), server_view(with_.samples)
    hits = "The server reported no prefix-cache hits." if b is None or b.prefix_hit_rate is None else (
        f"With the shared prefix, {pct(b.prefix_hit_rate)} of the prompt tokens the server looked up were already "
        f"in its prefix cache (without it: {pct(a.prefix_hit_rate if a else None)}).")
    prefill = "" if a is None or b is None or a.prefill_mean_s is None else \
        f" The server's mean prefill went {_change(a.prefill_mean_s, b.prefill_mean_s)}."
    return (f"{hits} TTFT p50 went {_change(without.stats.ttft.p50, with_.stats.ttft.p50)}.{prefill} "
            "Tokens found in the cache skip prefill: their keys and values are already stored.")


HISTORY_STATS = ("completed", "failed", "duration_s", "output_tokens", "output_tokens_per_s", "requests_per_s",
                 "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_p50_s", "e2e_p50_s",
                 "goodput_requests_per_s")


def history_row(result: RunResult, label: str) -> dict:
    """One flat row for the history table and its CSV: where the load went (url, model, api: never a key), the
    load, and the run's main figures."""
    ep, load = result.endpoint, result.load
    row = {"kind": "serving", "label": label, "url": ep.get("url"), "model": ep.get("model"), "api": ep.get("api"),
           "arrivals": load.arrivals, "concurrency": load.concurrency, "requests": load.requests,
           "output_tokens_per_request": load.output_tokens, "rate": load.rate}
    flat = result.stats.flat()
    row |= {k: round(flat[k], 6) if isinstance(flat[k], float) else flat[k] for k in HISTORY_STATS}
    return row | {"cancelled": result.cancelled}


def engine_vs_server_markdown(server: RunResult, engine: RunResult) -> str:
    """The same load on a batching server and on kvviz's engine (one request at a time), with both runs' numbers:
    what continuous batching did to throughput, TTFT and TPOT."""
    s, e, c = server.stats, engine.stats, server.load.concurrency
    ratio = f"{s.output_tokens_per_s / e.output_tokens_per_s:.1f}×" if e.output_tokens_per_s else "n/a"
    return (f"**The same load, {c} in flight, {server.load.requests} requests of {server.load.output_tokens} tokens.** "
            f"vLLM (continuous batching): {s.output_tokens_per_s:,.0f} tokens/s, TTFT p50 {ms(s.ttft.p50)}, TPOT p50 "
            f"{ms(s.tpot.p50)}. kvviz's engine (one request at a time): {e.output_tokens_per_s:,.0f} tokens/s, TTFT "
            f"p50 {ms(e.ttft.p50)}, TPOT p50 {ms(e.tpot.p50)}. Batching made {ratio} the tokens per second: each of "
            "vLLM's steps decodes every running request at once, one read of the weights for all of them, while "
            "kvviz's engine runs the requests in turn, so its TPOT is one request's alone and its TTFT includes "
            f"waiting for the {c - 1} request(s) ahead of it to finish." if c > 1 else
            f"**The same load, one request at a time.** vLLM: {s.output_tokens_per_s:,.0f} tokens/s, TPOT p50 "
            f"{ms(s.tpot.p50)}; kvviz's engine: {e.output_tokens_per_s:,.0f} tokens/s, TPOT p50 {ms(e.tpot.p50)} "
            f"({ratio}). With one request in flight there is nothing to batch: the difference is the engines' own "
            "speed (vLLM's kernels and scheduler against kvviz's plain PyTorch loop); raise the concurrency to see "
            "what batching adds.")
