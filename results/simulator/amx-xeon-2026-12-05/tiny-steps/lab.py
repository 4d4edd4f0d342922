"""Why does the plan check predict tiny's TPOT under Poisson load high? One vLLM start of tiny with its per-step log
(`serving(..., engine_steps=True)`: the worker in its own process), kvviz's calibration on it, then Poisson loads of
128/16 at the rates the SLO check searched, each twice: python lab.py OUT.pkl, from the repository root with
PYTHONPATH=. (kvviz's vLLM set up)."""

import pickle
import sys

from kvviz.sim.calibrate import LoadPoint, Mix, calibrate, measure, serving, warm_up

out = sys.argv[1]
with serving("tiny", 1024, engine_steps=True) as served:
    warm_up(served)
    fitted, runs = calibrate(served)
    held = []
    for rep in range(2):
        for rate in (100.0, 135.0):
            held.append(measure(served, LoadPoint(Mix(128, 16), 120, rate=rate, seed=rep)))
            print(rate, rep, held[-1].stats.tpot.p50, held[-1].stats.tpot.p90, len(held[-1].engine_steps), flush=True)
    with open(out, "wb") as handle:
        pickle.dump({"engine": served.engine, "fitted": fitted, "cal": runs, "held": held}, handle)
