"""What the Serving tab says: a run's table and the server's view of it, what a sweep's curves teach, what a
shared prefix saved, and one history row per run.

Pure functions from kvviz.serving's results (a RunResult, a sweep_frame DataFrame, the server's samples) to
markdown and flat dicts; every number in a sentence comes from the data given, so each can be checked
without a browser or a server. The lesson's questions 5 and 6 are answered with the sweep's own numbers.
Every function takes lang ("en" or "zh", kvviz.i18n) and says it in that language; messages that come from
the server or the core (a request's error) are translated by kvviz.i18n.errors where a template knows them.
Nothing here imports gradio or plotly, measures anything, or knows how the page lays the text out.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from kvviz.base.units import fmt_ms as ms
from kvviz.i18n import t
from kvviz.i18n.errors import translate
from kvviz.serving.loadgen import RunResult
from kvviz.serving.metrics_reader import ServerView, server_view
from kvviz.serving.overhead import BUSY, BUSY_LIMIT, LATE_READS, WAIT_SHARE
from kvviz.serving.stats import Distribution, RunStats
from kvviz.serving.sweep import CLIENT, stop_reason

# A level within this share of the sweep's best throughput counts as saturated (kvviz.serving.sweep's default
# saturation_gain: a level that adds less than 5% has stopped growing).
SATURATION_SHARE = 0.05
Q5 = "TTFT、TPOT、throughput 分别衡量什么?它们之间有哪些常见权衡?"
Q6 = "如果一个服务首 token 很慢但后续 token 很快,你会优先检查哪些环节?"


def pct(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percentage ('12.5%'), or n/a."""
    return "n/a" if fraction is None or pd.isna(fraction) else f"{fraction * 100:.{digits}f}%"


# --- one run ------------------------------------------------------------------------------------------------


def _latency_row(name: str, d: Distribution) -> str:
    return f"| {name} | {ms(d.mean)} | {ms(d.p50)} | {ms(d.p90)} | {ms(d.p99)} |"


def stats_markdown(s: RunStats, lang: str = "en") -> str:
    """The run's counts and rates, then its latencies (mean, p50, p90, p99) as a table."""
    return "\n".join([
        t("serving.stats.header", lang),
        "|---|---|---|---|---|---|",
        t("serving.stats.row", lang, completed=s.completed, requests=s.requests, failed=s.failed,
          tokens_per_s=f"{s.output_tokens_per_s:,.1f}", requests_per_s=f"{s.requests_per_s:,.2f}",
          goodput=f"{s.goodput_requests_per_s:,.2f}", slo_ttft=ms(s.slo.ttft_s), slo_tpot=ms(s.slo.tpot_s),
          duration=f"{s.duration_s:,.2f}"),
        "",
        t("serving.latency.header", lang),
        "|---|---|---|---|---|",
        _latency_row(t("serving.latency.ttft", lang), s.ttft),
        _latency_row(t("serving.latency.tpot", lang), s.tpot),
        _latency_row(t("serving.latency.itl", lang), s.itl),
        _latency_row(t("serving.latency.e2e", lang), s.e2e),
    ])


def kv_sentence(view: ServerView, lang: str = "en") -> str | None:
    """The peak KV-cache usage the server reported, beside kvviz's predicted peak."""
    if view.max_kv_usage is None:
        return None
    predicted = "" if view.max_predicted_kv_usage is None else \
        t("serving.kv.predicted", lang, pct=pct(view.max_predicted_kv_usage, 2))
    return t("serving.kv.peak", lang, pct=pct(view.max_kv_usage, 2), predicted=predicted)


def server_markdown(result: RunResult, lang: str = "en") -> str | None:
    """The run as the server saw it (its /metrics): where a request's time went, its TTFT beside the client's,
    prefix-cache hits, preemptions, peak KV usage against kvviz's prediction; None without two samples."""
    view = server_view(result.samples)
    if view is None:
        return None
    parts = []
    if view.queue_mean_s is not None:
        parts.append(t("serving.server.phases", lang, queued=ms(view.queue_mean_s), prefill=ms(view.prefill_mean_s),
                       decode=ms(view.decode_mean_s)))
    if view.ttft_mean_s is not None:
        parts.append(t("serving.server.ttft", lang, server=ms(view.ttft_mean_s), client=ms(result.stats.ttft.mean)))
    if view.prefix_hit_rate is not None:
        parts.append(t("serving.server.prefix", lang, pct=pct(view.prefix_hit_rate)))
    if view.preemptions is not None:
        parts.append(t("serving.server.preemptions", lang, count=f"{view.preemptions:,.0f}"))
    if view.max_waiting is not None:
        parts.append(t("serving.server.queue", lang, running=f"{view.max_running or 0:,.0f}",
                       waiting=f"{view.max_waiting:,.0f}"))
    parts.append(kv_sentence(view, lang))
    said = [p for p in parts if p]
    return t("serving.server.line", lang, parts=t("serving.server.sep", lang).join(said)) if said else None


