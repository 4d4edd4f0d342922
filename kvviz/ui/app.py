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

from kvviz.base.errors import first_line
from kvviz.base.inputs import whole_number
from kvviz.calc.dtypes import KV_DTYPES
from kvviz.calc.hardware import ACCELERATORS
from kvviz.calc.presets import preset_names
from kvviz.engine.hosting import HostPolicy
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


def _error(exc: Exception) -> gr.Error:
    """The page's (and the API's) message for a refusal: the first line, never a traceback, never huge."""
    return gr.Error(first_line(exc), print_exception=False)


@dataclass
class CalculatorTab:
    inputs: list
    outputs: list
    run: object  # the handler, for the page's first load


def calc_outputs(*values):
    """The calculator's outputs for one position of its controls; bad input becomes a message in the page."""
    try:
        r = calculate(*values)
    except ValueError as exc:
        raise _error(exc) from None
    return (r.summary, r.formula, _plot(r.memory_fig), _plot(r.curves_fig), _plot(r.attention_fig),
            _plot(r.window_fig), _plot(r.roofline_fig), r.details)


def calculator_tab(policy: HostPolicy) -> CalculatorTab:
    """Controls, readouts and figures of the KV-cache calculator, wired to kvviz.ui.calculator.

    Its events take the values as sent (preprocess=False): the handler checks them itself, so a wrong
    type from the API gets the same clear message as a wrong value. Hosted, the config box takes hub
    ids only, and the calculator bypasses the queue: a queue full of generations never blocks it.
    """
    gr.Markdown(CALCULATOR_INTRO)
    d = INPUT_DEFAULTS
    layers0, kv0, hd0 = preset_dims(d["preset"])
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            preset = gr.Dropdown(preset_names(), value=d["preset"], label="preset (sets the sliders)",
                                 elem_id="calc-preset")
            source = gr.Textbox(label="or a hub id (Enter to load)" if policy.hosted else
                                "or a config.json path or hub id (Enter to load)", max_lines=1,
                                placeholder="Qwen/Qwen2.5-0.5B-Instruct" if policy.hosted else
                                "Qwen/Qwen2.5-0.5B-Instruct or /path/to/config.json")
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

    def run(*values):
        try:
            values = (values[0], policy.check_source(values[1]), *values[2:])
        except ValueError as exc:
            raise _error(exc) from None
        return calc_outputs(*values)

    def dims_of_preset(name):
        try:
            return preset_dims(name)
        except ValueError as exc:  # an unknown preset name from the API
            raise _error(exc) from None

    def dims_of_source(name, source):
        from kvviz.ui.calculator import resolve

        try:
            source = policy.check_source(source)
            arch = resolve(name, source, 1, 1, 1) if source else None
        except ValueError as exc:
            raise _error(exc) from None
        return (gr.skip(),) * 3 if arch is None else (arch.num_layers, arch.num_kv_heads, arch.head_dim)

    common = dict(concurrency_limit=None, preprocess=False, queue=not policy.hosted)
    # Every control recomputes at once; only the latest position matters while a slider is dragged.
    gr.on([c.change for c in (batch, seq_len, layers, kv_heads, head_dim, kv_dtype, accelerator, mem_util,
                               block_size)],
          run, inputs, outputs, api_name="kv_memory", trigger_mode="always_last", show_progress="hidden", **common)
    preset.change(dims_of_preset, preset, [layers, kv_heads, head_dim], api_visibility="private", **common).then(
        run, inputs, outputs, api_visibility="private", show_progress="hidden", **common)
    source.submit(dims_of_source, [preset, source], [layers, kv_heads, head_dim], api_visibility="private",
                  **common).then(run, inputs, outputs, api_visibility="private", show_progress="hidden", **common)
    return CalculatorTab(inputs, outputs, run)


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
LAST_KEPT = 64  # API callers never trigger the drawing step that collects a record: keep only the newest


