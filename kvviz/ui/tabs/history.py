"""The history tab: every run of this session as a table, its CSV, and chosen runs' latency overlaid.

The runs live in the page's session state (a kvviz.ui.present.RunHistory), which build_app adds each
finished run to; this tab only reads it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from kvviz.ui import figures
from kvviz.ui.present import RunHistory
from kvviz.ui.tabs.common import plot


@dataclass(frozen=True)
class HistoryTab:
    table: gr.DataFrame
    run_picker: gr.Dropdown


def history_tab(runs: gr.State, lang: gr.Radio) -> HistoryTab:
    """The table, its download, the overlay picker and plot; `runs` holds the session's RunHistory."""
    gr.Markdown("Every run of this session. Download it as CSV, or overlay runs' per-token latency.")
    table = gr.DataFrame(label="runs", interactive=False)
    with gr.Row():
        download = gr.DownloadButton("Download CSV")
        run_picker = gr.Dropdown([], multiselect=True, label="runs to overlay")
    overlay = gr.Plot(show_label=False, elem_id="overlay-plot")

    def to_csv(history: RunHistory) -> str:
        path = Path(tempfile.mkdtemp()) / "kvviz-history.csv"
        history.table().to_csv(path, index=False)
        return str(path)

    def overlay_runs(history: RunHistory, picked):
        frame = history.overlay(picked)
        if frame is None:
            return plot(figures.empty("pick runs to overlay"))
        return plot(figures.token_latency(frame, "Per-token latency of the chosen runs"))

    table.change(to_csv, runs, download, api_visibility="private", concurrency_limit=None)
    run_picker.change(overlay_runs, [runs, run_picker], overlay, api_visibility="private", concurrency_limit=None,
                      preprocess=False)
    return HistoryTab(table, run_picker)
