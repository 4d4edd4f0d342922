"""The device's lock (kvviz.engine.queueing): first come, first served, cancellable, and a drop-in for the
places that used threading.Lock."""

from __future__ import annotations

import threading
import time

import pytest

from kvviz.engine.queueing import DeviceLock

pytestmark = pytest.mark.alone  # times what the machine does: run with nothing beside it (README)


def test_waiters_get_the_lock_in_the_order_they_asked():
    """Four threads queue 50 ms apart behind a held lock: they get it in that order."""
    lock, order = DeviceLock(), []
    lock.acquire()

    def waiter(i: int) -> None:
        lock.acquire()
        order.append(i)
        time.sleep(0.01)
        lock.release()

    threads = []
    for i in range(4):
        threads.append(threading.Thread(target=waiter, args=(i,)))
        threads[-1].start()
        time.sleep(0.05)
    lock.release()
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2, 3]


def test_who_releases_and_asks_again_goes_behind_the_waiters():
    """The unfairness a plain lock has: the thread that just released it takes it again before a waiter wakes.
    Here the waiter, in line first, gets it."""
    lock, got = DeviceLock(), []
    lock.acquire()
    waiter = threading.Thread(target=lambda: (lock.acquire(), got.append("waiter"), lock.release()))
    waiter.start()
    time.sleep(0.05)
    lock.release()
    lock.acquire()  # at once again, as a closed-loop worker does for its next request
    got.append("again")
    lock.release()
    waiter.join(5)
    assert got == ["waiter", "again"]


def test_a_cancelled_waiter_leaves_the_line_and_the_next_one_moves_up():
    lock, cancel, got = DeviceLock(), threading.Event(), []
    lock.acquire()
    first = threading.Thread(target=lambda: got.append(("first", lock.acquire(cancel=cancel))))
    first.start()
    time.sleep(0.05)
    second = threading.Thread(target=lambda: (got.append(("second", lock.acquire())), lock.release()))
    second.start()
    time.sleep(0.05)
    cancel.set()
    first.join(5)
    lock.release()
    second.join(5)
    assert got == [("first", False), ("second", True)] and not lock.locked()


def test_it_answers_as_a_threading_lock_does():
    lock = DeviceLock()
    assert lock.acquire(blocking=False) and lock.locked()
    assert not lock.acquire(blocking=False)
    started = time.monotonic()
    assert not lock.acquire(timeout=0.1) and time.monotonic() - started >= 0.09
    lock.release()
    with lock:
        assert lock.locked()
    assert not lock.locked()