def _keep_last(session: str, record) -> None:
    """Hold a session's finished run for the drawing step that follows it, dropping the oldest beyond
    LAST_KEPT, so clients that only call the API cannot grow the server's memory without end."""
    _LAST.pop(session, None)
    _LAST[session] = record
    while len(_LAST) > LAST_KEPT:
        _LAST.pop(next(iter(_LAST)))
TEXT_INTERVAL_S = 0.2  # streamed text reaches the page five times a second
PLOT_INTERVAL_S = 1.0  # live plots redraw once a second, and once more at the end


def _start(kind: str, spec: object, req, policy: HostPolicy):
    """Start a job on the device worker process: (the job, the model spec it loads). A model the host
    does not offer is refused at once."""
    from kvviz.ui.worker import start_job

    try:
        spec = policy.check_model(spec)
        return start_job(kind, spec, req, policy.request_time_limit_s, policy.hosted), spec
    except ValueError as exc:
        raise _error(exc) from None


def _request(policy: HostPolicy, prompt, max_new_tokens, temperature=None, top_k=None, top_p=None, seed=None,
             chat_template=True, use_cache=True):
    """The GenerationRequest for the values the page or the API sent, as sent; gr.Error for the first bad one.

    None (a cleared field) means the default: greedy, no top-k, no top-p, no seed; so do "" and -1 for the seed.
    """
    from kvviz.engine.request import GenerationRequest

    try:
        return GenerationRequest.from_untrusted(
            prompt, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
            chat_template=chat_template, use_cache=use_cache, policy=policy)
    except ValueError as exc:
        raise _error(exc) from None


def _time_limit_message(job) -> str:
    return f"stopped by the time limit: this demo allows {job.time_limit_s:g} s per request"


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


def _model_picker(policy: HostPolicy, default_model: str, **kw) -> gr.Dropdown:
    """The model dropdown: anything locally; hosted, only what the host offers (the server checks again)."""
    if policy.hosted:
        return gr.Dropdown(policy.model_choices(), value=default_model, allow_custom_value=False,
                           label="model (what this hosted demo offers)", **kw)
    return gr.Dropdown(MODEL_CHOICES, value=default_model, allow_custom_value=True,
                       label="model (bundled tiny, random:<preset> twins, a hub id or a local folder)", **kw)


def _max_new_slider(policy: HostPolicy, top: int, **kw) -> gr.Slider:
    top = min(top, policy.max_new_tokens) if policy.hosted else top
    return gr.Slider(1, top, value=min(128, top), step=1, label="max new tokens", **kw)


