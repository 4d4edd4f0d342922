"""What the Plan tab says: how a prediction was obtained, the answer (the replica's KV blocks and groups, the load
asked, the knee, the highest rate under the SLO, replicas, GPUs and cost), and the measured check's table of errors.

Pure functions from plain values and DataFrames to markdown and tables; every number in a sentence comes from the
values given, so each can be checked by hand. Every function takes lang ("en" or "zh", kvviz.i18n.plan). Nothing
here imports gradio or plotly, simulates or measures anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kvviz.base.units import fmt_pair
from kvviz.i18n import t
from kvviz.i18n.errors import translate
from kvviz.sim.capacity import groups_text
from kvviz.sim.scheduler import FULL_ATTENTION

METRIC_KEYS = {"output_tokens_per_s": "plan.metric.tput", "ttft_p50_s": "plan.metric.ttft_p50",
               "ttft_p99_s": "plan.metric.ttft_p99", "tpot_p50_s": "plan.metric.tpot_p50",
               "tpot_p99_s": "plan.metric.tpot_p99"}


@dataclass(frozen=True)
class Answer:
    """The numbers the answer states. how: roofline or calibrated; source: the GPU preset or the calibration
    file; device: the machine a calibration names; gpus: per replica (tp × pp; 1 machine calibrated); asked_*:
    the load asked and its predicted figures; max_rate 0 when no rate held, next_rate None when the knee held;
    replicas, total_gpus, cost_at_max, cost_at_target None when not asked or not known."""

    how: str
    model: str
    source: str
    device: str
    tp: int
    pp: int
    closed: bool
    load: float
    asked_tokens_per_s: float
    asked_ttft_p99_s: float | None
    asked_tpot_p99_s: float | None
    knee_rate: float
    knee_tokens_per_s: float
    max_rate: float
    next_rate: float | None
    output_tokens: int
    target_rate: float | None
    replicas: int | None
    total_gpus: int | None
    price: float | None
    cost_at_max: float | None
    cost_at_target: float | None
    overhead_s: float
    stopped: object = None  # a Said: why the search stopped early
    here: str | None = None  # this machine, when the calibration names another (kvviz.sim.calibrate.made_elsewhere)
    config: object = None  # the replica's scheduler (kvviz.sim.scheduler.SchedulerConfig): its blocks and groups
    band: object = None  # a calibrated plan's kvviz.sim.plan.Band: the answer with every step slower and faster


def how_line(a: Answer, lang: str = "en") -> str:
    """How the figures were obtained, in one line (each figure's subtitle)."""
    if a.how == "calibrated":
        return t("plan.how.calibrated", lang, model=a.model, path=a.source, device=a.device)
    return t("plan.how.roofline", lang, model=a.model, gpu=a.source, tp=a.tp, pp=a.pp)


def short_how(a: Answer, lang: str = "en") -> str:
    """How the figures were obtained, short enough for a figure's subtitle (the calibration by its file's name)."""
    if a.how == "calibrated":
        key = "plan.how.short_calibrated_elsewhere" if a.here else "plan.how.short_calibrated"
        return t(key, lang, file=Path(a.source).name, model=a.model)
    return t("plan.how.short_roofline", lang, model=a.model, gpu=a.source, tp=a.tp, pp=a.pp)


def _ms(seconds: float | None) -> str:
    """Seconds in ms; a dash for none (no TPOT when every request makes one token: None, or NaN from a frame)."""
    return "–" if seconds is None or seconds != seconds else f"{seconds * 1000:,.1f}"


def answer_markdown(a: Answer, lang: str = "en") -> str:
    """The answer, one line each: how, the load asked, the knee, the highest rate under the SLO, replicas, cost."""
    unit = t("plan.unit.machines" if a.how == "calibrated" else "plan.unit.gpus", lang)
    lines = [f"**{t('plan.answer.how', lang)}** {how_line(a, lang)}"]
    if a.here:
        lines.append(t("plan.answer.elsewhere", lang, there=a.device, here=a.here))
    if a.overhead_s:
        lines.append(t("plan.answer.overhead", lang, ms=_ms(a.overhead_s)))
    if a.config is not None:
        c = a.config
        lines.append(t("plan.answer.replica", lang, blocks=f"{c.num_blocks:,}", block=c.block_size,
                       seqs=f"{c.max_num_seqs:,}", tokens=f"{c.max_num_batched_tokens:,}"))
        if c.groups != FULL_ATTENTION:
            lines.append(t("sim_cli.groups", lang, groups=groups_text(c.groups, lang)))
    load = t("plan.answer.load_closed" if a.closed else "plan.answer.load_open", lang, load=f"{a.load:,.4g}")
    lines.append(t("plan.answer.asked", lang, load=load, tokens=f"{a.asked_tokens_per_s:,.0f}",
                   ttft=_ms(a.asked_ttft_p99_s), tpot=_ms(a.asked_tpot_p99_s)))
    lines.append(t("plan.answer.knee", lang, rate=f"{a.knee_rate:,.2f}", tokens=f"{a.knee_tokens_per_s:,.0f}"))
    tokens = f"{a.max_rate * a.output_tokens:,.0f}"
    if not a.max_rate:
        lines.append(t("plan.answer.none", lang))
    elif a.next_rate is None:
        lines.append(t("plan.answer.max_at_knee", lang, rate=f"{a.max_rate:,.2f}", tokens=tokens))
    else:
        rate, next_rate = fmt_pair(a.max_rate, a.next_rate)  # the search resolves 1%: two places may not tell
        lines.append(t("plan.answer.max_rate", lang, rate=rate, tokens=tokens, next=next_rate))
    if a.band is not None:
        b = a.band
        lines.append(t("plan.answer.band", lang, pct=f"{100 * b.fraction:g}", slower=f"{b.slower_max_rate:,.3g}",
                       faster=f"{b.faster_max_rate:,.3g}"))
    if a.replicas is not None and a.target_rate is not None:
        lines.append(t("plan.answer.replicas", lang, target=f"{a.target_rate:,.4g}", replicas=a.replicas,
                       per=a.tp * a.pp, gpus=a.total_gpus, unit=unit))
    if a.cost_at_max is not None and a.price is not None:
        hour = t("plan.unit.machine_hour" if a.how == "calibrated" else "plan.unit.gpu_hour", lang)
        lines.append(t("plan.answer.cost", lang, cost=f"{a.cost_at_max:,.4g}", price=f"{a.price:,.4g}", hour=hour))
        if a.cost_at_target is not None:
            lines.append(t("plan.answer.cost_target", lang, cost=f"{a.cost_at_target:,.4g}", gpus=a.total_gpus,
                           unit=unit))
    if a.stopped is not None:
        lines.append(t("plan.answer.stopped", lang, why=translate(a.stopped, lang)))
    return "\n\n".join(f"- {line}" for line in lines)


def errors_table(frame: pd.DataFrame | None, lang: str = "en") -> pd.DataFrame:
    """The check's errors as the page shows them: the load, the metric's name, predicted and measured (ms for
    latencies, tokens/s for throughput) and the error in percent, signed (+: the prediction is above)."""
    columns = [t(f"plan.table.{c}", lang) for c in ("load", "metric", "predicted", "measured", "error")]
    if frame is None or not len(frame):
        return pd.DataFrame(columns=columns)
    rows = []
    for _, r in frame.iterrows():
        scale = 1 if r["metric"] == "output_tokens_per_s" else 1000
        shown = [None if v is None or pd.isna(v) else round(v * scale, 2) for v in (r["predicted"], r["measured"])]
        error = None if r["error"] is None or pd.isna(r["error"]) else f"{r['error'] * 100:+.1f}%"
        rows.append([round(r["load"], 3), t(METRIC_KEYS[r["metric"]], lang), *shown, error])
    return pd.DataFrame(rows, columns=columns)


def check_markdown(frame: pd.DataFrame, requests: int, lang: str = "en") -> str:
    """One line on the check: the loads run, the requests each, and the median absolute error per metric."""
    parts = []
    for metric, key in METRIC_KEYS.items():
        errors = frame.loc[frame["metric"] == metric, "error"].dropna().abs()
        if len(errors):
            parts.append(f"{t(key, lang)} {errors.median() * 100:.0f}%")
    return t("plan.check.done", lang, loads=frame["load"].nunique(), requests=requests,
             errors=t("plan.check.sep", lang).join(parts) or "–")
