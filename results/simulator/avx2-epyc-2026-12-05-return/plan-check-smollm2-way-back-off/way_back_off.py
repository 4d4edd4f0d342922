"""The SLO plan check (kvviz.sim.plan_check, `calibrate`) with the simulator's way back turned off: return_s forced
to 0 in the calibration's fit (kvviz.sim.calibrate) and in the plan (kvviz.sim.plan), as the simulator was before
2026-12-05. Run as: PYTHONPATH=. python way_back_off.py OUT_DIR MODEL (the SLO of 6 steps' TTFT, 2 steps' TPOT)."""

import json
import sys
from pathlib import Path

import kvviz.sim.calibrate as cal
import kvviz.sim.plan as plan
from kvviz.sim import plan_check


def without(f):
    def g(*a, **k):
        k["return_s"] = 0.0
        return f(*a, **k)
    return g


cal.simulate = without(cal.simulate)
plan.simulate = without(plan.simulate)
result = plan_check.check_on_vllm(Path(sys.argv[1]), ttft_steps=6.0, tpot_steps=2.0, model=sys.argv[2], fit="calibrate")
print(json.dumps(result, indent=2))
