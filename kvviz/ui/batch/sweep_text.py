"""What a batch sweep says, in the run's own numbers: a table per batch size, and why the measurements go the
way they do and where they part from the roofline's prediction.

Pure functions from a sweep's DataFrame (kvviz.engine.batch_sweep; one model's rows) to markdown. Every number
in a sentence comes from the frame, through kvviz.engine.batch_sweep.summarize_sweep or the rows themselves,
so each can be checked against the data. A departure from the prediction is explained only where the data
shows it: a measured / predicted ratio well above 1 at B=1 (fixed per-step cost the roofline does not count),
falling as the batch shares it; the step turning compute-bound inside the sweep; the ratio rising again at
large B. Every sentence is in the language asked for (lang: "en" or "zh", kvviz.i18n's batch catalogue), with
the same numbers in both. Nothing here imports gradio or plotly, or measures anything.
"""

from __future__ import annotations

import pandas as pd

from kvviz.base.units import GIB
from kvviz.base.units import fmt_bytes_short as mb
from kvviz.base.units import fmt_ms as ms
from kvviz.base.units import fmt_rate as rate
from kvviz.engine.batch_sweep import STOP_CANCELLED, STOP_MAX_BATCH, STOP_MEMORY, summarize_sweep
from kvviz.i18n import CATALOG, t
from kvviz.i18n.errors import translate

OVERHEAD_RATIO = 1.5  # a measured step this many times the lower bound at B=1 is mostly cost the roofline omits
SHARED_FALL = 0.8  # the ratio counts as falling with B when its lowest is below this share of B=1's
RISE = 1.2  # ... and as rising again when the last batch's is above this multiple of the lowest
KERNEL_JUMP = 1.25  # the second batch's step this many times the first's, where the roofline's barely moves


def bound_name(kind: str, lang: str = "en", short: bool = False) -> str:
    """A roofline bound ("memory", "compute") as a reader says it: 'memory-bound' (short: 'memory') in lang; an
    unknown kind as it came."""
    key = f"batch.{'bound_short' if short else 'bound'}.{kind}"
    if key in CATALOG["en"]:
        return t(key, lang)
    return kind if short else f"{kind}-bound"


