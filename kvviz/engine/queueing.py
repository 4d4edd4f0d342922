"""The device's queue: one lock per device, handed out first come, first served, and waiting for it.

Every request (a single sequence, a batch) holds its device's lock from admission to its last token, so work
on one device never overlaps and the time a request waits for the lock is its queue time. The lock is fair:
requests get the device in the order they asked for it. (A plain threading.Lock is not: a thread that has just
released it often takes it again before the waiters wake, and under a closed-loop load one request waited six
turns where its place in line gave it two.) Waiting is cancellable. Request ids are numbered here, one sequence
for every kind of request, and on_device is every request's queue. Knows threads, not models.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator

import torch

from kvviz.base.device import Stopwatch
from kvviz.engine.events import DeviceAcquired, RequestReceived, Waiting

POLL_S = 0.02  # how often a waiter checks its cancel event
_REQUEST_IDS = itertools.count(1)


class DeviceLock:
    """A lock whose waiters get it in the order they asked; acquire/release/locked as threading.Lock's."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._line: deque[object] = deque()
        self._held = False

    def acquire(self, blocking: bool = True, timeout: float = -1, cancel: threading.Event | None = None) -> bool:
        """Take the lock when every earlier waiter has had it; False when not blocking and it is busy, when the
        timeout passes, or when `cancel` is set while waiting (the place in line is then given up)."""
        with self._cond:
            if not self._held and not self._line:
                self._held = True
                return True
            if not blocking:
                return False
            ticket, deadline = object(), None if timeout < 0 else time.monotonic() + timeout
            self._line.append(ticket)
            try:
                while self._held or self._line[0] is not ticket:
                    left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                    if left <= 0 or (cancel is not None and cancel.is_set()):
                        return False
                    self._cond.wait(left)
                self._held = True
                return True
            finally:
                self._line.remove(ticket)
                self._cond.notify_all()  # the next in line may be waiting for this one to leave

    def release(self) -> None:
        with self._cond:
            if not self._held:
                raise RuntimeError("release of a device lock that is not held")  # internal: a bug in kvviz
            self._held = False
            self._cond.notify_all()

    def locked(self) -> bool:
        return self._held

    def __enter__(self) -> DeviceLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_LOCKS: dict[str, DeviceLock] = {}
_LOCKS_GUARD = threading.Lock()


def device_lock(device: torch.device) -> DeviceLock:
    """The one lock that serialises work on `device`."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(str(device), DeviceLock())


def wait_for_device(device: torch.device, cancel: threading.Event, watch: Stopwatch) -> Generator[Waiting, None, bool]:
    """Take the device's lock: at once when it is free, else after yielding Waiting and waiting in line.
    Returns True holding the lock, or False (not holding it) when `cancel` was set first."""
    lock = device_lock(device)
    if lock.acquire(blocking=False):
        return True
    yield Waiting(t_s=watch.elapsed())
    return lock.acquire(cancel=cancel)


def on_device(device: torch.device, mode: str, cancel: threading.Event, watch: Stopwatch,
              cancelled: Callable[[float], object], run: Callable[[float], Iterator]) -> Iterator:
    """A request's queue, for a single sequence and a batch alike: RequestReceived, [Waiting], then
    DeviceAcquired and the events of run(queue_s) while holding the device's lock, released however the run
    ends; the event cancelled(t_s) instead when `cancel` is set while it waits."""
    yield RequestReceived(t_s=0.0, request_id=next(_REQUEST_IDS), mode=mode)
    if not (yield from wait_for_device(device, cancel, watch)):
        yield cancelled(watch.elapsed())
        return
    try:
        queue_s = watch.elapsed()
        yield DeviceAcquired(t_s=queue_s, queue_s=queue_s)
        yield from run(queue_s)
    finally:
        device_lock(device).release()
