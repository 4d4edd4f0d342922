# ruff: noqa: S301  (a scratch analysis of committed pickles, kept as run)
"""What the calibration's waves held, step by step: the two starts of ../../amx-xeon-2026-12-05/tiny-steps/ (vLLM's
per-step log on), each calibration load's steps as vLLM logged them (prompts per step; each kind of prompt step's
median elapsed time, the model's execution) beside the steps of kvviz's replay of the same load with the start's fit
(prompts per step told from the step's prompt tokens and prompt_cross: P² / (P² - cross), exact for equal chunks).
python waves.py PKL, from this folder with PYTHONPATH set to the repository root."""

import collections
import pickle
import sys

import numpy as np

from kvviz.sim import calibrate as cal

with open(sys.argv[1], "rb") as handle:
    d = pickle.load(handle)
f, engine = d["fitted"], d["engine"]
print(f.step, "handoff", f.handoff_s, "overhead", f.request_overhead_s)
for m in d["cal"]:
    order, joined = cal.engine_order(m)
    res = cal.replay(m.point, engine, f.step, f.handoff_s, detail=True, joined=joined, return_s=f.request_overhead_s)
    simulated = collections.Counter(
        0 if not s.prefill_tokens else round(s.prefill_tokens ** 2 / (s.prefill_tokens ** 2 - s.prompt_cross))
        for s in res.trace)
    logged = collections.Counter(s.context_requests for s in m.engine_steps)
    print(m.point.label, "steps: vLLM", len(m.engine_steps), "simulated", len(res.trace))
    print("   prompts per step, vLLM:", sorted(logged.items()), " simulated:", sorted(simulated.items()))
    elapsed = collections.defaultdict(list)
    for s in m.engine_steps:
        elapsed[(s.context_requests, s.context_tokens)].append(1e3 * s.elapsed_s)
    print("   vLLM (prompts, prompt tokens): steps, median ms",
          {k: (len(v), round(float(np.median(v)), 2)) for k, v in sorted(elapsed.items()) if k[0]})
