# ruff: noqa: S301  (a scratch analysis of the pickle written beside it, kept as run)
"""The requests whose stream had fewer chunks than tokens (vLLM's API server sending two tokens in one chunk), where
in the stream the merged gap was, and each round fitted with the code as it is: its coefficients and each load's
rows (gap rows, and span rows: a merged request's whole decode). python ana.py PKL."""

import collections
import pickle
import sys

import numpy as np

from kvviz.sim.calibrate import fit_runs

with open(sys.argv[1], "rb") as handle:
    d = pickle.load(handle)
merged, total, where = 0, 0, collections.Counter()
for runs in d["rounds"]:
    for m in runs:
        for r in m.records:
            total += 1
            if r.new_tokens > len(r.arrivals_s):
                merged += 1
                gaps = np.diff(r.arrivals_s)
                long = tuple(i for i, g in enumerate(gaps) if g > 1.6 * np.median(gaps))
                where[(m.point.label, len(r.arrivals_s), r.new_tokens, long[:4])] += 1
print(f"{merged} of {total} requests had fewer chunks than tokens; (load, chunks, tokens, gaps over 1.6x the median):")
for key, n in sorted(where.items()):
    print(f"  {n} x {key}")
for i, runs in enumerate(d["rounds"]):
    f = fit_runs(runs, d["engine"])
    s = f.step
    rows = {k: (v.get("gap_rows"), v.get("span_rows")) for k, v in f.residuals_by_load.items()}
    print(f"round {i}: a {1e3 * s.a:.2f} ms, b {1e6 * s.b:.1f} us, c {1e6 * s.c:.0f} us, d {1e9 * s.d:.1f} ns, "
          f"e {1e12 * s.e:.0f} ps; (gap rows, span rows) by load: {rows}")
