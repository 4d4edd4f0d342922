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
    """The comparison's headline: the speedup, agreement, every mode's figures side by side, what ran where, and
    (with the static mode) why the fast path is faster, in this run's numbers."""
    per_token = f" ({result.decode_speedup:.2f}× per decode token)" if result.decode_speedup else ""
    parts = [f"### {result.speedup:.2f}× faster with the cache{per_token}",
             f"{agreement(result)} {loaded.spec} on {loaded.device} in {loaded.dtype}.", mode_table(result)]
    if result.static is not None:
        parts.append(static_verdict(result))
        parts.append(fast_path_why(result, loaded.device))
    if loaded.random_weights:
        parts.append("*Random weights: the timing is real, the text is noise.*")
    return "\n\n".join(parts)


def mode_table(result: Comparison) -> str:
    """One line per mode: TTFT, TPOT, decode rate, time against the uncached run, decode bandwidth against the
    device's limit (the uncached loop re-reads the whole sequence each step: no bandwidth figure applies)."""
    lines = ["| mode | TTFT | TPOT | decode tokens/s | time (no queue or compile) | × uncached | "
             "bandwidth (decode) | of the limit |", "|---|---|---|---|---|---|---|---|"]
    for run in result.runs:
        s = run.summary
        bw = f"{s.bandwidth_achieved / 1e9:,.2f} GB/s" if s.bandwidth_achieved else "n/a"
        share = (f"{s.bandwidth_utilisation:.0%} of {s.bandwidth_bound / 1e9:,.1f} GB/s"
                 if s.bandwidth_utilisation else "n/a")
        lines.append(f"| {run.label} | {ms(s.ttft_s)} | {ms(s.tpot_s)} | {s.decode_tokens_per_s or 0:,.1f} | "
                     f"{ms(s.e2e_s - s.queue_s)} | {run.speedup:.2f}× | {bw} | {share} |")
    return "\n".join(lines)


def static_verdict(result: Comparison) -> str:
    """The static mode's line: its speed against the plain cached loop, its agreement, its compile."""
    run, c = result.static, result.cached
    s = run.summary
    pace = f"{c.tpot_s / s.tpot_s:.2f}× the plain cached loop per decode token" if c.tpot_s and s.tpot_s else \
        "too few tokens for a per-token rate"
    agree = ("the same tokens as the cached loop" if run.tokens_identical else
             f"parts from the cached loop at token {run.first_divergence}" if run.first_divergence is not None
             else "agrees with the cached loop where both ran")
    compiled = (f"compiling its step took {run.compile_s:,.1f} s, left out of its time"
                if run.compile_s else "its compiled step was reused from an earlier request: no compile")
    return (f"**{run.label}**: {pace}; {agree}; {compiled}. Its cache was allocated for {run.cache_tokens:,} "
            "tokens before the first step.")


def fast_path_why(result: Comparison, device: str) -> str:
    """Why the static mode decodes faster, with this run's numbers: the floor the weights and cache set at the
    device's bandwidth, how far the plain loop stands above it (per-step overhead), how close the static one is."""
    c, s = result.cached, result.static.summary
    if not (c.bytes_per_decode_step and c.bandwidth_bound and c.tpot_s and s.tpot_s and s.bytes_per_decode_step):
        return "Too few decode tokens to weigh the two loops against the bandwidth limit."
    limit = c.bandwidth_bound
    floor_c, floor_s = c.bytes_per_decode_step / limit, s.bytes_per_decode_step / limit
    how = ("replayed as one CUDA graph, so the GPU is handed the whole step at once" if device.startswith("cuda")
           else "compiled by inductor into fused kernels, the weights prepacked for its matrix kernels")
    text = (f"**Why the fast path is faster.** A decode step must read every weight and the cache: "
            f"{c.bytes_per_decode_step / 1e6:,.1f} MB per token for the plain loop. At this device's "
            f"{limit / 1e9:,.1f} GB/s ({c.bandwidth_source or 'its bandwidth'}) that read alone takes "
            f"{ms(floor_c)}: the floor under TPOT. The plain cached loop took {ms(c.tpot_s)}, "
            f"{ms(max(c.tpot_s - floor_c, 0.0))} above the floor: Python calling the model's modules one by one, a "
            "kernel launched for every small operation, the cache grown by a copy at every step. The static mode "
            f"runs the same step on a cache allocated once, {how}: {ms(s.tpot_s)} per token against a floor of "
            f"{ms(floor_s)} (it reads the whole preallocated cache, {s.bytes_per_decode_step / 1e6:,.1f} MB a step, "
            f"unwritten positions masked), {s.bandwidth_utilisation:.0%} of the limit.")
    if s.bandwidth_utilisation and s.bandwidth_utilisation > 1:
        text += (" Above 100%: the limit is the speed of a measured matrix-vector product, and the compiled step "
                 "streams its packed weights faster than that probe, or finds part of them still in the caches.")
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
