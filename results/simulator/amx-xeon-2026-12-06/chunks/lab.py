"""One start of tiny as kvviz makes it, warmed up, then the calibration's loads (kvviz.sim.calibrate.CALIBRATION as
it was before the lone prompts were added: the first six) run ROUNDS times; every Measured pickled for ana.py.
python lab.py ROUNDS OUT.pkl, from the repository root with PYTHONPATH=. and kvviz's vLLM set up."""

import pickle
import sys

from kvviz.sim import calibrate

rounds = int(sys.argv[1])
out = []
with calibrate.serving("tiny", 1024) as served:
    calibrate.warm_up(served)
    for r in range(rounds):
        out.append([calibrate.measure(served, p) for p in calibrate.CALIBRATION[:6]])
        print("round", r, flush=True)
    with open(sys.argv[2], "wb") as handle:
        pickle.dump({"engine": served.engine, "rounds": out}, handle)
