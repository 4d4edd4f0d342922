# ruff: noqa: S301  (a scratch analysis of the pickle written beside it, kept as run)
"""The loads of lab.py against the simulator on their calibration: TPOT measured and predicted, vLLM's steps (its
per-step log) against the simulator's, by contents. python ana.py PKL, from the repository root with PYTHONPATH=."""

import pickle
import statistics
import sys
from collections import defaultdict

from kvviz.sim.validate import _predicted

with open(sys.argv[1], "rb") as handle:
    d = pickle.load(handle)
engine, fitted = d["engine"], d["fitted"]
print("fit", fitted.step, "overhead", fitted.request_overhead_s, "handoff", fitted.handoff_s)


def by_kind(rows):
    """(prompts in the step, decodes in the step bucketed) -> durations"""
    out = defaultdict(list)
    for prompts, decodes, seconds in rows:
        out[(min(prompts, 3), min(decodes // 4 * 4, 16))].append(seconds)
    return out


for m in d["held"]:
    stats, _, sim = _predicted(m.point, engine, fitted)
    vsteps = m.engine_steps
    print(f"\n{m.point.label}: TPOT p50 measured {1e3 * m.stats.tpot.p50:.2f} predicted {1e3 * stats.tpot.p50:.2f}; "
          f"p90 {1e3 * m.stats.tpot.p90:.2f} / {1e3 * stats.tpot.p90:.2f}; steps vLLM {len(vsteps)} simulated "
          f"{len(sim.trace)}; wall measured {m.stats.duration_s:.2f} s simulated {sim.stats.duration_s:.2f}")
    real = by_kind((s.context_requests, s.generation_requests, s.elapsed_s) for s in vsteps)
    simd = by_kind((round(s.prefill_tokens / 128),  # whole 128-token prompts (no chunk is split at these loads)
                    s.decode_seqs, s.duration_s) for s in sim.trace)
    print("  (prompts, decodes//4*4): vLLM n, median elapsed ms | simulated n, median step ms (step time model)")
    for key in sorted(set(real) | set(simd)):
        r, s = real.get(key, []), simd.get(key, [])
        print(f"  {key}: {len(r):4d} {1e3 * statistics.median(r) if r else float('nan'):6.2f} | "
              f"{len(s):4d} {1e3 * statistics.median(s) if s else float('nan'):6.2f}")
    print("  vLLM prompt tokens per step with a prompt:",
          statistics.mean([s.context_tokens for s in vsteps if s.context_tokens] or [0]),
          " simulated:", statistics.mean([s.prefill_tokens for s in sim.trace if s.prefill_tokens]))
