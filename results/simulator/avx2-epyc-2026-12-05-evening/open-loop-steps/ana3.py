"""Reconstruct vLLM's steps from the client's token arrivals (one step's tokens reach the client within 2.5 ms),
and compare each busy step's duration with the calibrated linear model of its contents.

python ana3.py calibrated-128-16.pkl            the loads after the calibration, by kind, prefills and decodes
python ana3.py calibrated-128-16.pkl --decodes  decode-only steps by batch, calibration loads included
(PYTHONPATH: the repository; the pickles hold kvviz.sim.calibrate's Measured records, written by lab3.py/lab4.py)
"""

import itertools
import pickle
import statistics
import sys
from collections import defaultdict

import numpy as np

SAME = 2.5e-3


def steps_of(ms, st):
    """Each step after the first that gave a token: its duration (from the step before's tokens), whether the
    engine had work over it, its prompts finished, its decodes, the model's time for it, requests sent during it."""
    recs = [r for r in ms.records if r.ok]
    p = ms.point.mix.prompt_tokens
    ev = sorted((r.sent_s + a, i, k) for i, r in enumerate(recs) for k, a in enumerate(r.arrivals_s))
    clusters = []
    for t, i, k in ev:
        if clusters and t - clusters[-1][0] < SAME:
            clusters[-1][1].append((i, k))
        else:
            clusters.append([t, [(i, k)]])
    last = [r.sent_s + r.arrivals_s[-1] for r in recs]
    out = []
    for (t0, _), (t1, toks) in itertools.pairwise(clusters):
        busy = any(r.sent_s <= t0 + 1e-4 and last[i] > t0 + SAME for i, r in enumerate(recs))
        pre = sum(1 for i, k in toks if k == 0)
        dec = [(i, k) for i, k in toks if k > 0]
        pairs = pre * p * (p + 1) / 2 + sum(p + k for i, k in dec)
        model = st.a + st.b * pre * p + st.c * len(dec) + st.d * pairs
        arrivals = sum(1 for r in recs if t0 < r.sent_s < t1)
        out.append({"dur": t1 - t0, "busy": busy, "pre": pre, "dec": len(dec), "model": model, "arrivals": arrivals})
    return out


def by_kind(data, st):
    groups = defaultdict(list)
    for ms in data["runs"]:
        kind = "open" if ms.point.rate else f"closed{ms.point.concurrency}"
        for s in steps_of(ms, st):
            if s["busy"]:
                groups[(kind, s["pre"], min(s["dec"], 6), min(s["arrivals"], 1))].append((s["dur"], s["model"]))
    print("kind, prompts, decodes, requests sent in the step: n, measured median ms, model median ms, residual "
          "median ms [p25, p75]")
    for k in sorted(groups):
        v = groups[k]
        res = [1e3 * (d - m) for d, m in v]
        print(k, len(v), f"{1e3 * statistics.median(d for d, _ in v):.1f}",
              f"{1e3 * statistics.median(m for _, m in v):.1f}",
              f"{statistics.median(res):+.1f} [{np.percentile(res, 25):+.1f},{np.percentile(res, 75):+.1f}]")


def by_batch(data, st):
    groups = defaultdict(list)
    for ms in data["cal"] + data["runs"]:
        for s in steps_of(ms, st):
            if s["busy"] and s["pre"] == 0:
                groups[s["dec"]].append((s["dur"], s["model"], ms.point.mix.prompt_tokens))
    for n in sorted(groups):
        v = groups[n]
        print(n, len(v), f"measured {1e3 * statistics.median(d for d, _, _ in v):.1f}",
              f"model {1e3 * statistics.median(m for _, m, _ in v):.1f}", "prompts", sorted({p for *_, p in v}))


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        data = pickle.load(f)  # noqa: S301 - written by lab3.py/lab4.py beside it
    fitted = data["fitted"]
    print("model", fitted.step, "overhead", fitted.request_overhead_s, "handoff", fitted.handoff_s)
    (by_batch if "--decodes" in sys.argv else by_kind)(data, fitted.step)
