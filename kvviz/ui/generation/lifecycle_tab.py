"""The request-lifecycle tab: the latest run on one time axis, and its TTFT split by cause.

It has no controls: build_app draws its two figures after each run of the live-generation tab and each batch
of the batch tab (the batch's shared phases once, then one row per sequence).
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from kvviz.ui.lang import L


@dataclass(frozen=True)
class LifecycleTab:
    timeline: gr.Plot
    ttft: gr.Plot


def lifecycle_tab(lang: gr.Radio) -> LifecycleTab:
    gr.Markdown(L("lifecycle.intro"))
    return LifecycleTab(timeline=gr.Plot(show_label=False, elem_id="lifecycle-plot"), ttft=gr.Plot(show_label=False))
