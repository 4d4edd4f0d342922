"""The batch tab: B prompts decoded together by kvviz's own engine (static batching), then the batch sweep.

One batch runs on the device worker (a Batch job): its rows, each forward pass, the cache measured against the
memory model with its padding, and the batch's life cycle (also drawn on the life-cycle tab, and one history row per
sequence: build_app chains that on `ran`). The sweep (a BatchSweep job) measures B = 1, 2, 4, ... beside the
roofline's prediction (kvviz.engine.batch_sweep) and explains where they part (kvviz.ui.batch.sweep_text). Hosted, a
batch holds at most the host's max concurrency of sequences, each row at most the host's prompt tokens, and a sweep
is stopped at the time limit as a whole (the levels that ran are shown). Both handlers take the page's language last
(lang) and answer in it: headlines, the table's columns, figures, refusals; the last batch and sweep stay in the
page's state, from which a move of the language switch redraws them (batch_shown_in, sweep_shown_in).
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from kvviz.base.inputs import flag, text, whole_number
from kvviz.engine.batch import BatchRequest
from kvviz.engine.hosting import HostPolicy
from kvviz.i18n import t
from kvviz.ui.batch import run_figures, sweep_figures
from kvviz.ui.batch.run_text import batch_history_rows, batch_markdown, batch_rows, sweep_history_rows
from kvviz.ui.batch.sweep_text import sweep_markdown
from kvviz.ui.common import (
    CHAT_EXAMPLES,
    DEVICE,
    follow_answer,
    max_new_slider,
    model_picker,
    plot,
    refusal,
    start,
)
from kvviz.ui.generation.text import time_limit_message
from kvviz.ui.lang import L
from kvviz.ui.sessions import SessionStore, stop_handle
from kvviz.ui.worker import Batch, BatchSweep

MAX_BATCH = 64  # the page's slider; the engine takes more (kvviz.engine.request.MAX_BATCH)


@dataclass(frozen=True)
class BatchTab:
    ran: gr.events.Dependency  # Run batch; build_app draws the batch on the life-cycle tab and in the history
    last: gr.State  # the session's last batch: {"result": BatchResult, "loaded": Loaded, "rows": history rows}
    swept: gr.events.Dependency  # Run the sweep; build_app adds its rows to the history
    last_sweep: gr.State  # the session's last sweep: {"frame": its DataFrame, "rows": history rows, one per B}


def batch_view(result, loaded, lang: str) -> tuple:
    """What the page shows of a batch in `lang`: the headline, one row per sequence, the passes, the cache, the life
    cycle."""
    return (batch_markdown(result, loaded, lang), batch_rows(result, lang),
            plot(run_figures.batch_steps(result.steps, lang)), plot(run_figures.batch_kv(result.steps, lang)),
            plot(run_figures.batch_lifecycle(result.summary, result.rows, result.tokens, lang)))


def sweep_view(frame, lang: str, limit_s: float | None = None) -> tuple:
    """What the page shows of a sweep in `lang`: the explanation (under the time limit's line when the limit
    stopped it, `limit_s`) and four figures."""
    explained = sweep_markdown(frame, lang)
    if limit_s is not None:
        explained = f"**{time_limit_message(limit_s, lang)}**\n\n{explained}"
    return (explained, plot(sweep_figures.step_time(frame, lang)),
            plot(sweep_figures.throughput(frame, lang)), plot(sweep_figures.prefill_time(frame, lang)),
            plot(sweep_figures.kv_bytes(frame, lang)))


def batch_shown_in(last: dict | None, lang: str = "en") -> tuple:
    """The batch on the page again in `lang` (the language switch moved); nothing when none is."""
    if not last:  # only the empty table's headers change language
        return gr.skip(), batch_rows(None, lang), gr.skip(), gr.skip(), gr.skip()
    return batch_view(last["result"], last["loaded"], lang)


def sweep_shown_in(last: dict | None, lang: str = "en") -> tuple:
    """The sweep on the page again in `lang`; nothing when none is."""
    return (gr.skip(),) * 5 if not last else sweep_view(last["frame"], lang, last.get("limit_s"))


def batch_prompts(prompts: object, batch_size: object, limit: int, lang: str = "en") -> tuple[str, ...]:
    """B prompts from the page's text (one per line, cycled to fill the batch); ValueError in one line, in lang."""
    b = whole_number(batch_size, t("batch.field.batch_size", lang), 1, limit)
    lines = [line.strip() for line in text(prompts, t("batch.field.prompts", lang), 200_000).splitlines()
             if line.strip()]
    if not lines:
        raise ValueError(t("batch.error.no_prompts", lang))
    return tuple(lines[i % len(lines)] for i in range(b))


