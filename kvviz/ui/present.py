"""What the app's text says: a run's metrics and their explanation, a comparison's verdict, the history.

Pure functions from kvviz's results (a RunRecord, a Comparison, the worker's Loaded) to markdown, dicts
and DataFrames; the tab builders (kvviz.ui.tabs) put them on the page. Nothing here imports gradio, so
every sentence the page shows can be checked without a browser or a server.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pandas as pd

from kvviz.engine.batch import BatchResult
from kvviz.engine.compare import Comparison
from kvviz.ui.live import RunRecord
from kvviz.ui.worker import Loaded


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds with two decimals, or n/a."""
    return "n/a" if seconds is None else f"{seconds * 1e3:,.2f} ms"


def time_limit_message(limit_s: float) -> str:
    return f"stopped by the time limit: this demo allows {limit_s:g} s per request"


def metrics_markdown(record: RunRecord) -> str:
    """The run's metrics table, what it was, and why prefill and decode differ, with this run's numbers."""
    s = record.summary
    if s is None:
        return f"**{record.finish.reason}**: {record.finish.error}" if record.finish else "running…"
    bw = (f"{s.bandwidth_achieved / 1e9:,.2f} GB/s, {s.bandwidth_utilisation:.0%} of {s.bandwidth_bound / 1e9:,.1f}"
          if s.bandwidth_achieved else "n/a")
    lines = [
        "| TTFT | TPOT | tokens/s | decode tokens/s | ITL p50 / p90 / p99 | queue | prefill | bandwidth |",
        "|---|---|---|---|---|---|---|---|",
        f"| {ms(s.ttft_s)} | {ms(s.tpot_s)} | {s.tokens_per_s or 0:,.1f} | {s.decode_tokens_per_s or 0:,.1f} | "
        f"{ms(s.itl_p50_s)} / {ms(s.itl_p90_s)} / {ms(s.itl_p99_s)} | {ms(s.queue_s)} | {ms(s.prefill_s)} | {bw} |",
        "",
        f"run {record.run_id}: {s.model} on {s.device} in {s.dtype}, {s.mode}; {s.prompt_tokens} prompt tokens, "
        f"{s.new_tokens} new, finished by {s.finish_reason}.",
    ]
    if s.prefill_tokens_per_s and s.decode_tokens_per_s:
        lines.append(
            f"Prefill read {s.prompt_tokens} prompt tokens in {ms(s.prefill_s)} "
            f"({s.prefill_tokens_per_s:,.0f} tokens/s); "
            f"decode then made one token every {ms(s.tpot_s)} ({s.decode_tokens_per_s:,.0f} tokens/s). Prefill "
            f"moves {s.prefill_tokens_per_s / s.decode_tokens_per_s:,.1f}× more tokens per second because it "
            "multiplies every weight by all prompt tokens at once, while each decode step reads every weight "
            "(and the cache) for a single token.")
    if record.cpu_threads:
        lines.append(f"The device worker runs this model with {record.cpu_threads} torch thread(s) on this CPU.")
    if record.random_weights:
        lines.append("*Random weights: the timing and memory are real, the text is noise.*")
    return "\n".join(lines)


def final_metrics(record: RunRecord, time_limit_s: float | None) -> str:
    """The metrics at the end of a run; time_limit_s when the run was stopped by that limit."""
    text = metrics_markdown(record)
    if time_limit_s is None:
        return text
    return f"{text}\n\n**{time_limit_message(time_limit_s).capitalize()}.**"


def run_details(record: RunRecord, stopped_by_time_limit: bool) -> dict:
    """The run as the page's JSON box and the /generate API's last value show it (the lesson's keys first)."""
    details = {"lesson": record.summary.lesson(), "summary": record.summary.as_dict(), "text": record.text}
    if stopped_by_time_limit:
        details["stopped_by"] = "time_limit"
    return details


def agreement(result: Comparison) -> str:
    """Whether the cached and uncached runs made the same tokens, in one sentence."""
    if result.tokens_identical:
        return "The tokens are identical."
    if result.first_divergence is not None:
        return f"The tokens part at position {result.first_divergence}."
    return "The tokens agree where both ran; one run stopped earlier."


