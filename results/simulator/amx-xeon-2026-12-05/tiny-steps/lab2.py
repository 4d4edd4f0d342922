"""lab.py with two closed loops at the check's own lengths (128/16, 2 and 8 in flight) measured after the calibration,
for a refit with them (ana2.py): python lab2.py OUT.pkl, from the repository root with PYTHONPATH=."""

import pickle
import sys

from kvviz.sim.calibrate import LoadPoint, Mix, calibrate, measure, serving, warm_up

out = sys.argv[1]
with serving("tiny", 1024, engine_steps=True) as served:
    warm_up(served)
    fitted, runs = calibrate(served)
    extra = [measure(served, LoadPoint(Mix(128, 16), 8, concurrency=2)),
             measure(served, LoadPoint(Mix(128, 16), 24, concurrency=8))]
    held = []
    for rep in range(2):
        for rate in (100.0, 135.0):
            held.append(measure(served, LoadPoint(Mix(128, 16), 120, rate=rate, seed=rep)))
            print(rate, rep, held[-1].stats.tpot.p50, held[-1].stats.tpot.p90, len(held[-1].engine_steps), flush=True)
    with open(out, "wb") as handle:
        pickle.dump({"engine": served.engine, "fitted": fitted, "cal": runs, "extra": extra, "held": held}, handle)
