"""tabs.common.follow, the one reading of a worker job's messages for every tab, on scripted message streams.

A scripted job stands in for the worker so that each property is pinned by the messages alone: the real worker's
streams are covered in test_worker.py, and each tab's use of follow by its browser and API tests.
"""

from __future__ import annotations

import pytest

from kvviz.engine.events import Waiting
from kvviz.i18n import said
from kvviz.ui.common import Outcome, follow
from kvviz.ui.worker import Batched, Compared, Done, Failed, Loaded, Progress, Swept, Tick, Tokens

LOADED = Loaded(job_id=1, spec="tiny", random_weights=False, tokenizer_note="", device="cpu", dtype="float32",
                cpu_threads=2)


class ScriptedJob:
    """A WorkerJob's follow() that yields a fixed list of messages, answered by `answer`."""

    def __init__(self, answer: type, messages: list) -> None:
        self.answer = answer
        self.messages = messages
        self.periods: list[float] = []

    def follow(self, period_s: float):
        self.periods.append(period_s)
        yield from self.messages


class Bar:
    """gr.Progress as follow calls it: every (fraction, desc) it was told."""

    def __init__(self) -> None:
        self.told: list[tuple[float, str | None]] = []

    def __call__(self, fraction: float, desc: str | None = None) -> None:
        self.told.append((fraction, desc))


def run(job: ScriptedJob, **kw) -> tuple[list, Outcome, Bar]:
    """Drive follow to its end: (what it yielded, what it returned, the progress bar)."""
    bar, yielded = Bar(), []
    beats = iter(range(1, 100))
    gen = follow(job, bar, kw.pop("lang", "en"), lambda: (next(beats),), **kw)
    while True:
        try:
            yielded.append(next(gen))
        except StopIteration as stop:
            return yielded, stop.value, bar


def test_follow_gathers_the_answer_the_model_and_redraws_on_every_tick():
    """Loaded and the answer are returned; each Tick yields a fresh redraw(); progress is scaled to `loading`."""
    answer = Compared(job_id=1, comparison=None)
    job = ScriptedJob(Compared, [Progress(job_id=1, fraction=0.4, message="loading weights of tiny"), Tick(),
                                 LOADED, Tick(), answer, Done(job_id=1)])
    loaded_seen: list = []
    yielded, outcome, bar = run(job, loading=0.5, on_loaded=loaded_seen.append, period_s=0.2)
    assert yielded == [(1,), (2,)], "one redraw per Tick, called afresh each time"
    assert outcome == Outcome(loaded=LOADED, answer=answer, failure=None)
    assert loaded_seen == [LOADED] and job.periods == [0.2]
    assert bar.told == [(0.2, "loading weights of tiny")], "0.4 of the load is 0.2 of a bar whose first half it fills"


def test_progress_is_told_in_the_pages_language():
    """The worker's progress line (a Said: English with its key) reaches the bar in the page's language, rendered
    from its key (kvviz.i18n.errors.translate); the Chinese is the catalogue's, typed here by hand."""
    line = said("progress.loading_weights", spec="tiny")
    job = ScriptedJob(Batched, [Progress(job_id=1, fraction=1.0, message=line), Done(job_id=1)])
    _, _, bar = run(job, lang="zh")
    assert bar.told == [(1.0, "正在加载 tiny 的权重")]


def test_a_generations_events_go_to_on_event_in_order():
    """A Tokens-answered job's events are handed one by one to on_event; the outcome holds no answer."""
    events = [Waiting(t_s=0.0), Waiting(t_s=0.1)]
    job = ScriptedJob(Tokens, [LOADED, Tokens(job_id=1, events=(events[0],)), Tokens(job_id=1, events=(events[1],)),
                               Done(job_id=1)])
    got: list = []
    _, outcome, _ = run(job, on_event=got.append)
    assert got == events and outcome.answer is None and outcome.loaded == LOADED


def test_no_redraw_after_a_failure():
    """Once Failed came the handler yields nothing more (the refusal follows), and the failure is returned."""
    failed = Failed(job_id=1, message="no such model", bad_input=True)
    yielded, outcome, _ = run(ScriptedJob(Swept, [Tick(), failed, Tick(), Done(job_id=1)]))
    assert yielded == [(1,)] and outcome.failure == failed and outcome.answer is None


@pytest.mark.parametrize("answer, wrong", [
    (Batched, Swept(job_id=1, frame=None)),  # a sweep's answer to a batch job
    (Compared, Tokens(job_id=1, events=())),  # a stream to a one-answer job
    (Tokens, Compared(job_id=1, comparison=None)),
    (Swept, "a message of no kind"),
])
def test_a_message_of_another_kind_is_an_error(answer, wrong):
    """A message the job's kind does not send is a bug to report, never skipped."""
    stream = {"on_event": lambda event: None} if answer is Tokens else {}
    with pytest.raises(TypeError, match=f"a job answered with {answer.__name__} sent"):
        run(ScriptedJob(answer, [wrong, Done(job_id=1)]), **stream)


@pytest.mark.parametrize("answer, on_event", [(Tokens, None), (Compared, print)])
def test_on_event_is_given_for_a_stream_and_only_for_one(answer, on_event):
    """A generation followed without on_event would lose its events; a one-answer job's on_event would never be
    called: either is refused before the first message is read."""
    job = ScriptedJob(answer, [Done(job_id=1)])
    with pytest.raises(TypeError, match=f"on_event takes a generation's events, .* answered with {answer.__name__}"):
        run(job, on_event=on_event)
    assert job.periods == [], "the job was followed before the mistake was caught"