def rate_markdown(result: RunResult, lang: str = "en") -> str | None:
    """An open loop's rates (asked, sent, completed) and whether its concurrency cap held arrivals back and
    bounded the rate (kvviz.serving.stats' rule); None for a closed loop."""
    s = result.stats
    if s.rate_asked_per_s is None:
        return None
    key = "serving.rate.bound" if s.cap_bound else "serving.rate.held" if s.held_by_cap else "serving.rate.free"
    cap = t(key, lang, cap=result.load.concurrency, held=s.held_by_cap, requests=s.requests, wait=ms(s.held_mean_s),
            carried=_rate(s.cap_rate_per_s))
    return t("serving.rate.line", lang, asked=_rate(s.rate_asked_per_s), sent=_rate(s.rate_sent_per_s),
             completed=_rate(s.requests_per_s), cap=cap)


def _rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.2f}"


def client_markdown(result: RunResult, lang: str = "en") -> str | None:
    """What the client itself cost in the run, and a warning, with its reasons, when it limited the run
    (kvviz.serving.overhead's rule); None for a run not made by kvviz's client."""
    c = result.client
    if c is None:
        return None
    wait = "n/a" if c.read_wait is None else f"{ms(c.read_wait.p50)}/{ms(c.read_wait.p90)}"
    text = t("serving.client.line", lang, cpu=f"{c.cpu_s:,.2f}", busy=pct(c.busy, 0),
             per_token="n/a" if c.cpu_us_per_token is None else f"{c.cpu_us_per_token:,.1f}", wait=wait,
             joined=pct(c.joined_chunks, 0), headers=ms(c.headers.p50))
    if not c.limited:
        return text
    why = t("serving.client.sep", lang).join(_limit_text(reason, result, lang) for reason in c.limits)
    return text + "\n\n" + t("serving.client.limited", lang, why=why)


def _limit_text(reason: str, result: RunResult, lang: str) -> str:
    """One reason the client limited a run, with its numbers and the rule's bound."""
    c = result.client
    if reason == BUSY:
        return t("serving.client.busy", lang, busy=pct(c.busy, 0), limit=pct(BUSY_LIMIT, 0))
    if reason == LATE_READS:
        return t("serving.client.late", lang, wait=ms(c.read_wait.p90), share=pct(WAIT_SHARE),
                 e2e=ms(result.stats.e2e.p50))
    raise ValueError(f"unknown reason the client limited a run: {reason}")


def run_markdown(result: RunResult, lang: str = "en") -> str:
    """A finished run: its table, an open loop's rates, the server's view when it had one, the client's own cost,
    and why requests failed when some did."""
    lines = [stats_markdown(result.stats, lang)]
    for part in (rate_markdown(result, lang), server_markdown(result, lang), client_markdown(result, lang)):
        if part:
            lines += ["", part]
    if result.metrics_error:
        lines += ["", t("serving.run.metrics_error", lang, error=translate(result.metrics_error, lang))]
    if result.stats.first_error:
        lines += ["", t("serving.run.failed", lang, failed=result.stats.failed,
                        error=translate(result.stats.first_error, lang))]
    if result.cancelled:
        lines += ["", t("serving.run.cancelled", lang)]
    return "\n".join(lines)


# --- a sweep ------------------------------------------------------------------------------------------------


def saturation_level(frame: pd.DataFrame, share: float = SATURATION_SHARE) -> int:
    """The fewest requests in flight whose throughput came within `share` of the sweep's best."""
    f = frame.sort_values("concurrency")
    best = f["output_tokens_per_s"].max()
    return int(f[f["output_tokens_per_s"] >= (1 - share) * best]["concurrency"].iloc[0])


