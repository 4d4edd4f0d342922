# ruff: noqa: S301  (a scratch analysis of pickles written beside it, kept as run)
import pickle
import statistics
import sys
from collections import defaultdict

data = pickle.load(open(sys.argv[1], "rb"))
agg = defaultdict(list)
for d in data:
    for s in d["steps"]:
        if s.context_tokens:
            agg[(d["name"], s.context_tokens, s.generation_requests)].append(s.elapsed_s)
for k in sorted(agg):
    v = agg[k]
    print(k, len(v), f"{1e3 * statistics.median(v):.0f} [{1e3 * min(v):.0f}-{1e3 * max(v):.0f}]")