def generation_tab(default_model: str, policy: HostPolicy, history: gr.State, lifecycle_fig: gr.Plot,
                   ttft_fig: gr.Plot, history_table: gr.DataFrame, run_picker: gr.Dropdown) -> None:
    """Model picker, prompt, sampling settings, streaming text and live plots, Stop.

    Generate takes its values as sent (preprocess=False) and checks them itself, with the host's limits.
    """
    from kvviz.ui import figures
    from kvviz.ui.live import RunRecord, Throttle
    from kvviz.ui.worker import Failed, Loaded, Progress

    gr.Markdown(GENERATION_INTRO)
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            model = _model_picker(policy, default_model, elem_id="gen-model")
            prompt = gr.Textbox(label="prompt", lines=3, value=EXAMPLE_PROMPTS[0], elem_id="gen-prompt")
            # A Dataset with a checked handler rather than gr.Examples, whose own handler fails without a
            # message on an example index that does not exist (anyone can send one over HTTP).
            examples = gr.Dataset(components=[prompt], samples=[[p] for p in EXAMPLE_PROMPTS], label="examples",
                                  type="index")
            max_new = _max_new_slider(policy, 1024, elem_id="gen-max-new")
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
        req = _request(policy, prompt, max_new, temperature, top_k, top_p, seed, chat, use_cache)
        job, spec = _start("generate", spec, req, policy)
        session = _session(request)
        _ACTIVE[session] = job
        record = RunRecord(model=spec, mode=req.mode, prompt=req.prompt)
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
            # Stop pressed: the job is done already. The tab closed or the client cancelled: Gradio closes
            # this generator from its event loop, so the job is stopped (within a token) and drained on a
            # thread of its own rather than waited for here, which would stall the whole server meanwhile.
            job.abandon()
            if _ACTIVE.get(session) is job:
                del _ACTIVE[session]
        if failure is not None:
            raise _error(ValueError(failure.message))
        if record.summary is None or (job.timed_out and not record.summary.new_tokens):  # failed, or timed out early
            raise _error(ValueError(_time_limit_message(job) if job.timed_out else
                                    (record.finish and record.finish.error) or "the run ended without a result"))
        _keep_last(session, record)
        metrics, details = _metrics_markdown(record), {"lesson": record.summary.lesson(),
                                                        "summary": record.summary.as_dict(), "text": record.text}
        if job.timed_out:
            metrics += f"\n\n**{_time_limit_message(job).capitalize()}.**"
            details["stopped_by"] = "time_limit"
        yield record.text, metrics, *latest, details

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

    def pick_example(index):
        try:
            return EXAMPLE_PROMPTS[whole_number(index, "example", 0, len(EXAMPLE_PROMPTS) - 1)]
        except ValueError as exc:
            raise _error(exc) from None

    def halt(request: gr.Request):
        background = _ACTIVE.get(_session(request))
        if background is not None:
            background.stop()

    go.click(run, [model, prompt, max_new, temperature, top_k, top_p, seed, chat, use_cache],
             [text, metrics, latency, kv, details], api_name="generate", concurrency_id=DEVICE,
             concurrency_limit=1, preprocess=False).then(
        publish, history, [lifecycle_fig, ttft_fig, history, history_table, run_picker], api_visibility="private",
        concurrency_limit=None)
    stop.click(halt, None, None, api_name="stop", concurrency_limit=None, queue=False)
    examples.click(pick_example, examples, prompt, api_name="load_example", api_visibility="private", queue=False,
                   preprocess=False, show_progress="hidden")


