"""The plan checked on a real engine: a bounded search for the highest rate a running vLLM holds under an SLO,
with kvviz.serving's open loop, judged by the very rule the simulated points are (plan.judged) and searched by
the same bracket and bisection (plan.RateSearch); and the step rows a calibration is fitted from, measured on it.

The calibration is made on the same server in one of two ways. `steps`: step rows fitted as `python -m kvviz.sim fit`
does (below). `calibrate`: the closed loops `python -m kvviz.sim calibrate` runs and its fit (kvviz.sim.calibrate:
the request overhead and the front end's handoff with the step time), which the plan then adds as a prediction
does: the SLO is judged on the client's TTFT.

Step rows (for kvviz.sim.step_time.fit): a prefill row is one request of p prompt tokens alone, its TTFT the step
that computes its prompt (p prefill tokens, p(p+1)/2 attention pairs); a decode row is a wave of c requests of p tokens
sent together, their decode steps after the prompts (c decode sequences, c × (p + mid-output) attention pairs:
the KV tokens each reads),
each step's time their median TPOT. Both include what the client and the HTTP server add to each token, as the
simulated run then does. The engine must serve `ignore_eos` (vLLM does) so that every request gives its length.
Knows kvviz.serving's client; its vLLM starts through kvviz.sim.calibrate.serving.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.calc.machine import machine
from kvviz.calc.roofline import causal_pairs
from kvviz.i18n import t
from kvviz.serving.endpoint import Endpoint
from kvviz.serving.load import CONSTANT, MAX_CONCURRENCY, POISSON, Load
from kvviz.serving.loadgen import run
from kvviz.serving.prompts import Prompt, synthetic
from kvviz.sim import step_time
from kvviz.sim.plan import (
    DEFAULT_BAND,
    Engine,
    Point,
    RateSearch,
    Scaled,
    Search,
    Shape,
    SloLimits,
    calibrated_engine,
    judged,
    plan,
)
from kvviz.sim.plan_cli import progress_line
from kvviz.sim.step_time import StepContents


def measured(ep: Endpoint, slo: SloLimits, shape: Shape, prompts: Sequence[Prompt], rate: float,
             wall_s: float) -> Point:
    """One rate on the engine: shape.requests requests at `rate` (no cap on those in flight), judged; a line on
    stderr as it starts (a rate of SmolLM2's takes minutes) and one with its verdict."""
    print(t("sim_plan.sending", "en", rate=rate, requests=shape.requests, seconds=shape.requests / rate),
          file=sys.stderr, flush=True)
    load = Load(arrivals=POISSON if shape.poisson else CONSTANT, rate=rate, requests=shape.requests,
                concurrency=MAX_CONCURRENCY, output_tokens=shape.output_tokens, seed=shape.seed,
                timeout_s=max(wall_s, 1.0))
    result = run(ep, load, prompts, slo=slo.goodput)
    point = judged(rate, result.records, slo, result.stats.output_tokens_per_s)
    print(progress_line(point), file=sys.stderr, flush=True)  # a real run takes seconds to minutes
    return point


def real_max_rate(ep: Endpoint, slo: SloLimits, shape: Shape, prompts: Callable[[], Sequence[Prompt]],
                  start: float, search: Search, factor: float = 1.25,
                  after: Callable[[float], None] | None = None) -> tuple[float, float | None, RateSearch]:
    """The bounded search on the engine from `start` (the prediction): up or down by `factor` to a bracket, then
    bisection to search.resolution, within search.max_points runs: (the highest rate held, the lowest not held
    above it, the search with its points and why it stopped early). prompts() gives each rate's own prompts (new
    ones each time: a prompt sent at an earlier rate would find its blocks in vLLM's prefix cache, and its prompt
    step skipped, where the simulator computes it); after(rate) runs once each rate is judged."""
    def measure(rate: float, wall_s: float) -> Point:
        point = measured(ep, slo, shape, prompts(), rate, wall_s)
        if after is not None:
            after(rate)
        return point

    searcher = RateSearch(measure, search)
    low, high = searcher.run(start, factor)
    return low, high, searcher


PROBE_REQUESTS = 4  # a probe's requests: a closed loop of one takes about 1.2 s a request on SmolLM2 at 128/16


@dataclass(frozen=True)
class Probe:
    """A closed loop of one request at a time at the check's lengths, run on the engine before the search and after
    each rate: the medians of its TTFT and TPOT, and what the calibration predicts for one request alone (its
    prompt step and the request overhead; its decode steps' mean). How fast the machine ran its steps just then,
    against its calibration: the search's rates are minutes apart on SmolLM2, and the machine's speed moves."""

    after_rate: float | None  # None: before the search
    ttft_s: float
    tpot_s: float
    predicted_ttft_s: float
    predicted_tpot_s: float

    @property
    def step_ratio(self) -> float:
        """The lone decode step as measured over its prediction: above 1, the steps ran slower than fitted."""
        return self.tpot_s / self.predicted_tpot_s


def lone(engine: Engine, shape: Shape) -> tuple[float, float]:
    """The TTFT and TPOT of one request alone on `engine`: the request overhead and the step of its whole prompt;
    the mean of its decode steps, the k-th at context prompt + k."""
    p, o = shape.prompt_tokens, shape.output_tokens
    ttft = engine.overhead_s + engine.model.seconds(StepContents(p, 0, causal_pairs(p, None)))
    steps = [engine.model.seconds(StepContents(0, 1, p + k)) for k in range(1, max(o, 2))]
    return ttft, sum(steps) / len(steps)


def probe(ep: Endpoint, prompts: Sequence[Prompt], shape: Shape, predicted: tuple[float, float],
          after_rate: float | None) -> Probe:
    """One probe (Probe) with these prompts (PROBE_REQUESTS of them, sent one at a time); its line on stderr once
    it is done (seconds on SmolLM2, between rates that say their own)."""
    ran = run(ep, Load(concurrency=1, requests=len(prompts), output_tokens=shape.output_tokens), prompts)
    found = Probe(after_rate, ran.stats.ttft.p50, ran.stats.tpot.p50, *predicted)
    print(t("sim_plan.probe", "en", requests=len(prompts), ttft=1e3 * found.ttft_s, tpot=1e3 * found.tpot_s,
            ratio=found.step_ratio), file=sys.stderr, flush=True)
    return found


def step_rows(ep: Endpoint, tokenizer, prompt_lengths: Sequence[int], waves: Sequence[int], output_tokens: int,
              seed: int = 0) -> list[tuple[StepContents, float]]:
    """Prefill rows (one request of each prompt length, its TTFT) and decode rows (a wave of each size at each
    length, its median TPOT), as described above."""
    rows = []
    for p in prompt_lengths:
        one = run(ep, Load(concurrency=1, requests=3, output_tokens=2), synthetic(3, p, tokenizer, seed))
        rows.append((StepContents(p, 0, causal_pairs(p, None)), one.stats.ttft.p50))
        for c in waves:
            wave = run(ep, Load(concurrency=c, requests=c, output_tokens=output_tokens),
                       synthetic(c, p, tokenizer, seed + c))
            rows.append((StepContents(0, c, c * (p + output_tokens // 2)), wave.stats.tpot.p50))
    return rows


def _fitted_from_steps(served, out: Path, folder: Path) -> Path:
    """Step rows measured and fitted (as `python -m kvviz.sim fit` does): steps.csv and cal.json in `out`."""
    ep, tokenizer = served.server.endpoint(), served.tokenizer
    run(ep, Load(concurrency=4, requests=8, output_tokens=16), synthetic(8, 32, tokenizer, 99))  # warm-up
    rows = step_rows(ep, tokenizer, (32, 256, 768), (1, 4, 16), 32)
    with (out / "steps.csv").open("w", encoding="utf-8") as handle:
        handle.write("prefill_tokens,decode_seqs,attention_pairs,seconds\n")
        handle.writelines(f"{s.prefill_tokens},{s.decode_seqs},{s.attention_pairs},{t!r}\n" for s, t in rows)
    fitted = step_time.fit(rows)  # what `python -m kvviz.sim fit steps.csv` makes of these rows
    step_time.save(step_time.Calibration(fitted.step, folder.name, "cpu", fitted.fit), out / "cal.json")
    return out / "cal.json"


def _calibrated(served, out: Path, name: str = "cal.json") -> Path:
    """The calibration `python -m kvviz.sim calibrate` makes, on this server: `name` in `out`."""
    from kvviz.serving.vllm import VENV
    from kvviz.sim import calibrate
    from kvviz.sim.cli import progress

    calibrate.warm_up(served)
    fitted, runs = calibrate.calibrate(served, say=progress("en"))
    calibrate.save(out / name, fitted, served.engine, runs, VENV)
    return out / name


def bracket(before: float, after: float, measured_rate: float) -> dict:
    """The highest rate predicted from the calibration made after the search (`after`) over the measured one, and
    whether the measured rate lies between the two predictions, before and after: if so, the machine's speed moved
    during the check by as much as its miss."""
    low, high = sorted((before, after))
    return {"max_rate": after, "ratio_to_measured": after / measured_rate if measured_rate else None,
            "measured_between": bool(measured_rate) and low <= measured_rate <= high}


def calibrated_again(served, out: Path, folder: Path, slo: SloLimits, shape: Shape, before: float,
                     measured_rate: float) -> dict:
    """The calibration made again on the same server once the search is done (cal-after.json in `out`), and the
    plan's highest rate under the same SLO with it, against the measured rate (bracket). On two shared cores a
    calibration's prompt price moved by a third between vLLM starts half an hour apart (docs/simulator.md, "Where the
    Poisson TPOT bias sits"): this says how far it moved within the check."""
    path = _calibrated(served, out, "cal-after.json")
    engine = calibrated_engine(path, folder, config={"max_model_len": 1024})
    found = bracket(before, plan(engine, slo, shape).max_rate, measured_rate)
    return {"fit": step_time.fit_record(step_time.load(path), path), **found}


FITS = ("steps", "calibrate")


def check_on_vllm(out: Path, model: str = "tiny", prompt_tokens: int = 128, output_tokens: int = 16,
                  requests: int = 60, points: int = 6, factor: float = 1.25, ttft_steps: float = 3.0,
                  tpot_steps: float = 1.5, fit: str = "steps", again: bool = False) -> dict:
    """One vLLM start on a bundled model: a calibration made on it (`fit`: FITS), the plan's highest rate predicted
    with it, then the bounded real search from the prediction, each rate with prompts of its own, a probe (Probe)
    before it and after each rate. The SLO, set from the calibration so that it binds below the knee: TTFT p90 <=
    ttft_steps × the predicted TTFT of one prompt alone (its step, and the request overhead where the calibration
    has one), TPOT p90 <= tpot_steps × the predicted mean decode step of one request alone (lone). Writes cal.json
    (and steps.csv for `steps`) and check.json (the prediction with plan's default band, DEFAULT_BAND; then the
    measurement, whether it fell in the band, the probes and the plan again on the steps as they probed (as_probed),
    and the machine's record: kvviz.calc.machine) to `out`; returns what check.json holds. again (with `calibrate`):
    the calibration made again after the search, and the prediction from it (calibrated_again)."""
    from kvviz.serving.models import has_weights, model_folder
    from kvviz.sim.calibrate import serving

    if fit not in FITS:
        raise ValueError(f"fit: one of {FITS}, not {fit!r}")
    bounds = Search(resolution=0.1, max_points=points, max_wall_s=25.0 * requests)  # checked before vLLM starts
    out.mkdir(parents=True, exist_ok=True)
    asked = Path(model).expanduser()
    dummy = (asked / "config.json").is_file() and not has_weights(asked)  # a config alone: served with random weights
    folder = asked.resolve() if dummy else model_folder(model).path  # its own config, not the served copy's
    shape = Shape(prompt_tokens, output_tokens, requests=requests)
    with serving(model, 1024, dummy_weights=dummy) as served:
        ep = served.server.endpoint()
        path = _fitted_from_steps(served, out, folder) if fit == "steps" else _calibrated(served, out)
        engine = calibrated_engine(path, folder, config={"max_model_len": 1024})
        alone = lone(engine, shape)
        slo = SloLimits(ttft_s=ttft_steps * alone[0], tpot_s=tpot_steps * alone[1], ttft_percentile=90,
                        tpot_percentile=90)
        predicted = plan(engine, slo, shape, band=DEFAULT_BAND)
        result = {"model": model, "fit_kind": fit, "fit": step_time.fit_record(step_time.load(path), path),
                  "request_overhead_s": engine.overhead_s, "handoff_s": engine.handoff_s, "slo": asdict(slo),
                  "shape": asdict(shape),
                  "predicted": {"max_rate": predicted.max_rate, "next_rate": predicted.next_rate,
                                "knee_requests_per_s": predicted.knee.requests_per_s,
                                "band": asdict(predicted.band), "lone_ttft_s": alone[0], "lone_tpot_s": alone[1],
                                "points": [asdict(p) for p in predicted.points]}}
        (out / "check.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        probes: list[Probe] = []

        def probed(after_rate: float | None) -> None:
            prompts = synthetic(PROBE_REQUESTS, prompt_tokens, served.tokenizer, served.seed())
            probes.append(probe(ep, prompts, shape, alone, after_rate))

        probed(None)
        low, high, searcher = real_max_rate(
            ep, slo, shape, lambda: synthetic(requests, prompt_tokens, served.tokenizer, served.seed()),
            predicted.max_rate, bounds, factor, after=probed)
        later = calibrated_again(served, out, folder, slo, shape, predicted.max_rate, low) if again else None
    result |= {"measured": {"max_rate": low, "next_rate": high, "points": [asdict(p) for p in searcher.points],
                            "stopped": str(searcher.stopped) if searcher.stopped else None},
               "ratio_predicted_to_measured": predicted.max_rate / low if low else None,
               "measured_in_band": predicted.band.slower_max_rate <= low <= predicted.band.faster_max_rate,
               "probes": [asdict(p) | {"step_ratio": p.step_ratio} for p in probes],
               "as_probed": as_probed(engine, slo, shape, probes, low),
               "load_average_1m": round(os.getloadavg()[0], 2), "machine": machine()}
    result |= {"calibrated_after": later} if later else {}
    (out / "check.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def as_probed(engine: Engine, slo: SloLimits, shape: Shape, probes: Sequence[Probe], measured_rate: float) -> dict:
    """The plan again with every step of `engine` scaled by the probes' median step_ratio: not a prediction (the
    probes ran during the search) but how much of the check's miss the machine's speed on the day explains. Its
    highest rate held, and that over the measured one."""
    ratios = sorted(p.step_ratio for p in probes)
    median = statistics.median(ratios)
    again = plan(replace(engine, model=Scaled(engine.model, median)), slo, shape)
    return {"step_ratio_median": median, "step_ratio_min": ratios[0], "step_ratio_max": ratios[-1],
            "max_rate": again.max_rate, "ratio_to_measured": again.max_rate / measured_rate if measured_rate else None}


def _count(text: str) -> int:
    """A count from the command line: a whole number from 1, else argparse's one-line refusal."""
    import argparse

    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number from 1, not {text!r}")
    return int(text)


def main(argv: Sequence[str] | None = None) -> dict:
    """python -m kvviz.sim.plan_check DIR [TTFT_STEPS TPOT_STEPS [MODEL [steps|calibrate [PROMPT OUTPUT]]]]
    [--requests N] [--points N] [--again]: check_on_vllm, its result printed as JSON."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kvviz.sim.plan_check",
                                     description="The plan's highest rate under an SLO, predicted, then searched for "
                                                 "on a real vLLM.")
    parser.add_argument("out", nargs="?", type=Path, default=Path("plan-check"))
    parser.add_argument("ttft_steps", nargs="?", type=float, default=3.0)
    parser.add_argument("tpot_steps", nargs="?", type=float, default=1.5)
    parser.add_argument("model", nargs="?", default="tiny")
    parser.add_argument("fit", nargs="?", default="steps", choices=FITS)
    parser.add_argument("prompt_tokens", nargs="?", type=int, default=128)
    parser.add_argument("output_tokens", nargs="?", type=int, default=16)
    parser.add_argument("--requests", type=_count, default=60, help="requests each rate sends, predicted and measured")
    parser.add_argument("--points", type=_count, default=6, help="rates the real search runs at most")
    parser.add_argument("--again", action="store_true",
                        help="with calibrate: calibrate again once the search is done, and predict from that too")
    args = parser.parse_args(argv)
    if args.again and args.fit != "calibrate":
        parser.error("--again: with calibrate only (a calibration made again after the search)")
    try:
        result = check_on_vllm(**vars(args))
    except InputError as error:  # e.g. fewer rates than a search needs: one line, not a traceback
        parser.error(str(error))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
