"""The comparison's figures from known numbers: which modes they draw, the values, the device's limit."""

from __future__ import annotations

import pandas as pd

from kvviz.ui.figures import decode_bandwidth, step_work, to_plotly
from tests.ui.test_present import comparison, static_run


def prediction(static: bool) -> pd.DataFrame:
    """Two steps by hand: FLOPs 2e9 then 1e9 cached, 2e9 then 4e9 uncached, 2e9 then 3e9 static."""
    frame = pd.DataFrame({"index": [0, 1], "seq_len": [10, 11], "cached_flops": [2e9, 1e9],
                          "uncached_flops": [2e9, 4e9]})
    return frame.assign(static_flops=[2e9, 3e9]) if static else frame


def test_step_work_draws_the_modes_that_ran():
    """Two lines without the static mode, three with it, in GFLOP, named as the page names the modes."""
    two = to_plotly(step_work(prediction(static=False)))
    assert [t.name for t in two.data] == ["cached (predicted)", "uncached (predicted)"]
    three = to_plotly(step_work(prediction(static=True)))
    assert [t.name for t in three.data][-1] == "cached, static + compiled (predicted)"
    assert list(three.data[2].y) == [2.0, 3.0] and list(three.data[1].y) == [2.0, 4.0]


def test_decode_bandwidth_bars_against_the_limit():
    """One bar per mode in GB/s with its share of the limit; a mode without a figure is a labelled gap; the
    limit is a dashed rule at 8 GB/s, inside the y range."""
    fig = to_plotly(decode_bandwidth(comparison(static=static_run()).runs))
    bars = fig.data[0]
    assert list(bars.x) == ["cached", "uncached", "cached, static + compiled"]
    assert list(bars.y) == [2.0, 0.0, 4.8]
    assert list(bars.text) == ["25% of the limit", "n/a", "60% of the limit"]
    (rule,) = fig.layout.shapes
    assert rule.y0 == rule.y1 == 8.0 and rule.line.dash == "dash"
    assert fig.layout.annotations[0].text == "limit 8.0 GB/s" and fig.layout.yaxis.range[1] >= 8.0


def test_decode_bandwidth_above_the_limit_stays_in_view():
    """A mode past 100% of a measured limit (110% of 8 GB/s = 8.8 GB/s) is not cut off by the y range."""
    fig = to_plotly(decode_bandwidth(comparison(static=static_run(utilisation=1.1, achieved=8.8e9)).runs))
    assert fig.layout.yaxis.range[1] >= 8.8 and fig.data[0].text[-1] == "110% of the limit"
