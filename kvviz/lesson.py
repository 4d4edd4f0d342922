"""The lesson's six questions, answered with the numbers the visitor measured in this session.

QUESTIONS holds the questions in the lesson's order, its Chinese and an English translation. answers() turns
a session's history (kvviz.ui.generation.history.RunHistory: one row per run, and each single run's per-token frame)
into six short answers in zh or en: the last single run's life cycle (Q1), its prefill against its decode
(Q2), the KV formula with a model's numbers (Q3), the cache's measured bytes per step (Q4), TTFT, TPOT and
throughput across the levels of the latest serving load, batch sweep or batches (Q5), the last run's TTFT by
cause (Q6). Where nothing is measured yet, the answer says what to run. Q5 and Q6 lead on to the Plan tab's
prediction with the run's numbers (plan_numbers: the most requests in flight measured, the last run's lengths).
Pure: no gradio, no torch, no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pandas as pd

from kvviz.base.units import GIB, fmt_ms
from kvviz.calc.arch import Architecture
from kvviz.calc.dtypes import kv_dtype
from kvviz.i18n import CATALOG, t


@dataclass(frozen=True)
class Question:
    number: int
    zh: str  # the lesson's own words
    en: str

    @property
    def key(self) -> str:
        return f"lesson.q{self.number}"


QUESTIONS = tuple(Question(n, CATALOG["zh"][f"lesson.q{n}"], CATALOG["en"][f"lesson.q{n}"]) for n in range(1, 7))


class History(Protocol):
    """What answers() reads of a RunHistory."""

    rows: tuple[dict, ...]
    frames: dict[int, pd.DataFrame]


def ms(seconds: float | None, lang: str = "en") -> str:
    """Seconds as milliseconds with two decimals (kvviz.base.units.fmt_ms); n/a (无) for none."""
    return fmt_ms(seconds, "无" if lang == "zh" else "n/a")


def last_run(history: History) -> dict | None:
    """The last single generation's row (it has a run id and a summary), or None."""
    return next((r for r in reversed(history.rows) if "run" in r and r.get("ttft_s") is not None), None)


def lifecycle_answer(history: History, lang: str = "en") -> str:
    """Q1: the last run's moments, received to finished."""
    r = last_run(history)
    if r is None:
        return t("lesson.none.run", lang)
    return t("lesson.a1", lang, run=r["run"], model=r["model"], mode=r["mode"], queue=ms(r["queue_s"], lang),
             prompt_tokens=r["prompt_tokens"], tokenized=ms(r["queue_s"] + r["tokenize_s"], lang),
             ttft=ms(r["ttft_s"], lang), decode_tokens=max(r["new_tokens"] - 1, 0), e2e=ms(r["e2e_s"], lang),
             finish=r["finish"])


def prefill_decode_answer(history: History, lang: str = "en") -> str:
    """Q2: the last run's prefill (the whole prompt, one pass) against its decode (one token a pass)."""
    r = last_run(history)
    if r is None:
        return t("lesson.none.run", lang)
    prefill_rate, decode_rate = r.get("prefill_tokens_per_s"), r.get("decode_tokens_per_s")
    if not (prefill_rate and decode_rate):
        return t("lesson.a2.short", lang, run=r["run"])
    return t("lesson.a2", lang, run=r["run"], prompt_tokens=r["prompt_tokens"], prefill=ms(r["prefill_s"], lang),
             prefill_rate=f"{prefill_rate:,.0f}", decode_rate=f"{decode_rate:,.0f}", tpot=ms(r["tpot_s"], lang),
             ratio=f"{prefill_rate / decode_rate:,.1f}")


def kv_formula_answer(arch: Architecture | None, dtype: str = "bf16", lang: str = "en", batch: int = 16,
                      seq_len: int = 4096) -> str:
    """Q3: the formula, its variables, and a model's numbers in it (the lesson's example without a model)."""
    if arch is None:
        return t("lesson.a3.example", lang)
    elem = int(kv_dtype(dtype).nominal_bytes)  # a run's dtype: fp32, bf16 or fp16
    per_token = arch.num_layers * 2 * arch.num_kv_heads * arch.head_dim * elem
    return t("lesson.a3", lang, model=arch.name, layers=arch.num_layers, kv_heads=arch.num_kv_heads,
             head_dim=arch.head_dim, dtype=dtype, elem=elem, per_token=per_token,
             total_gib=batch * seq_len * per_token / GIB)


