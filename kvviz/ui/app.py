"""The Gradio app: the tabs in page order, then the events that connect them.

Each tab is built by its own builder in its feature's folder (kvviz.ui.<feature>.tab), which lays it out, wires
its own events and returns the handles other tabs need. Here only the page's frame and the cross-tab wiring live:
a finished generation is drawn on the life-cycle tab and added to the history; the language switch relabels the
tabs, re-answers the calculator and redraws the life-cycle tab (each tab redraws its own results). What a control
computes lives in kvviz's core and kvviz.ui.calculator.answer; what the page says, in each feature's text module;
per-session state the server holds, in kvviz.ui.sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr
from gradio.components.plot import PlotData

from kvviz.engine.batch import BatchResult
from kvviz.engine.hosting import HostPolicy
from kvviz.i18n import normalize
from kvviz.serving.local import LocalEngine
from kvviz.ui.batch import run_figures
from kvviz.ui.batch.tab import BatchTab, batch_tab
from kvviz.ui.calculator.tab import CalculatorTab, calculator_tab
from kvviz.ui.common import plot, toast
from kvviz.ui.compare.tab import compare_tab
from kvviz.ui.generation import figures
from kvviz.ui.generation.history import CsvExports, RunHistory
from kvviz.ui.generation.history_tab import HistoryTab, history_tab
from kvviz.ui.generation.lifecycle_tab import LifecycleTab, lifecycle_tab
from kvviz.ui.generation.live import RunRecord
from kvviz.ui.generation.tab import GenerationTab, generation_tab
from kvviz.ui.lang import LOAD_JS, SWITCH_JS, L, language_switch, tab_labels
from kvviz.ui.lesson.tab import LessonTargets, lesson_tab
from kvviz.ui.plan.tab import plan_tab
from kvviz.ui.scheduler.tab import scheduler_tab
from kvviz.ui.serving.tab import ServingTab, serving_tab
from kvviz.ui.sessions import SessionStore, session_id

# Tables in the page's Markdown wrap between words, never inside one (the metrics table's headers broke as
# "que ue" and "prefil l" in a narrow column), and scroll sideways when they cannot fit.
PAGE_CSS = """
.prose table { display: block; overflow-x: auto; }
.prose th, .prose td { word-break: normal; overflow-wrap: normal; hyphens: none; }
"""
# Plotly sizes a plot to its box when drawn; one drawn while its tab was hidden (the language switch redraws every
# tab's results) keeps a width that is not its box's and shows cut at the right until the window is resized. Plotly
# listens to the window's resize (Gradio draws it responsive), so a tab that comes into view sends one, twice: once
# the tab is drawn, and once more after a slower redraw.
RELAYOUT_JS = ("() => { for (const ms of [60, 400]) "
               "setTimeout(() => window.dispatchEvent(new Event('resize')), ms); }")
TABS = ["tab.calculator", "tab.generation", "tab.compare", "tab.batch", "tab.lifecycle", "tab.serving", "tab.plan",
        "tab.scheduler", "tab.history", "tab.lesson"]


class CountedBlocks(gr.Blocks):
    """gr.Blocks whose endpoints answer a call with too few values with a message, not a bare "Error".

    Anyone can call an endpoint over raw HTTP with fewer values than it takes. Gradio checks the count in
    Blocks.validate_inputs before any handler or validator runs, and raises a plain ValueError, which it
    hides from the caller (or, with show_error, shows with every value sent, however large). No event
    option reaches that check, so this one method is overridden. Extra values stay ignored, as in Gradio.
    """

    def validate_inputs(self, block_fn: Any, inputs: list[Any]) -> None:
        if len(inputs) < len(block_fn.inputs):
            raise toast(f"this endpoint takes {len(block_fn.inputs)} values; {len(inputs)} were sent")


@dataclass(frozen=True)
class LifecycleShown:
    """What the life-cycle tab shows: the last generation's record, or the last batch's result (one of the two)."""

    record: RunRecord | None = None
    batch: BatchResult | None = None

    def figures(self, lang: str) -> tuple[PlotData, PlotData]:
        """The time line and TTFT by cause, in `lang`."""
        if self.record is not None:
            r = self.record
            return plot(figures.lifecycle(r.phases, r.frame, lang)), plot(figures.ttft_parts(r.phases, r.frame, lang))
        b = self.batch
        return (plot(run_figures.batch_lifecycle(b.summary, b.rows, b.tokens, lang)),
                plot(run_figures.batch_ttft_parts(b.summary, lang)))


def lifecycle_in(shown: LifecycleShown | None, lang: str = "en") -> tuple:
    """The life-cycle tab's figures again in `lang` (the language switch moved); nothing before any run."""
    return (gr.skip(),) * 2 if shown is None else shown.figures(lang)


