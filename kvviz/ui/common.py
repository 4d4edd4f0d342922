"""What the tab builders share: Gradio's payloads for figures and refusals, the model controls, and running a
job on the device worker from values a visitor sent: start it (start), hold it while the handler runs (held:
Stop reaches it, and whatever ends the handler frees the device), and follow it to its end (follow: the one
reading of the worker's messages for every tab, which passes only what it shows while the job runs;
follow_answer: the same for a tab that shows nothing until the job's answer came).

A refusal is a gr.Error carrying the exception's first line (kvviz.base.errors.first_line): the page
and the API show that line, never a traceback; every toast's text is escaped in one place (toast), as Gradio
renders it as HTML. Every request is built by GenerationRequest.from_untrusted
with the host's policy, and every model is checked by the policy before the worker sees it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData

from kvviz.base.errors import first_line
from kvviz.engine.events import Event
from kvviz.engine.hosting import HostPolicy
from kvviz.engine.request import GenerationRequest
from kvviz.i18n import Said, said, t
from kvviz.i18n.errors import translate
from kvviz.ui.generation.text import time_limit_message
from kvviz.ui.lang import L
from kvviz.ui.sessions import SessionStore, stop_handle
from kvviz.ui.worker import Done, Failed, Loaded, Message, Payload, Progress, Tick, Tokens, WorkerJob, start_job

DEVICE = "device"  # concurrency id: everything that runs a model queues on the one device
MODEL_CHOICES = ["smollm2-135m-instruct", "tiny", "random:smollm2-135m", "random:qwen2.5-0.5b", "random:qwen3-0.6b",
                 "random:gpt2", "random:tinyllama-1.1b", "Qwen/Qwen2.5-0.5B-Instruct"]
# Questions SmolLM2-135M-Instruct answers well with its chat template (greedy: each ends by itself, in 8 to 83
# tokens, and reads right), then openings in the Debian-manual prose that tiny was trained on. Not the KV cache (it
# answers with a confident "lightweight data caching mechanism" of CPU cores) nor Chinese (it loops).
EXAMPLE_PROMPTS = ["Give three tips for writing clear code.", "What is the capital of France?",
                   "Name three primary colors.", "What does a CPU do?", "What is a package?", "The kernel"]
CHAT_EXAMPLES = EXAMPLE_PROMPTS[:4]  # the Batch tab's rows: four answers that end at different lengths
POLL_S = 0.25  # how often a handler that shows nothing while its job runs yields, so Gradio can close it


def plot(fig: dict) -> PlotData:
    """A figure spec as Gradio's plot payload, skipping plotly's slow Python-side validation."""
    return PlotData(type="plotly", plot=json.dumps(fig))


def toast(message: str) -> gr.Error:
    """The gr.Error that shows `message` as written. Gradio renders a toast's message as HTML, where
    "random:<preset>" would lose "<preset>" as an unknown tag (and a visitor's own text could add markup), so
    <, > and & are escaped here, for every toast. The API's caller gets the same escaped text; the page's Markdown
    status lines that repeat a refusal's message render it back as written."""
    return gr.Error(html.escape(message, quote=False), print_exception=False)


def refusal(exc: Exception | str, lang: object = "en") -> gr.Error:
    """The page's (and the API's) message for a refusal: the first line, never a traceback, never huge; in the
    page's language (kvviz.i18n.errors.translate; English where no translation is known)."""
    line = exc if isinstance(exc, Said) else first_line(exc if isinstance(exc, Exception) else ValueError(exc))
    return toast(translate(line, lang))


def no_answer(job: WorkerJob, failure: Failed | None, what: str, lang: object = "en") -> gr.Error:
    """The refusal for a worker job that ended without its answer: the time limit when it stopped the job (what
    the stop made the job say, such as "the batch was stopped", would hide why), else its failure, or that."""
    if job.timed_out and getattr(failure.message if failure else None, "key", None) != "job.time_limit_restart":
        return refusal(time_limit_message(job.time_limit_s, lang), lang)
    if failure is not None:
        return refusal(failure.message, lang)
    return refusal(said("job.no_result", what=what), lang)


def model_picker(policy: HostPolicy, default_model: str, **kw) -> gr.Dropdown:
    """The model dropdown: anything locally; hosted, only what the host offers (the server checks again)."""
    # Beside every picker: what a 135M model is for, so that its fluent, often wrong answers are not read as facts.
    if policy.hosted:
        return gr.Dropdown(policy.model_choices(), value=default_model, allow_custom_value=False,
                           label=L("common.model.hosted"), info=L("common.model.note"), **kw)
    return gr.Dropdown(MODEL_CHOICES, value=default_model, allow_custom_value=True,
                       label=L("common.model.local"), info=L("common.model.note"), **kw)


def max_new_slider(policy: HostPolicy, top: int, value: int = 128, label_key: str = "common.max_new_tokens",
                   **kw) -> gr.Slider:
    """The max-new-tokens slider up to `top` (hosted: the host's limit, if lower), at `value` or the top."""
    top = min(top, policy.max_new_tokens) if policy.hosted else top
    return gr.Slider(1, top, value=min(value, top), step=1, label=L(label_key), **kw)


def build_request(policy: HostPolicy, prompt, max_new_tokens, temperature=None, top_k=None, top_p=None, seed=None,
                  chat_template=True, use_cache=True, static=False, lang="en") -> GenerationRequest:
    """The GenerationRequest for the values the page or the API sent, as sent; gr.Error for the first bad one.

    None (a cleared field) means the default: greedy, no top-k, no top-p, no seed; so do "" and -1 for the seed.
    """
    try:
        return GenerationRequest.from_untrusted(
            prompt, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
            chat_template=chat_template, use_cache=use_cache, static=static, policy=policy)
    except ValueError as exc:
        raise refusal(exc, lang) from None


def start(model: object, payload: Payload, policy: HostPolicy, lang: object = "en") -> tuple[WorkerJob, str]:
    """Start a job on the device worker with the host's time limit: (the job, the model spec it loads). A model the
    host does not offer is refused at once."""
    try:
        spec = policy.check_model(model)
        return start_job(spec, payload, policy.request_time_limit_s, policy.hosted), spec
    except ValueError as exc:
        raise refusal(exc, lang) from None


@dataclass
class Outcome:
    """What a followed job sent back: its model's Loaded, its answer (None for a generation, whose events went to
    on_event), its Failed; None where none came."""

    loaded: Loaded | None = None
    answer: Message | None = None
    failure: Failed | None = None


def unchanged(outputs: int) -> Callable[[], tuple]:
    """The redraw of a handler that shows nothing while its job runs: every one of its outputs left as it is."""
    return lambda: (gr.skip(),) * outputs


class Told:
    """A handler's gr.Progress that also keeps what it was last told, so that the redraw can write it in the page:
    Gradio stops drawing its own bar once a generator handler has yielded, and these handlers yield on every tick
    (so that a closed tab ends them)."""

    def __init__(self, progress: Callable) -> None:
        self.progress, self.fraction, self.desc = progress, 0.0, ""

    def __call__(self, fraction: float, desc: str | None = None, **kw) -> None:
        self.fraction, self.desc = fraction, desc or self.desc
        self.progress(fraction, desc=desc, **kw)

    def line(self, lang: str) -> str:
        """The phase and how far it is, in `lang`; "running…" before anything was told."""
        return (t("common.progress_line", lang, what=self.desc, pct=f"{self.fraction:.0%}") if self.desc
                else t("common.running", lang))

    def redraw(self, outputs: int, lang: str) -> Callable[[], tuple]:
        """The redraw that writes the phase and how far it is in the first output, the others left as they are."""
        return lambda: (self.line(lang), *(gr.skip(),) * (outputs - 1))


def follow(job: WorkerJob, progress: Callable, lang: str, redraw: Callable[[], tuple], *, period_s: float = POLL_S,
           loading: float = 1.0, on_loaded: Callable[[Loaded], None] | None = None,
           on_event: Callable[[Event], None] | None = None) -> Generator[tuple, None, Outcome]:
    """Read the job's messages to its Done; returns what came back.

    Loading progress goes to `progress` in `lang`, scaled to the first `loading` of the bar, and the job's own
    progress after the load to the rest (to the whole bar when loading is 1); on_loaded is told the model once
    it is ready, on_event every event of a generation's stream. On every Tick (every period_s) the
    handler yields redraw(), so that Gradio can close it when the tab goes away, until a failure came (the refusal
    follows). A message that is not this job's kind's is an error, never ignored.
    """
    if (job.answer is Tokens) != (on_event is not None):  # a stream's events would be lost, or nothing would come
        raise TypeError(f"on_event takes a generation's events, and only those: this job is answered with "
                        f"{job.answer.__name__}")
    outcome = Outcome()
    for message in job.follow(period_s):
        match message:
            case Progress():  # the load fills the first `loading` of the bar, the job's own progress the rest
                start, span = (0.0, loading) if outcome.loaded is None or loading >= 1 else (loading, 1 - loading)
                progress(start + message.fraction * span, desc=translate(message.message, lang))
            case Loaded():
                outcome.loaded = message
                if on_loaded is not None:
                    on_loaded(message)
            case Tokens() if job.answer is Tokens:
                for event in message.events:
                    on_event(event)
            case Failed():
                outcome.failure = message
            case Tick():
                if outcome.failure is None:
                    yield redraw()
            case Done():
                pass
            case _ if isinstance(message, job.answer):  # the one answer of a job of any other kind
                outcome.answer = message
            case _:
                raise TypeError(f"a job answered with {job.answer.__name__} sent {message!r}")
    return outcome


@contextmanager
def held(job: WorkerJob, sessions: SessionStore | None = None, request: object = None,
         tab: str = "") -> Iterator[WorkerJob]:
    """The job for the block's time, Stop reaching it through `sessions` when given (by the request's session and
    the `tab`: each tab's Stop reaches its own run).

    Whatever ends the block ends the job: its own end (the job is done already), an error here, the app shutting
    down, or Gradio closing the handler because the tab closed or the client cancelled. Gradio closes it from its
    event loop, so the job is stopped (within a token) and followed on a thread of its own (WorkerJob.abandon)
    rather than waited for here, which would stall the whole server meanwhile.
    """
    session = stop_handle(request, tab)
    if sessions is not None:
        sessions.begin(session, job)
    try:
        yield job
    finally:
        job.abandon()
        if sessions is not None:
            sessions.end(session, job)


def follow_answer(job: WorkerJob, progress: Callable, lang: str, what: str, outputs: int,
                  sessions: SessionStore | None = None, request: object = None, tab: str = "",
                  **kw) -> Generator[tuple, None, Outcome]:
    """Follow a job whose handler shows nothing new until it ends but its progress (the phase, in its first
    output; the others left unchanged meanwhile), held as held() holds it (for `tab`'s Stop); what came back, or
    the refusal for `what` ending without its answer (no_answer). `kw`: what else follow takes."""
    told = Told(progress)
    with held(job, sessions, request, tab):
        outcome = yield from follow(job, told, lang, told.redraw(outputs, lang), **kw)
    if outcome.answer is None:
        raise no_answer(job, outcome.failure, what, lang)
    return outcome
