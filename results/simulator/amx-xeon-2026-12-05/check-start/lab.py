"""The SLO check's own vLLM start (kvviz.sim.plan_check: tiny, max_model_len 1024, no per-step log), kvviz's
calibration on it, closed loops at the check's lengths (128/16, 1, 2, 4 and 8 in flight), then Poisson 128/16 at
the rates the check searched (100, 120, 140 and 160 requests/s, 120 requests each, twice): every record pickled for
offline refits (ana.py). python lab.py OUT.pkl, from the repository root with PYTHONPATH=. and kvviz's vLLM set up."""

import pickle
import sys

from kvviz.sim.calibrate import LoadPoint, Mix, calibrate, measure, serving, warm_up

out = sys.argv[1]
with serving("tiny", 1024) as served:
    warm_up(served)
    fitted, runs = calibrate(served)
    extra = [measure(served, LoadPoint(Mix(128, 16), n, concurrency=c)) for c, n in ((1, 4), (2, 8), (4, 16), (8, 24))]
    held = []
    for rep in range(2):
        for rate in (100.0, 120.0, 140.0, 160.0):
            held.append(measure(served, LoadPoint(Mix(128, 16), 120, rate=rate, seed=10 * rep + int(rate))))
            m = held[-1]
            print(rate, rep, f"TTFT p90 {1e3 * m.stats.ttft.p90:.1f} TPOT p50 {1e3 * m.stats.tpot.p50:.2f} "
                  f"p90 {1e3 * m.stats.tpot.p90:.2f}", flush=True)
    with open(out, "wb") as handle:
        pickle.dump({"engine": served.engine, "fitted": fitted, "cal": runs, "extra": extra, "held": held}, handle)
