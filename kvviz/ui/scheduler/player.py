"""A simulated run as the browser plays it: every step's phases, lines and blocks computed here, once, as JSON;
the page's own script (player.js) only draws the step it is on, so playing needs no server round trip.

Phases, one letter per request per step: "_" not arrived yet, "w" waiting, "x" preempted in this step (and
waiting again), "p" a prefill chunk (a recompute after preemption included), "d" a decode (one token past the
prompt), "r" running but not scheduled (the token budget ran out before it), "f" finished. Each step also has
the one line the page shows for it (who runs, who waits, the budget used, the KV blocks), the tokens scheduled
(prefill and decode), the blocks each running request holds and the free blocks still cached. Request i is
named r<i>. Knows no gradio.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kvviz.i18n import t
from kvviz.sim.scheduler import SchedulerConfig
from kvviz.sim.simulate import InBatch, StepDetail, StepTrace

PLAYER_JS = Path(__file__).with_name("player.js")
PHASES = "_wxpdrf"


@dataclass(frozen=True)
class Played:
    """What the player needs of a simulated run: each request's prompt length, the steps and their detail, the
    scheduler's budget and pool."""

    prompt_tokens: tuple[int, ...]
    trace: tuple[StepTrace, ...]
    details: tuple[StepDetail, ...]
    config: SchedulerConfig


def name(index: int) -> str:
    return f"r{index}"


def running_phase(b: InBatch, prompt_tokens: int) -> str:
    """A running request's phase: not scheduled, a decode (one token past its prompt), or a prefill chunk."""
    if b.tokens == 0:
        return "r"
    return "d" if b.tokens == 1 and b.start >= prompt_tokens else "p"


def phases(run: Played) -> list[str]:
    """One string per request, one letter per step (the module's docstring says what each letter means)."""
    rows = [["_"] * len(run.details) for _ in run.prompt_tokens]
    done: set[int] = set()
    for k, d in enumerate(run.details):
        for i in done:
            rows[i][k] = "f"
        for i in d.waiting:
            rows[i][k] = "x" if i in d.preempted else "w"
        for b in d.running:
            rows[b.index][k] = running_phase(b, run.prompt_tokens[b.index])
        done.update(d.finished)
    return ["".join(row) for row in rows]


def _names(indices: list[int] | tuple[int, ...], lang: str) -> str:
    return " ".join(name(i) for i in indices) or t("scheduler.none", lang)


def step_line(step: StepTrace, d: StepDetail, config: SchedulerConfig, lang: str = "en") -> str:
    """The step in one line: its number and time, who runs, who waits, the budget used, the KV blocks; who was
    preempted, hit the prefix cache or finished in it, where anyone did."""
    parts = [t("scheduler.line.head", lang, step=step.index, t=step.start_s),
             t("scheduler.line.running", lang, names=_names([b.index for b in d.running], lang)),
             t("scheduler.line.waiting", lang, names=_names(d.waiting, lang)),
             t("scheduler.line.budget", lang, used=step.tokens_scheduled, budget=config.max_num_batched_tokens),
             t("scheduler.line.kv", lang, used=step.kv_blocks_used, blocks=config.num_blocks)]
    if d.preempted:
        parts.append(t("scheduler.line.preempted", lang, names=_names(d.preempted, lang)))
    if d.hits:
        hits = t("scheduler.sep", lang).join(f"{name(i)} {n}" for i, n in d.hits)
        parts.append(t("scheduler.line.hits", lang, hits=hits))
    if d.finished:
        parts.append(t("scheduler.line.finished", lang, names=_names(d.finished, lang)))
    return parts[0] + " · ".join(parts[1:])  # the head ends as its language ends a lead-in


def blocks_line(d: StepDetail, config: SchedulerConfig, lang: str = "en") -> str:
    """Each running request's blocks, and the free ones (those still cached among them)."""
    held = {block for b in d.running for block in b.blocks}
    each = t("scheduler.sep", lang).join(f"{name(b.index)} {len(b.blocks)}" for b in d.running) or \
        t("scheduler.none", lang)
    return t("scheduler.line.blocks", lang, each=each, free=config.num_blocks - len(held),
             cached=len(d.cached_free_blocks))


def owners(d: StepDetail) -> list[list]:
    """[block, [requests holding it]] for every held block, by block number."""
    held: dict[int, list[int]] = {}
    for b in d.running:
        for block in b.blocks:
            held.setdefault(block, []).append(b.index)
    return [[block, held[block]] for block in sorted(held)]


def labels(lang: str) -> dict[str, str]:
    """The player's own words (buttons, axes, legend) in `lang`."""
    keys = ("play", "pause", "prev", "next", "speed", "step", "requests", "tokens", "budget", "blocks", "free",
            "cached", "shared", *(f"phase.{p}" for p in PHASES))
    return {key: t(f"scheduler.ui.{key}", lang) for key in keys}


def to_json(run: Played, lang: str = "en") -> dict:
    """Everything the browser plays, computed once."""
    c = run.config
    steps = [{"t": round(s.start_s, 4), "prefill": s.prefill_tokens, "decode": s.decode_seqs,
              "line": step_line(s, d, c, lang), "held": blocks_line(d, c, lang), "owners": owners(d),
              "cached": list(d.cached_free_blocks)}
             for s, d in zip(run.trace, run.details, strict=True)]
    return {"labels": labels(lang), "budget": c.max_num_batched_tokens, "numBlocks": c.num_blocks,
            "blockSize": c.block_size, "requests": [name(i) for i in range(len(run.prompt_tokens))],
            "phases": phases(run), "steps": steps}


@cache
def player_js() -> str:
    return PLAYER_JS.read_text(encoding="utf-8")


def player_html(data: dict) -> str:
    """The player's frame: its controls, its drawings' places, and the run's JSON in a hidden element (escaped:
    the script reads it back as text); player.js fills the rest."""
    return f"""<div class="sched-player">
<div class="sched-data" hidden>{html.escape(json.dumps(data, ensure_ascii=False, separators=(",", ":")))}</div>
<div class="sched-controls">
<button type="button" class="sched-btn" data-act="play" id="sched-play"></button>
<button type="button" class="sched-btn" data-act="prev" id="sched-prev"></button>
<button type="button" class="sched-btn" data-act="next" id="sched-next"></button>
<input type="range" id="sched-slider" class="sched-slider" min="0" value="0" step="1">
<select id="sched-speed" class="sched-speed"><option value="4">4</option><option value="10" selected>10</option>
<option value="25">25</option><option value="60">60</option></select><span class="sched-speed-label"></span>
</div>
<div id="sched-line" class="sched-line"></div>
<div class="sched-gantt"></div><div class="sched-budget"></div>
<div class="sched-kv"></div><div id="sched-held" class="sched-held"></div><div class="sched-legend"></div>
</div>"""
