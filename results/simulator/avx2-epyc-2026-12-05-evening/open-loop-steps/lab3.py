"""Calibrate SmolLM2 (uniprocess, kvviz's default), then run open loops of 128/16 (the SLO check's shape) and
closed loops beside them, interleaved; keep every record for a step-by-step reconstruction (ana3.py)."""

import pickle
import sys

from kvviz.sim.calibrate import LoadPoint, Mix, calibrate, measure, serving, warm_up

model, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
m = Mix(128, 16)
LOADS = [LoadPoint(m, 60, rate=0.5, seed=1), LoadPoint(m, 10, concurrency=1), LoadPoint(m, 15, concurrency=3)]
data = {"runs": []}
with serving(model, 1024) as served:
    warm_up(served)
    fitted, cal = calibrate(served)
    data["fitted"], data["engine"], data["cal"] = fitted, served.engine, cal
    print("fit", fitted.step, fitted.request_overhead_s, fitted.handoff_s, fitted.fit, flush=True)
    for r in range(rounds):
        for p in LOADS if r % 2 == 0 else LOADS[::-1]:
            p = LoadPoint(p.mix, p.requests, p.concurrency, p.rate, seed=p.seed + 10 * r)
            ms = measure(served, p)
            data["runs"].append(ms)
            print(
                f"r{r} {p.label if hasattr(p, 'label') else p} tpot50 {1e3 * ms.stats.tpot.p50:.1f} "
                f"p90 {1e3 * ms.stats.tpot.p90:.1f} ttft50 {1e3 * ms.stats.ttft.p50:.0f} la {ms.load_average}",
                flush=True,
            )
            pickle.dump(data, open(out, "wb"))