def sweep_table(frame: pd.DataFrame, lang: str = "en") -> str:
    """One line per batch size: the step measured and predicted and their ratio, the rates, TTFT, the cache."""
    lines = [t("batch.table.header", lang), "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in frame.sort_values("batch").iterrows():
        same = (t("batch.table.yes", lang) if r["kv_bytes"] == r["kv_bytes_predicted"] else
                t("batch.table.no", lang, predicted=mb(r["kv_bytes_predicted"])))
        lines.append(f"| {int(r['batch'])} | {ms(r['step_s'])} | {ms(r['step_s_predicted'])} | "
                     f"{r['step_over_predicted']:.2f} | {bound_name(r['bound_predicted'], lang, short=True)} | "
                     f"{rate(r['tokens_per_s_total'])} | {rate(r['tokens_per_s_per_seq'])} | {ms(r['prefill_s'])} | "
                     f"{mb(r['kv_bytes'])} | {same} |")
    return "\n".join(lines)


def headline(s: dict, lang: str = "en") -> str:
    """The step against the rates from the first batch to the last, and why: the weights are read once a step."""
    a, z = s["first"], s["last"]
    if a["batch"] == z["batch"]:
        return t("batch.sweep.only", lang, b=a["batch"], step=ms(a["step_s"]), rate=rate(a["tokens_per_s_total"]),
                 stopped=_stopped(s, lang))
    if not _rate_beyond_noise(a, z):
        return t("batch.sweep.headline_noise", lang, a=a["batch"], z=z["batch"], rate_a=rate(a["tokens_per_s_total"]),
                 rate_z=rate(z["tokens_per_s_total"]), range_a=_step_range(a), range_z=_step_range(z),
                 stopped=_stopped(s, lang))
    per_seq_kv = z["kv_bytes"] / z["batch"]
    cheap = s["step_growth"] < (z["batch"] / a["batch"]) / 2
    return t("batch.sweep.headline", lang, a=a["batch"], z=z["batch"], step_a=ms(a["step_s"]), step_z=ms(z["step_s"]),
             step_growth=f"{s['step_growth']:.1f}", rate_a=rate(a["tokens_per_s_total"]),
             rate_z=rate(z["tokens_per_s_total"]), rate_growth=f"{s['tokens_per_s_growth']:.1f}",
             weights=mb(s["weights_bytes"]), per_seq_kv=mb(per_seq_kv),
             cheap=t("batch.sweep.cheap" if cheap else "batch.sweep.not_cheap", lang),
             seq_a=rate(a["tokens_per_s_per_seq"]), seq_z=rate(z["tokens_per_s_per_seq"]), stopped=_stopped(s, lang))


def _rate_beyond_noise(a: dict, z: dict) -> bool:
    """Whether batch z's tokens/s beat batch a's even at z's slowest step against a's fastest: one run per batch,
    so its own steps' range is the only noise band the sweep has."""
    return z["batch"] / z["step_max_s"] > a["batch"] / a["step_min_s"]


def _step_range(row: dict) -> str:
    return f"{ms(row['step_min_s'])}–{ms(row['step_max_s'])}"


def _stopped(s: dict, lang: str) -> str:
    reason, last = s["stop_reason"], s["last"]["batch"]
    if reason == STOP_MAX_BATCH:
        return t("batch.sweep.stop.max_batch", lang, b=last)
    if reason == STOP_MEMORY:
        return t("batch.sweep.stop.memory", lang, b=last, limit=f"{s['memory_limit_batch']:,}")
    if reason == STOP_CANCELLED:
        return t("batch.sweep.stop.cancelled", lang, b=last)
    return t("batch.sweep.stop.other", lang, b=last, reason=translate(reason, lang))


def _achieved_flops(row: pd.Series) -> float:
    """FLOP/s the measured step reached: the roofline's FLOPs of the step (its compute term × the peak) / step_s."""
    return row["step_compute_s_predicted"] * row["peak_flops"] / row["step_s"]


def _compute_bound(s: dict, frame: pd.DataFrame, lang: str) -> str:
    """Where the roofline turns compute-bound, how the measured step grew past it, and the FLOP/s it reached."""
    cb, last = s["compute_bound_batch"], s["last"]["batch"]
    ridge = t("batch.sweep.ridge", lang, ridge=f"{s['ridge_point']:.1f}", peak=f"{s['peak_flops'] / 1e9:,.0f}",
              bandwidth=f"{s['bandwidth'] / 1e9:,.1f}")
    if cb is None:
        return t("batch.sweep.never_compute", lang, ridge=ridge)
    if cb > last:
        return t("batch.sweep.compute_beyond", lang, ridge=ridge, cb=f"{cb:,}", last=last)
    f = frame.sort_values("batch").set_index("batch")
    before = f[f.index < cb]
    base = before.index[-1] if len(before) else f.index[0]
    z, y = f.loc[last], f.loc[base]
    flops = z["step_compute_s_predicted"] * z["peak_flops"]
    return t("batch.sweep.compute_inside", lang, cb=f"{cb:,}", intensity=f"{z['intensity_predicted']:.1f}", last=last,
             ridge=ridge, pred_base=ms(y["step_s_predicted"]), base=base, pred_last=ms(z["step_s_predicted"]),
             pred_growth=f"{z['step_s_predicted'] / y['step_s_predicted']:.1f}",
             growth=f"{z['step_s'] / y['step_s']:.1f}", gflop=f"{flops / 1e9:,.2f}", step=ms(z["step_s"]),
             achieved=f"{_achieved_flops(z) / 1e9:,.0f}", share=f"{_achieved_flops(z) / z['peak_flops']:.0%}")


def _first_step(s: dict, frame: pd.DataFrame, lang: str) -> str:
    """B=1 against its bound: the bandwidth the step reached, then either the fixed per-step cost (well above the
    bound) or nothing more (near it)."""
    a = s["first"]
    row = frame.sort_values("batch").iloc[0]
    moved = row["weight_bytes_read_predicted"] + row["kv_read_bytes_predicted"]
    reached = moved / row["step_s"]
    text = t("batch.sweep.first_step", lang, b=a["batch"], moved=mb(moved), step=ms(a["step_s"]),
             reached=f"{reached / 1e9:,.1f}", share=f"{reached / s['bandwidth']:.0%}",
             bandwidth=f"{s['bandwidth'] / 1e9:,.1f}")
    if a["step_over_predicted"] <= OVERHEAD_RATIO:
        return text + t("batch.sweep.first_near", lang)
    return text + t("batch.sweep.first_overhead", lang, weights_time=ms(s["weights_bytes"] / s["bandwidth"]))


def _kernel_switch(frame: pd.DataFrame, lang: str) -> str:
    """A jump from the first batch to the second that the roofline does not predict (its step barely moves)."""
    f = frame.sort_values("batch")
    if len(f) < 2:
        return ""
    a, b = f.iloc[0], f.iloc[1]
    grew, predicted = b["step_s"] / a["step_s"], b["step_s_predicted"] / a["step_s_predicted"]
    if grew < KERNEL_JUMP or predicted > 1.05 or b["step_min_s"] <= a["step_max_s"]:  # within the steps' range
        return ""
    return t("batch.sweep.kernel_switch", lang, a=int(a["batch"]), b=int(b["batch"]), grew=f"{grew:.1f}",
             step_a=ms(a["step_s"]), step_b=ms(b["step_s"]), predicted=f"{predicted:.2f}")


def _rising(s: dict, frame: pd.DataFrame, lang: str) -> str:
    """The ratio falling and then climbing again at large B."""
    z = s["last"]
    low = s["lowest_ratio_batch"]
    if low in (s["first"]["batch"], z["batch"]) or z["step_over_predicted"] < s["lowest_ratio"] * RISE:
        return ""
    row = frame.set_index("batch").loc[z["batch"]]
    key = "batch.sweep.rising_compute" if row["bound_predicted"] == "compute" else "batch.sweep.rising_memory"
    return t(key, lang, low=low, ratio=f"{z['step_over_predicted']:.2f}", b=z["batch"])


def departure(s: dict, frame: pd.DataFrame, lang: str = "en") -> str:
    """Where the measured step departs from the roofline's prediction, and why, from the ratios per batch."""
    a, z = s["first"], s["last"]
    if a["batch"] == z["batch"]:
        return (t("batch.sweep.departure_one", lang, pred=ms(a["step_s_predicted"]), b=a["batch"],
                  ratio=f"{a['step_over_predicted']:.2f}") + _first_step(s, frame, lang))
    parts = [t("batch.sweep.departure", lang, pred_a=ms(a["step_s_predicted"]), a=a["batch"],
               pred_z=ms(z["step_s_predicted"]), z=z["batch"], growth=f"{s['step_growth_predicted']:.1f}",
               ratio_a=f"{a['step_over_predicted']:.2f}", ratio_z=f"{z['step_over_predicted']:.2f}",
               lowest=f"{s['lowest_ratio']:.2f}", low_b=s["lowest_ratio_batch"]),
             _first_step(s, frame, lang), _kernel_switch(frame, lang)]
    if a["step_over_predicted"] > OVERHEAD_RATIO and s["lowest_ratio"] < a["step_over_predicted"] * SHARED_FALL:
        parts.append(t("batch.sweep.shared_cost", lang, lowest=f"{s['lowest_ratio']:.2f}",
                       low_b=s["lowest_ratio_batch"]))
    parts += [_compute_bound(s, frame, lang), _rising(s, frame, lang)]
    return t("batch.sweep.sentence_gap", lang).join(p for p in parts if p)


def prefill_text(s: dict, frame: pd.DataFrame, lang: str = "en") -> str:
    """TTFT: every sequence waits for the whole batch's prefill."""
    a, z = s["first"], s["last"]
    if a["batch"] == z["batch"]:
        return t("batch.sweep.prefill_one", lang, prefill=ms(a["prefill_s"]))
    ratios = frame["prefill_over_predicted"]
    return t("batch.sweep.prefill", lang, pa=ms(a["prefill_s"]), a=a["batch"], pz=ms(z["prefill_s"]), z=z["batch"],
             growth=f"{s['prefill_growth']:.1f}", reading=_prefill_reading(s, z, lang), bounds=_bounds(frame, lang),
             lo=f"{ratios.min():.2f}", hi=f"{ratios.max():.2f}")


def _prefill_reading(s: dict, z: dict, lang: str) -> str:
    """Why TTFT grows with the batch, said only when it grew (a busy machine can make the first batch's read high)."""
    if s["prefill_growth"] > 1:
        return t("batch.sweep.prefill_grew", lang, b=z["batch"], tokens=s["prompt_tokens"])
    return t("batch.sweep.prefill_flat", lang)


def _bounds(frame: pd.DataFrame, lang: str = "en") -> str:
    """'compute-bound at every batch', or where the prefill's bound changes: 'memory-bound at B=1, compute-bound
    from B=2'."""
    f = frame.sort_values("batch")
    kinds = f["prefill_bound_predicted"].tolist()
    if len(set(kinds)) == 1:
        return t("batch.sweep.bound_all", lang, kind=bound_name(kinds[0], lang))
    spans = [t("batch.sweep.bound_at" if i == 0 else "batch.sweep.bound_from", lang, kind=bound_name(k, lang),
               b=int(b)) for i, (b, k) in enumerate(zip(f["batch"], kinds, strict=True))
             if i == 0 or kinds[i - 1] != k]
    return t("batch.sweep.list_sep", lang).join(spans)


def kv_text(s: dict, frame: pd.DataFrame, lang: str = "en") -> str:
    """The cache: measured against the memory model, and where memory runs out."""
    z = s["last"]
    wrong = frame[frame["kv_bytes"] != frame["kv_bytes_predicted"]]
    agree = (t("batch.sweep.kv_equal", lang) if wrong.empty else
             t("batch.sweep.kv_differ", lang, batches=", ".join(str(int(b)) for b in wrong["batch"])))
    per_seq = z["kv_bytes"] / z["batch"]
    return t("batch.sweep.kv", lang, kv=mb(z["kv_bytes"]), b=z["batch"], agree=agree, per_seq=mb(per_seq),
             budget=f"{s['kv_budget_bytes'] / GIB:,.2f}", accelerator=translate(s["accelerator"], lang),
             limit=f"{s['memory_limit_batch']:,}", tokens=s["prompt_tokens"] + s["new_tokens"])


def sweep_markdown(frame: pd.DataFrame, lang: str = "en") -> str:
    """The whole explanation of one model's sweep, paragraph by paragraph, in its own numbers, in lang."""
    if frame is None or frame.empty:
        return t("batch.sweep.none", lang)
    s = summarize_sweep(frame)
    return "\n\n".join([headline(s, lang), departure(s, frame, lang), prefill_text(s, frame, lang),
                        kv_text(s, frame, lang)])
