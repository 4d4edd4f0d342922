"""The Lesson tab: the lesson's six questions as a guided path through the app, and the lesson's own script.

Each question has a button that opens the view that shows it, already set to make the point (the Live
generation tab with a long prompt, the Cached vs uncached tab, the calculator at the lesson's example with every
control its figure depends on, the Batch tab's sweep), and scrolls to where the answer shows; questions 5 and 6 have
a second, "Plan it", that opens the Plan tab set with the session's numbers. "Answer with my
measurements" fills every answer from the session's history (kvviz.lesson, in the page's language). The script
section runs the lesson's loop and kvviz's on the device worker (a Lesson job) and shows the script's dict beside
kvviz's metrics for the same request; its Stop reaches that run only (the session's "lesson" stop handle).
A move of the language switch writes the answers (once asked for) and the script's verdict again in the new
language, from the session's runs and the script's kept result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr

from kvviz.engine.hosting import HostPolicy
from kvviz.engine.lesson_script import LESSON_MAX_NEW_TOKENS, known_architecture
from kvviz.i18n import t
from kvviz.lesson import QUESTIONS, answers, plan_numbers
from kvviz.ui.common import (
    DEVICE,
    build_request,
    follow_answer,
    max_new_slider,
    model_picker,
    start,
)
from kvviz.ui.generation.history import RunHistory
from kvviz.ui.lang import L
from kvviz.ui.plan.predict import CLOSED
from kvviz.ui.plan.tab import PlanControls
from kvviz.ui.sessions import SessionStore, stop_handle
from kvviz.ui.worker import Lesson

# A long prompt: its prefill (and so its TTFT) is long enough to see on the life-cycle plots (questions 1 and 6). The
# passage is the lesson's own, there for its length; the question at its end is one SmolLM2-135M-Instruct answers
# well (asked to explain the KV cache, it answered a student with a confident "dynamic data structure that stores
# the entire path of one user request").
LONG_PROMPT = ("During training we care about one batch's forward pass, backward pass and optimizer step. During "
               "inference we care about the whole path of one user request: when it queues, when it gets the GPU, "
               "when its first token comes back, and how fast the following tokens flow. LLM inference is not a "
               "uniform process: prefill is like reading the whole question, decode like answering one word at a "
               "time. The two differ in the shape of their computation, their bottleneck and how to optimise them. "
               "The text above is only here to make this prompt long. Now answer this: give three tips for writing "
               "clear code.")
# The lesson's worked example on the calculator, with every control its 32 GiB depends on: the config box empty (it
# wins over the preset), the preset's own depth and heads (sliders moved earlier stay otherwise), bf16 (fp8 halves
# it), one GPU (tp, pp and dp split the figure). The accelerator, mem_util and block_size change what fits, not it.
# The script's prompt on the page: raw text (the script applies no chat template), so an opening SmolLM2-135M-Instruct
# continues well (three tips in 64 tokens), not the lesson's Chinese question, which it answers with a loop.
SCRIPT_PROMPT = "Three tips for writing clear code:"
LESSON_EXAMPLE = {"preset": "llama-2-7b", "config": "", "batch": 16, "seq_len": 4096, "layers": 32, "kv_heads": 32,
                  "head_dim": 128, "kv_dtype": "bf16", "tp": 1, "pp": 1, "dp": 1}
# Where each question's view shows its answer: the element "Show me" scrolls to once its tab is open.
ANSWER_AT = {1: "gen-prompt", 2: "compare-btn", 3: "calc-summary", 4: "calc-summary", 5: "batch-sweep",
             6: "gen-prompt"}


def scroll_js(elem_id: str) -> str:
    """Browser code that scrolls element `elem_id` to the top of the window as soon as its tab has drawn it (a
    newly selected tab keeps the page's scroll position, which would leave the visitor mid-page)."""
    return ("() => { let tries = 0; const go = () => { const el = document.getElementById('" + elem_id + "'); "
            "if (el && el.offsetParent !== null) { el.scrollIntoView({block: 'start'}); } "
            "else if (tries++ < 60) { setTimeout(go, 50); } }; go(); }")


@dataclass(frozen=True)
class LessonTargets:
    """What the questions' buttons open and set: the tab set, each view's tab id, and the controls they set."""

    tabs: gr.Tabs
    generation_id: str
    compare_id: str
    calculator_id: str
    batch_id: str
    gen_prompt: gr.Textbox | None
    calculator: Callable[[str], gr.components.Component]  # a calculator control by its input name
    plan_id: str | None = None  # questions 5 and 6 lead on to the Plan tab, set with the run's numbers
    plan: PlanControls | None = None


def plan_opener(targets: LessonTargets, question: int) -> tuple[Callable, list]:
    """The handler and outputs of question 5's or 6's "Plan it": the Plan tab selected, set from the session's
    runs (kvviz.lesson.plan_numbers): question 5 a closed loop at the most in flight measured, both the last run's
    prompt and output tokens; a value nothing measured is left as it is."""
    c = targets.plan

    def open_plan(history: RunHistory):
        n = plan_numbers(history)
        closed = question == 5 and n.in_flight is not None
        return (gr.Tabs(selected=targets.plan_id), gr.update(value=CLOSED) if closed else gr.update(),
                gr.update(value=n.in_flight) if closed else gr.update(),
                *(gr.update() if v is None else gr.update(value=v) for v in (n.prompt_tokens, n.output_tokens)))

    return open_plan, [targets.tabs, c.loop, c.concurrency, c.prompt_tokens, c.output_tokens]


def opener(targets: LessonTargets, question: int) -> tuple[Callable, list]:
    """The handler and outputs of question `question`'s button: the view selected, its controls set."""
    gen = [targets.gen_prompt] if targets.gen_prompt is not None else []
    if question in (1, 6):
        return (lambda: (gr.Tabs(selected=targets.generation_id), *[gr.update(value=LONG_PROMPT)] * len(gen)),
                [targets.tabs, *gen])
    if question == 2:
        return lambda: gr.Tabs(selected=targets.compare_id), [targets.tabs]
    if question in (3, 4):
        return (lambda: (gr.Tabs(selected=targets.calculator_id),
                         *[gr.update(value=value) for value in LESSON_EXAMPLE.values()]),
                [targets.tabs, *[targets.calculator(name) for name in LESSON_EXAMPLE]])
    return lambda: gr.Tabs(selected=targets.batch_id), [targets.tabs]


def script_verdict(result: dict, lang: str) -> str:
    """Whether the script and kvviz's loop made the same tokens, with the counts."""
    script, kvviz = result["script"], result["kvviz"]
    if result["tokens_identical"]:
        return t("lesson.script.same", lang, n=kvviz["new_tokens"], prompt=kvviz["prompt_tokens"],
                 new=kvviz["new_tokens"])
    return t("lesson.script.differ", lang, script_new=script["new_tokens"], new=kvviz["new_tokens"])


def lesson_tab(default_model: str, policy: HostPolicy, runs: gr.State, lang: gr.Radio,
               targets: LessonTargets, sessions: SessionStore) -> None:
    """The six questions with their answers and buttons, then the lesson's script beside kvviz's run."""
    gr.Markdown(L("lesson.intro"))
    refresh = gr.Button(L("lesson.refresh"), variant="primary", elem_id="lesson-refresh")
    shown = []
    for q in QUESTIONS:
        with gr.Group():
            with gr.Row():
                gr.Markdown(L(q.key))
                go = gr.Button(L("lesson.open"), size="sm", scale=0, min_width=120, elem_id=f"lesson-open-{q.number}")
                planned = (gr.Button(L("lesson.plan"), size="sm", scale=0, min_width=120,
                                     elem_id=f"lesson-plan-{q.number}")
                           if q.number in (5, 6) and targets.plan is not None else None)
            shown.append(gr.Markdown(L("lesson.pending"), elem_id=f"lesson-answer-{q.number}"))
        fn, outputs = opener(targets, q.number)
        go.click(fn, None, outputs, api_visibility="private", queue=False).then(
            None, js=scroll_js(ANSWER_AT[q.number]), api_visibility="private", queue=False)
        if planned is not None:
            fn, outputs = plan_opener(targets, q.number)
            planned.click(fn, runs, outputs, api_visibility="private", queue=False).then(
                None, js=scroll_js("plan-predict"), api_visibility="private", queue=False)

    gr.Markdown(L("lesson.script.title"))
    with gr.Row():
        model = model_picker(policy, default_model, scale=2, elem_id="lesson-model")
        prompt = gr.Textbox(SCRIPT_PROMPT, label=L("lesson.script.prompt"), scale=3, elem_id="lesson-prompt")
        max_new_tokens = max_new_slider(policy, 1024, LESSON_MAX_NEW_TOKENS, "lesson.script.max_new", scale=2)
        with gr.Column(scale=1, min_width=120):
            run = gr.Button(L("lesson.script.run"), variant="primary", elem_id="lesson-run")
            stop_button = gr.Button(L("generation.stop"), variant="stop", elem_id="lesson-stop")
    verdict = gr.Markdown(elem_id="lesson-verdict")
    with gr.Row():
        script_box = gr.JSON(label=L("lesson.script.script"), elem_id="lesson-script-dict")
        kvviz_box = gr.JSON(label=L("lesson.script.kvviz"), elem_id="lesson-kvviz-dict")
    # Kept for a language switch: the model the answers were asked for with (None: not yet), the script's result.
    asked_with, script_result = gr.State(None), gr.State(None)

    def answer(history: RunHistory, model: str, lang: str = "en"):
        """The six answers from the session's runs, in `lang`; Q3 with the chosen model's numbers."""
        return tuple(answers(history, lang, known_architecture(model)))

    def lesson_script(model, prompt=SCRIPT_PROMPT, max_new_tokens=LESSON_MAX_NEW_TOKENS, lang="en",
                      request: gr.Request = None, progress=gr.Progress()):
        """The lesson's script on `model` (prefill, then the last token with past_key_values, greedy, EOS), then
        kvviz's loop on the same raw prompt: whether they agree, the script's dict, kvviz's metrics."""
        req = build_request(policy, prompt, max_new_tokens, chat_template=False, lang=lang)
        yield gr.skip(), gr.skip(), gr.skip(), None  # the earlier result leaves the page's state before the job starts
        job, _ = start(model, Lesson(req), policy, lang)
        # Loading fills the first half of the bar; the two runs, which report nothing, the second.
        outcome = yield from follow_answer(job, progress, lang, t("lesson.script.what", lang), 4, sessions, request,
                                           "lesson", loading=0.5, on_loaded=lambda _: progress(0.5))
        result = outcome.answer.result.as_dict()
        yield script_verdict(result, lang), result["script"], result["kvviz"], result

    def answered(history: RunHistory, model: str, lang: str = "en"):
        """The answers and the model they were asked for with, kept for a language switch."""
        return (*answer(history, model, lang), model)

    def answers_in(history: RunHistory, model: str | None, lang: str = "en"):
        """The answers again in `lang` (the switch moved), once a visitor asked for them; nothing before."""
        return (gr.skip(),) * len(shown) if model is None else answer(history, model, lang)

    def verdict_in(result: dict | None, lang: str = "en"):
        return gr.skip() if result is None else script_verdict(result, lang)

    refresh.click(answered, [runs, model, lang], [*shown, asked_with], api_visibility="private",
                  concurrency_limit=None)
    run.click(lesson_script, [model, prompt, max_new_tokens, lang], [verdict, script_box, kvviz_box, script_result],
              api_name="lesson_script", concurrency_id=DEVICE, concurrency_limit=1, preprocess=False)
    lang.change(answers_in, [runs, asked_with, lang], shown, api_visibility="private", queue=False,
                show_progress="hidden")
    lang.change(verdict_in, [script_result, lang], verdict, api_visibility="private", queue=False,
                show_progress="hidden")

    def stop(request: gr.Request):
        """Stop this session's running lesson script within a token."""
        sessions.stop(stop_handle(request, "lesson"))

    stop_button.click(stop, None, None, api_visibility="private", concurrency_limit=None, queue=False)
