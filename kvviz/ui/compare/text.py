"""What the cached-against-uncached tab says: the verdict, the modes' table, the static mode's line and why its fast
path is faster, in the run's own numbers.

Pure functions from a Comparison (and the worker's Loaded) to markdown; no gradio. Its text is in kvviz.i18n.compare.
"""

from __future__ import annotations

from kvviz.base.noise import beyond_noise, spread
from kvviz.base.units import fmt_ms
from kvviz.engine.compare import Comparison
from kvviz.engine.request import mode_label
from kvviz.i18n import t
from kvviz.i18n.errors import translate
from kvviz.ui.worker import Loaded


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
        lines.append(f"| {mode_label(run.mode, lang)} | {fmt_ms(s.ttft_s)} | {fmt_ms(s.tpot_s)} | "
                     f"{s.decode_tokens_per_s or 0:,.1f} | {fmt_ms(s.e2e_s - s.queue_s)} | {run.speedup:.2f}× | {bw} | "
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
    """Where a run's bandwidth limit came from, "<device>: <how it was found>", in `lang`: a keyed text
    (kvviz.calc.hardware.bandwidth_source) rendered in it."""
    return translate(source, lang) if source else t("compare.its_bandwidth", lang)


def fast_path_why(result: Comparison, device: str, lang: str = "en") -> str:
    """Why the static mode decodes faster, with this run's numbers: the floor the weights and cache set at the
    device's bandwidth, how far the plain loop stands above it (per-step overhead), how close the static one is;
    or, when the two TPOTs are apart by less than the runs' own per-token spread, that they are within noise."""
    c, s = result.cached, result.static.summary
    if not (c.bytes_per_decode_step and c.bandwidth_bound and c.tpot_s and s.tpot_s and s.bytes_per_decode_step):
        return t("compare.why_none", lang)
    if not beyond_noise(c.tpot_s, s.tpot_s, c.itl_s, s.itl_s):
        return t("compare.why_noise", lang, tpot_s=fmt_ms(s.tpot_s), tpot_c=fmt_ms(c.tpot_s),
                 ratio=f"{max(c.tpot_s, s.tpot_s) / min(c.tpot_s, s.tpot_s):.2f}",
                 spread=fmt_ms(max(spread(c.itl_s), spread(s.itl_s))))
    limit = c.bandwidth_bound
    floor_c, floor_s = c.bytes_per_decode_step / limit, s.bytes_per_decode_step / limit
    how = t("compare.how_cuda" if device.startswith("cuda") else "compare.how_cpu", lang)
    text = t("compare.why", lang, step_mb=c.bytes_per_decode_step / 1e6, limit=limit / 1e9,
             source=source_text(c.bandwidth_source, lang), floor_c=fmt_ms(floor_c), tpot_c=fmt_ms(c.tpot_s),
             above=fmt_ms(max(c.tpot_s - floor_c, 0.0)), how=how, tpot_s=fmt_ms(s.tpot_s), floor_s=fmt_ms(floor_s),
             static_mb=s.bytes_per_decode_step / 1e6, share=s.bandwidth_utilisation)
    if s.bandwidth_utilisation and s.bandwidth_utilisation > 1:
        text += t("compare.above", lang)
    return text
