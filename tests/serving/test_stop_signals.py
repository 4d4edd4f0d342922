"""A stop signal is never lost: Python drops an exception raised while a __del__ runs ("Exception ignored in
..."), and CI once caught SIGTERM landing in a regex object's finalizer while vLLM started, so the capacity
command went on and exited 0. stop_signals raises it again where the work waits and when its block ends. No
vLLM here: the signal is sent to this process from inside a finalizer, where its raise is dropped."""

from __future__ import annotations

import gc
import os
import signal

import pytest

from kvviz.serving.vllm import Stopped, check_stopped, stop_signals


class SignalInFinalizer:
    """Sends `signum` to this process from its __del__, so that the handler runs (and raises) inside it."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        sum(range(10_000))  # bytecode for the handler to run in


def drop_in_finalizer(signum: int) -> None:
    SignalInFinalizer(signum)  # collected here, by reference count
    gc.collect()


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGTERM, Stopped), (signal.SIGHUP, Stopped),
                                                 (signal.SIGINT, KeyboardInterrupt)])
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped raise, reported
def test_a_signal_dropped_in_a_finalizer_ends_the_block(signum, raised):
    """The block's code runs to its end as if no signal came (its raise was dropped); leaving the block raises."""
    ran_on = False
    with pytest.raises(raised) as caught, stop_signals():
        drop_in_finalizer(signum)
        ran_on = True
    assert ran_on  # the raise in the finalizer was indeed dropped: the block went on
    if raised is Stopped:
        assert caught.value.signum == signum


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_wait_raises_a_dropped_signal_at_its_next_poll():
    """check_stopped (what wait_ready calls each half second) raises it at once, and only once."""
    with pytest.raises(Stopped), stop_signals():
        drop_in_finalizer(signal.SIGTERM)
        try:
            check_stopped()
        except Stopped:
            check_stopped()  # the signal was raised: a second check does not raise it again
            raise


def test_no_signal_no_raise_and_the_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with stop_signals():
        check_stopped()
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_that_was_raised_is_not_raised_twice():
    """A signal whose raise was not dropped ends the block once, and the next block starts clean."""
    with pytest.raises(Stopped), stop_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10_000))
    with stop_signals():
        check_stopped()


def test_a_signal_the_block_catches_is_its_own():
    """`kvviz.serving start` catches the interruption and stops as a service does: the block then ends clean."""
    with stop_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(10_000))
        except Stopped:
            pass
