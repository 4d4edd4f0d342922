"""The request-lifecycle tab: the latest run on one time axis, and its TTFT split by cause.

It has no controls: build_app draws its two figures after each run of the live-generation tab and each batch
of the batch tab (the batch's shared phases once, then one row per sequence).
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

INTRO = """
The latest run from the live-generation tab, or the latest batch from the batch tab (its shared queue,
tokenization and prefill once, then each sequence's decode to its own end), on one time axis. A slow first
token points at its cause: a long **queue** (the device was busy), a long **prefill** (a long prompt, or a
cold model), or tokenization. Decode ticks that spread apart mean each step is getting slower (no cache, or
a growing one).
"""


@dataclass(frozen=True)
class LifecycleTab:
    timeline: gr.Plot
    ttft: gr.Plot


def lifecycle_tab(lang: gr.Radio) -> LifecycleTab:
    gr.Markdown(INTRO)
    return LifecycleTab(timeline=gr.Plot(show_label=False, elem_id="lifecycle-plot"), ttft=gr.Plot(show_label=False))
