"""Choosing the CPU threads a model runs with beside the web server, from timed decode steps."""

from __future__ import annotations

import pytest
import torch

import kvviz.engine.threads as threads
from kvviz.engine.loading import load_model


@pytest.mark.parametrize("cores,fewer_s,all_s,expected", [
    (4, 1.0, 0.89, 4),  # all cores make a step more than 10% faster: use them
    (4, 1.0, 0.5, 4),
    (4, 1.0, 0.9, 3),  # exactly 10% faster is not enough: leave a core to the server
    (4, 1.0, 0.95, 3),
    (4, 1.0, 1.2, 3),  # slower with every core (contention): leave one
    (2, 0.01, 0.0089, 2),
    (2, 0.01, 0.0095, 1),
])
def test_a_core_is_left_free_unless_using_it_pays(monkeypatch, cores, fewer_s, all_s, expected):
    """cores - 1 threads unless a step with every core takes under 0.9 of the time with one fewer."""
    timed = []

    def fake_step_seconds(lm, n):
        timed.append(n)
        return {cores - 1: fewer_s, cores: all_s}[n]

    monkeypatch.setattr(threads, "step_seconds", fake_step_seconds)
    assert threads.choose_cpu_threads(object(), cores) == expected
    assert sorted(timed) == [cores - 1, cores], "both thread counts must be timed"


def test_one_core_is_all_there_is(monkeypatch):
    """With one core there is nothing to choose, and nothing is timed."""
    monkeypatch.setattr(threads, "step_seconds", lambda lm, n: pytest.fail("timed a single core"))
    assert threads.choose_cpu_threads(object(), 1) == 1


def test_step_seconds_times_decode_steps_with_the_asked_threads(tiny_models):
    """A real probe on a tiny model: a positive duration, measured with the thread count it was asked for."""
    lm = load_model(str(tiny_models["llama"]))
    before = torch.get_num_threads()
    try:
        seconds = threads.step_seconds(lm, 1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert seconds > 0
