"""Each SLO check of this day planned again on its own calibration and SLO with the decode term split by the step's
kind (../tpot-bias/beside.py): a decode in a step that computes prompt tokens charged nothing ("free") or b, a
prompt token's cost ("token"), and c as calibrated in a step of decodes alone. Not a refit: the calibration's
coefficients as saved (refitted offline on the saved starts the split moved a-e by under 1%: beside.txt). The
checks of this day's folders (check.json: SLO, shape, measured rate; ../e-term/ and ../lone-offset/ were made with
fits not kept, and are counted apart), and the three starts of ../repeat-search/ (the SLO of its repeat.py, the
median of its three searches as the measured rate, and whether it lies in the prediction's band of ±10% steps).
python checks.py, from this folder with PYTHONPATH set to the repository root."""

import json
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from kvviz.serving.models import model_folder
from kvviz.sim.plan import DEFAULT_BAND, Shape, SloLimits, calibrated_engine, plan
from kvviz.sim.plan_check import lone


@dataclass(frozen=True)
class Beside:
    inner: object
    token: bool

    def seconds(self, step) -> float:
        if not step.prefill_tokens or not step.decode_seqs:
            return self.inner.seconds(step)
        return self.inner.seconds(step) - step.decode_seqs * (self.inner.c - (self.inner.b if self.token else 0.0))


def checks():
    for check in sorted(Path("..").glob("*/plan-check-*/check.json")):
        c = json.loads(check.read_text(encoding="utf-8"))
        s = c["shape"]
        yield (f"{check.parent.parent.name}/{check.parent.name}", c["model"], check.parent / "cal.json",
               SloLimits(**c["slo"]), Shape(s["prompt_tokens"], s["output_tokens"], requests=s["requests"]),
               c["measured"]["max_rate"])
    runs = json.loads(Path("../repeat-search/repeat.json").read_text(encoding="utf-8"))["runs"]
    shape = Shape(128, 16, requests=600)
    for run in runs:
        path = Path(f"../repeat-search/start-{run['start']}/cal.json")
        alone = lone(calibrated_engine(path, model_folder("tiny").path, config={"max_model_len": 1024}), shape)
        slo = SloLimits(ttft_s=6 * alone[0], tpot_s=2 * alone[1], ttft_percentile=90, tpot_percentile=90)
        yield (f"repeat-search/start-{run['start']}", "tiny", path, slo, shape,
               statistics.median(s["max_rate"] for s in run["searches"]))


NOT_KEPT = ("e-term/", "lone-offset/")  # checks made with fits that were not kept
ratios = {"as made": [], "free": [], "token": []}
for name, model, path, slo, shape, measured in checks():
    engine = calibrated_engine(path, model_folder(model).path, config={"max_model_len": 1024})
    kept = not name.startswith(NOT_KEPT)
    line = f"{name}: measured {measured:.4g} /s;"
    if name.startswith("repeat-search"):
        band = plan(engine, slo, shape, band=DEFAULT_BAND).band
        line += f" band {band.slower_max_rate:.4g}-{band.faster_max_rate:.4g} /s" \
                f" ({'in' if band.slower_max_rate <= measured <= band.faster_max_rate else 'out'});"
    for kind, step in (("as made", engine.model), ("free", Beside(engine.model, False)),
                       ("token", Beside(engine.model, True))):
        rate = plan(replace(engine, model=step), slo, shape).max_rate
        ratios[kind].append((model, kept, rate / measured))
        line += f" {kind} {rate:.4g} /s ({rate / measured:.3f});"
    print(line, flush=True)
for kind, found in ratios.items():
    for model, which in ((m, w) for m in ("tiny", "smollm2-135m-instruct") for w in ("kept", "all")):
        r = [x for m, k, x in found if m == model and (k or which == "all")]
        print(f"{kind}, {model}, {which}: {sum(abs(x - 1) <= 0.15 for x in r)} of {len(r)} within 15%, "
              f"mean {statistics.mean(r):.3f},"
              f" {min(r):.2f}-{max(r):.2f}", flush=True)