def draw_finished_run(sessions: SessionStore):
    """The step after a run: the session's finished run drawn on the life-cycle tab (and kept for a language switch)
    and added to the history (its table and the overlay picker, which offers every run and picks the last two)."""

    def publish(history: RunHistory, lang: str, request: gr.Request):
        record = sessions.take_last(session_id(request))
        if record is None or record.summary is None:
            return (gr.skip(),) * 6
        history = history.with_run(record)
        runs = [str(r) for r in history.run_ids]
        shown = LifecycleShown(record=record)
        return (*shown.figures(lang), shown, history, history.view(lang), gr.update(choices=runs, value=runs[-2:]))

    return publish


def draw_finished_batch(history: RunHistory, last: dict | None, lang: str = "en"):
    """The step after a batch: its life cycle on the life-cycle tab (the shared phases once, a row per sequence),
    its shared TTFT by cause (both kept for a language switch), and one history row per sequence; in lang."""
    if not last:
        return (gr.skip(),) * 5
    for row in last["rows"]:
        history = history.with_row(row)
    shown = LifecycleShown(batch=last["result"])
    return (*shown.figures(lang), shown, history, history.view(lang))


def add_rows(history: RunHistory, last: dict | None):
    """The step after a serving job or a batch sweep: each of its runs becomes a row of the history (and its CSV)."""
    if not last:
        return gr.skip(), gr.skip()
    for row in last["rows"]:
        history = history.with_row(row)
    return history, history.view()


def wire_runs(sessions: SessionStore, runs: gr.State, lang: gr.Radio, generation: GenerationTab, batch: BatchTab,
              serving: ServingTab, lifecycle: LifecycleTab, history: HistoryTab) -> None:
    """What follows a finished run: a generation or a batch is drawn on the life-cycle tab (kept there, to be drawn
    again when the language switch moves) and added to the history, as are a serving job's and a sweep's runs."""
    drawn = gr.State(None)  # the LifecycleShown on the life-cycle tab
    generation.generated.then(
        draw_finished_run(sessions), [runs, lang],
        [lifecycle.timeline, lifecycle.ttft, drawn, runs, history.table, history.run_picker],
        api_visibility="private", concurrency_limit=None)
    batch.ran.success(draw_finished_batch, [runs, batch.last, lang],
                      [lifecycle.timeline, lifecycle.ttft, drawn, runs, history.table], api_visibility="private",
                      concurrency_limit=None)
    for event, published in serving.published:
        event.success(add_rows, [runs, published], [runs, history.table], api_visibility="private",
                      concurrency_limit=None)
    batch.swept.success(add_rows, [runs, batch.last_sweep], [runs, history.table], api_visibility="private",
                        concurrency_limit=None)
    lang.change(lifecycle_in, [drawn, lang], [lifecycle.timeline, lifecycle.ttft], api_visibility="private",
                queue=False, show_progress="hidden")


def wire_language(demo: gr.Blocks, lang: gr.Radio, tabs: list[gr.Tab], note: gr.Markdown | None,
                  calculator: CalculatorTab, policy: HostPolicy) -> None:
    """The language's events: on load the switch takes the browser's language (or the visitor's earlier choice);
    then, as after every move of the switch, the tabs out of view (and a hosted demo's note) are relabelled and
    the calculator answers in it."""

    def relabel(value):
        return [*tab_labels(value, TABS), *([policy.note(normalize(value))] if note else [])]

    relabelled = dict(fn=relabel, inputs=lang, outputs=[*tabs, *([note] if note else [])],
                      api_visibility="private", queue=False, show_progress="hidden")
    answer = dict(fn=calculator.answer, inputs=calculator.inputs, outputs=calculator.outputs,
                  api_visibility="private", show_progress="hidden", preprocess=False, queue=not policy.hosted)
    demo.load(None, outputs=lang, js=LOAD_JS, api_visibility="private").then(**relabelled).then(**answer)
    lang.input(None, lang, lang, js=SWITCH_JS, api_visibility="private").then(**relabelled).then(**answer)