def kv_growth_answer(history: History, lang: str = "en") -> str:
    """Q4: the last run's cache as measured at its first and last step, bytes per token at each."""
    r = last_run(history)
    frame = history.frames.get(r["run"]) if r is not None else None
    if frame is None or frame.empty:
        return t("lesson.none.run", lang)
    first, last = frame.iloc[0], frame.iloc[-1]
    if not last["kv_bytes"]:
        return t("lesson.a4.uncached", lang, run=r["run"])
    per_token, last_per_token = first["kv_bytes"] // first["seq_len"], last["kv_bytes"] // last["seq_len"]
    linear = per_token == last_per_token and first["kv_bytes"] % first["seq_len"] == 0
    return t("lesson.a4", lang, run=r["run"], first_bytes=int(first["kv_bytes"]), first_len=int(first["seq_len"]),
             last_bytes=int(last["kv_bytes"]), last_len=int(last["seq_len"]), per_token=int(per_token),
             last_per_token=int(last_per_token),
             linear=t("lesson.a4.linear" if linear else "lesson.a4.not_linear", lang))


@dataclass(frozen=True)
class Level:
    """One measured level of concurrency: requests in flight, tokens/s in all, TTFT, TPOT."""

    label: str
    in_flight: int
    tokens_per_s: float
    ttft_s: float | None
    tpot_s: float | None


LEVEL_KINDS = ("serving", "sweep", "batch")  # the history's rows that measure more than one request in flight


def levels(history: History, lang: str = "en") -> list[Level]:
    """The levels of the most recent measurement of several in flight, by requests in flight: a serving load's
    levels (its concurrency), else the last batch sweep's (each B), else each batch's beside the last single run
    (one in flight). A batch counts the rows that decoded (made a second token), not the rows it started."""
    newest = next((r["kind"] for r in reversed(history.rows) if r.get("kind") in LEVEL_KINDS), None)
    if newest == "serving":
        return serving_levels(history)
    if newest == "sweep":
        return sweep_levels(history)
    return batch_levels(history, lang) if newest == "batch" else []


def serving_levels(history: History) -> list[Level]:
    """Each serving load's level, the last at each concurrency."""
    found = {r["concurrency"]: Level(r["label"], r["concurrency"], r["output_tokens_per_s"], r.get("ttft_p50_s"),
                                     r.get("tpot_p50_s"))
             for r in history.rows if r.get("kind") == "serving" and r.get("output_tokens_per_s")}
    return [found[k] for k in sorted(found)]


def sweep_levels(history: History) -> list[Level]:
    """The last batch sweep's levels: every sequence of each B decodes (the sweep ignores EOS)."""
    rows = [r for r in history.rows if r.get("kind") == "sweep"]
    last = [r for r in rows if r["sweep"] == rows[-1]["sweep"]]
    return sorted((Level(r["label"], r["batch_size"], r["batch_tokens_per_s"], r["ttft_s"], r["decode_step_median_s"])
                   for r in last), key=lambda v: v.in_flight)


def batch_levels(history: History, lang: str = "en") -> list[Level]:
    """Each batch's level, in flight = its rows that decoded (a row that stopped at its first token shared no decode
    pass), the last batch at each level; and the last single run as one in flight."""
    batches: dict[int, list[dict]] = {}
    for r in history.rows:
        if r.get("kind") == "batch" and r.get("batch_tokens_per_s"):
            batches.setdefault(r["batch"], []).append(r)
    found: dict[int, Level] = {}
    for rows in batches.values():
        decoded = sum(1 for r in rows if r["new_tokens"] >= 2)
        if decoded:
            first = rows[0]
            label = t("lesson.a5.batch", lang, batch=first["batch"], rows=len(rows), decoded=decoded)
            found[decoded] = Level(label, decoded, first["batch_tokens_per_s"], first.get("ttft_s"),
                                   first.get("decode_step_median_s"))
    single = last_run(history)
    if found and single is not None and 1 not in found and single.get("tokens_per_s"):
        found[1] = Level(str(single["run"]), 1, single["tokens_per_s"], single["ttft_s"], single["tpot_s"])
    return [found[k] for k in sorted(found)]


