"""The Plan tab: a deployment predicted by the simulator (kvviz.ui.plan.predict), its curves, knee and SLO answer,
and, on this machine calibrated, the same loads run on the local vLLM with the measured points over the lines.

Predict checks every value, then simulates step by step on the handler's thread, yielding a status line between
steps (the knee, each load of the curve, the search), and ends with the answer, the four figures and the
prediction as JSON. The check ("Run on the local vLLM") needs the last prediction to be a calibrated one and the
local vLLM (started in the Serving tab) to serve its model; it runs each load as the Serving tab runs one
(kvviz.serving.live.LiveJob, one load at a time in the whole app: the Serving tab's concurrency id), under the
host's limits (kvviz.engine.hosting: requests, requests in flight, tokens, time), then predicts each again with
the same requests and arrivals and shows the error per point. Every text is in the page's language (`lang`,
every handler's last input; kvviz.i18n.plan).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from dataclasses import dataclass

import gradio as gr
import pandas as pd

from kvviz.base.inputs import whole_number
from kvviz.calc.hardware import ACCELERATORS
from kvviz.calc.presets import preset_names
from kvviz.engine.hosting import HostPolicy
from kvviz.i18n import t
from kvviz.serving.endpoint import COMPLETIONS, EndpointError
from kvviz.serving.live import ONE, LiveJob
from kvviz.serving.live import Plan as LivePlan
from kvviz.serving.load import CLOSED as CLOSED_ARRIVALS
from kvviz.serving.load import MAX_CONCURRENCY, POISSON, Load
from kvviz.serving.local import READY, LocalEngine
from kvviz.serving.stats import Slo
from kvviz.sim.calibrate import made_elsewhere
from kvviz.sim.plan_cli import as_dict
from kvviz.ui.common import plot, refusal
from kvviz.ui.lang import L
from kvviz.ui.plan import figures as plan_figures
from kvviz.ui.plan import text as plan_text
from kvviz.ui.plan.predict import (
    CLOSED,
    GPU,
    HERE,
    OPEN,
    PlanValues,
    Prediction,
    Setup,
    calibration_choices,
    check_loads,
    curve_row,
    errors,
    is_calibrated,
    predict,
    setup_from_values,
    shown_source,
    simulated_stats,
)
from kvviz.ui.serving.tab import SERVING
from kvviz.ui.sessions import SessionStore, stop_handle

DEVICE_KEYS = {GPU: "plan.device.gpu", HERE: "plan.device.here"}
LOOP_KEYS = {OPEN: "plan.loop.open", CLOSED: "plan.loop.closed"}
REDRAW_S = 1.0


@dataclass(frozen=True)
class Shown:
    """What the tab shows: the last prediction and, once checked, the measured rows and the errors."""

    prediction: Prediction
    measured: pd.DataFrame | None = None
    errors: pd.DataFrame | None = None


@dataclass(frozen=True)
class PlanControls:
    """The controls other tabs set (the Lesson's questions 5 and 6): the loop, requests in flight, the lengths."""

    loop: gr.Radio
    concurrency: gr.Number
    prompt_tokens: gr.Number
    output_tokens: gr.Number


def answer_of(p: Prediction) -> plan_text.Answer:
    """The numbers the answer states, from a prediction."""
    s, e, found = p.setup, p.setup.engine, p.plan
    cost = found.cost
    return plan_text.Answer(
        how=e.how, model=s.model, source=shown_source(e.source), device=e.device, tp=e.tp, pp=e.pp, closed=s.closed,
        load=s.load,
        asked_tokens_per_s=p.asked["output_tokens_per_s"], asked_ttft_p99_s=p.asked["ttft_p99_s"],
        asked_tpot_p99_s=p.asked["tpot_p99_s"], knee_rate=p.knee.requests_per_s,
        knee_tokens_per_s=p.knee.output_tokens_per_s, max_rate=found.max_rate, next_rate=found.next_rate,
        output_tokens=s.shape.output_tokens, target_rate=found.target_rate, replicas=found.replicas,
        total_gpus=found.gpus, price=s.price, cost_at_max=cost.at_max if cost else None,
        cost_at_target=cost.at_target if cost else None, overhead_s=s.overhead_s, stopped=found.stopped,
        here=made_elsewhere(e.device) if e.how == "calibrated" else None, config=e.config, band=found.band)


def marks_of(p: Prediction, lang: str = "en") -> plan_figures.Marks:
    s = p.setup
    return plan_figures.Marks(s.closed, p.knee.requests_per_s, p.knee.output_tokens_per_s, p.plan.max_rate or None,
                              s.slo.ttft_s, s.slo.ttft_percentile, s.slo.tpot_s, s.slo.tpot_percentile,
                              plan_text.short_how(answer_of(p), lang))


def figures_of(shown: Shown, lang: str = "en") -> tuple:
    """The four figures of what is shown, in `lang`."""
    p, m = shown.prediction, shown.measured
    marks = marks_of(p, lang)
    return (plot(plan_figures.throughput(p.curve, marks, m, lang)),
            plot(plan_figures.latency(p.curve, marks, "ttft", m, lang)),
            plot(plan_figures.latency(p.curve, marks, "tpot", m, lang)),
            plot(plan_figures.tradeoff(p.curve, marks, m, lang)))


def details(p: Prediction) -> dict:
    """The prediction as JSON (English keys): `python -m kvviz.sim plan --json`'s record, with the tab's model,
    loop, load, request overhead and curve."""
    return as_dict(p.plan) | {
        "model": p.setup.model, "closed_loop": p.setup.closed, "load": p.setup.load,
        "request_overhead_s": p.setup.overhead_s,
        "curve": p.curve.astype(object).where(p.curve.notna(), None).to_dict(orient="records")}  # JSON: no NaN


def load_text(setup: Setup, load: float, lang: str) -> str:
    key = "plan.answer.load_closed" if setup.closed else "plan.answer.load_open"
    return t(key, lang, load=f"{load:,.4g}")


def check_load(setup: Setup, load: float, requests: int, policy: HostPolicy) -> Load:
    """One measured load: the prediction's arrivals and lengths (no cap on those in flight in an open loop but the
    host's), within the host's limits."""
    top = policy.max_concurrency if policy.hosted else MAX_CONCURRENCY
    if setup.closed:
        built = Load(arrivals=CLOSED_ARRIVALS, concurrency=int(load), requests=requests,
                     output_tokens=setup.shape.output_tokens, seed=setup.shape.seed)
    else:
        built = Load(arrivals=POISSON, rate=load, concurrency=top, requests=requests,
                     output_tokens=setup.shape.output_tokens, seed=setup.shape.seed)
    duration = min(built.duration_s, policy.time_limit_s) if policy.hosted else built.duration_s
    policy.check_load(built.concurrency, requests, built.output_tokens, setup.shape.prompt_tokens, duration,
                      built.rate)
    return built


def plan_tab(policy: HostPolicy, engine: LocalEngine, sessions: SessionStore, lang: gr.Radio) -> PlanControls:
    """Inputs on the left; the answer, the four figures, the check and the JSON on the right."""
    gr.Markdown(L("plan.intro"))
    shown = gr.State(None)
    calibrations = calibration_choices()
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            device = gr.Radio([(L(key), value) for value, key in DEVICE_KEYS.items()], value=GPU,
                              label=L("plan.device"), elem_id="plan-device")
            with gr.Group(visible=True) as gpu_box:
                model = gr.Dropdown(preset_names(), value="llama-3.1-8b", allow_custom_value=not policy.hosted,
                                    label=L("plan.model"), elem_id="plan-model")
                gpu = gr.Dropdown(list(ACCELERATORS), value="h100-sxm", label=L("plan.gpu"), elem_id="plan-gpu")
                with gr.Row():
                    tp = gr.Number(0, precision=0, minimum=0, label=L("plan.tp"), elem_id="plan-tp", min_width=80)
                    pp = gr.Number(1, precision=0, minimum=1, label=L("plan.pp"), elem_id="plan-pp", min_width=80)
            with gr.Group(visible=False) as here_box:
                calibration = gr.Dropdown(calibrations, value=PlanValues.calibration if PlanValues.calibration in
                                          calibrations else next(iter(calibrations), None),
                                          allow_custom_value=not policy.hosted, label=L("plan.calibration"),
                                          elem_id="plan-calibration")
                kv_space = gr.Slider(1, 2 if policy.hosted else 64, value=1, step=1, label=L("plan.kv_space"))
            with gr.Accordion(L("plan.workload"), open=True):
                loop = gr.Radio([(L(key), value) for value, key in LOOP_KEYS.items()], value=OPEN,
                                label=L("plan.loop"), elem_id="plan-loop")
                with gr.Row():
                    rate = gr.Number(20.0, label=L("plan.rate"), elem_id="plan-rate", min_width=100)
                    concurrency = gr.Number(16, precision=0, label=L("plan.concurrency"), elem_id="plan-concurrency",
                                            min_width=100)
                with gr.Row():
                    prompt_tokens = gr.Number(512, precision=0, label=L("plan.prompt_tokens"), min_width=100,
                                              elem_id="plan-prompt-tokens")
                    output_tokens = gr.Number(128, precision=0, label=L("plan.output_tokens"), min_width=100,
                                              elem_id="plan-output-tokens")
                prefix_tokens = gr.Number(0, precision=0, label=L("plan.prefix_tokens"), elem_id="plan-prefix-tokens")
                requests = gr.Number(300, precision=0, label=L("plan.requests"), elem_id="plan-requests")
            with gr.Accordion(L("plan.slo"), open=True):
                with gr.Row():
                    ttft = gr.Number(1.0, label=L("plan.ttft"), elem_id="plan-ttft", min_width=100)
                    ttft_q = gr.Number(99.0, label=L("plan.ttft_percentile"), min_width=100)
                with gr.Row():
                    tpot = gr.Number(0.05, label=L("plan.tpot"), elem_id="plan-tpot", min_width=100)
                    tpot_q = gr.Number(99.0, label=L("plan.tpot_percentile"), min_width=100)
            with gr.Accordion(L("plan.cost_box"), open=True):
                with gr.Row():
                    price = gr.Number(2.5, label=L("plan.price"), elem_id="plan-price", min_width=100)
                    target_rate = gr.Number(50.0, label=L("plan.target_rate"), elem_id="plan-target-rate",
                                            min_width=100)
            go = gr.Button(L("plan.predict"), variant="primary", elem_id="plan-predict")
        with gr.Column(scale=2):
            gr.Markdown(L("plan.hint"))
            # Computed text only: a component whose value is a static text is translated again by the browser at a
            # language switch, which would write the hint over the last status line.
            status = gr.Markdown(elem_id="plan-status")
            answer = gr.Markdown(elem_id="plan-answer")
            with gr.Row():
                tput_plot = gr.Plot(show_label=False, elem_id="plan-throughput")
                tradeoff_plot = gr.Plot(show_label=False, elem_id="plan-tradeoff")
            with gr.Row():
                ttft_plot = gr.Plot(show_label=False, elem_id="plan-ttft-plot")
                tpot_plot = gr.Plot(show_label=False, elem_id="plan-tpot-plot")
            with gr.Accordion(L("plan.check_box"), open=False):
                gr.Markdown(L("plan.check_hint"))
                with gr.Row():
                    check_requests = gr.Number(min(32, policy.max_requests) if policy.hosted else 32, precision=0,
                                               label=L("plan.check_requests"), elem_id="plan-check-requests")
                    check_go = gr.Button(L("plan.check_button"), elem_id="plan-check")
                check_text = gr.Markdown(elem_id="plan-check-text")
                check_table = gr.Dataframe(interactive=False, elem_id="plan-check-table", wrap=True)
            with gr.Accordion(L("plan.json"), open=False):
                as_json = gr.JSON(label=L("plan.json"))

    def pick_device(choice):
        here = choice == HERE
        return gr.update(visible=not here), gr.update(visible=here)

    def run_plan(device, model, gpu, tp, pp, calibration, kv_space_gib, loop, rate, concurrency, prompt_tokens,
                 output_tokens, prefix_tokens, requests, ttft, ttft_percentile, tpot, tpot_percentile, price,
                 target_rate, lang="en") -> Generator[tuple, None, None]:
        """The prediction; yields a status line between its steps, then the answer, the figures, the JSON.
        Parameters carry `python -m kvviz.sim plan`'s names."""
        values = PlanValues(device, model, gpu, tp, pp, calibration, kv_space_gib, loop, rate, concurrency,
                            prompt_tokens, output_tokens, prefix_tokens, requests, ttft, ttft_percentile, tpot,
                            tpot_percentile, price, target_rate)
        started = time.monotonic()
        try:
            setup = setup_from_values(values, policy)
        except (ValueError, OSError) as exc:
            yield from said_and_raised(refusal(exc, lang), lang, 8)
        yield (t("plan.status.knee", lang), *(gr.skip(),) * 8)
        lines: list[str] = []

        def on_step(done, of, load):  # the simulation runs here, on this thread: its progress is collected
            lines.append(t("plan.status.search", lang) if load is None else
                         t("plan.status.point", lang, done=done + 1, of=of, load=load_text(setup, load, lang)))

        try:
            prediction = yield from _stepped(setup, on_step, lines)
        except (ValueError, OSError) as exc:
            yield from said_and_raised(refusal(exc, lang), lang, 8)
        now = Shown(prediction)
        line = t("plan.status.done", lang, seconds=f"{time.monotonic() - started:.1f}",
                 points=len(prediction.curve), searched=len(prediction.plan.points))
        yield (line, plan_text.answer_markdown(answer_of(prediction), lang), *figures_of(now, lang),
               plan_text.errors_table(None, lang), details(prediction), now)

    def _stepped(setup: Setup, on_step, lines: list[str]) -> Generator[tuple, None, Prediction]:
        """predict() on a thread of its own, its status lines yielded as they come (a generator cannot yield
        from inside a callback)."""
        box: dict = {}

        def work():
            try:
                box["answer"] = predict(setup, on_step)
            except BaseException as exc:  # handed to the handler's thread, raised there
                box["error"] = exc

        worker = threading.Thread(target=work, daemon=True, name="plan-predict")
        worker.start()
        shown = 0
        while worker.is_alive():
            worker.join(0.25)
            if len(lines) > shown:
                shown = len(lines)
                yield (lines[-1], *(gr.skip(),) * 8)
        if "error" in box:
            raise box["error"]
        return box["answer"]

    def said_and_raised(failed: gr.Error, lang: str, others: int) -> Generator[tuple, None, None]:
        """The failure in the status line (a toast fades), then raised for the toast and the API."""
        yield (t("plan.failed", lang, message=failed.message), *(gr.skip(),) * others)
        raise failed

    def run_check(last: Shown | None, check_requests=32, lang="en",
                  request: gr.Request = None) -> Generator[tuple, None, None]:
        """The last prediction's check loads on the local vLLM, one after another; yields a status line once a
        second, then the figures with the measured points, the table of errors and its summary."""
        if last is None:
            yield from said_and_raised(refusal(t("plan.refuse.predict_first", lang), lang), lang, 7)
        setup = last.prediction.setup
        status_now = engine.status()
        try:
            if not is_calibrated(setup):
                raise ValueError(t("plan.refuse.calibrated_only", lang))
            if status_now.state != READY or status_now.model != setup.model:
                raise ValueError(t("plan.refuse.local_first", lang, model=setup.model,
                                   served=status_now.model or "–"))
            n = whole_number(check_requests, "requests per measured load",
                             1, policy.max_requests if policy.hosted else 10_000)
            loads = [(x, check_load(setup, x, n, policy)) for x in check_loads(setup)]
        except (ValueError, EndpointError) as exc:
            yield from said_and_raised(refusal(exc, lang), lang, 7)
        started, measured, predicted = time.monotonic(), [], []
        session = stop_handle(request, "plan")
        for i, (x, load) in enumerate(loads):
            live = LivePlan(ONE, engine.endpoint(COMPLETIONS), load, setup.shape.prompt_tokens,
                            setup.shape.prefix_tokens, slo=Slo(setup.slo.ttft_s, setup.slo.tpot_s),
                            tokenizer_folder=status_now.folder, time_limit_s=policy.request_time_limit_s)
            job = LiveJob(live)
            sessions.begin(session, job)
            try:
                while not job.wait(REDRAW_S):
                    yield (t("plan.status.check_run", lang, done=i + 1, of=len(loads), load=load_text(setup, x, lang),
                             ended=len(job.progress.records), seconds=f"{time.monotonic() - started:.0f}"),
                           *(gr.skip(),) * 7)
            finally:
                job.stop()  # the page closed or the call was cancelled: the load ends now
                sessions.end(session, job)
            if job.error is not None or job.outcome is None or not job.outcome.runs:
                yield from said_and_raised(refusal(job.error or t("plan.refuse.no_run", lang), lang), lang, 7)
            measured.append(curve_row(x, job.outcome.runs[-1].stats))
            predicted.append(curve_row(x, simulated_stats(setup, x, requests=n, wall_s=setup.wall_s)))
        table = errors(pd.DataFrame(measured), pd.DataFrame(predicted))
        now = Shown(last.prediction, pd.DataFrame(measured), table)
        line = t("plan.status.check_done", lang, loads=len(loads), seconds=f"{time.monotonic() - started:.0f}")
        yield (line, *figures_of(now, lang), plan_text.check_markdown(table, n, lang),
               plan_text.errors_table(table, lang), now)

    def redraw(last: Shown | None, lang="en"):
        """The answer, figures, check and table again in `lang` (the language switch moved)."""
        if last is None:
            return (gr.skip(),) * 7
        check = (plan_text.check_markdown(last.errors, len(last.measured), lang) if last.errors is not None
                 else gr.skip())
        return (plan_text.answer_markdown(answer_of(last.prediction), lang), *figures_of(last, lang), check,
                plan_text.errors_table(last.errors, lang))

    plots = [tput_plot, ttft_plot, tpot_plot, tradeoff_plot]
    device.change(pick_device, device, [gpu_box, here_box], api_visibility="private", queue=False)
    go.click(run_plan, [device, model, gpu, tp, pp, calibration, kv_space, loop, rate, concurrency, prompt_tokens,
                        output_tokens, prefix_tokens, requests, ttft, ttft_q, tpot, tpot_q, price, target_rate, lang],
             [status, answer, *plots, check_table, as_json, shown], api_name="plan", concurrency_id="plan",
             concurrency_limit=1, show_progress="hidden", preprocess=False)  # values as sent, checked by run_plan
    check_go.click(run_check, [shown, check_requests, lang], [status, *plots, check_text, check_table, shown],
                   api_name="plan_check", concurrency_id=SERVING, concurrency_limit=1, show_progress="hidden")
    lang.change(redraw, [shown, lang], [answer, *plots, check_text, check_table], api_visibility="private",
                queue=False, show_progress="hidden")
    return PlanControls(loop, concurrency, prompt_tokens, output_tokens)
