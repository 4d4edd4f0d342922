"""The Serving tab: a real engine under load, measured from outside as a client sees it and as its own
/metrics say, live while the load runs; at the end the sweep's curves, tied to the lesson's questions 5 and 6.

The target is the local vLLM that kvviz starts (kvviz.serving.local, one per app) or any OpenAI-compatible
endpoint (hosted: only those the operator listed). Start checks every value (kvviz.ui.serving.plan) and runs
the job on a thread (kvviz.serving.live); the handler redraws from its progress once a second and ends with
the finished figures, the explanation and the run as JSON. Loads run one at a time in the whole app (two
loads on one server would measure each other). A finished load goes into the history (build_app chains
that step on `finished`) and can be run again on kvviz's own engine, one request at a time, beside it.
Every text is in the page's language: the static ones through L (kvviz.i18n.serving), the computed ones in the
`lang` every handler takes last; the core's English messages (the engine's status line, refusals) are translated
at this boundary (kvviz.i18n.errors).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import asdict, dataclass

import gradio as gr
import pandas as pd

from kvviz.base.errors import first_line
from kvviz.base.inputs import whole_number
from kvviz.engine.hosting import HostPolicy
from kvviz.i18n import t
from kvviz.i18n.errors import translate
from kvviz.serving.endpoint import APIS, COMPLETIONS, EndpointError
from kvviz.serving.live import ONE, PREFIX, SWEEP, LiveJob, Outcome
from kvviz.serving.load import CLOSED, CONSTANT, POISSON
from kvviz.serving.local import READY, STARTING, STOPPED, LocalEngine
from kvviz.serving.metrics_reader import server_view
from kvviz.serving.models import model_folder
from kvviz.serving.prompts import load_tokenizer, synthetic
from kvviz.serving.redact import redact
from kvviz.serving.setup import SetupSlot
from kvviz.serving.sweep import sweep_frame
from kvviz.serving.vllm import VllmError
from kvviz.ui import figures
from kvviz.ui.common import DEVICE, follow_answer, no_answer, plot, refusal, start
from kvviz.ui.generation.text import time_limit_message
from kvviz.ui.lang import L
from kvviz.ui.serving import figures as serving_figures
from kvviz.ui.serving import text as serving_text
from kvviz.ui.serving.plan import ARRIVALS, LOCAL, REMOTE, PageValues, plan_from_page
from kvviz.ui.sessions import SessionStore, stop_handle
from kvviz.ui.worker import EngineLoad

# The catalogue's key of each choice's words; the choices' values stay the API's (English) values.
TARGET_KEYS = {LOCAL: "serving.target.local", REMOTE: "serving.target.remote"}
KIND_KEYS = {ONE: "serving.kind.one", SWEEP: "serving.kind.sweep", PREFIX: "serving.kind.prefix"}
ARRIVAL_KEYS = {CLOSED: "serving.arrivals.closed", POISSON: "serving.arrivals.poisson",
                CONSTANT: "serving.arrivals.constant"}
LOCAL_MODELS = ["tiny", "smollm2-135m-instruct", "random:smollm2-135m", "random:qwen2.5-0.5b", "random:gpt2",
                "random:llama-3-8b@2"]
SERVING = "serving"  # concurrency id: one load at a time in the whole app
REDRAW_S = 1.0
ENGINE_START_WAIT_S = 600.0
MAX_RANKS = 64  # per parallel size from the page: past a node's worth; vLLM and the calculator refuse what cannot run
LIVE_OUTPUTS = 6  # status and five live plots


@dataclass(frozen=True)
class ServingTab:
    # (an event, the state it leaves its runs in: a dict with "rows" for the history): Start's and the engine
    # comparison's; build_app adds the rows to the history after each
    published: list[tuple[gr.events.Dependency, gr.State]]
    kind: gr.Radio | None = None  # what to run; the Lesson tab's question 5 sets it to the sweep


def kind_name(kind: str, lang: str = "en") -> str:
    """What a run's kind is called in `lang` (in English, its value: "one load", "sweep", ...)."""
    return t(KIND_KEYS[kind], lang) if kind in KIND_KEYS else kind


