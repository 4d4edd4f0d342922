"""Timing work on a device: wait for it, then read the clock.

A GPU runs the kernels queued on it after the Python call that queued them has returned, so a clock read
without waiting measures the queueing, not the work. sync(device) waits; Stopwatch reads seconds since it
started, always after sync. The engine's timestamps, the hardware measurement and the benchmarks all time
through here (gpt-fast's device_sync). Only CUDA is waited for; a CPU's work is done when the call returns.
This module knows torch devices, nothing of models; torch is imported only when a GPU must be waited for.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def sync(device: torch.device) -> None:
    """Wait until `device` has finished the work queued so far, so a clock read next covers it."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


class Stopwatch:
    """Seconds since the stopwatch was made (t0), each reading taken after sync(device).

    t0 itself is not synced: the engine starts one when a request arrives, and the time until the
    device is free is the request's to count.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        sync(self.device)
        return time.perf_counter() - self.t0

    def exclude(self, seconds: float) -> None:
        """Leave `seconds` just spent out of every later reading: a one-off cost the caller reports apart (the
        static mode's compile), so the readings after it compare with runs that had none."""
        self.t0 += seconds