def _row(frame: pd.DataFrame, concurrency: int) -> pd.Series:
    return frame[frame["concurrency"] == concurrency].iloc[0]


def q5_markdown(frame: pd.DataFrame, lang: str = "en") -> str:
    """What TTFT, TPOT and throughput measure, and how this sweep traded them, from its first level to its best."""
    f = frame.sort_values("concurrency")
    first = f.iloc[0]
    best = int(f.loc[f["output_tokens_per_s"].idxmax(), "concurrency"])
    top = _row(f, best) if best != int(first["concurrency"]) else f.iloc[-1]  # the best, else the last level
    gain = f"{top['output_tokens_per_s'] / first['output_tokens_per_s']:.1f}×" if first["output_tokens_per_s"] \
        else t("serving.q5.from_nothing", lang)
    users = ""
    if pd.notna(first["tokens_per_s_per_user"]) and pd.notna(top["tokens_per_s_per_user"]):
        users = t("serving.q5.users", lang, first=f"{first['tokens_per_s_per_user']:,.0f}",
                  top=f"{top['tokens_per_s_per_user']:,.0f}")
    return t("serving.q5.text", lang, question=Q5, first=int(first["concurrency"]), top=int(top["concurrency"]),
             first_tps=f"{first['output_tokens_per_s']:,.0f}", top_tps=f"{top['output_tokens_per_s']:,.0f}",
             gain=gain, first_tpot=ms(first["tpot_p50_s"]), top_tpot=ms(top["tpot_p50_s"]), users=users,
             first_ttft=ms(first["ttft_p50_s"]), top_ttft=ms(top["ttft_p50_s"]),
             reading=_tpot_reading(first["tpot_p50_s"], top["tpot_p50_s"], lang))


def _tpot_reading(before: float | None, after: float | None, lang: str = "en") -> str:
    """What the TPOT change says about batching, only as far as the numbers say it."""
    if before is None or after is None or pd.isna(before) or pd.isna(after):
        return t("serving.q5.batching", lang)
    if after > before * 1.05:
        return t("serving.q5.batching_slower", lang, ratio=f"{after / before:.1f}")
    return t("serving.q5.batching_free", lang)


def saturation_markdown(frame: pd.DataFrame, lang: str = "en") -> str:
    """Where throughput stopped growing, or that it had not yet at the sweep's last level."""
    f = frame.sort_values("concurrency")
    level, last = saturation_level(f), int(f["concurrency"].iloc[-1])
    at = _row(f, level)
    if level == last:
        return t("serving.saturation.growing", lang, last=last, tokens_per_s=f"{at['output_tokens_per_s']:,.0f}")
    best = f.loc[f["output_tokens_per_s"].idxmax()]
    return t("serving.saturation.stopped", lang, level=level, tokens_per_s=f"{at['output_tokens_per_s']:,.0f}",
             best=int(best["concurrency"]), best_tps=f"{best['output_tokens_per_s']:,.0f}",
             more=f"{best['output_tokens_per_s'] / at['output_tokens_per_s'] - 1:.1%}", ttft=ms(at["ttft_p50_s"]),
             best_ttft=ms(best["ttft_p50_s"]))


def views_by_level(results: Sequence[RunResult]) -> dict[int, ServerView]:
    """Each level's server view (from its own samples), by requests in flight; levels without one left out."""
    views = {r.load.concurrency: server_view(r.samples) for r in results}
    return {c: v for c, v in views.items() if v is not None}


def q6_markdown(frame: pd.DataFrame, results: Sequence[RunResult], lang: str = "en") -> str:
    """Why the first token got slower with load while the later ones did not (much): the server's queue, its
    prefill time and its scheduling, with the levels' own numbers."""
    f = frame.sort_values("concurrency")
    first, last = f.iloc[0], f.iloc[-1]
    text = t("serving.q6.text", lang, question=Q6, first_ttft=ms(first["ttft_p50_s"]), first=int(first["concurrency"]),
             last_ttft=ms(last["ttft_p50_s"]), last=int(last["concurrency"]), last_p99=ms(last["ttft_p99_s"]),
             first_tpot=ms(first["tpot_p50_s"]), last_tpot=ms(last["tpot_p50_s"]))
    views = views_by_level(results)
    if not views:
        return text + t("serving.q6.no_metrics", lang)
    queued = {c: v.max_waiting for c, v in views.items() if v.max_waiting}
    if queued:
        said = t("serving.q6.sep", lang).join(t("serving.q6.level", lang, concurrency=c, waiting=f"{w:,.0f}")
                                               for c, w in sorted(queued.items()))
        text += t("serving.q6.queued", lang, levels=said)
    else:
        text += t("serving.q6.no_queue", lang)
    top = views.get(int(last["concurrency"]))
    if top is not None and top.queue_mean_s is not None:
        text += t("serving.q6.top", lang, concurrency=int(last["concurrency"]), queued=ms(top.queue_mean_s),
                  prefill=ms(top.prefill_mean_s))
    return text


