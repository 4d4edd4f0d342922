"""plan_check with the simulator's way back off (return_s forced to 0 in the calibration fit and the plan)."""
import sys
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
sys.argv = ["plan_check", *sys.argv[1:]]
plan_check.main(sys.argv[1:]) if hasattr(plan_check, "main") else None
import json
from pathlib import Path
print(json.dumps(plan_check.check_on_vllm(Path(sys.argv[1]), ttft_steps=6.0, tpot_steps=2.0, model=sys.argv[2], fit="calibrate"), indent=2))
