"""What a batch sweep says, in the run's own numbers: a table per batch size, and why the measurements go the
way they do and where they part from the roofline's prediction.

Pure functions from a sweep's DataFrame (kvviz.engine.batch_sweep; one model's rows) to markdown. Every number
in a sentence comes from the frame, through kvviz.engine.batch_sweep.summarize_sweep or the rows themselves,
so each can be checked against the data. A departure from the prediction is explained only where the data
shows it: a measured / predicted ratio well above 1 at B=1 (fixed per-step cost the roofline does not count),
falling as the batch shares it; the step turning compute-bound inside the sweep; the ratio rising again at
large B. Nothing here imports gradio or plotly, or measures anything.
"""

from __future__ import annotations

import pandas as pd

from kvviz.base.units import GIB
from kvviz.engine.batch_sweep import STOP_CANCELLED, STOP_MAX_BATCH, STOP_MEMORY, summarize_sweep

OVERHEAD_RATIO = 1.5  # a measured step this many times the lower bound at B=1 is mostly cost the roofline omits
SHARED_FALL = 0.8  # the ratio counts as falling with B when its lowest is below this share of B=1's
RISE = 1.2  # ... and as rising again when the last batch's is above this multiple of the lowest
KERNEL_JUMP = 1.25  # the second batch's step this many times the first's, where the roofline's barely moves


def ms(seconds: float) -> str:
    """Seconds as milliseconds with about three significant digits: '3.05 ms', '41.2 ms', '1,234 ms'."""
    v = seconds * 1e3
    return f"{v:,.0f} ms" if v >= 100 else f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms"


def rate(per_s: float) -> str:
    """A rate in tokens/s: '8,000', '12.5'."""
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.1f}"


def mb(n_bytes: float) -> str:
    """Bytes in GB, MB or KB (10^9, 10^6, 10^3 bytes): '1.98 GB', '20.5 MB', '96.3 KB'."""
    if n_bytes >= 1e9:
        return f"{n_bytes / 1e9:,.2f} GB"
    return f"{n_bytes / 1e6:,.1f} MB" if n_bytes >= 1e6 else f"{n_bytes / 1e3:,.1f} KB"