def batch_tab(default_model: str, policy: HostPolicy, sessions: SessionStore, lang: gr.Radio) -> BatchTab:
    """One batch (rows, passes, cache, life cycle) and the batch sweep (measured beside predicted)."""
    gr.Markdown(L("batch.intro"))
    top = min(MAX_BATCH, policy.max_concurrency) if policy.hosted else MAX_BATCH
    last, last_sweep = gr.State(None), gr.State(None)
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            model = model_picker(policy, default_model, elem_id="batch-model")
            prompts = gr.Textbox("\n".join(CHAT_EXAMPLES), lines=5, label=L("batch.prompts"), elem_id="batch-prompts")
            size = gr.Slider(1, top, value=min(4, top), step=1, label=L("batch.size"), elem_id="batch-size")
            max_new = max_new_slider(policy, 512, elem_id="batch-max-new")
            use_cache = gr.Checkbox(True, label=L("batch.use_cache"))
            ignore_eos = gr.Checkbox(False, label=L("batch.ignore_eos"))
            # On, as on the live-generation tab: an instruct model answers a raw prompt with an end of turn at once;
            # the engine applies the template only where the tokenizer has one (tiny has none).
            chat_template = gr.Checkbox(True, label=L("batch.chat_template"), elem_id="batch-chat-template")
            with gr.Row():
                go = gr.Button(L("batch.run"), variant="primary", elem_id="batch-run")
                stop_run = gr.Button(L("generation.stop"), variant="stop", elem_id="batch-stop")
        with gr.Column(scale=2):
            summary = gr.Markdown(elem_id="batch-summary")
            rows = gr.DataFrame(batch_rows(None), label=L("batch.rows"), interactive=False, elem_id="batch-rows")
            with gr.Row():
                steps = gr.Plot(show_label=False, elem_id="batch-steps")
                kv = gr.Plot(show_label=False, elem_id="batch-kv")
            life = gr.Plot(show_label=False, elem_id="batch-lifecycle")
    gr.Markdown(L("batch.sweep.heading"), elem_id="batch-sweep")
    with gr.Row():
        sweep_prompt = gr.Slider(1, 512, value=32, step=1, label=L("batch.sweep.prompt_tokens"),
                                 elem_id="sweep-prompt-tokens")
        sweep_new = gr.Slider(2, 256, value=16, step=1, label=L("batch.sweep.new_tokens"), elem_id="sweep-new-tokens")
        sweep_top = gr.Slider(1, top, value=min(16, top), step=1, label=L("batch.sweep.max_batch"),
                              elem_id="sweep-max-batch")
        with gr.Column(min_width=160):
            sweep_go = gr.Button(L("batch.sweep.run"), variant="primary", elem_id="sweep-run")
            stop_sweep = gr.Button(L("generation.stop"), variant="stop", elem_id="sweep-stop")
    sweep_text = gr.Markdown(elem_id="sweep-text")
    with gr.Row():
        step_plot = gr.Plot(show_label=False, elem_id="sweep-step")
        rate_plot = gr.Plot(show_label=False, elem_id="sweep-throughput")
    with gr.Row():
        prefill_plot = gr.Plot(show_label=False, elem_id="sweep-prefill")
        kv_plot = gr.Plot(show_label=False, elem_id="sweep-kv")

    def run(model, prompts, batch_size, max_new_tokens, use_cache, ignore_eos, chat_template=True, lang="en",
            request: gr.Request = None, progress=gr.Progress()):
        """Decode the prompts together; the headline, one row per sequence, the passes, the cache, the life cycle,
        all in lang."""
        try:
            if policy.hosted:
                policy.check_request(whole_number(max_new_tokens, t("batch.field.max_new_tokens", lang), 1, 10**6))
            req = BatchRequest(batch_prompts(prompts, batch_size, top, lang), max_new_tokens,
                               use_cache=flag(use_cache, t("batch.field.use_cache", lang)),
                               ignore_eos=flag(ignore_eos, t("batch.field.ignore_eos", lang)),
                               chat_template=flag(chat_template, t("batch.field.chat_template", lang)),
                               max_prompt_tokens=policy.prompt_token_limit)
        except ValueError as exc:
            raise refusal(exc, lang) from None
        yield (*(gr.skip(),) * 5, None)  # the earlier batch leaves the page's state, before the job starts
        job, _ = start(model, Batch(req), policy, lang)
        outcome = yield from follow_answer(job, progress, lang, t("batch.what.batch", lang), 6, sessions, request,
                                           "batch")
        result = outcome.answer.result
        yield (*batch_view(result, outcome.loaded, lang),
               {"result": result, "loaded": outcome.loaded, "rows": batch_history_rows(result, lang)})

    def sweep(model, prompt_tokens, new_tokens, max_batch, lang="en", request: gr.Request = None,
              progress=gr.Progress()):
        """B = 1, 2, 4, ... to the largest B: the explanation and four figures, measured beside predicted, in lang."""
        try:
            if policy.hosted:
                policy.check_request(whole_number(new_tokens, t("batch.field.new_tokens", lang), 1, 10**6))
            ask = BatchSweep(whole_number(max_batch, t("batch.field.max_batch", lang), 1, top), prompt_tokens,
                             new_tokens)
            if policy.hosted and ask.prompt_tokens > policy.max_prompt_tokens:
                raise ValueError(t("batch.error.prompt_limit", lang, tokens=f"{ask.prompt_tokens:,}",
                                   limit=f"{policy.max_prompt_tokens:,}"))
        except ValueError as exc:
            raise refusal(exc, lang) from None
        yield (*(gr.skip(),) * 5, None)  # the earlier sweep leaves the page's state, before the job starts
        job, _ = start(model, ask, policy, lang)
        outcome = yield from follow_answer(job, progress, lang, t("batch.what.sweep", lang), 6, sessions, request,
                                           "batch")
        frame = outcome.answer.frame
        if job.timed_out and frame.empty:  # a sweep is bounded as a whole: none of its levels ran
            raise refusal(time_limit_message(job.time_limit_s, lang), lang)
        limit_s = job.time_limit_s if job.timed_out else None  # the levels that ran, and why there are no more
        yield (*sweep_view(frame, lang, limit_s),
               {"frame": frame, "limit_s": limit_s, "rows": sweep_history_rows(frame, lang)})

    ran = go.click(run, [model, prompts, size, max_new, use_cache, ignore_eos, chat_template, lang],
                   [summary, rows, steps, kv, life, last],
                   api_name="batch", concurrency_id=DEVICE, concurrency_limit=1, preprocess=False)
    swept = sweep_go.click(sweep, [model, sweep_prompt, sweep_new, sweep_top, lang],
                           [sweep_text, step_plot, rate_plot, prefill_plot, kv_plot, last_sweep],
                           api_name="batch_sweep", concurrency_id=DEVICE, concurrency_limit=1, preprocess=False)

    def stop(request: gr.Request):
        """Stop this session's running batch or sweep before its next forward pass."""
        sessions.stop(stop_handle(request, "batch"))

    for button in (stop_run, stop_sweep):
        button.click(stop, None, None, api_visibility="private", concurrency_limit=None, queue=False)
    lang.change(batch_shown_in, [last, lang], [summary, rows, steps, kv, life], api_visibility="private",
                queue=False, show_progress="hidden")
    lang.change(sweep_shown_in, [last_sweep, lang], [sweep_text, step_plot, rate_plot, prefill_plot, kv_plot],
                api_visibility="private", queue=False, show_progress="hidden")
    return BatchTab(ran, last, swept, last_sweep)