def _session(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "api"


def _history_frame(state: dict):
    import pandas as pd

    return pd.DataFrame(state.get("history", []))


def compare_tab(default_model: str, policy: HostPolicy) -> None:
    """Both modes side by side: texts, per-token latency, total time, the prediction, agreement."""
    from kvviz.engine.compare import Comparison
    from kvviz.ui import figures
    from kvviz.ui.worker import Failed, Loaded, Progress

    gr.Markdown(COMPARE_INTRO)
    with gr.Row():
        model = _model_picker(policy, default_model, scale=2)
        prompt = gr.Textbox(label="prompt", value=EXAMPLE_PROMPTS[1], scale=3)  # a long answer: a clear curve
        max_new = _max_new_slider(policy, 512, scale=2)
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
        req = _request(policy, prompt, max_new)
        job, _ = _start("compare", spec, req, policy)
        result = loaded = failure = None
        try:
            while not job.done:
                for item in job.drain(0.25):
                    if isinstance(item, Progress):
                        progress(item.fraction / 2, desc=item.message)
                    elif isinstance(item, Loaded):
                        loaded = item
                        progress(0.5, desc="running both modes (after a warm-up)")
                    elif isinstance(item, Failed):
                        failure = item
                    elif isinstance(item, Comparison):
                        result = item
                if not job.done:
                    # Nothing to show until both modes ran, but a generator that yields can be closed by Gradio
                    # when the tab goes away or the call is cancelled (and the finally below stops the job);
                    # a plain function would hold the device to its end.
                    yield (gr.skip(),) * 6
        finally:
            job.abandon()  # a cancelled call, a closed tab, an error here, the app shutting down: free the device
        if job.timed_out and result is None:
            raise _error(ValueError(_time_limit_message(job)))
        if failure is not None:
            raise _error(ValueError(failure.message))
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
        yield (md, result.cached_text, result.uncached_text,
               _plot(figures.token_latency(result.rows, "Per-token latency, cached against uncached")),
               _plot(figures.cumulative_time(result.rows, result.prediction)),
               _plot(figures.step_work(result.prediction)))

    go.click(run, [model, prompt, max_new], [verdict, cached_text, uncached_text, latency, cumulative, work],
             api_name="compare", concurrency_id=DEVICE, concurrency_limit=1, preprocess=False)


def build_app(default_model: str = "tiny", policy: HostPolicy | None = None) -> gr.Blocks:
    """The whole app. Nothing heavy happens at build time: models load on first use.

    policy: what a hosted demo allows (kvviz.engine.hosting); the default allows everything. Launch the
    result with demo.queue(max_size=policy.queue_max_size) so the queue is bounded when hosted.
    """
    from kvviz.ui import figures

    policy = policy or HostPolicy()
    default_model = policy.check_model(default_model)  # PolicyError at start-up, not on the first click
    with gr.Blocks(title="kvviz: how LLM inference really behaves") as demo:
        gr.Markdown("# kvviz\nSee how LLM inference really behaves: the KV cache, prefill and decode, TTFT and TPOT.")
        if policy.hosted:
            gr.Markdown(policy.note(), elem_id="hosted-note")
        history = gr.State({"rows": {}, "history": []})
        with gr.Tab("KV-cache calculator"):
            calc = calculator_tab(policy)
        with gr.Tab("Live generation"):
            gen_slot = gr.Column()
        with gr.Tab("Cached vs uncached"):
            compare_tab(default_model, policy)
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
            generation_tab(default_model, policy, history, lifecycle_fig, ttft_fig, history_table, run_picker)

        def to_csv(state):
            import tempfile

            path = Path(tempfile.mkdtemp()) / "kvviz-history.csv"
            _history_frame(state).to_csv(path, index=False)
            return str(path)

        def overlay_runs(state, picked):
            import pandas as pd

            rows = state.get("rows", {})
            frames = [pd.DataFrame(rows[run_id]) for run_id in _run_ids(picked) if run_id in rows]
            if not frames:
                return _plot(figures.empty("pick runs to overlay"))
            return _plot(figures.token_latency(pd.concat(frames), "Per-token latency of the chosen runs"))

        history_table.change(to_csv, history, download, api_visibility="private", concurrency_limit=None)
        run_picker.change(overlay_runs, [history, run_picker], overlay, api_visibility="private",
                          concurrency_limit=None, preprocess=False)
        demo.load(calc.run, calc.inputs, calc.outputs, api_visibility="private", show_progress="hidden",
                  preprocess=False, queue=not policy.hosted)
    _name_missing_inputs(demo)
    return demo


def _name_missing_inputs(demo: gr.Blocks) -> None:
    """Make a call with too few values (possible over raw HTTP) get a message, not Gradio's bare "Error".

    Gradio checks the count in Blocks.validate_inputs and raises a plain ValueError, which it hides
    from the caller; this instance's check raises gr.Error instead. Extra values stay ignored, as
    Gradio ignores them.
    """
    def validate_inputs(block_fn, inputs: list) -> None:
        if len(inputs) < len(block_fn.inputs):
            raise gr.Error(f"this endpoint takes {len(block_fn.inputs)} values; {len(inputs)} were sent",
                           print_exception=False)

    demo.validate_inputs = validate_inputs


def _run_ids(picked: object) -> list[int]:
    """The run ids in the overlay picker's value as sent; anything that is not one is ignored."""
    items = picked if isinstance(picked, list) else []
    return [int(r) for r in items if isinstance(r, (str, int)) and not isinstance(r, bool) and str(r).isdecimal()
            and len(str(r)) < 12]
