"""Calibrate, then closed loops of 32/64 at 2..24 in flight: the decode step's time against its batch."""

import pickle
import sys

from kvviz.sim.calibrate import LoadPoint, Mix, calibrate, measure, serving, warm_up

model, out = sys.argv[1], sys.argv[2]
data = {"runs": []}
with serving(model, 1024) as served:
    warm_up(served)
    fitted, cal = calibrate(served)
    data["fitted"], data["engine"], data["cal"] = fitted, served.engine, cal
    print("fit", fitted.step, fitted.request_overhead_s, flush=True)
    for c in (2, 6, 8, 16, 24, 32):
        ms = measure(served, LoadPoint(Mix(32, 64), 2 * c, concurrency=c, seed=c))
        data["runs"].append(ms)
        print(c, f"tpot50 {1e3 * ms.stats.tpot.p50:.1f} la {ms.load_average}", flush=True)
        pickle.dump(data, open(out, "wb"))
