"""The history tab: every run of this session as a table, its CSV, and chosen runs' latency overlaid.

The runs live in the page's session state (a kvviz.ui.generation.history.RunHistory), which build_app adds each
finished run to; this tab only reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from kvviz.i18n import t
from kvviz.ui.common import plot
from kvviz.ui.figures import empty
from kvviz.ui.generation import figures
from kvviz.ui.generation.history import CsvExports, RunHistory
from kvviz.ui.lang import L
from kvviz.ui.sessions import session_id


@dataclass(frozen=True)
class HistoryTab:
    table: gr.DataFrame
    run_picker: gr.Dropdown
    exports: CsvExports  # the CSV downloads' files: build_app forgets a session's when its page closes


def history_tab(runs: gr.State, lang: gr.Radio) -> HistoryTab:
    """The table, its download, the overlay picker and plot; `runs` holds the session's RunHistory. The table's
    headers follow the page's language: it is redrawn in it whenever the runs or the language change."""
    gr.Markdown(L("history.intro"))
    table = gr.DataFrame(label=L("history.runs"), interactive=False)
    with gr.Row():
        download = gr.DownloadButton(L("history.download"))
        run_picker = gr.Dropdown([], multiselect=True, label=L("history.pick"))
    overlay = gr.Plot(show_label=False, elem_id="overlay-plot")

    exports = CsvExports()

    def to_csv(history: RunHistory, request: gr.Request):
        return str(exports.write(history, session_id(request)))

    def overlay_runs(history: RunHistory, picked, lang="en"):
        frame = history.overlay(picked)
        if frame is None:
            return plot(empty(t("history.empty", lang)))
        return plot(figures.token_latency(frame, t("history.overlay", lang), lang))

    def show(history: RunHistory, lang="en"):
        return history.view(lang)

    table.change(to_csv, runs, download, api_visibility="private", concurrency_limit=None)
    gr.on([runs.change, lang.change], show, [runs, lang], table, api_visibility="private", concurrency_limit=None,
          show_progress="hidden")
    gr.on([run_picker.change, lang.change], overlay_runs, [runs, run_picker, lang], overlay, api_visibility="private",
          concurrency_limit=None, preprocess=False)
    return HistoryTab(table, run_picker, exports)