def live_plots(records, arrivals, samples, lang: str = "en") -> tuple:
    """The five live plots of a run, from its records, its output chunks' arrivals and the server's samples."""
    return (plot(serving_figures.throughput_over_time(arrivals, samples, lang=lang)),
            plot(serving_figures.requests_over_time(samples, lang)),
            plot(serving_figures.kv_usage_over_time(samples, lang)),
            plot(serving_figures.request_timeline(records, lang=lang)), plot(serving_figures.ttft_itl(records, lang)))


def live_update(job: LiveJob, started: float, lang: str = "en") -> tuple:
    """The page while a job runs: one status line and the five live plots from its progress so far."""
    p = job.progress
    records, arrivals, samples = list(p.records), list(p.arrivals_s), list(p.samples)
    level = t("serving.live.level", lang, concurrency=p.concurrency) if p.concurrency else ""
    done = "" if job.plan.kind == ONE else t("serving.live.done", lang, runs=len(job.runs))
    status = t("serving.live.status", lang, kind=kind_name(job.plan.kind, lang), level=level,
               seconds=f"{time.monotonic() - started:.0f}", ended=len(records), chunks=f"{len(arrivals):,}", done=done)
    return (status, *live_plots(records, arrivals, samples, lang))


def final_update(outcome: Outcome, lang: str = "en") -> tuple:
    """The page once a job ended: the last run's live plots and the end figures, explanation and JSON."""
    runs, kind = outcome.runs, outcome.plan.kind
    last = runs[-1]
    arrivals = [r.sent_s + a for r in last.records for a in r.arrivals_s]
    live = live_plots(last.records, arrivals, last.samples, lang)
    lifecycle = plot(serving_figures.client_vs_server(last.records, server_view(last.samples), lang))
    not_sweep = plot(figures.empty(t("serving.final.no_sweep", lang)))
    if kind == SWEEP:
        frame = sweep_frame(runs)
        curves = (plot(serving_figures.sweep_throughput(frame, lang)), plot(serving_figures.sweep_latency(frame, lang)),
                  plot(serving_figures.sweep_tradeoff(frame, lang)))
        text = serving_text.sweep_markdown(frame, list(runs), lang)
    else:
        curves, text = (not_sweep,) * 3, serving_text.run_markdown(last, lang)
    if kind == PREFIX and len(runs) == 2:
        prefix = plot(serving_figures.prefix_cache(runs[0], runs[1], lang))
        text = serving_text.prefix_markdown(runs[0], runs[1], lang) + "\n\n" + text
    else:
        prefix = plot(figures.empty(t("serving.final.no_prefix", lang)))
    if outcome.timed_out:  # reported as a Stop is, saying which limit stopped it
        text = f"**{time_limit_message(outcome.plan.time_limit_s, lang).capitalize()}.**\n\n" + text
    elif outcome.cancelled:
        text = t("serving.final.stopped", lang) + text
    status = t("serving.final.status", lang, kind=kind_name(kind, lang), runs=len(runs),
               requests=sum(len(r.records) for r in runs))
    return (status, *live, lifecycle, *curves, prefix, text, details(outcome))


def details(outcome: Outcome) -> dict:
    """The job as JSON: the endpoint (never its key), the load, each run's figures and requests."""
    return {"kind": outcome.plan.kind, "endpoint": outcome.runs[-1].endpoint, "cancelled": outcome.cancelled,
            **({"stopped_by": "time_limit"} if outcome.timed_out else {}),
            "runs": [{"load": asdict(r.load), "stats": r.stats.flat(), "requests": [x.row() for x in r.records],
                      "server": asdict(v) if (v := server_view(r.samples)) else None,
                      "metrics_error": r.metrics_error} for r in outcome.runs]}


def history_rows(outcome: Outcome) -> list[dict]:
    label = outcome.plan.kind
    return [serving_text.history_row(r, f"{label} c={r.load.concurrency}") for r in outcome.runs]


