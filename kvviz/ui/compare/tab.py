"""The cached-against-uncached tab: both modes on one prompt, their texts, latency, total time, the prediction;
on request the third mode beside them, cached on a static cache with a compiled decode step (static).

Compare runs on the device worker like a generation; there is nothing to draw until both modes ran, but
the handler yields while it waits, so that Gradio can close it when the tab goes away or the call is
cancelled (a plain function would hold the device to its end). The finished comparison stays in the page's
state, from which a move of the language switch redraws the verdict and the figures (shown_in).
"""

from __future__ import annotations

import gradio as gr

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
from kvviz.ui.compare.text import compare_verdict
from kvviz.ui.generation import figures
from kvviz.ui.generation.text import time_limit_message
from kvviz.ui.lang import L
from kvviz.ui.sessions import SessionStore, stop_handle
from kvviz.ui.worker import Compare

OUTPUTS = 9  # verdict, three texts, four figures, the comparison kept for a language switch


def verdict_and_figures(result, loaded, lang: str) -> tuple:
    """What the page says of a finished comparison in `lang`: the verdict and the four figures."""
    return (compare_verdict(result, loaded, lang),
            plot(figures.token_latency(result.rows, t("fig.compare.latency", lang), lang)),
            plot(figures.cumulative_time(result.rows, result.prediction, lang)),
            plot(figures.step_work(result.prediction, lang)), plot(figures.decode_bandwidth(result.runs, lang)))


def shown_in(shown: tuple | None, lang: str = "en") -> tuple:
    """The comparison on the page (its result and its model's Loaded) again in `lang`; nothing when none is."""
    return (gr.skip(),) * 5 if shown is None else verdict_and_figures(*shown, lang)


def compare_tab(default_model: str, policy: HostPolicy, sessions: SessionStore, lang: gr.Radio) -> None:
    """Both modes side by side: texts, per-token latency, total time, the prediction, agreement."""
    gr.Markdown(L("compare.intro"))
    with gr.Row():
        model = model_picker(policy, default_model, scale=2, elem_id="compare-model")
        # A long answer: a clear curve.
        prompt = gr.Textbox(label=L("generation.prompt"), value=EXAMPLE_PROMPTS[0], scale=3)
        max_new_tokens = max_new_slider(policy, 512, scale=2, elem_id="compare-max-new")
        static = gr.Checkbox(False, label=L("compare.static"), elem_id="compare-static", scale=1)
        with gr.Column(scale=1, min_width=120):
            go = gr.Button(L("compare.go"), variant="primary", elem_id="compare-btn")
            stop_button = gr.Button(L("generation.stop"), variant="stop", elem_id="compare-stop")
    verdict = gr.Markdown(elem_id="compare-verdict")
    with gr.Row():
        cached_text = gr.Textbox(label=L("compare.with"), lines=6)
        uncached_text = gr.Textbox(label=L("compare.without"), lines=6)
        static_text = gr.Textbox(label=L("compare.static_text"), lines=6, visible=False, elem_id="compare-static-text")
    with gr.Row():
        latency = gr.Plot(show_label=False)
        cumulative = gr.Plot(show_label=False)
    with gr.Row():
        work = gr.Plot(show_label=False)
        bandwidth = gr.Plot(show_label=False)
    shown = gr.State(None)  # the finished comparison on the page, for a language switch

    def compare(model, prompt, max_new_tokens, static=False, lang="en", request: gr.Request = None,
                progress=gr.Progress()):
        """Generate greedily with the KV cache and without it, and with static also on a static cache with a
        compiled step; the verdict (speedups, agreement, every mode's figures, why the fast path is faster),
        the texts (the static one empty when it did not run) and four figures: per-token latency, total time
        against the prediction, the work per step and the decode bandwidth against the device's limit; all in `lang`."""
        req = build_request(policy, prompt, max_new_tokens, static=static, lang=lang)
        # The earlier comparison leaves the page's state (a language switch meanwhile redraws nothing), before the job
        # starts: a handler closed at this yield holds no job.
        yield (*(gr.skip(),) * (OUTPUTS - 1), None)
        job, _ = start(model, Compare(req), policy, lang)
        # Stop reaches the job; loading fills the first half of the bar, the runs (their phase and tokens) the second
        told = Told(progress)  # the phase is written in the verdict's place while it runs
        with held(job, sessions, request, "compare"):
            outcome = yield from follow(job, told, lang, told.redraw(OUTPUTS, lang), loading=0.5,
                                        on_loaded=lambda _: told(0.5, desc=t("compare.progress", lang)))
        result = outcome.answer.comparison if outcome.answer is not None else None
        if job.timed_out and result is None:
            raise refusal(time_limit_message(job.time_limit_s, lang), lang)
        if outcome.failure is not None:
            raise refusal(outcome.failure.message, lang)
        if result is None:
            raise refusal(t("compare.no_result", lang), lang)
        ran = result.static is not None
        said, *plots = verdict_and_figures(result, outcome.loaded, lang)
        yield (said, result.cached_text, result.uncached_text,
               gr.update(value=result.static.text if ran else "", visible=ran), *plots, (result, outcome.loaded))

    go.click(compare, [model, prompt, max_new_tokens, static, lang],
             [verdict, cached_text, uncached_text, static_text, latency, cumulative, work, bandwidth, shown],
             api_name="compare", concurrency_id=DEVICE, concurrency_limit=1, preprocess=False)
    lang.change(shown_in, [shown, lang], [verdict, latency, cumulative, work, bandwidth], api_visibility="private",
                queue=False, show_progress="hidden")

    def stop(request: gr.Request):
        """Stop this session's running comparison within a token."""
        sessions.stop(stop_handle(request, "compare"))

    stop_button.click(stop, None, None, api_visibility="private", concurrency_limit=None, queue=False)
