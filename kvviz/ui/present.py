"""What the app's text says: a run's metrics and their explanation, a comparison's verdict, the history.

Pure functions from kvviz's results (a RunRecord, a Comparison, the worker's Loaded) to markdown, dicts
and DataFrames; the tab builders (kvviz.ui.tabs) put them on the page. Nothing here imports gradio, so
every sentence the page shows can be checked without a browser or a server.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import pandas as pd

from kvviz.base.noise import beyond_noise, spread
from kvviz.base.units import fmt_ms, fmt_seconds
from kvviz.engine.batch import BatchResult
from kvviz.engine.compare import Comparison
from kvviz.engine.request import mode_label
from kvviz.i18n import CATALOG, t
from kvviz.i18n.calculator import memory_text
from kvviz.i18n.errors import translate
from kvviz.ui.live import RunRecord
from kvviz.ui.worker import Loaded


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds with two decimals, or n/a."""
    return fmt_ms(seconds)


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


def agreement(result: Comparison, lang: str = "en") -> str:
    """Whether the cached and uncached runs made the same tokens, in one sentence."""
    if result.tokens_identical:
        return t("compare.identical", lang)
    if result.first_divergence is not None:
        return t("compare.part", lang, position=result.first_divergence)
    return t("compare.shorter", lang)


def compare_verdict(result: Comparison, loaded: Loaded, lang: str = "en") -> str:
    """The comparison's headline: the speedup, agreement, every mode's figures side by side, what ran where, and
    (with the static mode) why the fast path is faster, in this run's numbers."""
    per_token = t("compare.per_token", lang, speedup=result.decode_speedup) if result.decode_speedup else ""
    parts = [t("compare.headline", lang, speedup=result.speedup, per_token=per_token),
             t("compare.where", lang, agreement=agreement(result, lang), spec=loaded.spec, device=loaded.device,
               dtype=loaded.dtype), mode_table(result, lang)]
    if result.static is not None:
        parts.append(static_verdict(result, lang))
        parts.append(fast_path_why(result, loaded.device, lang))
    if loaded.random_weights:
        parts.append(t("compare.random", lang))
    return "\n\n".join(parts)


def mode_table(result: Comparison, lang: str = "en") -> str:
    """One line per mode: TTFT, TPOT, decode rate, time against the uncached run, decode bandwidth against the
    device's limit (the uncached loop re-reads the whole sequence each step: no bandwidth figure applies)."""
    lines = [t("compare.table_header", lang), "|---|---|---|---|---|---|---|---|"]
    for run in result.runs:
        s = run.summary
        bw = t("compare.bandwidth", lang, achieved=s.bandwidth_achieved / 1e9) if s.bandwidth_achieved else "n/a"
        share = (t("compare.share", lang, share=s.bandwidth_utilisation, bound=s.bandwidth_bound / 1e9)
                 if s.bandwidth_utilisation else "n/a")
        lines.append(f"| {mode_label(run.mode, lang)} | {ms(s.ttft_s)} | {ms(s.tpot_s)} | "
                     f"{s.decode_tokens_per_s or 0:,.1f} | {ms(s.e2e_s - s.queue_s)} | {run.speedup:.2f}× | {bw} | "
                     f"{share} |")
    return "\n".join(lines)


def static_verdict(result: Comparison, lang: str = "en") -> str:
    """The static mode's line: its speed against the plain cached loop, its agreement, its compile."""
    run, c = result.static, result.cached
    s = run.summary
    pace = (t("compare.pace", lang, ratio=c.tpot_s / s.tpot_s) if c.tpot_s and s.tpot_s else
            t("compare.pace_none", lang))
    agree = (t("compare.agree_same", lang) if run.tokens_identical else
             t("compare.agree_part", lang, position=run.first_divergence) if run.first_divergence is not None
             else t("compare.agree_shorter", lang))
    compiled = (t("compare.compiled", lang, seconds=run.compile_s) if run.compile_s else t("compare.reused", lang))
    return t("compare.static_line", lang, label=mode_label(run.mode, lang), pace=pace, agree=agree,
             compiled=compiled, tokens=run.cache_tokens)


def source_text(source: str, lang: str = "en") -> str:
    """Where a run's bandwidth limit came from, "<device>: <how it was found>" (kvviz.engine.meter), in `lang`:
    the device's name and the how, each translated (the memory model's texts: kvviz.i18n.calculator.memory_text)."""
    if not source:
        return t("compare.its_bandwidth", lang)
    name, _, how = source.partition(": ")
    return t("compare.source", lang, name=memory_text(name, lang), how=memory_text(how, lang)) if how else \
        memory_text(source, lang)