def compare_verdict(result: Comparison, loaded: Loaded) -> str:
    """The comparison's headline: the speedup, agreement, both modes' TPOT and rate, and what ran where."""
    c, u = result.cached, result.uncached
    per_token = f" ({result.decode_speedup:.2f}× per decode token)" if result.decode_speedup else ""
    text = (f"### {result.speedup:.2f}× faster with the cache{per_token}\n"
            f"{agreement(result)} Cached: TPOT {ms(c.tpot_s)}, {c.tokens_per_s:,.1f} tokens/s. "
            f"Uncached: TPOT {ms(u.tpot_s)}, {u.tokens_per_s:,.1f} tokens/s. "
            f"{loaded.spec} on {loaded.device} in {loaded.dtype}.")
    if loaded.random_weights:
        text += "\n\n*Random weights: the timing is real, the text is noise.*"
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

    def table(self) -> pd.DataFrame:
        """The history table (and its CSV): one row per run."""
        return pd.DataFrame(list(self.rows))

    def overlay(self, picked: object) -> pd.DataFrame | None:
        """The per-token rows of the runs picked (as the picker sends them), together; None if none is known."""
        frames = [self.frames[i] for i in run_ids(picked) if i in self.frames]
        return pd.concat(frames) if frames else None


def run_ids(picked: object) -> list[int]:
    """The run ids in the overlay picker's value as sent; anything that is not one is ignored."""
    items = picked if isinstance(picked, list) else []
    return [int(r) for r in items if isinstance(r, (str, int)) and not isinstance(r, bool) and str(r).isdecimal()
            and len(str(r)) < 12]


_BATCH_IDS = itertools.count(1)


def batch_markdown(result: BatchResult, loaded: Loaded | None) -> str:
    """A batch's headline with its own numbers: what ran, the shared prefill, the decode pass, the rates, the
    cache and its padding, and why a pass costs about the same for one row or many."""
    s = result.summary
    step = ms(s.decode_step_median_s)
    lines = [f"### {s.batch_size} sequences decoded together: {s.tokens_per_s:,.1f} tokens/s in all, "
             f"{s.tokens_per_s_per_sequence:,.1f} per sequence",
             f"{s.model} on {s.device} in {s.dtype}, {s.mode}. One prefill pass read every row's prompt "
             f"({sum(s.prompt_tokens)} tokens, left-padded to {s.padded_len} each) in {ms(s.prefill_s)}: every row's "
             f"first token came at {ms(s.ttft_s)}. Then each decode pass fed one token per row in {step} (median "
             f"over {s.decode_steps} passes). The cache peaked at {s.peak_kv_bytes / 2**20:,.2f} MiB, of which "
             f"{s.peak_padding_bytes / 2**20:,.2f} MiB held padding; measured from its tensors, it equals the memory "
             "model's batch × seq_len × layers × 2 × kv_heads × head_dim × bytes at every pass (the KV plot).",
             "A decode pass reads every weight once for the whole batch, and each row adds only its own cache and "
             "its own arithmetic: while the pass is bound by reading memory (or, on a small model, by the fixed "
             "cost of launching it), B rows cost about what one does. The batch sweep below measures that."]
    if loaded is not None and loaded.random_weights:
        lines.append("*Random weights: the timing and memory are real, the text is noise.*")
    return "\n\n".join(lines)


def batch_rows(result: BatchResult) -> pd.DataFrame:
    """One line per sequence of a batch: its prompt, padding, tokens, how it ended and its text."""
    return pd.DataFrame([{"row": r.row, "prompt_tokens": r.prompt_tokens, "padding": r.padding,
                          "new_tokens": r.new_tokens, "finish": r.finish_reason, "end_ms": round(r.end_s * 1e3, 2),
                          "prompt": r.prompt[:60], "text": r.text[:200]} for r in result.rows])


def batch_history_rows(result: BatchResult) -> list[dict]:
    """The history's rows for a batch: one per sequence, the batch's shared figures repeated on each (its id,
    size, TTFT, decode pass, tokens/s in all) beside the sequence's own (tokens, finish, tokens/s)."""
    s, batch = result.summary, next(_BATCH_IDS)
    return [{"kind": "batch", "label": f"batch {batch} row {r.row}", "model": s.model, "mode": s.mode,
             "batch": batch, "batch_size": s.batch_size, "row": r.row, "finish": r.finish_reason,
             "prompt": r.prompt[:60], "prompt_tokens": r.prompt_tokens, "padding": r.padding,
             "new_tokens": r.new_tokens, "ttft_s": round(r.ttft_s, 6),
             "tokens_per_s": round(r.new_tokens / r.end_s, 6) if r.end_s else None,
             "decode_step_median_s": s.decode_step_median_s, "batch_tokens_per_s": round(s.tokens_per_s, 6)}
            for r in result.rows]
