"""What the batch tab says of one batch run: its headline in its own numbers, one line per sequence, and the history's
rows for a batch and for a batch sweep.

Pure functions from a BatchResult (or a sweep's frame) to markdown, DataFrames and dicts; no gradio. Its text is in
kvviz.i18n.batch.
"""

from __future__ import annotations

import itertools

import pandas as pd

from kvviz.base.units import fmt_ms
from kvviz.engine.batch import BatchResult
from kvviz.engine.request import mode_label
from kvviz.i18n import t
from kvviz.ui.worker import Loaded

_BATCH_IDS = itertools.count(1)
_SWEEP_IDS = itertools.count(1)


def batch_markdown(result: BatchResult, loaded: Loaded | None, lang: str = "en") -> str:
    """A batch's headline with its own numbers: what ran, the shared prefill, the decode pass, the rates, the
    cache and its padding, and why a pass costs about the same for one row or many."""
    s = result.summary
    lines = [t("batch.md.headline", lang, batch_size=s.batch_size, rate=f"{s.tokens_per_s:,.1f}",
               rate_seq=f"{s.tokens_per_s_per_sequence:,.1f}"),
             t("batch.md.body", lang, model=s.model, device=s.device, dtype=s.dtype, mode=mode_label(s.mode, lang),
               prompt_tokens=sum(s.prompt_tokens), padded_len=s.padded_len, prefill=fmt_ms(s.prefill_s),
               ttft=fmt_ms(s.ttft_s), step=fmt_ms(s.decode_step_median_s), steps=s.decode_steps,
               peak=f"{s.peak_kv_bytes / 2**20:,.2f}", padding=f"{s.peak_padding_bytes / 2**20:,.2f}"),
             t("batch.md.why", lang)]
    if loaded is not None and loaded.random_weights:
        lines.append(t("batch.md.random", lang))
    return "\n\n".join(lines)


ROW_COLUMNS = ("row", "prompt_tokens", "padding", "new_tokens", "finish", "end_ms", "prompt", "text")


def batch_rows(result: BatchResult | None, lang: str = "en") -> pd.DataFrame:
    """One line per sequence of a batch: its prompt, padding, tokens, how it ended and its text; the columns named
    in lang (in English, the names the API has always returned). No batch: the columns alone, so that the empty
    table is headed by what it will hold, not by gradio's 1 2 3."""
    values = [(r.row, r.prompt_tokens, r.padding, r.new_tokens, r.finish_reason, round(r.end_s * 1e3, 2),
               r.prompt[:60], r.text[:200]) for r in (result.rows if result else ())]
    return pd.DataFrame(values, columns=[t(f"batch.col.{c}", lang) for c in ROW_COLUMNS])


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
