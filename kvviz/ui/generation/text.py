"""What the live-generation tab says of a run: its metrics and their explanation, the load line, the time limit.

Pure functions from a RunRecord to markdown and dicts; the tab (kvviz.ui.generation.tab) puts them on the page.
Nothing here imports gradio, so every sentence can be checked without a browser or a server. The time limit's
sentence is shared by every tab that runs a job (kvviz.ui.common); its text is in kvviz.i18n.generation.
"""

from __future__ import annotations

from kvviz.base.units import fmt_ms as ms
from kvviz.base.units import fmt_seconds
from kvviz.engine.request import mode_label
from kvviz.i18n import t
from kvviz.i18n.errors import translate
from kvviz.ui.generation.live import RunRecord


def time_limit_message(limit_s: float, lang: str = "en") -> str:
    return t("metrics.time_limit", lang, limit=limit_s)


def metrics_markdown(record: RunRecord, lang: str = "en") -> str:
    """The run's metrics table, what it was, and why prefill and decode differ, with this run's numbers."""
    s = record.summary
    if s is None:
        if record.finish is None:
            return t("metrics.running", lang)
        return t("metrics.failed", lang, reason=record.finish.reason, error=translate(record.finish.error, lang))
    bw = (t("metrics.bandwidth", lang, achieved=s.bandwidth_achieved / 1e9, share=s.bandwidth_utilisation,
            bound=s.bandwidth_bound / 1e9) if s.bandwidth_achieved else "n/a")
    lines = [
        t("metrics.header", lang),
        "|---|---|---|---|---|---|---|---|",
        f"| {ms(s.ttft_s)} | {ms(s.tpot_s)} | {s.tokens_per_s or 0:,.1f} | {s.decode_tokens_per_s or 0:,.1f} | "
        f"{ms(s.itl_p50_s)} / {ms(s.itl_p90_s)} / {ms(s.itl_p99_s)} | {ms(s.queue_s)} | {ms(s.prefill_s)} | {bw} |",
        "",
        t("metrics.run", lang, run_id=record.run_id, model=s.model, device=s.device, dtype=s.dtype,
          mode=mode_label(s.mode, lang), prompt_tokens=s.prompt_tokens, new_tokens=s.new_tokens,
          finish=s.finish_reason),
    ]
    if s.prefill_tokens_per_s and s.decode_tokens_per_s:
        lines.append(t("metrics.prefill_decode", lang, prompt_tokens=s.prompt_tokens, prefill=ms(s.prefill_s),
                       prefill_rate=s.prefill_tokens_per_s, tpot=ms(s.tpot_s), decode_rate=s.decode_tokens_per_s,
                       ratio=s.prefill_tokens_per_s / s.decode_tokens_per_s))
    if record.cpu_threads:
        lines.append(t("metrics.threads", lang, threads=record.cpu_threads))
    if record.random_weights:
        lines.append(t("metrics.random", lang))
    if record.load_s is not None:
        lines += ["", load_line(record.load_s, lang)]  # a paragraph of its own, last: the wait TTFT leaves out
    return "\n".join(lines)


LOAD_SHOWN_S = 0.5  # a model kept in the worker is ready in milliseconds; anything longer was a load


def load_line(load_s: float, lang: str = "en") -> str:
    """What getting the model ready cost before the request, apart from its TTFT: a load, or a model kept."""
    return t("metrics.load" if load_s >= LOAD_SHOWN_S else "metrics.kept", lang, load=fmt_seconds(load_s))


def final_metrics(record: RunRecord, time_limit_s: float | None, lang: str = "en") -> str:
    """The metrics at the end of a run; time_limit_s when the run was stopped by that limit."""
    text = metrics_markdown(record, lang)
    if time_limit_s is None:
        return text
    return f"{text}\n\n{t('metrics.stopped', lang, message=time_limit_message(time_limit_s, lang).capitalize())}"


def run_details(record: RunRecord, stopped_by_time_limit: bool) -> dict:
    """The run as the page's JSON box and the /generate API's last value show it (the lesson's keys first)."""
    details = {"lesson": record.summary.lesson(), "summary": record.summary.as_dict(), "load_s": record.load_s,
               "text": record.text}
    if stopped_by_time_limit:
        details["stopped_by"] = "time_limit"
    return details
