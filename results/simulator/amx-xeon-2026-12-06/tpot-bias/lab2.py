"""An open loop of another mix in the calibration, measured for openfit3.py: per vLLM start of tiny as the SLO check
makes it, kvviz's calibration as it is, a Poisson load of 256/32 (300 requests) at 0.6 of the rate the calibrated
simulator gives a closed loop of 16 of it, then the SLO check's Poisson loads (128/16 at 110 and 130 requests/s,
600 requests each). Three starts: python lab2.py OUT.pkl, from the repository root with PYTHONPATH=. (kvviz's vLLM
set up)."""

import pickle
import sys

from kvviz.sim.calibrate import LoadPoint, Mix, calibrate, measure, serving, warm_up
from kvviz.sim.validate import open_rate

out, starts = sys.argv[1], []
for start in range(3):
    with serving("tiny", 1024) as served:
        warm_up(served)
        fitted, runs = calibrate(served)
        rate = open_rate(Mix(256, 32), 0.6, served.engine, fitted)
        extra = measure(served, LoadPoint(Mix(256, 32), 300, rate=rate, seed=100 + start))
        held = [measure(served, LoadPoint(Mix(128, 16), 600, rate=r, seed=start)) for r in (110.0, 130.0)]
        starts.append({"engine": served.engine, "cal": runs, "open": extra, "held": held})
        print(start, f"open 256/32 at {rate:g}/s: TPOT p50 {1e3 * extra.stats.tpot.p50:.2f} ms;",
              "poisson 128/16 TPOT p50/p90 ms", [(round(1e3 * m.stats.tpot.p50, 2), round(1e3 * m.stats.tpot.p90, 2))
                                                 for m in held], "load average", [m.load_average for m in held],
              flush=True)
        with open(out, "wb") as handle:
            pickle.dump(starts, handle)
