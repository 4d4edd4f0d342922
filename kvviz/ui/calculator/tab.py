"""The KV-cache calculator tab: controls, readouts and figures, wired to kvviz.ui.calculator.answer.calculate.

Its events take the values as sent (preprocess=False): the handler checks them itself, so a wrong type
from the API gets the same clear message as a wrong value. Its API endpoint, /kv_memory, names its
parameters as the CLI does (`python -m kvviz memory --batch ... --gpu ...`), each with the page's default.
Hosted, the config box takes hub ids only, and the calculator bypasses the queue: a queue full of
generations never blocks it.

seq_len is a pair: a slider over log₂ of the length, which a visitor drags from a handful of tokens to 262,144 with
the same care at either end, and a number box holding the exact length, which is the input every other place
sets (the Lesson's "Show me", the API's seq_len). Dragging writes the nearest whole length into the box; a length
typed or set there moves the slider to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gradio as gr

from kvviz.calc.dtypes import KV_DTYPES
from kvviz.calc.hardware import ACCELERATORS
from kvviz.calc.presets import preset_names
from kvviz.engine.hosting import HostPolicy
from kvviz.ui.calculator.answer import INPUT_DEFAULTS, calculate, preset_dims, resolve
from kvviz.ui.common import plot, refusal
from kvviz.ui.lang import L

D = INPUT_DEFAULTS
SEQ_LEN_TOP_LOG2 = 18  # the slider's right end: 2^18 = 262,144 tokens (the box takes longer ones)
SEQ_LEN_STEP = 0.01  # the slider's step in log₂: about 0.7% of the length anywhere on it


def length_at(position: float) -> int:
    """The whole length at a position of the log₂ slider: 2^position, rounded (10 → 1,024)."""
    return max(1, round(2 ** float(position)))


def position_of(length: int) -> float:
    """The log₂ slider's position for a length, on its step and within its ends (1,000 → 9.97)."""
    return min(SEQ_LEN_TOP_LOG2, max(0.0, round(math.log2(max(length, 1)) / SEQ_LEN_STEP) * SEQ_LEN_STEP))


def slider_follows(length: object, position: object):
    """The slider's update after the box changed: moved to the box's length, unless it already stands at a
    position that gives that length (the drag that wrote it), or the box holds no valid length (the calculator
    says why)."""
    try:
        length, position = float(length), float(position)
    except (TypeError, ValueError):
        return gr.skip()
    if not math.isfinite(length) or length < 1 or not math.isfinite(position) or length_at(position) == length:
        return gr.skip()
    return position_of(round(length))


# The calculator's inputs in their order (the /kv_memory endpoint's parameters, as the CLI names them).
INPUT_NAMES = ("preset", "config", "batch", "seq_len", "layers", "kv_heads", "head_dim", "kv_dtype", "gpu", "mem_util",
               "block_size", "tp", "pp", "dp", "lang")


@dataclass(frozen=True)
class CalculatorTab:
    inputs: list[gr.components.Component]
    outputs: list[gr.components.Component]
    answer: object  # the /kv_memory handler, which the page's first load runs too

    def control(self, name: str) -> gr.components.Component:
        """The control of input `name` (INPUT_NAMES), which another tab may set (the Lesson's questions 3 and 4)."""
        return self.inputs[INPUT_NAMES.index(name)]


