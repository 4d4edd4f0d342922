"""The Serving tab: a real engine under load, measured from outside as a client sees it and as its own
/metrics say, live while the load runs; at the end the sweep's curves, tied to the lesson's questions 5 and 6.

The target is the local vLLM that kvviz starts (kvviz.serving.local, one per app) or any OpenAI-compatible
endpoint (hosted: only those the operator listed). Start checks every value (kvviz.ui.serving_plan) and runs
the job on a thread (kvviz.serving.live); the handler redraws from its progress once a second and ends with
the finished figures, the explanation and the run as JSON. Loads run one at a time in the whole app (two
loads on one server would measure each other). A finished load goes into the history (build_app chains
that step on `finished`) and can be run again on kvviz's own engine, one request at a time, beside it.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import asdict, dataclass

import gradio as gr
import pandas as pd

from kvviz.base.inputs import whole_number
from kvviz.engine.hosting import HostPolicy
from kvviz.serving.endpoint import APIS, COMPLETIONS, EndpointError
from kvviz.serving.live import KINDS, ONE, PREFIX, SWEEP, LiveJob, Outcome
from kvviz.serving.load import CLOSED
from kvviz.serving.local import READY, STARTING, LocalEngine
from kvviz.serving.metrics_reader import server_view
from kvviz.serving.models import model_folder
from kvviz.serving.prompts import load_tokenizer, synthetic
from kvviz.serving.sweep import sweep_frame
from kvviz.serving.vllm import VllmError
from kvviz.ui import figures, serving_figures, serving_text
from kvviz.ui.serving_plan import ARRIVALS, LOCAL, TARGETS, PageValues, plan_from_page
from kvviz.ui.sessions import SessionStore, session_id
from kvviz.ui.tabs.common import DEVICE, no_answer, plot, refusal
from kvviz.ui.worker import Done, Failed, Loaded, Served, Tick, start_load_job
from kvviz.ui.worker import Progress as WorkerProgress

INTRO = """
A request's life on a real server (the lesson's question 1): the client sends it over HTTP, the server queues
it, prefills its prompt, streams each token as it is decoded, and ends the stream. Here kvviz loads a real
engine with many such requests at once, as a service sees them, and measures each one from the client (TTFT,
every token's arrival, E2E) while reading the server's own view from its Prometheus `/metrics` (requests
running and waiting, KV-cache usage, its queue, prefill and decode times). A **sweep** raises the requests in
flight 1, 2, 4, ... until throughput stops growing: the curves show what continuous batching trades (questions
5 and 6). Start vLLM here (its environment: `python -m kvviz.serving setup`), or point the tab at a server.
"""
LOCAL_MODELS = ["tiny", "smollm2-135m-instruct", "random:smollm2-135m", "random:qwen2.5-0.5b", "random:gpt2",
                "random:llama-3-8b@2"]
SERVING = "serving"  # concurrency id: one load at a time in the whole app
REDRAW_S = 1.0
ENGINE_START_WAIT_S = 600.0
LIVE_OUTPUTS = 6  # status and five live plots


@dataclass(frozen=True)
class ServingTab:
    # (an event, the state it leaves its runs in: a dict with "rows" for the history): Start's and the engine
    # comparison's; build_app adds the rows to the history after each
    published: list[tuple[gr.events.Dependency, gr.State]]


def live_update(job: LiveJob, started: float) -> tuple:
    """The page while a job runs: one status line and the five live plots from its progress so far."""
    p = job.progress
    records, arrivals, samples = list(p.records), list(p.arrivals_s), list(p.samples)
    level = f" at {p.concurrency} in flight" if p.concurrency else ""
    done = "" if job.plan.kind == ONE else f"; {len(job.runs)} run(s) finished"
    status = (f"running {job.plan.kind}{level}: {time.monotonic() - started:.0f} s, {len(records)} request(s) "
              f"ended, {len(arrivals):,} output chunks{done}")
    return (status, plot(serving_figures.throughput_over_time(arrivals, samples)),
            plot(serving_figures.requests_over_time(samples)), plot(serving_figures.kv_usage_over_time(samples)),
            plot(serving_figures.request_timeline(records)), plot(serving_figures.ttft_itl(records)))


def final_update(outcome: Outcome) -> tuple:
    """The page once a job ended: the last run's live plots and the end figures, explanation and JSON."""
    runs, kind = outcome.runs, outcome.plan.kind
    last = runs[-1]
    arrivals = [r.sent_s + t for r in last.records for t in r.arrivals_s]
    live = (plot(serving_figures.throughput_over_time(arrivals, last.samples)),
            plot(serving_figures.requests_over_time(last.samples)),
            plot(serving_figures.kv_usage_over_time(last.samples)),
            plot(serving_figures.request_timeline(last.records)), plot(serving_figures.ttft_itl(last.records)))
    lifecycle = plot(serving_figures.client_vs_server(last.records, server_view(last.samples)))
    not_sweep = plot(figures.empty("run a sweep to draw the curves"))
    if kind == SWEEP:
        frame = sweep_frame(runs)
        curves = (plot(serving_figures.sweep_throughput(frame)), plot(serving_figures.sweep_latency(frame)),
                  plot(serving_figures.sweep_tradeoff(frame)))
        text = serving_text.sweep_markdown(frame, list(runs))
    else:
        curves, text = (not_sweep,) * 3, serving_text.run_markdown(last)
    if kind == PREFIX and len(runs) == 2:
        prefix = plot(serving_figures.prefix_cache(runs[0], runs[1]))
        text = serving_text.prefix_markdown(runs[0], runs[1]) + "\n\n" + text
    else:
        prefix = plot(figures.empty("the prefix-cache experiment draws here"))
    if outcome.cancelled:
        text = "**Stopped**: the figures cover what ran before Stop.\n\n" + text
    status = f"{kind} finished: {len(runs)} run(s), {sum(len(r.records) for r in runs)} request(s)"
    return (status, *live, lifecycle, *curves, prefix, text, details(outcome))


def details(outcome: Outcome) -> dict:
    """The job as JSON: the endpoint (never its key), the load, each run's figures and requests."""
    return {"kind": outcome.plan.kind, "endpoint": outcome.runs[-1].endpoint, "cancelled": outcome.cancelled,
            "runs": [{"load": asdict(r.load), "stats": r.stats.flat(), "requests": [x.row() for x in r.records],
                      "server": asdict(v) if (v := server_view(r.samples)) else None,
                      "metrics_error": r.metrics_error} for r in outcome.runs]}


def history_rows(outcome: Outcome) -> list[dict]:
    label = outcome.plan.kind
    return [serving_text.history_row(r, f"{label} c={r.load.concurrency}") for r in outcome.runs]


def serving_tab(policy: HostPolicy, engine: LocalEngine, sessions: SessionStore,
                lang: gr.Radio) -> ServingTab:
    """Target, load, Start/Stop; live plots; the finished figures and their explanation."""
    gr.Markdown(INTRO)
    last = gr.State(None)
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            target = gr.Radio(list(TARGETS), value=LOCAL, label="target", elem_id="serve-target")
            with gr.Group(visible=True) as local_box:
                local_model = gr.Dropdown(policy.model_choices() if policy.hosted else LOCAL_MODELS, value="tiny",
                                          allow_custom_value=not policy.hosted, label="model vLLM serves",
                                          elem_id="serve-local-model")
                kv_space = gr.Slider(1, 2 if policy.hosted else 64, value=1, step=1,
                                     label="KV-cache space, GiB (vLLM's CPU build)")
                with gr.Row():
                    start_engine = gr.Button("Start vLLM", elem_id="serve-start-vllm")
                    stop_engine = gr.Button("Stop vLLM", variant="stop", visible=not policy.hosted)
                engine_status = gr.Markdown(engine.status().line(), elem_id="serve-engine-status")
            with gr.Group(visible=False) as remote_box:
                if policy.hosted:
                    url = gr.Dropdown(list(policy.allowed_endpoints), label="endpoint (what this demo allows)",
                                      value=policy.allowed_endpoints[0] if policy.allowed_endpoints else None)
                else:
                    url = gr.Textbox("http://127.0.0.1:8000", label="endpoint URL (with or without /v1)")
                served = gr.Textbox("", label="model name the server serves (its /v1/models)")
                api = gr.Radio(list(APIS), value=COMPLETIONS, label="API")
                api_key = gr.Textbox("", type="password", label="API key (or set KVVIZ_API_KEY); never logged or saved")
                tokenizer = gr.Textbox("", label="the served model's local folder (counts prompt tokens, predicts "
                                       "KV usage; optional)", visible=not policy.hosted)
            kind = gr.Radio(list(KINDS), value=ONE, label="what to run", elem_id="serve-kind")
            with gr.Accordion("load", open=True):
                arrivals = gr.Radio(list(ARRIVALS), value=next(iter(ARRIVALS)), label="arrivals (one load)")
                top = policy.max_concurrency if policy.hosted else 256
                concurrency = gr.Slider(1, top, value=min(8, top), step=1, label="requests in flight (at most)",
                                        elem_id="serve-concurrency")
                rate = gr.Number(4.0, label="request rate, requests/s (open loop)")
                prompt_tokens = gr.Slider(1, min(policy.max_prompt_tokens, 1000) if policy.hosted else 1000,
                                          value=16, step=1, label="prompt tokens", elem_id="serve-prompt-tokens")
                shared_prefix = gr.Slider(0, 999, value=0, step=1, label="of which shared by every prompt (prefix)",
                                          elem_id="serve-shared-prefix")
                output_tokens = gr.Slider(1, policy.max_new_tokens if policy.hosted else 1024, value=128, step=1,
                                          label="output tokens per request (ignore_eos)", elem_id="serve-output-tokens")
                requests = gr.Slider(1, policy.max_requests if policy.hosted else 2000, value=32, step=1,
                                     label="requests in all (one load, each experiment run)", elem_id="serve-requests")
                duration = gr.Number(min(120.0, policy.time_limit_s) if policy.hosted else 120.0,
                                     label="stop sending after, s")
                max_concurrency = gr.Slider(1, top, value=min(16, top), step=1, label="sweep: last level",
                                            elem_id="serve-max-concurrency")
                per_level = gr.Slider(1, 16, value=4, step=1,
                                      label="sweep: requests per slot at each level", elem_id="serve-per-level")
                with gr.Row():
                    slo_ttft = gr.Number(1.0, label="SLO: TTFT ≤ s")
                    slo_tpot = gr.Number(0.05, label="SLO: TPOT ≤ s")
            with gr.Row():
                go = gr.Button("Start", variant="primary", elem_id="serve-start")
                halt = gr.Button("Stop", variant="stop", elem_id="serve-stop")
        with gr.Column(scale=2):
            status = gr.Markdown(elem_id="serve-status")
            with gr.Row():
                tput = gr.Plot(show_label=False, elem_id="serve-throughput")
                inflight = gr.Plot(show_label=False, elem_id="serve-requests")
            with gr.Row():
                kv = gr.Plot(show_label=False, elem_id="serve-kv")
                ttft = gr.Plot(show_label=False, elem_id="serve-ttft")
            timeline = gr.Plot(show_label=False, elem_id="serve-timeline")
            lifecycle = gr.Plot(show_label=False, elem_id="serve-lifecycle")
            explanation = gr.Markdown(elem_id="serve-explanation")
            with gr.Row():
                sweep_tput = gr.Plot(show_label=False, elem_id="serve-sweep-throughput")
                sweep_latency = gr.Plot(show_label=False, elem_id="serve-sweep-latency")
            with gr.Row():
                tradeoff = gr.Plot(show_label=False, elem_id="serve-tradeoff")
                prefix = gr.Plot(show_label=False, elem_id="serve-prefix")
            with gr.Accordion("the same load on kvviz's own engine, one request at a time", open=False):
                side_go = gr.Button("Run the last load on kvviz's engine", elem_id="serve-engine-btn")
                side_text = gr.Markdown(elem_id="serve-side-text")
                side_plot = gr.Plot(show_label=False, elem_id="serve-side-plot")
            with gr.Accordion("this job as JSON (no API key)", open=False):
                as_json = gr.JSON(label="job")

    def pick_target(choice):
        remote = choice != LOCAL
        return gr.update(visible=not remote), gr.update(visible=remote)

    def start_vllm(model, kv_space_gib):
        """Start (or keep) the local vLLM for `model`; streams its status until it is ready or failed."""
        try:
            spec = policy.check_model(model)
            gib = whole_number(kv_space_gib, "KV-cache space (GiB)", 1, 2 if policy.hosted else 1_024)
            engine.start(spec, gib)
        except (ValueError, VllmError) as exc:
            raise refusal(exc) from None
        deadline = time.monotonic() + ENGINE_START_WAIT_S
        while engine.status().state == STARTING and time.monotonic() < deadline:
            yield engine.status().line()
            time.sleep(1.0)
        state = engine.status()
        if state.state != READY:
            raise refusal(state.line())
        yield state.line()

    def stop_vllm():
        if policy.hosted:
            raise refusal("this hosted demo keeps its vLLM serving for every visitor")
        engine.stop()
        return engine.status().line()

    def run(target, url, model, api, api_key, tokenizer, kind, arrivals, concurrency, rate, prompt_tokens,
            shared_prefix_tokens, output_tokens, requests, duration, max_concurrency, per_level, slo_ttft, slo_tpot,
            request: gr.Request) -> Generator[tuple, None, None]:
        """Run the job; yields (status, five live plots) once a second, then every output and the run as JSON.
        Parameters carry `python -m kvviz.serving run`'s names."""
        values = PageValues(target, url, model, api, api_key, tokenizer, kind, arrivals, concurrency, rate,
                            prompt_tokens, shared_prefix_tokens, output_tokens, requests, duration, max_concurrency,
                            per_level, slo_ttft, slo_tpot)
        try:
            plan = plan_from_page(values, policy, engine)
        except (ValueError, EndpointError) as exc:
            raise refusal(exc) from None
        job, session, started = LiveJob(plan), session_id(request), time.monotonic()
        sessions.begin(session, job)
        try:
            while not job.wait(REDRAW_S):
                yield (*live_update(job, started), *(gr.skip(),) * 8)
        finally:
            job.stop()  # Stop pressed, the tab closed, the call cancelled: the load ends now
            sessions.end(session, job)
        if job.error is not None:
            raise refusal(job.error)
        outcome = job.outcome
        if outcome is None or not outcome.runs:
            raise refusal("stopped before any run ended")
        yield (*final_update(outcome), {"rows": history_rows(outcome), "outcome": outcome, "at": time.time()})

    def stop(request: gr.Request):
        sessions.stop(session_id(request))

    def on_engine(model, last_run, request: gr.Request, progress=gr.Progress()):
        """The last load (its last run: a sweep's top level) again on kvviz's own engine in the device worker,
        with prompts of the same length; yields nothing new while it runs, then the comparison."""
        server, load, prompts, spec = same_load_on_engine(model, last_run)
        job = start_load_job(spec, load, prompts, policy.request_time_limit_s, policy.hosted)
        session = session_id(request)
        sessions.begin(session, job)
        served = failure = None
        try:
            for message in job.follow(0.25):
                match message:
                    case WorkerProgress():
                        progress(message.fraction, desc=message.message)
                    case Served():
                        served = message.result
                    case Failed():
                        failure = message
                    case Tick():
                        yield gr.skip(), gr.skip(), gr.skip()
                    case Loaded() | Done():
                        pass
                    case _:
                        raise TypeError(f"a load's job sent {message!r}")
        finally:
            job.abandon()
            sessions.end(session, job)
        if failure is not None or served is None:
            raise no_answer(job, failure, "the engine's run")
        frame = pd.DataFrame([{"source": "vLLM (continuous batching)", **server.stats.flat()},
                              {"source": "kvviz engine (one at a time)", **served.stats.flat()}])
        row = serving_text.history_row(served, f"kvviz engine c={load.concurrency}")
        yield (serving_text.engine_vs_server_markdown(server, served), plot(serving_figures.engine_vs_server(frame)),
               {"rows": [row], "at": time.time()})

    def same_load_on_engine(model, last_run) -> tuple:
        """(vLLM's run, its load, fresh prompts of its length, the engine's model spec); refused unless the last
        load ran on the local vLLM serving this model as a closed loop."""
        outcome = last_run.get("outcome") if isinstance(last_run, dict) else None
        status = engine.status()
        try:
            spec = policy.check_model(model)
            served_name = model_folder(spec).name
        except ValueError as exc:
            raise refusal(exc) from None
        if outcome is None or status.state != READY or status.model != served_name or \
                outcome.runs[-1].endpoint.get("url") != status.url:
            raise refusal(f"run a load on the local vLLM serving {spec} first: the comparison runs that same load "
                          "on kvviz's engine")
        server = outcome.runs[-1]
        if server.load.arrivals != CLOSED:
            raise refusal("kvviz's engine takes closed-loop loads (fixed requests in flight); run one on vLLM first")
        tokenizer = load_tokenizer(outcome.plan.tokenizer_folder)
        prompts = tuple(synthetic(server.load.requests, outcome.plan.prompt_tokens, tokenizer,
                                  seed=server.load.seed + 303))
        return server, server.load, prompts, spec

    target.change(pick_target, target, [local_box, remote_box], api_visibility="private", queue=False)
    start_engine.click(start_vllm, [local_model, kv_space], engine_status, api_name="start_vllm",
                       concurrency_id=SERVING, concurrency_limit=1, preprocess=False)
    stop_engine.click(stop_vllm, None, engine_status, api_name="stop_vllm", concurrency_limit=None)
    finished = go.click(
        run, [target, url, served, api, api_key, tokenizer, kind, arrivals, concurrency, rate, prompt_tokens,
              shared_prefix, output_tokens, requests, duration, max_concurrency, per_level, slo_ttft, slo_tpot],
        [status, tput, inflight, kv, timeline, ttft, lifecycle, sweep_tput, sweep_latency, tradeoff, prefix,
         explanation, as_json, last], api_name="serve", concurrency_id=SERVING, concurrency_limit=1,
        preprocess=False)
    halt.click(stop, None, None, api_name="stop_serving", concurrency_limit=None, queue=False)
    side_last = gr.State(None)
    compared = side_go.click(on_engine, [local_model, last], [side_text, side_plot, side_last],
                             api_name="serve_on_engine", concurrency_id=DEVICE, concurrency_limit=1,
                             preprocess=False)
    return ServingTab([(finished, last), (compared, side_last)])
