"""The live generation's figures from hand-made numbers: the life cycle's time axis."""

from __future__ import annotations

import pandas as pd
import pytest

from kvviz.ui.figures import to_plotly
from kvviz.ui.generation.figures import lifecycle


def test_the_life_cycle_starts_at_the_request():
    """Queued 10 ms, tokenized at 12 ms, first token at 50 ms, the last at 70 ms: the axis runs from 0 (the
    request's arrival: nothing happens before it) to just past 70 ms, not from plotly's padding below zero."""
    phases = {"device acquired": 0.010, "tokenized": 0.012, "prefill done": 0.050}
    frame = pd.DataFrame({"t_s": [0.050, 0.060, 0.070]})
    fig = to_plotly(lifecycle(phases, frame))
    low, high = fig.layout.xaxis.range
    assert low == 0 and 70 < high < 75
    assert [bar.base[0] for bar in fig.data[:4]] == pytest.approx([0, 10, 12, 50])