def forget_exports(exports: CsvExports) -> Callable:
    """What runs when a page closes: its session's History CSV is removed."""

    def forget(request: gr.Request) -> None:
        exports.forget(session_id(request))

    return forget


def page_header() -> tuple[gr.Radio, gr.Button]:
    """The title and intro, where to start for each kind of visitor (its button opens the Lesson), and the
    language switch."""
    with gr.Row():
        with gr.Column(scale=4):
            gr.Markdown(L("app.intro"))
            with gr.Row(equal_height=True):
                gr.Markdown(L("app.start"), elem_id="start-here")
                start_lesson = gr.Button(L("app.start_lesson"), size="sm", scale=0, min_width=180,
                                         elem_id="start-lesson")
        lang = language_switch()
    return lang, start_lesson


def build_app(default_model: str = "tiny", policy: HostPolicy | None = None,
              engine: LocalEngine | None = None) -> gr.Blocks:
    """The whole app. Nothing heavy happens at build time: models load on first use.

    policy: what a hosted demo allows (kvviz.engine.hosting); the default allows everything. Launch the
    result with demo.queue(max_size=policy.queue_max_size) so the queue is bounded when hosted. engine: the
    vLLM server the Serving tab starts and stops (one per app; a new one by default).
    """
    policy = policy or HostPolicy()
    default_model = policy.check_model(default_model)  # PolicyError at start-up, not on the first click
    sessions = SessionStore()
    engine = engine or LocalEngine()
    with CountedBlocks(title="kvviz: how LLM inference really behaves") as demo:
        lang, start_lesson = page_header()
        note = gr.Markdown(policy.note(), elem_id="hosted-note") if policy.hosted else None
        runs = gr.State(RunHistory())
        tabs = []
        with gr.Tabs() as tab_set:  # the Lesson tab's buttons select a tab by its id
            with gr.Tab(L("tab.calculator"), id="calculator") as tab:
                calculator = calculator_tab(policy, lang)
            tabs.append(tab)
            with gr.Tab(L("tab.generation"), id="generation") as tab:
                generation = generation_tab(default_model, policy, sessions, lang)
            tabs.append(tab)
            with gr.Tab(L("tab.compare"), id="compare") as tab:
                compare_tab(default_model, policy, sessions, lang)
            tabs.append(tab)
            with gr.Tab(L("tab.batch"), id="batch") as tab:
                batch = batch_tab(default_model, policy, sessions, lang)
            tabs.append(tab)
            with gr.Tab(L("tab.lifecycle"), id="lifecycle") as tab:
                lifecycle = lifecycle_tab(lang)
            tabs.append(tab)
            with gr.Tab(L("tab.serving"), id="serving") as tab:
                serving = serving_tab(policy, engine, sessions, lang)
            tabs.append(tab)
            with gr.Tab(L("tab.plan"), id="plan") as tab:
                plan = plan_tab(policy, engine, sessions, lang)
            tabs.append(tab)
            with gr.Tab(L("tab.scheduler"), id="scheduler") as tab:
                scheduler_tab(policy, engine, lang)
            tabs.append(tab)
            with gr.Tab(L("tab.history"), id="history") as tab:
                history = history_tab(runs, lang)
            tabs.append(tab)
            with gr.Tab(L("tab.lesson"), id="lesson") as tab:  # the lesson's questions lead through the tabs above
                lesson_tab(default_model, policy, runs, lang, LessonTargets(tab_set, "generation", "compare",
                           "calculator", "batch", generation.prompt, calculator.control, "plan", plan), sessions)
            tabs.append(tab)

        start_lesson.click(lambda: gr.Tabs(selected="lesson"), None, tab_set, api_visibility="private", queue=False)
        tab_set.change(None, js=RELAYOUT_JS, api_visibility="private", queue=False)  # a click or a Show me
        wire_runs(sessions, runs, lang, generation, batch, serving, lifecycle, history)
        wire_language(demo, lang, tabs, note, calculator, policy)
        demo.unload(forget_exports(history.exports))
    return demo