def fast_path_why(result: Comparison, device: str, lang: str = "en") -> str:
    """Why the static mode decodes faster, with this run's numbers: the floor the weights and cache set at the
    device's bandwidth, how far the plain loop stands above it (per-step overhead), how close the static one is;
    or, when the two TPOTs are apart by less than the runs' own per-token spread, that they are within noise."""
    c, s = result.cached, result.static.summary
    if not (c.bytes_per_decode_step and c.bandwidth_bound and c.tpot_s and s.tpot_s and s.bytes_per_decode_step):
        return t("compare.why_none", lang)
    if not beyond_noise(c.tpot_s, s.tpot_s, c.itl_s, s.itl_s):
        return t("compare.why_noise", lang, tpot_s=ms(s.tpot_s), tpot_c=ms(c.tpot_s),
                 ratio=f"{max(c.tpot_s, s.tpot_s) / min(c.tpot_s, s.tpot_s):.2f}",
                 spread=ms(max(spread(c.itl_s), spread(s.itl_s))))
    limit = c.bandwidth_bound
    floor_c, floor_s = c.bytes_per_decode_step / limit, s.bytes_per_decode_step / limit
    how = t("compare.how_cuda" if device.startswith("cuda") else "compare.how_cpu", lang)
    text = t("compare.why", lang, step_mb=c.bytes_per_decode_step / 1e6, limit=limit / 1e9,
             source=source_text(c.bandwidth_source, lang), floor_c=ms(floor_c), tpot_c=ms(c.tpot_s),
             above=ms(max(c.tpot_s - floor_c, 0.0)), how=how, tpot_s=ms(s.tpot_s), floor_s=ms(floor_s),
             static_mb=s.bytes_per_decode_step / 1e6, share=s.bandwidth_utilisation)
    if s.bandwidth_utilisation and s.bandwidth_utilisation > 1:
        text += t("compare.above", lang)
    return text


@dataclass(frozen=True, eq=False)
class RunHistory:
    """A session's finished runs: one history row and the per-token frame of each, oldest first.

    Held in the page's session state; each run makes a new one (with_run), so the state is never edited
    in place. eq=False: Gradio hashes state to see whether it changed, and frames do not hash.
    """

    rows: tuple[dict, ...] = ()
    frames: dict[int, pd.DataFrame] = field(default_factory=dict)

    def with_run(self, record: RunRecord) -> RunHistory:
        return RunHistory(rows=(*self.rows, record.history_row()), frames={**self.frames, record.run_id: record.frame})

    def with_row(self, row: dict) -> RunHistory:
        """A run without per-token rows (a serving load, measured from the client): a table row only."""
        return RunHistory(rows=(*self.rows, dict(row)), frames=self.frames)

    @property
    def run_ids(self) -> list[int]:
        return list(self.frames)

    def table(self, lang: str = "en") -> pd.DataFrame:
        """The history table: one row per run, its columns named in `lang` (the CSV takes the English keys)."""
        frame = pd.DataFrame(list(self.rows))
        return frame.rename(columns=lambda key: column_name(key, lang))

    def view(self, lang: str = "en") -> pd.DataFrame:
        """What the History tab shows of the table: the columns a person compares runs by (VIEW), those some run
        has, in readable units (times in ms, rates to a decimal, the bandwidth share in %), named in `lang`. The
        CSV keeps every column raw (table)."""
        frame = pd.DataFrame(list(self.rows))
        shown = [(key, unit) for key, unit in VIEW if key in frame and frame[key].notna().any()]
        return pd.DataFrame({view_name(key, unit, lang): [_readable(v, unit) for v in frame[key]]
                             for key, unit in shown})

    def overlay(self, picked: object) -> pd.DataFrame | None:
        """The per-token rows of the runs picked (as the picker sends them), together; None if none is known."""
        frames = [self.frames[i] for i in run_ids(picked) if i in self.frames]
        return pd.concat(frames) if frames else None


# The History tab's columns, in order, and each one's unit there: None as it is, "ms" from seconds, "rate" to one
# decimal, "share" a fraction as a percentage. Generation runs, batch rows and serving loads share the table.
VIEW = (("kind", None), ("run", None), ("label", None), ("model", None), ("mode", None), ("finish", None),
        ("prompt_tokens", None), ("new_tokens", None), ("batch_size", None), ("concurrency", None),
        ("load_s", "ms"), ("ttft_s", "ms"), ("tpot_s", "ms"), ("ttft_p50_s", "ms"), ("tpot_p50_s", "ms"),
        ("tokens_per_s", "rate"), ("batch_tokens_per_s", "rate"), ("output_tokens_per_s", "rate"),
        ("bandwidth_utilisation", "share"))


def view_name(key: str, unit: str | None, lang: str = "en") -> str:
    """A History column's header: a time in ms is named as such; the others as the CSV's columns."""
    return t(f"history.view.{key}", lang) if unit == "ms" else column_name(key, lang)


