"""How the plan's highest rate under a fixed SLO moves when the machine's steps run s times the calibrated ones."""

import json
import sys
from dataclasses import replace
from pathlib import Path

from kvviz.serving.models import model_folder
from kvviz.sim import plan as planning
from kvviz.sim.plan import Search, Shape, SloLimits
from kvviz.sim.step_time import LinearStepTime

d = Path(sys.argv[1])
model = sys.argv[2]
check = json.loads((d / "check.json").read_text())
engine = planning.calibrated_engine(d / "cal.json", model_folder(model).path, config={"max_model_len": 1024})
slo = SloLimits(**check["slo"])
shape = Shape(**{k: v for k, v in check["shape"].items() if k in ("prompt_tokens", "output_tokens", "requests")})
m = engine.model
print("measured max rate", check["measured"]["max_rate"], "predicted", check["predicted"]["max_rate"])
for s in (1.0, 1.05, 1.10, 1.15, 1.20):
    e = replace(engine, model=LinearStepTime(*(s * k for k in m.coefficients())))
    p = planning.plan(e, slo, shape, Search(resolution=0.02, max_points=12, max_wall_s=300))
    print(f"steps x{s:.2f}: max rate {p.max_rate:.3f} (knee {p.knee.requests_per_s:.3f})", flush=True)
print("band 10% (plan's default search):", planning.plan(engine, slo, shape, band=0.1).band)
