"""The noise rule, on latencies whose quartiles are worked by hand."""

from __future__ import annotations

from kvviz.base.noise import beyond_noise, spread

# Sorted 96, 98, 100, 102, 104 ms: inclusive quartiles at positions 1 and 3 (0-based) are 98 and 102: IQR 4 ms.
RUN = [0.100, 0.096, 0.104, 0.098, 0.102]


def test_spread_is_the_interquartile_range():
    assert abs(spread(RUN) - 0.004) < 1e-12
    assert spread([0.1]) == 0.0 and spread([]) == 0.0


def test_a_difference_inside_the_spread_is_noise():
    """100 ms against 103 ms (1.03×) with 4 ms of spread: noise; against 110 ms: a difference."""
    shifted = [x + 0.003 for x in RUN]
    assert not beyond_noise(0.100, 0.103, RUN, shifted)
    assert beyond_noise(0.100, 0.110, RUN, [x + 0.010 for x in RUN])


def test_the_wider_run_sets_the_band():
    """A steady run (no spread) beside a noisy one (IQR 40 ms) is judged by the noisy one: 30 ms apart is noise."""
    noisy = [x * 10 - 0.9 for x in RUN]  # 0.1, 0.06, 0.14, 0.08, 0.12: IQR 0.12 - 0.08 = 0.04
    assert not beyond_noise(0.100, 0.130, [0.1] * 5, noisy)
    assert beyond_noise(0.100, 0.150, [0.1] * 5, noisy)
