"""The Scheduler tab: a preset's simulated run played step by step in the browser (kvviz.ui.scheduler.player),
what to watch in it, and, on demand, the same load on the local vLLM with its /metrics against the simulator's.

Simulate (api /schedule) and a preset's pick simulate on the server, once (a few ms), and send the whole run;
the page's script plays it. Run on the local vLLM (api /schedule_on_vllm) needs the Serving tab's vLLM ready; it
shares the Serving tab's concurrency id, so that no two loads measure each other. Hosted: fewer simulated
requests (the host's max_requests, if below the view's) and the host's load limits and time limit on the real
run. Every text is in the page's language: static ones through L, computed ones in the `lang` each handler
takes last.
"""

from __future__ import annotations

import gradio as gr

from kvviz.engine.hosting import HostPolicy
from kvviz.i18n import t
from kvviz.serving.local import READY, LocalEngine
from kvviz.ui.common import plot, refusal
from kvviz.ui.lang import L
from kvviz.ui.scheduler import compare, text
from kvviz.ui.scheduler.player import Played, player_html, player_js, to_json
from kvviz.ui.scheduler.presets import MAX_VIEW_REQUESTS, PRESETS, calibration, preset, run_preset, view_requests
from kvviz.ui.scheduler.real import run_on_vllm
from kvviz.ui.serving.tab import SERVING

FIRST = "fill"
PLAYER_CSS = """
.sched-controls { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; margin: 4px 0; }
.sched-btn { padding: 4px 12px; border-radius: 6px; border: 1px solid #8a8f98; background: transparent;
  color: inherit; cursor: pointer; font-size: 14px; }
.sched-slider { flex: 1; min-width: 200px; }
.sched-line { font-family: ui-monospace, monospace; font-size: 14px; padding: 6px 8px; margin: 4px 0;
  border-left: 4px solid #4e79a7; background: rgba(138, 143, 152, 0.12); min-height: 1.5em; }
.sched-gantt svg, .sched-budget svg, .sched-kv svg { display: block; }
.sched-gantt text, .sched-budget text, .sched-kv text { fill: currentColor; }
.sched-kv text[fill="#fff"] { fill: #fff; }
.sched-held { font-size: 13px; margin: 2px 0 0 44px; }
.sched-legend { display: flex; flex-wrap: wrap; gap: 12px; font-size: 13px; margin-top: 6px; }
.sched-key i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px;
  box-sizing: border-box; }
"""


def request_cap(policy: HostPolicy) -> int:
    """The most requests the view simulates: its rows' limit, and a host's max_requests below that."""
    return min(MAX_VIEW_REQUESTS, policy.max_requests) if policy.hosted else MAX_VIEW_REQUESTS


def simulated(key: object, requests: object, policy: HostPolicy, lang: str = "en") -> tuple[str, str]:
    """(what to watch and the set-up, the player's HTML) for a preset's run of `requests` requests."""
    p = preset(key)
    n = view_requests(requests, request_cap(policy))
    c = calibration()
    result = run_preset(p, n, c)
    records = result.records
    run = Played(tuple(r.prompt_tokens for r in records), result.trace, result.details, p.config())
    return text.explanation(p, n, result, c, lang), player_html(to_json(run, lang))


def compared(engine: LocalEngine, key: object, requests: object, policy: HostPolicy, lang: str = "en") -> tuple:
    """(the summary, the figure) of the preset's load on the local vLLM against the simulator's."""
    p = preset(key)
    n = view_requests(requests, request_cap(policy))
    status = engine.status()
    if status.state != READY:
        raise refusal(t("scheduler.refuse.no_engine", lang), lang)
    if status.workers > 1:
        raise refusal(t("scheduler.refuse.ranks", lang, n=status.workers), lang)
    done = run_on_vllm(engine.endpoint(), status.folder, status.model, p, n, policy)
    if done is None:
        raise refusal(t("scheduler.refuse.no_cache", lang), lang)
    frame = compare.merged(done.result.samples, done.sim.trace, done.sim.kv_blocks)
    summary = text.real_summary(frame, n, status.model, done.cache.num_blocks, done.cache.block_size,
                                done.result.stats.duration_s, done.sim, done.preemptions, done.calibration,
                                done.load_average, lang)
    return summary, plot(compare.comparison_figure(frame, lang))


def scheduler_tab(policy: HostPolicy, engine: LocalEngine, lang: gr.Radio) -> None:
    """Lay the tab out and wire its events."""
    top = request_cap(policy)
    gr.Markdown(L("scheduler.intro"))
    with gr.Row():
        key = gr.Radio([(L(f"scheduler.preset.{k}"), k) for k in PRESETS], value=FIRST, label=L("scheduler.preset"),
                       elem_id="sched-preset", scale=3)
        requests = gr.Slider(1, top, value=min(PRESETS[FIRST].requests, top), step=1, label=L("scheduler.requests"),
                             elem_id="sched-requests", scale=1)
        go = gr.Button(L("scheduler.simulate"), variant="primary", elem_id="sched-simulate", scale=0, min_width=120,
                       size="lg")
    words, page = simulated(FIRST, min(PRESETS[FIRST].requests, top), policy)
    explanation = gr.Markdown(words, elem_id="sched-explanation")
    player = gr.HTML(page, js_on_load=player_js(), css_template=PLAYER_CSS, elem_id="sched-player-box")
    with gr.Accordion(L("scheduler.real.box"), open=False):
        gr.Markdown(L("scheduler.real.intro"))
        real_go = gr.Button(L("scheduler.real.run"), elem_id="sched-real")
        real_text = gr.Markdown(elem_id="sched-real-text")
        real_plot = gr.Plot(show_label=False, elem_id="sched-real-plot")

    def schedule(preset="fill", requests=12, lang="en"):
        """Simulate a preset (fill, chunk, preempt, prefix) with `requests` requests; the request count simulated
        (the page's slider shows it), the explanation and the player, in `lang`."""
        try:
            n = view_requests(requests, top)
            return n, *simulated(preset, n, policy, lang)
        except ValueError as exc:
            raise refusal(exc, lang) from None

    def pick(preset, lang="en"):
        """A preset picked on the page: its own request count, and its run."""
        return schedule(preset, min(PRESETS[preset].requests, top), lang) if preset in PRESETS else gr.skip()

    def schedule_on_vllm(preset="fill", requests=12, lang="en"):
        """The preset's load on the local vLLM (started on the Serving tab) against the simulator's run of it."""
        try:
            return compared(engine, preset, requests, policy, lang)
        except ValueError as exc:
            raise refusal(exc, lang) from None

    # Each run sets the slider to the count it simulated: a Simulate clicked while a preset's pick was still on its
    # way sends the old count, and the page then shows that run, its count and the slider together.
    go.click(schedule, [key, requests, lang], [requests, explanation, player], api_name="schedule",
             concurrency_limit=None, preprocess=False)  # the values as sent: schedule checks them itself, in one line
    key.input(pick, [key, lang], [requests, explanation, player], api_visibility="private", concurrency_limit=None)
    lang.change(schedule, [key, requests, lang], [requests, explanation, player], api_visibility="private",
                concurrency_limit=None, show_progress="hidden")
    real_go.click(schedule_on_vllm, [key, requests, lang], [real_text, real_plot], api_name="schedule_on_vllm",
                  preprocess=False, concurrency_id=SERVING, concurrency_limit=1, show_progress_on=real_text)
