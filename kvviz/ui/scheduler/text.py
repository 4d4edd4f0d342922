"""What the Scheduler tab says in words: a preset's explanation and set-up, and the comparison's summary, in the
page's language (kvviz.i18n.scheduler). Knows no gradio."""

from __future__ import annotations

from kvviz.i18n import t
from kvviz.i18n.errors import translate
from kvviz.sim.simulate import SimResult
from kvviz.sim.step_time import Calibration
from kvviz.ui.scheduler.compare import SIM, VLLM, peaks
from kvviz.ui.scheduler.presets import Preset


def calibration_words(c: Calibration, lang: str = "en") -> str:
    return t("scheduler.real.calibration", lang, model=c.model or "?", device=c.device or "?")


def setup_line(p: Preset, requests: int, result: SimResult, c: Calibration, lang: str = "en") -> str:
    """The preset's load and scheduler, and what the simulation came to, in one paragraph."""
    arrivals = (t("scheduler.setup.closed", lang, n=min(p.concurrency, requests)) if p.concurrency is not None
                else t("scheduler.setup.rate", lang, gap=1 / p.rate))
    prefix = t("scheduler.setup.prefix", lang, prefix=p.prefix_tokens) if p.prefix_tokens else ""
    last = result.trace[-1] if result.trace else None
    line = t("scheduler.setup", lang, requests=requests, prompt=p.prompt_tokens, output=p.output_tokens,
             prefix=prefix, arrivals=arrivals, blocks=p.num_blocks, block_size=p.block_size,
             budget=p.max_num_batched_tokens, seqs=p.max_num_seqs, steps=len(result.trace),
             seconds=last.start_s + last.duration_s if last else 0.0, preemptions=sum(result.preemptions),
             calibration=calibration_words(c, lang))
    if result.stopped:
        line += " " + t("scheduler.setup.stopped", lang, why=translate(result.stopped, lang))
    return line


def explanation(p: Preset, requests: int, result: SimResult, c: Calibration, lang: str = "en") -> str:
    """What to watch in this preset, then its set-up."""
    return t(f"scheduler.explain.{p.key}", lang) + "\n\n" + setup_line(p, requests, result, c, lang)


def real_summary(frame, requests: int, model: str, blocks: int, block_size: int, real_s: float,
                 sim: SimResult, real_preemptions: float | None, c: Calibration, load_average: float,
                 lang: str = "en") -> str:
    """The comparison in a paragraph: durations, peaks of both series, preemptions, how coarse vLLM's gauges
    are against a step."""
    top = peaks(frame)
    real, simulated = top.get(VLLM, {}), top.get(SIM, {})
    steps = sim.trace
    step_ms = 1e3 * sum(s.duration_s for s in steps) / len(steps) if steps else 0.0
    unknown = t("scheduler.real.unknown", lang)

    def shown(side: dict[str, float], name: str, spec: str) -> str:
        return format(side[name], spec) if name in side else unknown  # no samples: the server's /metrics failed

    return t("scheduler.real.result", lang, requests=requests, model=model, blocks=blocks, block_size=block_size,
             real=real_s, sim=sim.stats.duration_s, real_running=shown(real, "running", "g"),
             sim_running=shown(simulated, "running", "g"), real_waiting=shown(real, "waiting", "g"),
             sim_waiting=shown(simulated, "waiting", "g"), real_kv=shown(real, "kv_usage", ".2%"),
             sim_kv=shown(simulated, "kv_usage", ".2%"),
             real_pre=unknown if real_preemptions is None else f"{real_preemptions:g}",
             sim_pre=sum(sim.preemptions), step_ms=step_ms, calibration=calibration_words(c, lang),
             load=load_average)