def serving_tab(policy: HostPolicy, engine: LocalEngine, sessions: SessionStore,
                lang: gr.Radio) -> ServingTab:
    """Target, load, Start/Stop; live plots; the finished figures and their explanation."""
    gr.Markdown(L("serving.intro"))
    setup = SetupSlot(engine.venv)  # one set-up of vLLM's environment for the whole app, every visitor's

    def setup_state(lang="en", refused: str | None = None) -> tuple[str, bool, bool, bool]:
        """(the status line, whether to offer the set-up, whether one runs, whether to offer Start vLLM) as things
        stand: vLLM's status when its environment is there; else the set-up under way (its progress), the last
        one's end, or the offer to set it up (never in a hosted demo). refused: a set-up that could not begin."""
        job, ready = setup.job, setup.ready()
        running = job is not None and job.running
        if refused is not None:
            line = t("serving.setup.failed", lang, why=refused)
        elif running:
            line = t("serving.setup.running", lang, line=translate(job.progress().line(), lang), log=job.log)
        elif setup.refused is not None and not ready:  # the latest press could not begin a set-up: say why
            line = t("serving.setup.failed", lang, why=translate(redact(first_line(setup.refused, 1000)), lang))
        elif job is not None and job.error is not None and not ready:
            line = t("serving.setup.failed", lang, why=translate(redact(first_line(job.error, 1000)), lang))
        elif job is not None and ready and engine.status().state == STOPPED:
            line = t("serving.setup.done", lang, line=translate(job.progress().line(), lang))
        elif ready:
            line = translate(engine.status().line(), lang)
        elif policy.hosted:
            line = t("serving.setup.hosted_missing", lang)
        elif job is not None:  # stopped
            line = t("serving.setup.stopped", lang, line=translate(job.progress().line(), lang))
        else:
            line = t("serving.setup.offer", lang, venv=setup.venv)
        return line, not (ready or running or policy.hosted), running, ready or policy.hosted

    first = setup_state()  # English; the switch (set on load) and the timer's first tick write the page's own
    last = gr.State(None)
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            target = gr.Radio([(L(key), value) for value, key in TARGET_KEYS.items()], value=LOCAL,
                              label=L("serving.target"), elem_id="serve-target")
            with gr.Group(visible=True) as local_box:
                local_model = gr.Dropdown(policy.model_choices() if policy.hosted else LOCAL_MODELS, value="tiny",
                                          allow_custom_value=not policy.hosted, label=L("serving.local_model"),
                                          elem_id="serve-local-model")
                kv_space = gr.Slider(1, 2 if policy.hosted else 64, value=1, step=1,
                                     label=L("serving.kv_space"))
                # Past one device: vLLM's tensor, pipeline and data parallel ranks (one worker each, the KV space
                # above each); a hosted demo runs one
                with gr.Row(visible=not policy.hosted):
                    tp = gr.Number(1, precision=0, minimum=1, label=L("serving.tp"), elem_id="serve-tp", min_width=80)
                    pp = gr.Number(1, precision=0, minimum=1, label=L("serving.pp"), elem_id="serve-pp", min_width=80)
                    dp = gr.Number(1, precision=0, minimum=1, label=L("serving.dp"), elem_id="serve-dp", min_width=80)
                with gr.Row():
                    start_engine = gr.Button(L("serving.start_vllm"), elem_id="serve-start-vllm", visible=first[3])
                    stop_engine = gr.Button(L("serving.stop_vllm"), variant="stop", elem_id="serve-stop-vllm",
                                            visible=first[3] and not policy.hosted)
                engine_status = gr.Markdown(first[0], elem_id="serve-engine-status")
                with gr.Row():
                    setup_go = gr.Button(L("serving.setup.button"), variant="primary", visible=first[1],
                                         elem_id="serve-setup-vllm")
                    setup_halt = gr.Button(L("serving.setup.stop"), variant="stop", visible=first[2],
                                           elem_id="serve-setup-stop")
                # Redraws the set-up's progress while one runs. On at each page load (not hosted: no set-up runs
                # there), so a page opened or reloaded during a set-up follows it; its first tick turns it off
                # when none runs.
                setup_timer = gr.Timer(1.0, active=not policy.hosted)
            with gr.Group(visible=False) as remote_box:
                if policy.hosted:
                    url = gr.Dropdown(list(policy.allowed_endpoints), label=L("serving.endpoint_hosted"),
                                      value=policy.allowed_endpoints[0] if policy.allowed_endpoints else None)
                else:
                    url = gr.Textbox("http://127.0.0.1:8000", label=L("serving.endpoint_url"))
                served = gr.Textbox("", label=L("serving.served"))
                api = gr.Radio(list(APIS), value=COMPLETIONS, label=L("serving.api"))
                api_key = gr.Textbox("", type="password", label=L("serving.api_key"))
                tokenizer = gr.Textbox("", label=L("serving.tokenizer"), visible=not policy.hosted)
            kind = gr.Radio([(L(key), value) for value, key in KIND_KEYS.items()], value=ONE, label=L("serving.kind"),
                            elem_id="serve-kind")
            with gr.Accordion(L("serving.load"), open=True):
                arrivals = gr.Radio([(L(ARRIVAL_KEYS[value]), label) for label, value in ARRIVALS.items()],
                                    value=next(iter(ARRIVALS)), label=L("serving.arrivals"))
                top = policy.max_concurrency if policy.hosted else 256
                concurrency = gr.Slider(1, top, value=min(8, top), step=1, label=L("serving.concurrency"),
                                        elem_id="serve-concurrency")
                rate = gr.Number(4.0, label=L("serving.rate"))
                prompt_tokens = gr.Slider(1, min(policy.max_prompt_tokens, 1000) if policy.hosted else 1000,
                                          value=16, step=1, label=L("serving.prompt_tokens"),
                                          elem_id="serve-prompt-tokens")
                shared_prefix = gr.Slider(0, 999, value=0, step=1, label=L("serving.shared_prefix"),
                                          elem_id="serve-shared-prefix")
                output_tokens = gr.Slider(1, policy.max_new_tokens if policy.hosted else 1024, value=128, step=1,
                                          label=L("serving.output_tokens"), elem_id="serve-output-tokens")
                requests = gr.Slider(1, policy.max_requests if policy.hosted else 2000, value=32, step=1,
                                     label=L("serving.requests"), elem_id="serve-requests")
                duration = gr.Number(min(120.0, policy.time_limit_s) if policy.hosted else 120.0,
                                     label=L("serving.duration"))
                max_concurrency = gr.Slider(1, top, value=min(16, top), step=1, label=L("serving.max_concurrency"),
                                            elem_id="serve-max-concurrency")
                per_level = gr.Slider(1, 16, value=4, step=1,
                                      label=L("serving.per_level"), elem_id="serve-per-level")
                with gr.Row():
                    slo_ttft = gr.Number(1.0, label=L("serving.slo_ttft"))
                    slo_tpot = gr.Number(0.05, label=L("serving.slo_tpot"))
            with gr.Row():
                go = gr.Button(L("serving.start"), variant="primary", elem_id="serve-start")
                halt = gr.Button(L("serving.stop"), variant="stop", elem_id="serve-stop")
        with gr.Column(scale=2):
            status = gr.Markdown(L("serving.plots_hint"), elem_id="serve-status")  # the plots are empty until a run
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
            with gr.Accordion(L("serving.engine_box"), open=False):
                side_go = gr.Button(L("serving.engine_button"), elem_id="serve-engine-btn")
                side_text = gr.Markdown(elem_id="serve-side-text")
                side_plot = gr.Plot(show_label=False, elem_id="serve-side-plot")
            with gr.Accordion(L("serving.json_box"), open=False):
                as_json = gr.JSON(label=L("serving.json"))

    def pick_target(choice):
        remote = choice != LOCAL
        return gr.update(visible=not remote), gr.update(visible=remote)

    def engine_line(lang="en"):
        """The local vLLM's status in `lang` (the core says it in English; kvviz.i18n.errors translates it)."""
        return translate(engine.status().line(), lang)

    def engine_view(lang="en", refused: str | None = None, timed: bool = True) -> tuple:
        """setup_state as the page's updates: the status line, the set-up's two buttons, Start and Stop vLLM, the
        timer (on while a set-up runs, unless the caller follows it itself: timed=False)."""
        line, offer, running, startable = setup_state(lang, refused)
        return (line, gr.update(visible=offer), gr.update(visible=running), gr.update(visible=startable),
                gr.update(visible=startable and not policy.hosted), gr.Timer(active=running and timed))

    def setup_vllm(lang="en") -> Generator[tuple, None, None]:
        """Set vLLM's environment up (or follow the set-up under way), its progress redrawn once a second until
        it ends (the page that pressed the button follows it here: a timer's tick answered late could turn the
        timer off); refused in a hosted demo. Closing the page leaves the set-up running for the next visit."""
        if policy.hosted:
            raise refusal(t("serving.refuse.hosted_setup", lang), lang)
        try:
            job = setup.start()
        except VllmError as exc:  # another process builds it, the folder holds other files, it is there already
            yield engine_view(lang, refused=translate(redact(first_line(exc, 1000)), lang))
            return
        while not job.wait(REDRAW_S):
            yield engine_view(lang, timed=False)
        yield engine_view(lang)

    def stop_setup(lang="en") -> tuple:
        """Stop the set-up under way: pip and everything it started end, what it made is removed."""
        if policy.hosted:
            raise refusal(t("serving.refuse.hosted_setup", lang), lang)
        setup.stop()
        return engine_view(lang)

    def start_vllm(model, kv_space_gib, tensor_parallel=1, pipeline_parallel=1, data_parallel=1, lang="en"):
        """Start (or keep) the local vLLM for `model` on tensor × pipeline × data parallel ranks (each with
        kv_space_gib of KV space; one rank hosted); streams its status until it is ready or failed."""
        try:
            spec = policy.check_model(model)
            gib = whole_number(kv_space_gib, "KV-cache space (GiB)", 1, 2 if policy.hosted else 1_024)
            most = 1 if policy.hosted else MAX_RANKS
            asked = ((tensor_parallel, "serving.tp"), (pipeline_parallel, "serving.pp"), (data_parallel, "serving.dp"))
            tps, pps, dps = (whole_number(value, t(key, lang), 1, most) for value, key in asked)
            engine.start(spec, gib, tensor_parallel=tps, pipeline_parallel=pps, data_parallel=dps)
        except (ValueError, VllmError) as exc:
            raise refusal(exc, lang) from None
        deadline = time.monotonic() + ENGINE_START_WAIT_S
        while engine.status().state == STARTING and time.monotonic() < deadline:
            yield engine_line(lang)
            time.sleep(1.0)
        state = engine.status()
        if state.state != READY:
            raise refusal(state.line(), lang)
        yield translate(state.line(), lang)

    def stop_vllm(lang="en"):
        if policy.hosted:
            raise refusal(t("serving.refuse.hosted_vllm", lang), lang)
        engine.stop()
        return engine_line(lang)

    def run(target, url, model, api, api_key, tokenizer, kind, arrivals, concurrency, rate, prompt_tokens,
            shared_prefix_tokens, output_tokens, requests, duration, max_concurrency, per_level, slo_ttft, slo_tpot,
            lang="en", request: gr.Request = None) -> Generator[tuple, None, None]:
        """Run the job; yields (status, five live plots) once a second, then every output and the run as JSON,
        all in `lang`. Parameters carry `python -m kvviz.serving run`'s names."""
        values = PageValues(target, url, model, api, api_key, tokenizer, kind, arrivals, concurrency, rate,
                            prompt_tokens, shared_prefix_tokens, output_tokens, requests, duration, max_concurrency,
                            per_level, slo_ttft, slo_tpot)
        try:
            plan = plan_from_page(values, policy, engine)
        except (ValueError, EndpointError) as exc:  # a value may quote what was typed: the key too
            yield from said_and_raised(refusal(redact(first_line(exc), (api_key,) if isinstance(api_key, str) else ()),
                                               lang), lang)
        job, session, started = LiveJob(plan), stop_handle(request, "serving"), time.monotonic()
        sessions.begin(session, job)
        try:
            while not job.wait(REDRAW_S):
                yield (*live_update(job, started, lang), *(gr.skip(),) * 8)
        finally:
            job.stop()  # Stop pressed, the tab closed, the call cancelled: the load ends now
            sessions.end(session, job)
        if job.error is not None:
            yield from said_and_raised(refusal(job.error, lang), lang)
        outcome = job.outcome
        if outcome is None or not outcome.runs:
            yield from said_and_raised(refusal(t("serving.refuse.no_run", lang), lang), lang)
        yield (*final_update(outcome, lang), {"rows": history_rows(outcome), "outcome": outcome, "at": time.time()})

    def said_and_raised(failed: gr.Error, lang: str) -> Generator[tuple, None, None]:
        """The failure written in the status line (a toast fades; the plots keep what they showed), then raised
        for the toast and the API."""
        yield (t("generation.failed", lang, message=failed.message), *(gr.skip(),) * 13)
        raise failed

    def stop(request: gr.Request):
        """Stop this session's serving load and its run on kvviz's engine, whichever runs."""
        for tab in ("serving", "serving-engine"):
            sessions.stop(stop_handle(request, tab))

    def on_engine(model, last_run, lang="en", request: gr.Request = None, progress=gr.Progress()):
        """The last load (its last run: a sweep's top level) again on kvviz's own engine in the device worker,
        with prompts of the same length; yields nothing new while it runs, then the comparison in `lang`."""
        server, load, prompts, spec = same_load_on_engine(model, last_run, lang)
        job, _ = start(spec, EngineLoad(load, prompts), policy, lang)
        outcome = yield from follow_answer(job, progress, lang, t("serving.engine_run", lang), 3, sessions, request,
                                           "serving-engine")
        if outcome.failure is not None:  # a load that failed part way is not shown beside vLLM's
            raise no_answer(job, outcome.failure, t("serving.engine_run", lang), lang)
        served = outcome.answer.result
        frame = pd.DataFrame([{"source": t("serving.source.vllm", lang), **server.stats.flat()},
                              {"source": t("serving.source.engine", lang), **served.stats.flat()}])
        row = serving_text.history_row(served, f"kvviz engine c={load.concurrency}")
        yield (serving_text.engine_vs_server_markdown(server, served, lang),
               plot(serving_figures.engine_vs_server(frame, lang)), {"rows": [row], "at": time.time()})

    def same_load_on_engine(model, last_run, lang="en") -> tuple:
        """(vLLM's run, its load, fresh prompts of its length, the engine's model spec); refused unless the last
        load ran on the local vLLM serving this model as a closed loop."""
        outcome = last_run.get("outcome") if isinstance(last_run, dict) else None
        status = engine.status()
        try:
            spec = policy.check_model(model)
            served_name = model_folder(spec).name
        except ValueError as exc:
            raise refusal(exc, lang) from None
        if outcome is None or status.state != READY or status.model != served_name or \
                outcome.runs[-1].endpoint.get("url") != status.url:
            raise refusal(t("serving.refuse.local_first", lang, spec=spec), lang)
        server = outcome.runs[-1]
        if server.load.arrivals != CLOSED:
            raise refusal(t("serving.refuse.closed_only", lang), lang)
        tokenizer = load_tokenizer(outcome.plan.tokenizer_folder)
        prompts = tuple(synthetic(server.load.requests, outcome.plan.prompt_tokens, tokenizer,
                                  seed=server.load.seed + 303))
        return server, server.load, prompts, spec

    target.change(pick_target, target, [local_box, remote_box], api_visibility="private", queue=False)
    # The switch (set on load too) writes the status in the page's language; the timer keeps a set-up's current.
    viewed = [engine_status, setup_go, setup_halt, start_engine, stop_engine, setup_timer]
    lang.change(engine_view, lang, viewed, api_visibility="private", queue=False, show_progress="hidden")
    setup_timer.tick(engine_view, lang, viewed, api_visibility="private", queue=False, show_progress="hidden")
    setup_go.click(setup_vllm, lang, viewed, api_name="setup_vllm", concurrency_limit=None, show_progress="hidden")
    setup_halt.click(stop_setup, lang, viewed, api_name="stop_vllm_setup", concurrency_limit=None,
                     show_progress="hidden")
    start_engine.click(start_vllm, [local_model, kv_space, tp, pp, dp, lang], engine_status, api_name="start_vllm",
                       concurrency_id=SERVING, concurrency_limit=1, preprocess=False)
    stop_engine.click(stop_vllm, lang, engine_status, api_name="stop_vllm", concurrency_limit=None)
    finished = go.click(
        run, [target, url, served, api, api_key, tokenizer, kind, arrivals, concurrency, rate, prompt_tokens,
              shared_prefix, output_tokens, requests, duration, max_concurrency, per_level, slo_ttft, slo_tpot, lang],
        [status, tput, inflight, kv, timeline, ttft, lifecycle, sweep_tput, sweep_latency, tradeoff, prefix,
         explanation, as_json, last], api_name="serve", concurrency_id=SERVING, concurrency_limit=1,
        preprocess=False, show_progress="hidden")  # the status line says it all, live, and a failure too
    halt.click(stop, None, None, api_name="stop_serving", concurrency_limit=None, queue=False)
    side_last = gr.State(None)
    compared = side_go.click(on_engine, [local_model, last, lang], [side_text, side_plot, side_last],
                             api_name="serve_on_engine", concurrency_id=DEVICE, concurrency_limit=1,
                             preprocess=False, show_progress_on=side_text)
    return ServingTab([(finished, last), (compared, side_last)], kind)
