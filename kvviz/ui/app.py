"""The Gradio app: one builder per tab, then the Blocks that holds them.

Layout and event wiring only. What a control computes lives in the pure handlers beside this module
(kvviz.ui.calculator) and in kvviz's core; a handler's ValueError becomes a message in the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData

from kvviz.dtypes import KV_DTYPES
from kvviz.hardware import ACCELERATORS
from kvviz.presets import preset_names
from kvviz.ui.calculator import INPUT_DEFAULTS, calculate, preset_dims

CALCULATOR_INTRO = """
The KV cache keeps every layer's keys and values so that decoding a token does not recompute the
whole history. It buys that speed with memory:
**bytes = batch × seq_len × layers × 2 (K and V) × kv_heads × head_dim × bytes_per_elem**, linear in each.
Grouped-query attention shrinks `kv_heads`, sliding-window layers cap `seq_len` at the window, and
DeepSeek's latent attention stores one compressed vector per token instead of per-head keys and values.
Pick a preset or give a config.json path or hub id, then move the sliders: every figure below is
recomputed from the same formula, shown with your numbers.
"""


def _plot(fig: dict) -> PlotData:
    """A figure spec as Gradio's plot payload, skipping plotly's slow Python-side validation."""
    return PlotData(type="plotly", plot=json.dumps(fig))


@dataclass
class CalculatorTab:
    inputs: list
    outputs: list


def calculator_tab() -> CalculatorTab:
    """Controls, readouts and figures of the KV-cache calculator, wired to kvviz.ui.calculator."""
    gr.Markdown(CALCULATOR_INTRO)
    d = INPUT_DEFAULTS
    layers0, kv0, hd0 = preset_dims(d["preset"])
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            preset = gr.Dropdown(preset_names(), value=d["preset"], label="preset (sets the sliders)")
            source = gr.Textbox(label="or a config.json path or hub id (Enter to load)", max_lines=1,
                                placeholder="Qwen/Qwen2.5-0.5B-Instruct or /path/to/config.json")
            batch = gr.Slider(1, 512, value=d["batch"], step=1, label="batch (sequences at once)")
            seq_len = gr.Slider(1, 262_144, value=d["seq_len"], step=1, label="seq_len (tokens per sequence)")
            layers = gr.Slider(1, 128, value=layers0, step=1, label="layers")
            kv_heads = gr.Slider(1, 128, value=kv0, step=1, label="kv_heads (must divide the query heads)")
            head_dim = gr.Slider(1, 512, value=hd0, step=1, label="head_dim")
            kv_dtype = gr.Dropdown(list(KV_DTYPES), value=d["kv_dtype"], label="KV dtype")
            accelerator = gr.Dropdown([(a.name, k) for k, a in ACCELERATORS.items()] + [("this CPU (measured)", "cpu")],
                                      value=d["accelerator"], label="accelerator")
            mem_util = gr.Slider(0.05, 1.0, value=d["mem_util"], step=0.01, label="memory utilisation")
            block_size = gr.Slider(1, 256, value=d["block_size"], step=1, label="block size (paged allocation)")
        with gr.Column(scale=2):
            summary = gr.Markdown(elem_id="calc-summary")
            memory_fig = gr.Plot(label="memory on the device", show_label=False)
            with gr.Accordion("the formulas, with your numbers", open=False):
                formula = gr.Code(language=None, label="formulas", elem_id="calc-formula")
    with gr.Row():
        curves_fig = gr.Plot(show_label=False)
        attention_fig = gr.Plot(show_label=False)
    with gr.Row():
        window_fig = gr.Plot(show_label=False)
        roofline_fig = gr.Plot(show_label=False)
    with gr.Accordion("the whole answer as JSON (what `python -m kvviz memory --json` prints)", open=False):
        details = gr.JSON(label="report")

    inputs = [preset, source, batch, seq_len, layers, kv_heads, head_dim, kv_dtype, accelerator, mem_util, block_size]
    outputs = [summary, formula, memory_fig, curves_fig, attention_fig, window_fig, roofline_fig, details]

    def run(*values):
        try:
            r = calculate(*values)
        except ValueError as exc:
            raise gr.Error(str(exc), print_exception=False) from exc
        return (r.summary, r.formula, _plot(r.memory_fig), _plot(r.curves_fig), _plot(r.attention_fig),
                _plot(r.window_fig), _plot(r.roofline_fig), r.details)

    def dims_of_preset(name: str):
        try:
            return preset_dims(name)
        except Exception as exc:  # an unknown preset name from the API
            raise gr.Error(str(exc), print_exception=False) from exc

    def dims_of_source(name: str, text: str, *current):
        from kvviz.ui.calculator import resolve

        try:
            arch = resolve(name, text, 1, 1, 1) if text.strip() else None
        except ValueError as exc:
            raise gr.Error(str(exc), print_exception=False) from exc
        return current if arch is None else (arch.num_layers, arch.num_kv_heads, arch.head_dim)

    # Every control recomputes at once; only the latest position matters while a slider is dragged.
    gr.on([c.change for c in (batch, seq_len, layers, kv_heads, head_dim, kv_dtype, accelerator, mem_util,
                               block_size)],
          run, inputs, outputs, api_name="kv_memory", trigger_mode="always_last", concurrency_limit=None,
          show_progress="hidden")
    preset.change(dims_of_preset, preset, [layers, kv_heads, head_dim], api_visibility="private",
                  concurrency_limit=None).then(run, inputs, outputs, api_visibility="private",
                                               concurrency_limit=None, show_progress="hidden")
    source.submit(dims_of_source, [preset, source, layers, kv_heads, head_dim], [layers, kv_heads, head_dim],
                  api_visibility="private", concurrency_limit=None).then(
        run, inputs, outputs, api_visibility="private", concurrency_limit=None, show_progress="hidden")
    return CalculatorTab(inputs, outputs)


def build_app() -> gr.Blocks:
    """The whole app. Loads nothing heavy at build time: models load on first use."""
    with gr.Blocks(title="kvviz: how LLM inference really behaves") as demo:
        gr.Markdown("# kvviz\nSee how LLM inference really behaves: the KV cache, prefill and decode, TTFT and TPOT.")
        with gr.Tab("KV-cache calculator"):
            calc = calculator_tab()
        demo.load(lambda *v: calc_outputs(*v), calc.inputs, calc.outputs, api_visibility="private",
                  show_progress="hidden")
    return demo


def calc_outputs(*values):
    r = calculate(*values)
    return (r.summary, r.formula, _plot(r.memory_fig), _plot(r.curves_fig), _plot(r.attention_fig),
            _plot(r.window_fig), _plot(r.roofline_fig), r.details)
