"""How well the SLO check's measured rate repeats: one vLLM start of tiny as the check makes it, kvviz's calibration on
it, the plan's prediction under the check's SLO (`plan_check DIR 6 2 tiny calibrate --requests 600`), then the real
search for the highest rate held run three times back to back on the same start (each rate with prompts of its own),
at a finer resolution than the check's (5% against 10%, eight rates at most). python repeat.py OUT.json [STARTS],
from the repository root with PYTHONPATH=. and kvviz's vLLM set up."""

import json
import os
import sys
import time
from pathlib import Path

from kvviz.calc.machine import machine
from kvviz.serving.models import model_folder
from kvviz.serving.prompts import synthetic
from kvviz.sim.calibrate import serving
from kvviz.sim.plan import Search, Shape, SloLimits, calibrated_engine, plan
from kvviz.sim.plan_check import _calibrated, lone, real_max_rate

out = Path(sys.argv[1])
starts = int(sys.argv[2]) if len(sys.argv) > 2 else 3
folder = model_folder("tiny").path
shape = Shape(128, 16, requests=600)
found = []
for start in range(starts):
    cal_dir = out.parent / f"start-{start}"
    cal_dir.mkdir(parents=True, exist_ok=True)
    with serving("tiny", 1024) as served:
        ep = served.server.endpoint()
        engine = calibrated_engine(_calibrated(served, cal_dir), folder, config={"max_model_len": 1024})
        alone = lone(engine, shape)
        slo = SloLimits(ttft_s=6 * alone[0], tpot_s=2 * alone[1], ttft_percentile=90, tpot_percentile=90)
        predicted = plan(engine, slo, shape).max_rate
        row = {"start": start, "predicted": predicted, "slo": [slo.ttft_s, slo.tpot_s], "searches": []}
        for k in range(3):
            began = time.monotonic()
            low, high, searcher = real_max_rate(
                ep, slo, shape, lambda: synthetic(600, 128, served.tokenizer, served.seed()), predicted,
                Search(resolution=0.05, max_points=8, max_wall_s=25.0 * 600), 1.25)
            row["searches"].append({"max_rate": low, "next_rate": high, "wall_s": time.monotonic() - began,
                                    "stopped": str(searcher.stopped) if searcher.stopped else None,
                                    "points": [[p.rate, p.held, p.ttft_s, p.tpot_s] for p in searcher.points],
                                    "load_average_1m": round(os.getloadavg()[0], 2)})
            print(f"start {start} search {k}: held {low} not {high}; predicted {predicted:.4g}", flush=True)
        found.append(row)
    out.write_text(json.dumps({"runs": found, "machine": machine()}, indent=2) + "\n", encoding="utf-8")