def sweep_table(frame: pd.DataFrame) -> str:
    """One line per batch size: the step measured and predicted and their ratio, the rates, TTFT, the cache."""
    lines = ["| B | decode step | roofline | measured / roofline | bound (roofline) | tokens/s total | "
             "tokens/s per sequence | TTFT (prefill) | KV measured | = predicted |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in frame.sort_values("batch").iterrows():
        same = "yes" if r["kv_bytes"] == r["kv_bytes_predicted"] else f"no ({mb(r['kv_bytes_predicted'])})"
        lines.append(f"| {int(r['batch'])} | {ms(r['step_s'])} | {ms(r['step_s_predicted'])} | "
                     f"{r['step_over_predicted']:.2f} | {r['bound_predicted']} | {rate(r['tokens_per_s_total'])} | "
                     f"{rate(r['tokens_per_s_per_seq'])} | {ms(r['prefill_s'])} | {mb(r['kv_bytes'])} | {same} |")
    return "\n".join(lines)


def headline(s: dict) -> str:
    """The step against the rates from the first batch to the last, and why: the weights are read once a step."""
    a, z = s["first"], s["last"]
    if a["batch"] == z["batch"]:
        return (f"Only B={a['batch']} ran: a decode step took {ms(a['step_s'])} "
                f"({rate(a['tokens_per_s_total'])} tokens/s). {_stopped(s)}")
    per_seq_kv = z["kv_bytes"] / z["batch"]
    cheap = s["step_growth"] < (z["batch"] / a["batch"]) / 2
    return (f"From B={a['batch']} to B={z['batch']} the decode step went from {ms(a['step_s'])} to "
            f"{ms(z['step_s'])} ({s['step_growth']:.1f}×) while tokens/s went from {rate(a['tokens_per_s_total'])} "
            f"to {rate(z['tokens_per_s_total'])} ({s['tokens_per_s_growth']:.1f}×): the weights "
            f"({mb(s['weights_bytes'])}) are read once per step for the whole batch, and each sequence adds only "
            f"its own cache ({mb(per_seq_kv)} at the end) and its own FLOPs"
            + (", so a bigger batch is nearly free per step. " if cheap else ". ")
            + f"Each sequence's own rate went from {rate(a['tokens_per_s_per_seq'])} to "
            f"{rate(z['tokens_per_s_per_seq'])} tokens/s: batching trades each sequence's latency for the "
            f"batch's throughput. {_stopped(s)}")


def _stopped(s: dict) -> str:
    reason, last = s["stop_reason"], s["last"]["batch"]
    if reason == STOP_MAX_BATCH:
        return f"The sweep stopped at the largest batch asked for (B={last})."
    if reason == STOP_MEMORY:
        return (f"The sweep stopped at B={last}: the next batch would not fit by the calculator (memory runs out "
                f"after B={s['memory_limit_batch']:,}).")
    if reason == STOP_CANCELLED:
        return f"The sweep was stopped after B={last}."
    return f"The sweep stopped after B={last}: {reason}."


def _achieved_flops(row: pd.Series) -> float:
    """FLOP/s the measured step reached: the roofline's FLOPs of the step (its compute term × the peak) / step_s."""
    return row["step_compute_s_predicted"] * row["peak_flops"] / row["step_s"]


def _compute_bound(s: dict, frame: pd.DataFrame) -> str:
    """Where the roofline turns compute-bound, how the measured step grew past it, and the FLOP/s it reached."""
    cb, last = s["compute_bound_batch"], s["last"]["batch"]
    ridge = (f"this device's ridge point ({s['ridge_point']:.1f} FLOP/B = {s['peak_flops'] / 1e9:,.0f} GFLOP/s / "
             f"{s['bandwidth'] / 1e9:,.1f} GB/s)")
    if cb is None:
        return f"By the roofline the step never turns compute-bound here: its FLOPs per byte level off below {ridge}."
    if cb > last:
        return (f"By the roofline the step stays memory-bound over the whole sweep: its FLOPs per byte reach "
                f"{ridge} only at B={cb:,}, beyond B={last}.")
    f = frame.sort_values("batch").set_index("batch")
    before = f[f.index < cb]
    base = before.index[-1] if len(before) else f.index[0]
    z, y = f.loc[last], f.loc[base]
    flops = z["step_compute_s_predicted"] * z["peak_flops"]
    return (f"From B={cb:,} the roofline turns compute-bound: the step's FLOPs per byte "
            f"({z['intensity_predicted']:.1f} at B={last}) pass {ridge}, and its predicted step grows with B, "
            f"{ms(y['step_s_predicted'])} at B={base} to {ms(z['step_s_predicted'])} at B={last} "
            f"({z['step_s_predicted'] / y['step_s_predicted']:.1f}×); measured, the step grew "
            f"{z['step_s'] / y['step_s']:.1f}× over the same batches. At B={last} it does {flops / 1e9:,.2f} GFLOP in "
            f"{ms(z['step_s'])}: {_achieved_flops(z) / 1e9:,.0f} GFLOP/s, {_achieved_flops(z) / z['peak_flops']:.0%} "
            "of the peak this device reached with one large matmul; a decode step's matmuls are thin (B rows).")


def _first_step(s: dict, frame: pd.DataFrame) -> str:
    """B=1 against its bound: the bandwidth the step reached, then either the fixed per-step cost (well above the
    bound) or nothing more (near it)."""
    a = s["first"]
    row = frame.sort_values("batch").iloc[0]
    moved = row["weight_bytes_read_predicted"] + row["kv_read_bytes_predicted"]
    reached = moved / row["step_s"]
    text = (f"At B={a['batch']} the step moves {mb(moved)} in {ms(a['step_s'])}: {reached / 1e9:,.1f} GB/s, "
            f"{reached / s['bandwidth']:.0%} of the {s['bandwidth'] / 1e9:,.1f} GB/s this device measured.")
    if a["step_over_predicted"] <= OVERHEAD_RATIO:
        return text + " A batch of one is a memory-bound step, as the roofline says."
    return text + (" The roofline counts bytes moved and FLOPs, not the fixed cost of running a step (Python, "
                   "and a kernel launch for every operation of every layer), which on a model whose weights read in "
                   f"{ms(s['weights_bytes'] / s['bandwidth'])} is most of the step.")


def _kernel_switch(frame: pd.DataFrame) -> str:
    """A jump from the first batch to the second that the roofline does not predict (its step barely moves)."""
    f = frame.sort_values("batch")
    if len(f) < 2:
        return ""
    a, b = f.iloc[0], f.iloc[1]
    grew, predicted = b["step_s"] / a["step_s"], b["step_s_predicted"] / a["step_s_predicted"]
    if grew < KERNEL_JUMP or predicted > 1.05:
        return ""
    return (f"From B={int(a['batch'])} to B={int(b['batch'])} the measured step grew {grew:.1f}× "
            f"({ms(a['step_s'])} to {ms(b['step_s'])}) where the roofline's grows {predicted:.2f}×: the bound assumes "
            "every kernel streams the weights at the measured bandwidth, which was measured with a matrix-vector "
            "product, the kernel a batch of one runs; two rows or more run matrix-matrix kernels, which on a CPU "
            "can read the same weights more slowly.")


def _rising(s: dict, frame: pd.DataFrame) -> str:
    """The ratio falling and then climbing again at large B."""
    z = s["last"]
    low = s["lowest_ratio_batch"]
    if low in (s["first"]["batch"], z["batch"]) or z["step_over_predicted"] < s["lowest_ratio"] * RISE:
        return ""
    row = frame.set_index("batch").loc[z["batch"]]
    lead = (f"Past B={low} the ratio rises again, to {z['step_over_predicted']:.2f} at B={z['batch']}: the "
            "measured step grows faster than the roofline's")
    if row["bound_predicted"] == "compute":
        return lead + " as the step's arithmetic grows, below the device's peak (above)."
    return lead + (": the roofline counts the weights and the cache, not the activations each step writes and "
                   "reads again, nor the attention's own kernels, and those grow with B.")


def departure(s: dict, frame: pd.DataFrame) -> str:
    """Where the measured step departs from the roofline's prediction, and why, from the ratios per batch."""
    a, z = s["first"], s["last"]
    if a["batch"] == z["batch"]:
        return (f"The roofline predicted a step of {ms(a['step_s_predicted'])} at B={a['batch']}, a lower bound; "
                f"measured / predicted is {a['step_over_predicted']:.2f}. " + _first_step(s, frame))
    parts = [f"The roofline predicted a step of {ms(a['step_s_predicted'])} at B={a['batch']} and "
             f"{ms(z['step_s_predicted'])} at B={z['batch']} ({s['step_growth_predicted']:.1f}×), a lower bound; "
             f"measured / predicted is {a['step_over_predicted']:.2f} at B={a['batch']} and "
             f"{z['step_over_predicted']:.2f} at B={z['batch']} (lowest {s['lowest_ratio']:.2f}, at "
             f"B={s['lowest_ratio_batch']}).", _first_step(s, frame), _kernel_switch(frame)]
    if a["step_over_predicted"] > OVERHEAD_RATIO and s["lowest_ratio"] < a["step_over_predicted"] * SHARED_FALL:
        parts.append(f"The batch shares the fixed cost, so the ratio falls to {s['lowest_ratio']:.2f} at "
                     f"B={s['lowest_ratio_batch']}.")
    parts += [_compute_bound(s, frame), _rising(s, frame)]
    return " ".join(p for p in parts if p)


def prefill_text(s: dict, frame: pd.DataFrame) -> str:
    """TTFT: every sequence waits for the whole batch's prefill."""
    a, z = s["first"], s["last"]
    if a["batch"] == z["batch"]:
        return f"The prefill (every sequence's TTFT) took {ms(a['prefill_s'])}."
    ratios = frame["prefill_over_predicted"]
    return (f"TTFT, the batch's prefill, went from {ms(a['prefill_s'])} at B={a['batch']} to {ms(z['prefill_s'])} "
            f"at B={z['batch']} ({s['prefill_growth']:.1f}×){_prefill_reading(s, z)} The roofline calls the "
            f"prefill {_bounds(frame)}, and the measured prefill is "
            f"{ratios.min():.2f}-{ratios.max():.2f}× its lower bound.")


def _prefill_reading(s: dict, z: dict) -> str:
    """Why TTFT grows with the batch, said only when it grew (a busy machine can make the first batch's read high)."""
    if s["prefill_growth"] > 1:
        return (f": every sequence waits for all B prompts ({z['batch']} × {s['prompt_tokens']} tokens) to pass "
                "through the model before its first token.")
    return (": it did not grow here, so the smaller batch's prefill was slowed by something else (the machine's "
            "other work, a cold first pass); in general every sequence waits for all B prompts.")


def _bounds(frame: pd.DataFrame) -> str:
    """'compute-bound at every batch', or where the prefill's bound changes: 'memory-bound at B=1, compute-bound
    from B=2'."""
    f = frame.sort_values("batch")
    kinds = f["prefill_bound_predicted"].tolist()
    if len(set(kinds)) == 1:
        return f"{kinds[0]}-bound at every batch"
    spans = [f"{k}-bound {'at' if i == 0 else 'from'} B={int(b)}" for i, (b, k) in enumerate(zip(f["batch"], kinds,
             strict=True)) if i == 0 or kinds[i - 1] != k]
    return ", ".join(spans)


def kv_text(s: dict, frame: pd.DataFrame) -> str:
    """The cache: measured against the memory model, and where memory runs out."""
    z = s["last"]
    wrong = frame[frame["kv_bytes"] != frame["kv_bytes_predicted"]]
    agree = ("equal to the memory model's prediction at every batch, to the byte" if wrong.empty else
             "different from the memory model's prediction at B=" + ", ".join(str(int(b)) for b in wrong["batch"]))
    per_seq = z["kv_bytes"] / z["batch"]
    return (f"The cache after the last step held {mb(z['kv_bytes'])} at B={z['batch']}, {agree}: "
            f"B × {mb(per_seq)} per sequence, linear in the batch. The calculator's KV budget is "
            f"{s['kv_budget_bytes'] / GIB:,.2f} GiB ({s['accelerator']}: memory × mem_util − weights − reserve), "
            f"so memory runs out after B={s['memory_limit_batch']:,} sequences of "
            f"{s['prompt_tokens'] + s['new_tokens']} tokens.")


def sweep_markdown(frame: pd.DataFrame) -> str:
    """The whole explanation of one model's sweep, paragraph by paragraph, in its own numbers."""
    if frame is None or frame.empty:
        return "No batch ran."
    s = summarize_sweep(frame)
    return "\n\n".join([headline(s), departure(s, frame), prefill_text(s, frame), kv_text(s, frame)])
