"""The cached-against-uncached tab: both modes on one prompt, their texts, latency, total time, the prediction;
on request the third mode beside them, cached on a static cache with a compiled decode step (static).

Compare runs on the device worker like a generation; there is nothing to draw until both modes ran, but
the handler yields while it waits, so that Gradio can close it when the tab goes away or the call is
cancelled (a plain function would hold the device to its end).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

import gradio as gr

from kvviz.engine.compare import Comparison
from kvviz.engine.hosting import HostPolicy
from kvviz.ui import figures
from kvviz.ui.present import compare_verdict, time_limit_message
from kvviz.ui.tabs.common import (
    DEVICE,
    EXAMPLE_PROMPTS,
    build_request,
    max_new_slider,
    model_picker,
    plot,
    refusal,
    start,
)
from kvviz.ui.worker import Compared, Done, Failed, JobKind, Loaded, Progress, Tick, WorkerJob

INTRO = """
Without the cache every step re-reads the whole sequence: step *n* costs a prefill of *n* tokens, so
per-token time grows with position and total time grows quadratically. With the cache a step feeds
one token and reads the stored keys and values: per-token time stays nearly flat and total time
grows linearly. Both runs use the same prompt, settings and device, after a warm-up. In fp32 the
tokens are identical; in bf16/fp16 they may part, because the two modes multiply matrices of
different shapes, and the first position where they do is reported.

Tick **static + compiled** to run a third mode: the same cached loop on a cache allocated once for the whole
run, its decode step compiled (CUDA graphs on a GPU, inductor on the CPU). The first request of a shape
compiles (tens of seconds on a CPU; the time is reported apart), later ones reuse it. The bandwidth plot
shows how close each loop comes to the device's limit.
"""
POLL_S = 0.25
OUTPUTS = 8  # verdict, three texts, four figures


@dataclass(frozen=True)
class CompareOutcome:
    result: Comparison | None = None
    loaded: Loaded | None = None
    failure: Failed | None = None


def follow_comparison(job: WorkerJob, progress: Callable) -> Generator[tuple, None, CompareOutcome]:
    """Report the job's progress, yielding nothing new to the page on every Tick; returns what came back."""
    result = loaded = failure = None
    for message in job.follow(POLL_S):
        match message:
            case Progress():
                progress(message.fraction / 2, desc=message.message)
            case Loaded():
                loaded = message
                progress(0.5, desc="running every mode (after a warm-up)")
            case Compared():
                result = message.comparison
            case Failed():
                failure = message
            case Tick():
                yield (gr.skip(),) * OUTPUTS
            case Done():
                pass
            case _:
                raise TypeError(f"a comparison's job sent {message!r}")
    return CompareOutcome(result, loaded, failure)


def compare_tab(default_model: str, policy: HostPolicy, lang: gr.Radio) -> None:
    """Both modes side by side: texts, per-token latency, total time, the prediction, agreement."""
    gr.Markdown(INTRO)
    with gr.Row():
        model = model_picker(policy, default_model, scale=2)
        prompt = gr.Textbox(label="prompt", value=EXAMPLE_PROMPTS[2], scale=3)  # a long answer: a clear curve
        max_new_tokens = max_new_slider(policy, 512, scale=2)
        static = gr.Checkbox(False, label="static + compiled (third mode)", elem_id="compare-static", scale=1)
        go = gr.Button("Compare", variant="primary", elem_id="compare-btn", scale=1)
    verdict = gr.Markdown(elem_id="compare-verdict")
    with gr.Row():
        cached_text = gr.Textbox(label="with the KV cache", lines=6)
        uncached_text = gr.Textbox(label="without the cache", lines=6)
        static_text = gr.Textbox(label="static + compiled", lines=6, visible=False, elem_id="compare-static-text")
    with gr.Row():
        latency = gr.Plot(show_label=False)
        cumulative = gr.Plot(show_label=False)
    with gr.Row():
        work = gr.Plot(show_label=False)
        bandwidth = gr.Plot(show_label=False)

    def compare(model, prompt, max_new_tokens, static=False, progress=gr.Progress()):
        """Generate greedily with the KV cache and without it, and with static also on a static cache with a
        compiled step; the verdict (speedups, agreement, every mode's figures, why the fast path is faster),
        the texts (the static one empty when it did not run) and four figures: per-token latency, total time
        against the prediction, the work per step and the decode bandwidth against the device's limit."""
        req = build_request(policy, prompt, max_new_tokens, static=static)
        job, _ = start(JobKind.COMPARE, model, req, policy)
        try:
            outcome = yield from follow_comparison(job, progress)
        finally:
            job.abandon()  # a cancelled call, a closed tab, an error here, the app shutting down: free the device
        result = outcome.result
        if job.timed_out and result is None:
            raise refusal(time_limit_message(job.time_limit_s))
        if outcome.failure is not None:
            raise refusal(outcome.failure.message)
        if result is None:
            raise refusal("the comparison ended without a result")
        ran = result.static is not None
        yield (compare_verdict(result, outcome.loaded), result.cached_text, result.uncached_text,
               gr.update(value=result.static.text if ran else "", visible=ran),
               plot(figures.token_latency(result.rows, "Per-token latency, mode against mode")),
               plot(figures.cumulative_time(result.rows, result.prediction)),
               plot(figures.step_work(result.prediction)), plot(figures.decode_bandwidth(result.runs)))

    go.click(compare, [model, prompt, max_new_tokens, static],
             [verdict, cached_text, uncached_text, static_text, latency, cumulative, work, bandwidth],
             api_name="compare", concurrency_id=DEVICE, concurrency_limit=1, preprocess=False)
