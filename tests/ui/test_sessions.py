"""The session store: each session's running job for Stop, and a bounded set of finished runs for drawing."""

from __future__ import annotations

from types import SimpleNamespace

from kvviz.ui.sessions import LAST_KEPT, SessionStore, session_id


class FakeJob:
    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_finished_runs_kept_for_drawing_are_bounded():
    """A run's record waits for the drawing step the page triggers; API clients never trigger it, so only
    the newest `keep` sessions' records are kept (a client per run must not grow the server's memory)."""
    store = SessionStore()
    assert store.keep == LAST_KEPT == 64
    for i in range(3 * 64):
        store.keep_last(f"session-{i}", f"run-{i}")
    kept = store.kept_sessions()
    assert len(kept) == 64 and kept[0] == "session-128" and kept[-1] == "session-191"
    store.keep_last("session-again", "older")
    store.keep_last("session-again", "newer")  # a session's newer run replaces its older one
    assert len(store.kept_sessions()) == 64 and store.kept_sessions()[-1] == "session-again"
    assert store.take_last("session-again") == "newer"
    assert store.take_last("session-again") is None, "a finished run is handed over once"


def test_stop_reaches_only_the_sessions_own_job():
    """Stop stops the job of the session that asks, and nothing once that job has ended."""
    store, mine, theirs = SessionStore(), FakeJob(), FakeJob()
    store.begin("mine", mine)
    store.begin("theirs", theirs)
    store.stop("mine")
    assert mine.stopped and not theirs.stopped
    store.end("theirs", theirs)
    store.stop("theirs")
    assert not theirs.stopped, "a job that ended was stopped"


def test_an_older_job_ending_leaves_the_newer_one():
    """A session's first job, ending after its second began, does not unregister the second."""
    store, first, second = SessionStore(), FakeJob(), FakeJob()
    store.begin("s", first)
    store.begin("s", second)
    store.end("s", first)
    store.stop("s")
    assert second.stopped


def test_session_names():
    """A request's session hash names its session; a call without one is "api"."""
    assert session_id(SimpleNamespace(session_hash="abc")) == "abc"
    assert session_id(SimpleNamespace(session_hash=None)) == "api" == session_id(None)


def test_runs_are_numbered_per_session_and_the_count_stays_bounded(monkeypatch):
    """Two visitors each count 1, 2, ... (no gaps from the other's runs); with the cap at 3 sessions, the longest
    idle is forgotten first and starts again at 1, and a recently numbered one keeps its count."""
    monkeypatch.setattr("kvviz.ui.sessions.NUMBERED_KEPT", 3)
    store = SessionStore()
    assert [store.number("a"), store.number("b"), store.number("a"), store.number("b")] == [1, 1, 2, 2]
    store.number("c")
    store.number("a")  # a is now the most recent: b is the longest idle
    store.number("d")  # a fourth session: b is dropped
    assert store.number("a") == 4 and store.number("b") == 1