def throughput_answer(history: History, lang: str = "en") -> str:
    """Q5: TTFT, TPOT and tokens/s at each level measured, and what more in flight traded; then the Plan tab at the
    most in flight measured."""
    measured = levels(history, lang)
    if not measured:
        return t("lesson.a5.none", lang)
    rows = "\n".join(t("lesson.a5.row", lang, label=v.label, in_flight=v.in_flight, rate=f"{v.tokens_per_s:,.1f}",
                       ttft=ms(v.ttft_s, lang), tpot=ms(v.tpot_s, lang)) for v in measured)
    text = t("lesson.a5", lang, what=t("lesson.a5.what", lang), rows=rows)
    low, high = measured[0], measured[-1]
    plan = t("lesson.a5.plan", lang, in_flight=high.in_flight)
    if len(measured) < 2:
        return f"{text}\n\n{t('lesson.a5.one', lang)}\n\n{plan}"
    tpot_ratio = f"{high.tpot_s / low.tpot_s:,.2f}" if high.tpot_s and low.tpot_s else ms(None, lang)
    return f"{text}\n\n" + t("lesson.a5.tradeoff", lang, low=low.in_flight, high=high.in_flight,
                             rate_ratio=f"{high.tokens_per_s / low.tokens_per_s:,.2f}", tpot_ratio=tpot_ratio) + \
        f"\n\n{plan}"


def ttft_answer(history: History, lang: str = "en") -> str:
    """Q6: the last run's TTFT split into queue, tokenization and prefill, and what to check first."""
    r = last_run(history)
    if r is None:
        return f"{t('lesson.none.run', lang)}\n\n{t('lesson.q6.busy', lang)}"
    parts = {"queue": r["queue_s"], "tokenize": r["tokenize_s"], "prefill": r["prefill_s"] or 0.0}
    largest = max(parts, key=parts.get)
    return t("lesson.a6", lang, run=r["run"], ttft=ms(r["ttft_s"], lang), queue=ms(r["queue_s"], lang),
             tokenize=ms(r["tokenize_s"], lang), prefill=ms(r["prefill_s"], lang),
             prompt_tokens=r["prompt_tokens"], largest=t(f"lesson.part.{largest}", lang)) + \
        f"\n\n{t('lesson.q6.busy', lang)}\n\n{t('lesson.a6.plan', lang, prompt_tokens=r['prompt_tokens'])}"


@dataclass(frozen=True)
class PlanNumbers:
    """What the Plan tab is opened with from questions 5 and 6: the most requests in flight measured (the latest
    serving load, batch sweep or batches), the last run's prompt and new tokens; None where nothing measured it."""

    in_flight: int | None
    prompt_tokens: int | None
    output_tokens: int | None


def plan_numbers(history: History) -> PlanNumbers:
    measured, run = levels(history), last_run(history)
    return PlanNumbers(measured[-1].in_flight if measured else None,
                       int(run["prompt_tokens"]) if run and run.get("prompt_tokens") else None,
                       int(run["new_tokens"]) if run and run.get("new_tokens") else None)


def answers(history: History, lang: str = "en", arch: Architecture | None = None) -> list[str]:
    """The six answers in the lesson's order, in `lang`; arch: the model for Q3's numbers (None: the lesson's
    example). Q3 takes the dtype of the last run when there is one."""
    r = last_run(history)
    dtype = r.get("dtype", "bf16") if r is not None else "bf16"
    return [lifecycle_answer(history, lang), prefill_decode_answer(history, lang),
            kv_formula_answer(arch, dtype, lang), kv_growth_answer(history, lang), throughput_answer(history, lang),
            ttft_answer(history, lang)]
