"""Does a decode beside a prompt cost the step what it costs a step of decodes alone? One vLLM start per model with
vLLM's per-step log on (kvviz.sim.calibrate.serving(..., engine_steps=True)), a warm-up, then Poisson loads of
128/16 near the SLO check's rates (tiny 110 and 130 /s, 600 requests; SmolLM2 9 and 11 /s, 120), and vLLM's logged
steps grouped by the prompts they compute and the decodes beside: median elapsed time (the model's execution) per
group, and the least-squares slope of elapsed time on decodes, in steps with one prompt and in steps with none.
python steps_lab.py OUT.pkl, from the repository root with PYTHONPATH=. and kvviz's vLLM set up."""

import collections
import pickle
import sys

import numpy as np

from kvviz.sim.calibrate import LoadPoint, Mix, measure, serving, warm_up

RATES = {"tiny": ((110.0, 130.0), 600), "smollm2-135m-instruct": ((9.0, 11.0), 120)}
found = {}
for model, (rates, requests) in RATES.items():
    with serving(model, 1024, engine_steps=True) as served:
        warm_up(served)
        found[model] = [measure(served, LoadPoint(Mix(128, 16), requests, rate=r, seed=1)) for r in rates]
with open(sys.argv[1], "wb") as handle:
    pickle.dump(found, handle)
for model, loads in found.items():
    for m in loads:
        steps = [s for s in m.engine_steps if s.context_tokens in (0, 128) and s.context_requests <= 1]
        print(f"{model}, {m.point.label}: {len(m.engine_steps)} steps logged, TPOT p50 {1e3 * m.stats.tpot.p50:.2f} ms")
        for prompts in (0, 1):
            kind = [s for s in steps if s.context_requests == prompts]
            groups = collections.defaultdict(list)
            for s in kind:
                groups[s.generation_requests // 4 * 4].append(1e3 * s.elapsed_s)
            d = np.array([s.generation_requests for s in kind], dtype=float)
            t = np.array([1e3 * s.elapsed_s for s in kind])
            slope = np.polyfit(d, t, 1) if len(set(d)) > 1 else (float("nan"), float("nan"))
            print(f"  {prompts} prompt(s) of 128: {len(kind)} steps; by decodes beside (from D): "
                  + ", ".join(f"{k}: {len(v)} x {np.median(v):.2f} ms" for k, v in sorted(groups.items()))
                  + f"; fit {slope[1]:.2f} ms + {1e3 * slope[0]:.0f} us a decode")
