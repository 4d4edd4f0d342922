"""Do the calibration's lone prompts carry a cost a prompt under Poisson load does not? One vLLM start of tiny with
vLLM's per-step log on (the worker in its own process), a warm-up, kvviz's calibration, then Poisson 128/16 at 110
requests/s (600) twice. Per load: vLLM's mean prefill time (its clock, from scheduling to the first token: what the
calibration fits the lone prompts on) beside the logged elapsed time of the steps that computed them (the model's
execution), and per step the wall time not in the logged execution (the load's wall time less the steps' elapsed
over its steps: scheduling, the step's update, the wait for the next request). python lone_lab.py OUT.pkl, from
the repository root with PYTHONPATH=. and kvviz's vLLM set up."""

import pickle
import sys

import numpy as np

from kvviz.sim.calibrate import LoadPoint, Mix, calibrate, measure, serving, warm_up

with serving("tiny", 1024, engine_steps=True) as served:
    warm_up(served)
    fitted, runs = calibrate(served)
    held = [measure(served, LoadPoint(Mix(128, 16), 600, rate=110.0, seed=s)) for s in (1, 2)]
with open(sys.argv[1], "wb") as handle:
    pickle.dump({"fitted": fitted, "cal": runs, "held": held, "engine": served.engine}, handle)
print(fitted.step, "overhead", fitted.request_overhead_s, "handoff", fitted.handoff_s)
for m in runs + held:
    steps = m.engine_steps
    prompt = [1e3 * s.elapsed_s for s in steps if s.context_requests == 1 and s.generation_requests == 0]
    decode = [1e3 * s.elapsed_s for s in steps if s.context_requests == 0]
    wall = max(r.sent_s + r.e2e_s for r in m.records if r.ok) - min(r.sent_s for r in m.records)
    busy = sum(s.elapsed_s for s in steps)
    v = m.server
    print(f"{m.point.label}: vLLM prefill mean {1e3 * (v.prefill_mean_s or 0):.2f} ms; logged steps of one prompt "
          f"alone {len(prompt)} x {np.median(prompt) if prompt else float('nan'):.2f} ms (median); decode-only "
          f"{len(decode)} x {np.median(decode) if decode else float('nan'):.2f} ms; wall {wall:.2f} s, {len(steps)} "
          f"steps, {1e3 * (wall - busy) / max(len(steps), 1):.2f} ms a step outside the logged execution; client "
          f"TPOT p50 {1e3 * (m.stats.tpot.p50 or 0):.2f} ms", flush=True)
