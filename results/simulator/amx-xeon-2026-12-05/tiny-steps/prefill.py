# ruff: noqa: S301  (a scratch analysis of the pickle written beside it, kept as run)
"""vLLM's own elapsed time (its per-step log) of steps that computed prompt tokens, by the tokens and prompts in them
and the decodes beside them, over every load of a lab pickle: python prefill.py PKL."""

import pickle
import statistics
import sys
from collections import defaultdict

with open(sys.argv[1], "rb") as handle:
    d = pickle.load(handle)
loads = d["cal"] + d.get("extra", []) + d["held"]
rows = defaultdict(list)
for m in loads:
    for s in m.engine_steps:
        rows[(s.context_requests, s.context_tokens, min(s.generation_requests, 8) // 4 * 4)].append(s.elapsed_s)
print("(prompts, prompt tokens, decodes beside: 0-3 / 4-7 / 8+): steps, median elapsed ms, per prompt token us")
for key in sorted(rows):
    if key[1] and len(rows[key]) >= 3:
        med = statistics.median(rows[key])
        print(f"{key}: {len(rows[key]):4d} {1e3 * med:7.2f} {1e6 * med / key[1]:6.1f}")
