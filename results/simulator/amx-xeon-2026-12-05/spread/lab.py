"""The calibration's spread between vLLM starts: STARTS starts of tiny as kvviz makes them, each with the calibration's
loads, lone prompts of 128, 384 and 960 tokens (closed loops of one, 3 requests each), and Poisson 128/16 at 110 and
130 requests/s (600 requests each, the SLO check's load): every record pickled for offline refits (ana.py).
python lab.py STARTS OUT.pkl, from the repository root with PYTHONPATH=. and kvviz's vLLM set up."""

import pickle
import sys

from kvviz.sim.calibrate import CALIBRATION, LoadPoint, Mix, measure, serving, warm_up

LONE = tuple(LoadPoint(Mix(p, 8), 3, concurrency=1) for p in (128, 384, 960))
starts, out, found = int(sys.argv[1]), sys.argv[2], []
for start in range(starts):
    with serving("tiny", 1024) as served:
        warm_up(served)
        cal = [measure(served, p) for p in CALIBRATION]
        lone = [measure(served, p) for p in LONE]
        held = [measure(served, LoadPoint(Mix(128, 16), 600, rate=r, seed=100 * start + int(r)))
                for r in (110.0, 130.0)]
        for m in held:
            print(start, m.point.label, f"TPOT p50 {1e3 * m.stats.tpot.p50:.2f} p90 {1e3 * m.stats.tpot.p90:.2f}",
                  flush=True)
        found.append({"engine": served.engine, "cal": cal, "lone": lone, "held": held})
    with open(out, "wb") as handle:
        pickle.dump(found, handle)