def sweep_markdown(frame: pd.DataFrame, results: Sequence[RunResult], lang: str = "en") -> str:
    """What the sweep's curves say about the lesson's questions 5 and 6, with this sweep's numbers; first, when
    the sweep stopped because the client limited a level, that."""
    if frame is None or not len(frame):
        return t("serving.sweep.none", lang)
    if len(frame) == 1:
        parts = [t("serving.sweep.one", lang, concurrency=int(frame["concurrency"].iloc[0]))]
    else:
        parts = [q5_markdown(frame, lang), saturation_markdown(frame, lang), q6_markdown(frame, results, lang)]
    return "\n\n".join(filter(None, [client_stop_markdown(results, lang), *parts]))


def client_stop_markdown(results: Sequence[RunResult], lang: str = "en") -> str | None:
    """That the sweep stopped where the client, not the server, limited a level (kvviz.serving.sweep's rule)."""
    if not results or stop_reason(results) != CLIENT:
        return None
    return t("serving.sweep.client", lang, concurrency=results[-1].load.concurrency)


# --- a shared prefix, and the history ------------------------------------------------------------------------


def _change(before: float | None, after: float | None, lang: str = "en") -> str:
    if before is None or after is None:
        return t("serving.change.plain", lang, before=ms(before), after=ms(after))
    relative = t("serving.change.relative", lang, relative=f"{after / before - 1:+.0%}") if before else ""
    return t("serving.change.delta", lang, before=ms(before), after=ms(after), delta=f"{(after - before) * 1e3:+,.1f}",
             relative=relative)


def prefix_markdown(without: RunResult, with_: RunResult, lang: str = "en") -> str:
    """What a shared prompt prefix saved: the server's prefix-cache hit rate, the client's TTFT p50 and the
    server's mean prefill, without and with it."""
    a, b = server_view(without.samples), server_view(with_.samples)
    hits = t("serving.prefix.no_hits", lang) if b is None or b.prefix_hit_rate is None else \
        t("serving.prefix.hits", lang, with_=pct(b.prefix_hit_rate), without=pct(a.prefix_hit_rate if a else None))
    prefill = "" if a is None or b is None or a.prefill_mean_s is None else \
        t("serving.prefix.prefill", lang, change=_change(a.prefill_mean_s, b.prefill_mean_s, lang))
    return t("serving.prefix.text", lang, hits=hits, ttft=_change(without.stats.ttft.p50, with_.stats.ttft.p50, lang),
             prefill=prefill)


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


def engine_vs_server_markdown(server: RunResult, engine: RunResult, lang: str = "en") -> str:
    """The same load on a batching server and on kvviz's engine (one request at a time), with both runs' numbers:
    what continuous batching did to throughput, TTFT and TPOT."""
    s, e, c = server.stats, engine.stats, server.load.concurrency
    ratio = f"{s.output_tokens_per_s / e.output_tokens_per_s:.1f}×" if e.output_tokens_per_s else "n/a"
    if c > 1:
        return t("serving.engine.many", lang, concurrency=c, requests=server.load.requests,
                 tokens=server.load.output_tokens, s_tps=f"{s.output_tokens_per_s:,.0f}", s_ttft=ms(s.ttft.p50),
                 s_tpot=ms(s.tpot.p50), e_tps=f"{e.output_tokens_per_s:,.0f}", e_ttft=ms(e.ttft.p50),
                 e_tpot=ms(e.tpot.p50), ratio=ratio, ahead=c - 1)
    return t("serving.engine.one", lang, s_tps=f"{s.output_tokens_per_s:,.0f}", s_tpot=ms(s.tpot.p50),
             e_tps=f"{e.output_tokens_per_s:,.0f}", e_tpot=ms(e.tpot.p50), ratio=ratio)