def calculator_tab(policy: HostPolicy, lang: gr.Radio) -> CalculatorTab:
    """The calculator's layout and events; its handler answers the page and /kv_memory alike."""
    gr.Markdown(L("calc.intro"))
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            preset = gr.Dropdown(preset_names(), value=D["preset"], label=L("calc.preset"),
                                 elem_id="calc-preset")
            config = gr.Textbox(D["config"], max_lines=1,
                                label=L("calc.config.hosted" if policy.hosted else "calc.config.local"),
                                placeholder="Qwen/Qwen2.5-0.5B-Instruct" if policy.hosted else
                                L("calc.config.placeholder"))
            batch = gr.Slider(1, 512, value=D["batch"], step=1, label=L("calc.batch"), elem_id="calc-batch")
            seq_drag = gr.Slider(0, SEQ_LEN_TOP_LOG2, value=position_of(D["seq_len"]), step=SEQ_LEN_STEP,
                                 label=L("calc.seq_len.drag"), elem_id="calc-seq-len-log")
            seq_len = gr.Number(D["seq_len"], precision=0, minimum=1, label=L("calc.seq_len.exact"),
                                elem_id="calc-seq-len")
            layers = gr.Slider(1, 128, value=D["layers"], step=1, label=L("calc.layers"), elem_id="calc-layers")
            kv_heads = gr.Slider(1, 128, value=D["kv_heads"], step=1, label=L("calc.kv_heads"),
                                 elem_id="calc-kv-heads")
            head_dim = gr.Slider(1, 512, value=D["head_dim"], step=1, label=L("calc.head_dim"))
            kv_dtype = gr.Dropdown(list(KV_DTYPES), value=D["kv_dtype"], label=L("calc.kv_dtype"),
                                   elem_id="calc-kv-dtype")
            gpu = gr.Dropdown([(a.name, k) for k, a in ACCELERATORS.items()] + [(L("calc.cpu"), "cpu")],
                              value=D["gpu"], label=L("calc.accelerator"))
            mem_util = gr.Slider(0.05, 1.0, value=D["mem_util"], step=0.01, label=L("calc.mem_util"))
            block_size = gr.Slider(1, 256, value=D["block_size"], step=1, label=L("calc.block_size"))
            gr.Markdown(L("calc.gpus_note"), elem_id="calc-gpus-note")
            # One under another, as the sliders above: three abreast in this column clipped the third.
            tp = gr.Slider(1, 64, value=D["tp"], step=1, label="tp", elem_id="calc-tp")
            pp = gr.Slider(1, 64, value=D["pp"], step=1, label="pp", elem_id="calc-pp")
            dp = gr.Slider(1, 64, value=D["dp"], step=1, label="dp", elem_id="calc-dp")
        with gr.Column(scale=2):
            summary = gr.Markdown(elem_id="calc-summary")
            memory_fig = gr.Plot(show_label=False)
            with gr.Accordion(L("calc.formulas_title"), open=False):
                formula = gr.Code(language=None, label=L("calc.formulas"), elem_id="calc-formula", wrap_lines=True)
    with gr.Row():
        curves_fig = gr.Plot(show_label=False)
        attention_fig = gr.Plot(show_label=False)
    with gr.Row():
        window_fig = gr.Plot(show_label=False)
        roofline_fig = gr.Plot(show_label=False)
    with gr.Accordion(L("calc.json_title"), open=False):
        details = gr.JSON(label=L("calc.json"))

    inputs = [preset, config, batch, seq_len, layers, kv_heads, head_dim, kv_dtype, gpu, mem_util, block_size, tp, pp,
              dp, lang]
    outputs = [summary, formula, memory_fig, curves_fig, attention_fig, window_fig, roofline_fig, details]

    def kv_memory(preset=D["preset"], config=D["config"], batch=D["batch"], seq_len=D["seq_len"], layers=D["layers"],
                  kv_heads=D["kv_heads"], head_dim=D["head_dim"], kv_dtype=D["kv_dtype"], gpu=D["gpu"],
                  mem_util=D["mem_util"], block_size=D["block_size"], tp=D["tp"], pp=D["pp"], dp=D["dp"], lang="en"):
        """The KV cache's size and what fits, for a model (a preset, or a config.json path or hub id) and a
        batch × seq_len on tp × pp × dp GPUs, with the figures the page draws and the report
        `python -m kvviz memory --json` prints; its text and figures in `lang` ("en" or "zh")."""
        try:
            r = calculate(preset, policy.check_source(config), batch, seq_len, layers, kv_heads, head_dim, kv_dtype,
                          gpu, mem_util, block_size, tp, pp, dp, lang=lang)
        except ValueError as exc:
            raise refusal(exc, lang) from None
        return (r.summary, r.formula, plot(r.memory_fig), plot(r.curves_fig), plot(r.attention_fig),
                plot(r.window_fig), plot(r.roofline_fig), r.details)

    def dims_of_preset(preset, lang="en"):
        try:
            return preset_dims(preset)
        except ValueError as exc:  # an unknown preset name from the API
            raise refusal(exc, lang) from None

    def dims_of_source(preset, config, lang="en"):
        try:
            config = policy.check_source(config)
            arch = resolve(preset, config, 1, 1, 1) if config else None
        except ValueError as exc:
            raise refusal(exc, lang) from None
        return (gr.skip(),) * 3 if arch is None else (arch.num_layers, arch.num_kv_heads, arch.head_dim)

    common = dict(concurrency_limit=None, preprocess=False, queue=not policy.hosted)
    # The pair kept in step: a drag (input: the visitor's own move, not the update below) writes the box, and the
    # box moves the slider (its change then recomputes the calculator with the rest).
    seq_drag.input(length_at, seq_drag, seq_len, api_visibility="private", concurrency_limit=None, queue=False,
                   show_progress="hidden")
    seq_len.change(slider_follows, [seq_len, seq_drag], seq_drag, api_visibility="private", queue=False,
                   preprocess=False, show_progress="hidden")
    # Every control recomputes at once; only the latest position matters while a slider is dragged.
    gr.on([c.change for c in (batch, seq_len, layers, kv_heads, head_dim, kv_dtype, gpu, mem_util, block_size, tp, pp,
                              dp)],
          kv_memory, inputs, outputs, api_name="kv_memory", trigger_mode="always_last", show_progress="hidden",
          **common)
    preset.change(dims_of_preset, [preset, lang], [layers, kv_heads, head_dim], api_visibility="private",
                  **common).then(kv_memory, inputs, outputs, api_visibility="private", show_progress="hidden", **common)
    config.submit(dims_of_source, [preset, config, lang], [layers, kv_heads, head_dim], api_visibility="private",
                  **common).then(kv_memory, inputs, outputs, api_visibility="private", show_progress="hidden", **common)
    return CalculatorTab(inputs, outputs, kv_memory)
