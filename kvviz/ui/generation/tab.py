"""The live-generation tab: model, prompt and sampling settings; the text as it streams, the live plots, Stop.

Generate takes its values as sent (preprocess=False) and checks them with the host's limits
(tabs.common.build_request); the run happens on the device worker, whose messages tabs.common.follow feeds
into a RunRecord, and live_update turns into the page's updates: the text five times a second, the plots once a
second and at the end.
The finished run is left in the session store for the drawing step build_app chains after it, and kept in the
page's state (with the time limit that stopped it, if one did), from which a move of the language switch redraws
the metrics and the plots in the new language without running anything again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData

from kvviz.base.inputs import whole_number
from kvviz.engine.hosting import HostPolicy
from kvviz.i18n import t
from kvviz.ui.common import (
    DEVICE,
    EXAMPLE_PROMPTS,
    Told,
    build_request,
    follow,
    held,
    max_new_slider,
    model_picker,
    plot,
    refusal,
    start,
)
from kvviz.ui.generation import figures
from kvviz.ui.generation.live import RunRecord, Throttle
from kvviz.ui.generation.text import final_metrics, metrics_markdown, run_details, time_limit_message
from kvviz.ui.lang import L
from kvviz.ui.sessions import SessionStore, session_id, stop_handle
from kvviz.ui.worker import Generate, Loaded

TEXT_INTERVAL_S = 0.2  # streamed text reaches the page five times a second
PLOT_INTERVAL_S = 1.0  # live plots redraw once a second, and once more at the end


@dataclass(frozen=True)
class GenerationTab:
    generated: gr.events.Dependency  # the Generate event; build_app chains the finished run's drawing on it
    prompt: gr.Textbox | None = None  # the Lesson tab's questions 1 and 6 set it to a long prompt


def live_plots(record: RunRecord, lang: str = "en") -> tuple[PlotData, PlotData]:
    """Per-token latency and KV growth of the run so far."""
    frame = record.frame
    return plot(figures.token_latency(frame, lang=lang)), plot(figures.kv_growth(frame, lang))


def take_loaded(record: RunRecord, loaded: Loaded) -> None:
    """What the run's record keeps of the model the worker got ready: its name, weights, threads, load time."""
    record.model, record.random_weights = loaded.spec, loaded.random_weights
    record.cpu_threads, record.load_s = loaded.cpu_threads, loaded.load_s


def live_update(record: RunRecord, lang: str = "en", told: Told | None = None) -> Callable[[], tuple]:
    """The page's update while the run streams: text, metrics, both plots (redrawn once every PLOT_INTERVAL_S),
    no details yet, in `lang`; no finished run kept meanwhile (a language switch leaves the live view alone).
    Until the model is ready the metrics' place says what the worker is doing and how far (`told`: loading,
    converting, fetching), as Gradio draws no bar once the handler has yielded."""
    plots, latest = Throttle(PLOT_INTERVAL_S), (None, None)

    def redraw() -> tuple:
        nonlocal latest
        if plots.due():
            latest = live_plots(record, lang)
        loading = told is not None and told.desc and record.load_s is None and record.finish is None
        # Unchanged values, not gr.skip(): Gradio rebuilds a component's config for every skip,
        # which costs more than the model's own step on a small model.
        return record.text, told.line(lang) if loading else metrics_markdown(record, lang), *latest, None, None

    return redraw


def shown_in(shown: tuple[RunRecord, float | None] | None, lang: str = "en") -> tuple:
    """The finished run's metrics and plots again, in `lang` (the language switch moved); nothing when no finished
    run is on the page. shown: the run and the time limit that stopped it (None when it ended by itself)."""
    if shown is None:
        return (gr.skip(),) * 3
    record, limit = shown
    return final_metrics(record, limit, lang), *live_plots(record, lang)


