"""Per-visitor state the server must hold itself: each session's running job and its finished run.

Stop is a separate call from Generate, so the job it stops has to be found by session; runs are numbered per
session, counting only those that finished with a result; a finished run
waits here for the drawing step that follows it on the page (the life-cycle tab, the history). API
clients never trigger that step, so only the newest `keep` finished runs are held. Sessions are named
by Gradio's session hash; callers without one share the name "api". Nothing here imports gradio.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol

from kvviz.ui.generation.live import RunRecord


class Stoppable(Protocol):
    """A running job Stop can reach: a device worker's job (kvviz.ui.worker.WorkerJob), a serving load."""

    def stop(self) -> None: ...


LAST_KEPT = 64  # finished runs held for drawing; beyond that the oldest is dropped
NUMBERED_KEPT = 10_000  # sessions whose run count is held (a few dozen bytes each): a hosted demo stays bounded


def session_id(request: object) -> str:
    """The session a Gradio request belongs to (its session_hash), or "api" for a call without one."""
    return getattr(request, "session_hash", None) or "api"


def stop_handle(request: object, tab: str) -> str:
    """Where a tab's running job is kept for Stop: the session and the tab, so that each tab's Stop reaches its
    own run only (a generation's Stop never ends the same visitor's serving load, nor the other way)."""
    return f"{session_id(request)}/{tab}"


class SessionStore:
    """Running jobs (for Stop, by stop_handle: a session's tab) and finished runs (for the drawing step, by
    session); safe across threads."""

    def __init__(self, keep: int = LAST_KEPT) -> None:
        self.keep = keep
        self._active: dict[str, Stoppable] = {}
        self._last: OrderedDict[str, RunRecord] = OrderedDict()
        self._numbered: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def number(self, session: str) -> int:
        """The next run number of the session: 1, 2, ... for the runs that finished with a result, so that a
        failed run takes none and another visitor's runs do not show as gaps."""
        with self._lock:
            n = self._numbered.pop(session, 0) + 1
            self._numbered[session] = n  # the most recent last; the longest idle dropped beyond NUMBERED_KEPT
            while len(self._numbered) > NUMBERED_KEPT:
                self._numbered.popitem(last=False)
            return n

    def begin(self, session: str, job: Stoppable) -> None:
        """`job` is the session's running job: stop() reaches it."""
        with self._lock:
            self._active[session] = job

    def end(self, session: str, job: Stoppable) -> None:
        """`job` is over; the session keeps a newer job if it started one."""
        with self._lock:
            if self._active.get(session) is job:
                del self._active[session]

    def stop(self, session: str) -> None:
        """Stop the session's running job, if it has one."""
        with self._lock:
            job = self._active.get(session)
        if job is not None:
            job.stop()

    def keep_last(self, session: str, record: RunRecord) -> None:
        """Hold the session's finished run (replacing an older one), dropping the oldest beyond `keep`."""
        with self._lock:
            self._last.pop(session, None)
            self._last[session] = record
            while len(self._last) > self.keep:
                self._last.popitem(last=False)

    def take_last(self, session: str) -> RunRecord | None:
        """The session's finished run, handed over once."""
        with self._lock:
            return self._last.pop(session, None)

    def kept_sessions(self) -> list[str]:
        """Sessions whose finished run is held, oldest first."""
        with self._lock:
            return list(self._last)
