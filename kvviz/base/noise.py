"""When two measured latencies differ by more than their noise: the one rule every explanation uses before it
names a cause for a difference. A run's noise is its own spread: the interquartile range of its per-token (or
per-step) latencies, which one slow token cannot widen as it would a standard deviation."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import quantiles


def spread(latencies: Sequence[float]) -> float:
    """The interquartile range of `latencies` (inclusive quartiles); 0 for fewer than two."""
    if len(latencies) < 2:
        return 0.0
    q1, _, q3 = quantiles(latencies, n=4, method="inclusive")
    return q3 - q1


def beyond_noise(a: float, b: float, a_latencies: Sequence[float], b_latencies: Sequence[float]) -> bool:
    """Whether typical latencies `a` and `b` differ by more than the larger spread of the two runs' own."""
    return abs(a - b) > max(spread(a_latencies), spread(b_latencies))