def generation_tab(default_model: str, policy: HostPolicy, sessions: SessionStore,
                   lang: gr.Radio) -> GenerationTab:
    """Model picker, prompt, sampling settings, streaming text and live plots, Stop."""
    gr.Markdown(L("generation.intro"))
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            model = model_picker(policy, default_model, elem_id="gen-model")
            prompt = gr.Textbox(label=L("generation.prompt"), lines=3, value=EXAMPLE_PROMPTS[0], elem_id="gen-prompt")
            # A Dataset with a checked handler rather than gr.Examples, whose own handler fails without a
            # message on an example index that does not exist (anyone can send one over HTTP).
            examples = gr.Dataset(components=[prompt], samples=[[p] for p in EXAMPLE_PROMPTS],
                                  label=L("generation.examples"), type="index")
            max_new_tokens = max_new_slider(policy, 1024, elem_id="gen-max-new")
            use_cache = gr.Checkbox(True, label=L("generation.use_cache"))
            static = gr.Checkbox(False, label=L("generation.static"), info=L("generation.static_info"),
                                 elem_id="gen-static")
            chat_template = gr.Checkbox(True, label=L("generation.chat_template"))
            with gr.Accordion(L("generation.sampling"), open=False):
                temperature = gr.Slider(0, 2, value=0, step=0.05, label=L("generation.temperature"))
                top_k = gr.Slider(0, 200, value=0, step=1, label=L("generation.top_k"))
                top_p = gr.Slider(0.01, 1, value=1, step=0.01, label=L("generation.top_p"))
                seed = gr.Number(value=0, precision=0, label=L("generation.seed"))
            with gr.Row():
                go = gr.Button(L("generation.go"), variant="primary", elem_id="generate-btn")
                stop_button = gr.Button(L("generation.stop"), variant="stop", elem_id="stop-btn")
        with gr.Column(scale=2):
            text = gr.Textbox(label=L("generation.output"), lines=8, elem_id="gen-text")
            metrics = gr.Markdown(elem_id="gen-metrics")
            latency = gr.Plot(show_label=False, elem_id="latency-plot")
            kv = gr.Plot(show_label=False)
    with gr.Accordion(L("generation.json"), open=False):
        details = gr.JSON(label=L("generation.json_label"))
    shown = gr.State(None)  # the finished run on the page, which a language switch redraws (shown_in)

    def generate(model, prompt, max_new_tokens, temperature, top_k, top_p, seed, chat_template, use_cache,
                 static=False, lang="en", request: gr.Request = None, progress=gr.Progress()):
        """Generate on the device worker, streaming (text, metrics, latency plot, KV plot, None) in `lang`; the
        last update carries the run as JSON: the lesson's keys, the whole summary and the text."""
        req = build_request(policy, prompt, max_new_tokens, temperature, top_k, top_p, seed, chat_template, use_cache,
                            static=static, lang=lang)
        job, spec = start(model, Generate(req), policy, lang)
        record = RunRecord(model=spec, mode=req.mode, prompt=req.prompt)
        told = Told(progress)  # the load's phase, written in the metrics' place until the model is ready
        with held(job, sessions, request, "generation"):  # Stop reaches it; a closed tab or a cancelled call ends it
            outcome = yield from follow(job, told, lang, live_update(record, lang, told), period_s=TEXT_INTERVAL_S,
                                        on_loaded=lambda loaded: take_loaded(record, loaded), on_event=record.add)
        failed = None
        if outcome.failure is not None:
            failed = refusal(outcome.failure.message, lang)
        elif record.summary is None or (job.timed_out and not record.summary.new_tokens):  # or timed out early
            failed = refusal(time_limit_message(job.time_limit_s, lang) if job.timed_out else
                             (record.finish and record.finish.error) or t("generation.no_result", lang), lang)
        if failed is not None:  # said where "running…" stood (a toast fades), then raised for the toast and the API
            yield gr.skip(), t("generation.failed", lang, message=failed.message), gr.skip(), gr.skip(), gr.skip(), None
            raise failed
        record.run_id = sessions.number(session_id(request))
        sessions.keep_last(session_id(request), record)
        limit = job.time_limit_s if job.timed_out else None
        yield (record.text, final_metrics(record, limit, lang), *live_plots(record, lang),
               run_details(record, job.timed_out), (record, limit))

    def pick_example(index, lang="en"):
        try:
            return EXAMPLE_PROMPTS[whole_number(index, "example", 0, len(EXAMPLE_PROMPTS) - 1)]
        except ValueError as exc:
            raise refusal(exc, lang) from None

    def stop(request: gr.Request):
        """Stop this session's running generation before its next token."""
        sessions.stop(stop_handle(request, "generation"))

    generated = go.click(generate, [model, prompt, max_new_tokens, temperature, top_k, top_p, seed, chat_template,
                                    use_cache, static, lang], [text, metrics, latency, kv, details, shown],
                         api_name="generate", concurrency_id=DEVICE, concurrency_limit=1, preprocess=False,
                         show_progress_on=text)  # progress (and a failure's badge) on the text alone, not on 4 boxes
    stop_button.click(stop, None, None, api_name="stop", concurrency_limit=None, queue=False)
    lang.change(shown_in, [shown, lang], [metrics, latency, kv], api_visibility="private", queue=False,
                show_progress="hidden")
    examples.click(pick_example, [examples, lang], prompt, api_name="load_example", api_visibility="private",
                   queue=False, preprocess=False, show_progress="hidden")
    return GenerationTab(generated, prompt)