def _readable(value: object, unit: str | None) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if unit == "ms":
        return round(float(value) * 1e3, 2)
    if unit == "rate":
        return round(float(value), 1)
    if unit == "share":
        return f"{float(value):.0%}"
    return value


def column_name(key: str, lang: str = "en") -> str:
    """A history column's header in `lang`: the row's key in English, a key no catalogue names as it is."""
    return t(f"history.col.{key}", lang) if f"history.col.{key}" in CATALOG["en"] else key


def run_ids(picked: object) -> list[int]:
    """The run ids in the overlay picker's value as sent; anything that is not one is ignored."""
    items = picked if isinstance(picked, list) else []
    return [int(r) for r in items if isinstance(r, (str, int)) and not isinstance(r, bool) and str(r).isdecimal()
            and len(str(r)) < 12]


_BATCH_IDS = itertools.count(1)
_SWEEP_IDS = itertools.count(1)


def batch_markdown(result: BatchResult, loaded: Loaded | None, lang: str = "en") -> str:
    """A batch's headline with its own numbers: what ran, the shared prefill, the decode pass, the rates, the
    cache and its padding, and why a pass costs about the same for one row or many."""
    s = result.summary
    lines = [t("batch.md.headline", lang, batch_size=s.batch_size, rate=f"{s.tokens_per_s:,.1f}",
               rate_seq=f"{s.tokens_per_s_per_sequence:,.1f}"),
             t("batch.md.body", lang, model=s.model, device=s.device, dtype=s.dtype, mode=mode_label(s.mode, lang),
               prompt_tokens=sum(s.prompt_tokens), padded_len=s.padded_len, prefill=ms(s.prefill_s),
               ttft=ms(s.ttft_s), step=ms(s.decode_step_median_s), steps=s.decode_steps,
               peak=f"{s.peak_kv_bytes / 2**20:,.2f}", padding=f"{s.peak_padding_bytes / 2**20:,.2f}"),
             t("batch.md.why", lang)]
    if loaded is not None and loaded.random_weights:
        lines.append(t("batch.md.random", lang))
    return "\n\n".join(lines)


def batch_rows(result: BatchResult, lang: str = "en") -> pd.DataFrame:
    """One line per sequence of a batch: its prompt, padding, tokens, how it ended and its text; the columns named
    in lang (in English, the names the API has always returned)."""
    frame = pd.DataFrame([{"row": r.row, "prompt_tokens": r.prompt_tokens, "padding": r.padding,
                           "new_tokens": r.new_tokens, "finish": r.finish_reason, "end_ms": round(r.end_s * 1e3, 2),
                           "prompt": r.prompt[:60], "text": r.text[:200]} for r in result.rows])
    return frame.rename(columns={c: t(f"batch.col.{c}", lang) for c in frame.columns})


def batch_history_rows(result: BatchResult, lang: str = "en") -> list[dict]:
    """The history's rows for a batch: one per sequence, the batch's shared figures repeated on each (its id,
    size, TTFT, decode pass, tokens/s in all) beside the sequence's own (tokens, finish, tokens/s); the label a
    person reads in lang."""
    s, batch = result.summary, next(_BATCH_IDS)
    return [{"kind": "batch", "label": t("batch.history.label", lang, batch=batch, row=r.row), "model": s.model,
             "mode": s.mode, "batch": batch, "batch_size": s.batch_size, "row": r.row, "finish": r.finish_reason,
             "prompt": r.prompt[:60], "prompt_tokens": r.prompt_tokens, "padding": r.padding,
             "new_tokens": r.new_tokens, "ttft_s": round(r.ttft_s, 6),
             "tokens_per_s": round(r.new_tokens / r.end_s, 6) if r.end_s else None,
             "decode_step_median_s": s.decode_step_median_s, "batch_tokens_per_s": round(s.tokens_per_s, 6)}
            for r in result.rows]


def sweep_history_rows(frame: pd.DataFrame, lang: str = "en") -> list[dict]:
    """The history's rows for a batch sweep (kvviz.engine.batch_sweep's frame): one per B, with the figures the
    lesson's question 5 reads (B in flight, the batch's tokens/s, TTFT, the decode pass); the label in lang."""
    sweep = next(_SWEEP_IDS)
    return [{"kind": "sweep", "label": t("batch.sweep.history.label", lang, sweep=sweep, batch=int(r.batch)),
             "model": r.model, "mode": "cached", "sweep": sweep, "batch_size": int(r.batch),
             "prompt_tokens": int(r.prompt_tokens), "new_tokens": int(r.new_tokens), "ttft_s": round(r.ttft_s, 6),
             "decode_step_median_s": round(r.step_s, 6), "batch_tokens_per_s": round(r.tokens_per_s_total, 6)}
            for r in frame.itertuples()]
