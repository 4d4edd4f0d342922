"""The validation's loads, measured for offline refits: per model (tiny, SmolLM2-135M-Instruct), kvviz's own vLLM start
(as `validate` makes it), the calibration, every held-out load of kvviz.sim.validate.FULL (the open loops at the
rates the calibration as made sets), and Poisson 128/16 at rates around the SLO check's answer (120 requests each):
every record pickled (ana.py). python lab2.py OUT.pkl, from the repository root with PYTHONPATH=. and kvviz's vLLM
set up."""

import pickle
import sys

from kvviz.sim.calibrate import LoadPoint, Mix, calibrate, measure, serving, warm_up
from kvviz.sim.validate import FULL, open_rate

RATES = {"tiny": (100.0, 130.0, 160.0), "smollm2-135m-instruct": (8.0, 10.0, 12.0)}
out, found = sys.argv[1], {}
for plan in FULL[:2]:
    with serving(plan.model, plan.max_model_len) as served:
        warm_up(served)
        fitted, runs = calibrate(served, plan.calibration)
        opened = tuple(LoadPoint(mix, n, rate=open_rate(mix, f, served.engine, fitted), seed=n)
                       for mix, f, n in plan.open_fractions)
        held = [measure(served, p) for p in plan.held_out + opened]
        slo = [measure(served, LoadPoint(Mix(128, 16), 120, rate=r, seed=int(r))) for r in RATES[plan.name]]
        for m in held + slo:
            print(plan.name, m.point.label, f"TTFT p50 {1e3 * m.stats.ttft.p50:.1f} TPOT p50 "
                  f"{1e3 * m.stats.tpot.p50:.2f} p90 {1e3 * m.stats.tpot.p90:.2f}", flush=True)
        found[plan.name] = {"engine": served.engine, "fitted": fitted, "cal": runs, "held": held, "slo": slo}
    with open(out, "wb") as handle:
        pickle.dump(found, handle)
