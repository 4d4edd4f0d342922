"""The Gradio app: one builder per tab, then the Blocks that holds them.

Layout and event wiring only. What a control computes lives in the pure handlers beside this module
(kvviz.ui.calculator) and in kvviz's core; a handler's ValueError becomes a message in the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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
            preset = gr.Dropdown(preset_names(), value=d["preset"], label="preset (sets the sliders)",
                                 elem_id="calc-preset")
            source = gr.Textbox(label="or a config.json path or hub id (Enter to load)", max_lines=1,
                                placeholder="Qwen/Qwen2.5-0.5B-Instruct or /path/to/config.json")
            batch = gr.Slider(1, 512, value=d["batch"], step=1, label="batch (sequences at once)", elem_id="calc-batch")
            seq_len = gr.Slider(1, 262_144, value=d["seq_len"], step=1, label="seq_len (tokens per sequence)")
            layers = gr.Slider(1, 128, value=layers0, step=1, label="layers")
            kv_heads = gr.Slider(1, 128, value=kv0, step=1, label="kv_heads (must divide the query heads)",
                                 elem_id="calc-kv-heads")
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

    run = calc_outputs
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


GENERATION_INTRO = """
A request's life: it arrives, waits for the device, is tokenized, then **prefill** reads the whole
prompt in one forward pass (many tokens at once: bound by compute) and samples the first token. Then
**decode** feeds one token at a time, reading every weight and the whole KV cache for each (bound by
memory bandwidth). **TTFT** (time to first token) is queue + tokenization + prefill; **TPOT** (time per
output token) is the mean gap after it; **tokens/s** is new tokens over the whole request. Batching
more requests raises throughput but lengthens each one's TPOT; a long prompt lengthens TTFT.
"""

COMPARE_INTRO = """
Without the cache every step re-reads the whole sequence: step *n* costs a prefill of *n* tokens, so
per-token time grows with position and total time grows quadratically. With the cache a step feeds
one token and reads the stored keys and values: per-token time stays nearly flat and total time
grows linearly. Both runs use the same prompt, settings and device, after a warm-up. In fp32 the
tokens are identical; in bf16/fp16 they may part, because the two modes multiply matrices of
different shapes, and the first position where they do is reported.
"""

LIFECYCLE_INTRO = """
The latest run from the live-generation tab, on one time axis. A slow first token points at its
cause: a long **queue** (the device was busy), a long **prefill** (a long prompt, or a cold model), or
tokenization. Decode ticks that spread apart mean each step is getting slower (no cache, or a growing one).
"""

MODEL_CHOICES = ["tiny", "random:smollm2-135m", "random:qwen2.5-0.5b", "random:qwen3-0.6b", "random:gpt2",
                 "random:tinyllama-1.1b", "Qwen/Qwen2.5-0.5B-Instruct"]
EXAMPLE_PROMPTS = ["用三句话解释 LLM 推理中的 KV Cache。", "What is a package?", "The kernel",
                   "Explain what the kernel does."]
DEVICE = "device"  # concurrency id: everything that runs a model queues on the one device
_ACTIVE: dict[str, object] = {}  # session -> its running WorkerJob, so Stop can reach it
_LAST: dict[str, object] = {}  # session -> its finished RunRecord, for the tabs drawn after a run
TEXT_INTERVAL_S = 0.2  # streamed text reaches the page five times a second
PLOT_INTERVAL_S = 1.0  # live plots redraw once a second, and once more at the end


def _error(exc: Exception) -> gr.Error:
    return gr.Error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, print_exception=False)


def _start(kind: str, spec: str, req):
    """Start a job on the device worker process; a malformed request is refused at once."""
    from kvviz.ui.worker import device_worker

    spec = (spec or "").strip()
    if not spec:
        raise gr.Error("no model given", print_exception=False)
    try:
        return device_worker().start(kind, spec, req)
    except ValueError as exc:
        raise _error(exc) from exc


def _request(prompt, max_new_tokens, temperature, top_k, top_p, seed, chat_template, use_cache):
    from kvviz.engine import GenerationRequest

    def whole(value, name):
        try:
            if isinstance(value, bool) or float(value) != int(value):
                raise ValueError
            return int(value)
        except (TypeError, ValueError, OverflowError):
            raise gr.Error(f"{name} must be a whole number, got {value!r}", print_exception=False) from None

    def number(value, name, default):
        try:
            return default if value is None else float(value)
        except (TypeError, ValueError):
            raise gr.Error(f"{name} must be a number, got {value!r}", print_exception=False) from None

    if not isinstance(prompt, str) and prompt is not None:
        raise gr.Error("the prompt must be text", print_exception=False)
    seed = None if seed in (None, "", -1) else whole(seed, "seed")
    return GenerationRequest(prompt=prompt or "", max_new_tokens=whole(max_new_tokens, "max_new_tokens"),
                             use_cache=bool(use_cache), temperature=number(temperature, "temperature", 0.0),
                             top_k=whole(top_k or 0, "top_k"), top_p=number(top_p, "top_p", 1.0),
                             seed=seed, chat_template=bool(chat_template))


def _metrics_markdown(record) -> str:
    s = record.summary
    if s is None:
        return f"**{record.finish.reason}**: {record.finish.error}" if record.finish else "running…"
    bw = (f"{s.bandwidth_achieved / 1e9:,.2f} GB/s, {s.bandwidth_utilisation:.0%} of {s.bandwidth_bound / 1e9:,.1f}"
          if s.bandwidth_achieved else "n/a")

    def ms(x):
        return "n/a" if x is None else f"{x * 1e3:,.2f} ms"

    lines = [
        "| TTFT | TPOT | tokens/s | decode tokens/s | ITL p50 / p90 / p99 | queue | prefill | bandwidth |",
        "|---|---|---|---|---|---|---|---|",
        f"| {ms(s.ttft_s)} | {ms(s.tpot_s)} | {s.tokens_per_s or 0:,.1f} | {s.decode_tokens_per_s or 0:,.1f} | "
        f"{ms(s.itl_p50_s)} / {ms(s.itl_p90_s)} / {ms(s.itl_p99_s)} | {ms(s.queue_s)} | {ms(s.prefill_s)} | {bw} |",
        "",
        f"run {record.run_id}: {s.model} on {s.device} in {s.dtype}, {s.mode}; {s.prompt_tokens} prompt tokens, "
        f"{s.new_tokens} new, finished by {s.finish_reason}.",
    ]
    if s.prefill_tokens_per_s and s.decode_tokens_per_s:
        lines.append(
            f"Prefill read {s.prompt_tokens} prompt tokens in {ms(s.prefill_s)} "
            f"({s.prefill_tokens_per_s:,.0f} tokens/s); "
            f"decode then made one token every {ms(s.tpot_s)} ({s.decode_tokens_per_s:,.0f} tokens/s). Prefill "
            f"moves {s.prefill_tokens_per_s / s.decode_tokens_per_s:,.1f}× more tokens per second because it "
            "multiplies every weight by all prompt tokens at once, while each decode step reads every weight "
            "(and the cache) for a single token.")
    if record.cpu_threads:
        lines.append(f"The device worker runs this model with {record.cpu_threads} torch thread(s) on this CPU.")
    if record.random_weights:
        lines.append("*Random weights: the timing and memory are real, the text is noise.*")
    return "\n".join(lines)


def generation_tab(default_model: str, history: gr.State, lifecycle_fig: gr.Plot, ttft_fig: gr.Plot,
                   history_table: gr.DataFrame, run_picker: gr.Dropdown) -> None:
    """Model picker, prompt, sampling settings, streaming text and live plots, Stop."""
    from kvviz.ui import figures
    from kvviz.ui.live import RunRecord, Throttle
    from kvviz.ui.worker import Failed, Loaded, Progress

    gr.Markdown(GENERATION_INTRO)
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            model = gr.Dropdown(MODEL_CHOICES, value=default_model, allow_custom_value=True, elem_id="gen-model",
                                label="model (bundled tiny, random:<preset> twins, a hub id or a local folder)")
            prompt = gr.Textbox(label="prompt", lines=3, value=EXAMPLE_PROMPTS[0], elem_id="gen-prompt")
            gr.Examples([[p] for p in EXAMPLE_PROMPTS], [prompt], label="examples")
            max_new = gr.Slider(1, 1024, value=128, step=1, label="max new tokens", elem_id="gen-max-new")
            use_cache = gr.Checkbox(True, label="use the KV cache")
            chat = gr.Checkbox(True, label="apply the chat template (when the tokenizer has one)")
            with gr.Accordion("sampling", open=False):
                temperature = gr.Slider(0, 2, value=0, step=0.05, label="temperature (0 = greedy)")
                top_k = gr.Slider(0, 200, value=0, step=1, label="top-k (0 = off)")
                top_p = gr.Slider(0.01, 1, value=1, step=0.01, label="top-p")
                seed = gr.Number(value=0, precision=0, label="seed")
            with gr.Row():
                go = gr.Button("Generate", variant="primary", elem_id="generate-btn")
                stop = gr.Button("Stop", variant="stop", elem_id="stop-btn")
        with gr.Column(scale=2):
            text = gr.Textbox(label="output (streams as it is generated)", lines=8, elem_id="gen-text")
            metrics = gr.Markdown(elem_id="gen-metrics")
            latency = gr.Plot(show_label=False, elem_id="latency-plot")
            kv = gr.Plot(show_label=False)
    with gr.Accordion("this run as JSON (summary with the lesson's keys)", open=False):
        details = gr.JSON(label="run")

    def run(spec, prompt, max_new, temperature, top_k, top_p, seed, chat, use_cache, request: gr.Request,
            progress=gr.Progress()):
        req = _request(prompt, max_new, temperature, top_k, top_p, seed, chat, use_cache)
        job = _start("generate", spec, req)
        session = _session(request)
        _ACTIVE[session] = job
        record = RunRecord(model=str(spec).strip(), mode=req.mode, prompt=req.prompt)
        plots = Throttle(PLOT_INTERVAL_S)
        latest = (None, None)
        failure = None
        try:
            while not job.done:
                for item in job.drain(TEXT_INTERVAL_S):
                    if isinstance(item, Progress):
                        progress(item.fraction, desc=item.message)
                    elif isinstance(item, Loaded):
                        record.model, record.random_weights = item.spec, item.random_weights
                        record.cpu_threads = item.cpu_threads
                    elif isinstance(item, Failed):
                        failure = item
                    else:
                        record.add(item)
                if failure is not None:
                    continue
                if job.done or plots.due():
                    frame = record.frame
                    latest = (_plot(figures.token_latency(frame)), _plot(figures.kv_growth(frame)))
                # Unchanged values, not gr.skip(): Gradio rebuilds a component's config for every skip,
                # which costs more than the model's own step on a small model.
                yield record.text, _metrics_markdown(record), *latest, None
        finally:
            job.stop()  # Stop pressed, tab closed or error: free the device within a token
            job.wait(60)
            _ACTIVE.pop(session, None)
        if failure is not None:
            raise gr.Error(failure.message.splitlines()[0], print_exception=False)
        _LAST[session] = record
        if record.finish and record.finish.error and record.summary is None:
            raise gr.Error(record.finish.error, print_exception=False)
        yield (record.text, _metrics_markdown(record), *latest,
               {"lesson": record.summary.lesson(), "summary": record.summary.as_dict(), "text": record.text})

    def publish(state, request: gr.Request):
        """After a run: the life-cycle tab, the history table and the overlay picker."""
        record = _LAST.pop(_session(request), None)
        if record is None or record.summary is None:
            return gr.skip(), gr.skip(), state, gr.skip(), gr.skip()
        frame = record.frame
        state = {"rows": {**state.get("rows", {}), record.run_id: frame.to_dict(orient="list")},
                 "history": [*state.get("history", []), record.history_row()]}
        runs = [str(r) for r in state["rows"]]
        return (_plot(figures.lifecycle(record.phases, frame)), _plot(figures.ttft_parts(record.phases, frame)),
                state, _history_frame(state), gr.update(choices=runs, value=runs[-2:]))

    def halt(request: gr.Request):
        background = _ACTIVE.get(_session(request))
        if background is not None:
            background.stop()

    go.click(run, [model, prompt, max_new, temperature, top_k, top_p, seed, chat, use_cache],
             [text, metrics, latency, kv, details], api_name="generate", concurrency_id=DEVICE,
             concurrency_limit=1).then(publish, history, [lifecycle_fig, ttft_fig, history, history_table, run_picker],
                                       api_visibility="private", concurrency_limit=None)
    stop.click(halt, None, None, api_name="stop", concurrency_limit=None, queue=False)


def _session(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "api"


def _history_frame(state: dict):
    import pandas as pd

    return pd.DataFrame(state.get("history", []))


def compare_tab(default_model: str) -> None:
    """Both modes side by side: texts, per-token latency, total time, the prediction, agreement."""
    from kvviz.compare import Comparison
    from kvviz.ui import figures
    from kvviz.ui.worker import Failed, Loaded, Progress

    gr.Markdown(COMPARE_INTRO)
    with gr.Row():
        model = gr.Dropdown(MODEL_CHOICES, value=default_model, allow_custom_value=True, label="model", scale=2)
        prompt = gr.Textbox(label="prompt", value=EXAMPLE_PROMPTS[1], scale=3)  # a long answer: a clear curve
        max_new = gr.Slider(1, 512, value=128, step=1, label="max new tokens", scale=2)
        go = gr.Button("Compare", variant="primary", elem_id="compare-btn", scale=1)
    verdict = gr.Markdown(elem_id="compare-verdict")
    with gr.Row():
        cached_text = gr.Textbox(label="with the KV cache", lines=6)
        uncached_text = gr.Textbox(label="without the cache", lines=6)
    with gr.Row():
        latency = gr.Plot(show_label=False)
        cumulative = gr.Plot(show_label=False)
    work = gr.Plot(show_label=False)

    def run(spec, prompt, max_new, progress=gr.Progress()):
        req = _request(prompt, max_new, 0.0, 0, 1.0, None, True, True)
        job = _start("compare", spec, req)
        result = loaded = None
        while not job.done:
            for item in job.drain(0.25):
                if isinstance(item, Progress):
                    progress(item.fraction / 2, desc=item.message)
                elif isinstance(item, Loaded):
                    loaded = item
                    progress(0.5, desc="running both modes (after a warm-up)")
                elif isinstance(item, Failed):
                    raise gr.Error(item.message.splitlines()[0], print_exception=False)
                elif isinstance(item, Comparison):
                    result = item
        if result is None:
            raise gr.Error("the comparison ended without a result", print_exception=False)
        parted = ("The tokens are identical." if result.tokens_identical else
                  f"The tokens part at position {result.first_divergence}." if result.first_divergence is not None
                  else "The tokens agree where both ran; one run stopped earlier.")
        c, u = result.cached, result.uncached
        md = (f"### {result.speedup:.2f}× faster with the cache"
              + (f" ({result.decode_speedup:.2f}× per decode token)" if result.decode_speedup else "")
              + f"\n{parted} Cached: TPOT {c.tpot_s * 1e3:,.2f} ms, {c.tokens_per_s:,.1f} tokens/s. "
              f"Uncached: TPOT {u.tpot_s * 1e3:,.2f} ms, {u.tokens_per_s:,.1f} tokens/s. "
              f"{loaded.spec} on {loaded.device} in {loaded.dtype}."
              + ("\n\n*Random weights: the timing is real, the text is noise.*" if loaded.random_weights else ""))
        return (md, result.cached_text, result.uncached_text,
                _plot(figures.token_latency(result.rows, "Per-token latency, cached against uncached")),
                _plot(figures.cumulative_time(result.rows, result.prediction)),
                _plot(figures.step_work(result.prediction)))

    go.click(run, [model, prompt, max_new], [verdict, cached_text, uncached_text, latency, cumulative, work],
             api_name="compare", concurrency_id=DEVICE, concurrency_limit=1)


def build_app(default_model: str = "tiny") -> gr.Blocks:
    """The whole app. Nothing heavy happens at build time: models load on first use."""
    from kvviz.ui import figures

    with gr.Blocks(title="kvviz: how LLM inference really behaves") as demo:
        gr.Markdown("# kvviz\nSee how LLM inference really behaves: the KV cache, prefill and decode, TTFT and TPOT.")
        history = gr.State({"rows": {}, "history": []})
        with gr.Tab("KV-cache calculator"):
            calc = calculator_tab()
        with gr.Tab("Live generation"):
            gen_slot = gr.Column()
        with gr.Tab("Cached vs uncached"):
            compare_tab(default_model)
        with gr.Tab("Request lifecycle"):
            gr.Markdown(LIFECYCLE_INTRO)
            lifecycle_fig = gr.Plot(show_label=False, elem_id="lifecycle-plot")
            ttft_fig = gr.Plot(show_label=False)
        with gr.Tab("History"):
            gr.Markdown("Every run of this session. Download it as CSV, or overlay runs' per-token latency.")
            history_table = gr.DataFrame(label="runs", interactive=False)
            with gr.Row():
                download = gr.DownloadButton("Download CSV")
                run_picker = gr.Dropdown([], multiselect=True, label="runs to overlay")
            overlay = gr.Plot(show_label=False)
        with gen_slot:
            generation_tab(default_model, history, lifecycle_fig, ttft_fig, history_table, run_picker)

        def to_csv(state):
            import tempfile

            path = Path(tempfile.mkdtemp()) / "kvviz-history.csv"
            _history_frame(state).to_csv(path, index=False)
            return str(path)

        def overlay_runs(state, picked):
            import pandas as pd

            frames = [pd.DataFrame(state["rows"][int(r)]) for r in picked or [] if int(r) in state.get("rows", {})]
            if not frames:
                return _plot(figures.empty("pick runs to overlay"))
            return _plot(figures.token_latency(pd.concat(frames), "Per-token latency of the chosen runs"))

        history_table.change(to_csv, history, download, api_visibility="private", concurrency_limit=None)
        run_picker.change(overlay_runs, [history, run_picker], overlay, api_visibility="private",
                          concurrency_limit=None)
        demo.load(calc_outputs, calc.inputs, calc.outputs, api_visibility="private",
                  show_progress="hidden")
    return demo

def calc_outputs(*values):
    """The calculator's outputs for one position of its controls; bad input becomes a message in the page."""
    try:
        r = calculate(*values)
    except ValueError as exc:
        raise gr.Error(str(exc), print_exception=False) from exc
    return (r.summary, r.formula, _plot(r.memory_fig), _plot(r.curves_fig), _plot(r.attention_fig),
            _plot(r.window_fig), _plot(r.roofline_fig), r.details)
