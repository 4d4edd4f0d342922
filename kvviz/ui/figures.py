"""What every figure shares: the figure specification, its layout, colours, marker lines and the empty figure.

Each feature draws its own figures (kvviz.ui.<feature>.figures) with these.

A figure here is the JSON-ready dict plotly.js draws ({"data": [...], "layout": {...}}), built
without plotly's Python validation: the calculator redraws five of them on every slider move and
must answer within tens of milliseconds. `to_plotly` turns a spec into a plotly Figure (for export
and for tests, which validate every spec that way). Figures have axis titles with units and a
transparent background with mid-grey text, so they read in light and dark themes alike. Nothing here
computes the numbers it draws.
"""

from __future__ import annotations

INK = "#8a8f98"  # mid grey: legible on white and on near-black
GRID = "rgba(138, 143, 152, 0.25)"
COLORS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d"]

Figure = dict
# A log axis with ticks at 1, 2, 5 × 10^n written in full ("200", not plotly's small "2" between decades).
LOG_FULL = {"type": "log", "dtick": "D2", "tickformat": ",~g"}


def in_ms(seconds) -> list:
    """Seconds drawn as milliseconds; None (a gap in the line) where a value is missing, None or NaN."""
    return [None if v is None or v != v else v * 1e3 for v in seconds]


def base_layout(title: str, x: str, y: str, height: int = 400, **extra) -> dict:
    """kvviz's figure layout: transparent, mid-grey ink, axis titles, the legend below the x axis's title."""
    axis = {"gridcolor": GRID, "zerolinecolor": GRID, "linecolor": INK, "automargin": True}
    return {
        "title": {"text": title, "font": {"size": 15}}, "height": height,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
        "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)", "font": {"color": INK},
        # Below the axis title, so long series names never run into the plot's title on a narrow plot.
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0.0},
        "xaxis": {**axis, "title": {"text": x}}, "yaxis": {**axis, "title": {"text": y}}, **extra,
    }


def vline(x: float, text: str, dash: str = "dash", top: bool = True) -> tuple[dict, dict]:
    """A vertical rule across the plot at data x, and its label at the top or bottom (linear axes only)."""
    shape = {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
             "line": {"color": INK, "dash": dash, "width": 1}}
    note = {"x": x, "xref": "x", "y": 1 if top else 0, "yref": "paper", "text": text, "showarrow": False,
            "xanchor": "right" if top else "left", "yanchor": "top" if top else "bottom",
            "font": {"color": INK, "size": 11}}
    return shape, note


def hline(y: float, text: str) -> tuple[dict, dict]:
    shape = {"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": y, "y1": y,
             "line": {"color": INK, "dash": "dash", "width": 1}}
    note = {"x": 0, "xref": "paper", "y": y, "yref": "y", "text": text, "showarrow": False,
            "xanchor": "left", "yanchor": "bottom", "font": {"color": INK, "size": 11}}
    return shape, note


def empty(message: str) -> Figure:
    """A blank figure that says why it is blank."""
    layout = base_layout("", "", "", height=200, annotations=[{"text": message, "showarrow": False, "x": 0.5, "y": 0.5,
                                                              "xref": "paper", "yref": "paper",
                                                              "font": {"color": INK, "size": 14}}])
    layout["xaxis"] |= {"visible": False}
    layout["yaxis"] |= {"visible": False}
    return {"data": [], "layout": layout}


def to_plotly(fig: Figure):
    """The spec as a validated plotly Figure (raises on any property plotly does not know)."""
    import plotly.graph_objects as go

    return go.Figure(fig)


# The request's phases, one colour each wherever a life cycle is drawn (one run's or a batch's).
PHASE_COLORS = {"queued": "#b279a2", "tokenize": "#72b7b2", "prefill": "#f58518", "decode": "#4c78a8"}
