"""The comparison's figures from known numbers: which modes they draw, the values, the device's limit."""

from __future__ import annotations

import pandas as pd

from kvviz.ui.figures import to_plotly
from kvviz.ui.generation.figures import decode_bandwidth, step_work, token_latency
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


def tokens(mode: str, first_ms: float, decode_ms: list[float]) -> pd.DataFrame:
    """One run's token rows by hand: the first token, then decode steps, times in ms."""
    return pd.DataFrame({"mode": mode, "index": range(1 + len(decode_ms)),
                         "phase": ["prefill"] + ["decode"] * len(decode_ms),
                         "dt_s": [ms / 1e3 for ms in [first_ms, *decode_ms]]})


def test_latency_axis_is_linear_so_uncached_growth_shows():
    """Cached steps flat at 4 ms, uncached growing 8 to 12 ms, first tokens 9 and 10 ms (under 3 x 12): a
    linear axis from zero holding everything, no note."""
    frame = pd.concat([tokens("cached", 9.0, [4.0, 4.0, 4.0]), tokens("uncached", 10.0, [8.0, 10.0, 12.0])])
    fig = to_plotly(token_latency(frame))
    assert fig.layout.yaxis.type in (None, "linear") and fig.layout.yaxis.rangemode == "tozero"
    assert fig.layout.yaxis.range is None and not fig.layout.annotations
    assert list(fig.data[2].y) == [8.0, 10.0, 12.0]
    assert fig.layout.yaxis.title.text == "ms since the previous token"


def test_a_first_token_far_above_decode_is_written_not_drawn():
    """A model just loaded: first token 169 ms against decode steps of 4-5 ms (over 3 x 5): the axis ends at
    1.3 x 5 = 6.5 ms and the first token is a note at the top with its time; the other run's 5.5 ms first
    token is inside the axis and gets no note."""
    frame = pd.concat([tokens("cached", 169.0, [4.0, 5.0]), tokens("uncached", 5.5, [4.5, 5.0])])
    fig = to_plotly(token_latency(frame))
    assert list(fig.layout.yaxis.range) == [0, 6.5]
    (note,) = fig.layout.annotations
    assert note.text == "↑ cached: first token 169.00 ms, above the axis"
    zh = to_plotly(token_latency(frame, lang="zh"))
    assert zh.layout.annotations[0].text.startswith("↑ ") and "首 token 169.00 ms" in zh.layout.annotations[0].text
