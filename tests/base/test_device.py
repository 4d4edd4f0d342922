"""Timing on a device: the clock is read only after the device has finished its queued work."""

from __future__ import annotations

import time
from types import SimpleNamespace

import torch

from kvviz.base.device import Stopwatch, sync


def test_stopwatch_syncs_a_gpu_before_every_reading(monkeypatch):
    """On CUDA each reading waits for the device first (a fake device: no GPU needed); t0 itself does not."""
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    gpu = SimpleNamespace(type="cuda")
    watch = Stopwatch(gpu)
    assert calls == [], "starting the stopwatch must not wait: t0 is when the request arrived"
    watch.elapsed()
    watch.elapsed()
    assert calls == [gpu, gpu]


def test_a_cpu_is_never_synced(monkeypatch):
    """A CPU's work is done when the call returns: nothing to wait for."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: (_ for _ in ()).throw(AssertionError))
    sync(torch.device("cpu"))
    Stopwatch(torch.device("cpu")).elapsed()


def test_stopwatch_counts_from_its_start():
    """Readings grow, and cover at least a sleep taken between start and reading."""
    watch = Stopwatch(torch.device("cpu"))
    time.sleep(0.01)
    first = watch.elapsed()
    assert first >= 0.01 and watch.elapsed() >= first
