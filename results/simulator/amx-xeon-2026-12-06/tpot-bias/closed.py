# ruff: noqa: S301  (a scratch analysis of committed pickles, kept as run)
"""window.py's regression on the calibration's closed loops of 4 and 12 at 64/32 (31 decode steps a request): what a
64-token prompt joining the loop's decodes cost the client, against the fit's price of it (b x 64 + d x 64 x 65 / 2)
and the same regression on the loop replayed on the fit. python closed.py PKL..., from the repository root with
PYTHONPATH=."""

import pickle
import sys

import numpy as np

from kvviz.sim.calibrate import engine_order, fit_runs, replay


def fit(records, n):
    ok = [r for r in records if r.ok and len(r.arrivals_s) == r.new_tokens == n]
    firsts = np.array([r.sent_s + r.arrivals_s[0] for r in ok])
    rest = np.sort(np.concatenate([r.sent_s + np.array(r.arrivals_s[1:]) for r in ok]))
    x, y = [], []
    for r in ok:
        first, last = r.sent_s + r.arrivals_s[0], r.sent_s + r.arrivals_s[-1]
        prompts = np.count_nonzero((firsts > first) & (firsts <= last))
        decodes = np.searchsorted(rest, last, "right") - np.searchsorted(rest, first, "right") - (n - 1)
        x.append((1.0, decodes / (n - 1), prompts / (n - 1)))
        y.append((last - first) / (n - 1))
    coef, *_ = np.linalg.lstsq(np.array(x), np.array(y), rcond=None)
    return coef, np.array(x).mean(axis=0)


for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        starts = pickle.load(handle)
    for i, s in enumerate(starts):
        runs = s["cal"] + s.get("lone", [])
        f = fit_runs(runs, s["engine"])
        st = f.step
        price = st.b * 64 + st.d * 64 * 65 / 2
        line = f"{path.split('/')[-1]} start {i}: the fit's 64-token prompt {1e3 * price:.2f} ms;"
        for m in runs:
            if m.point.closed and m.point.mix.prompt_tokens == 64 and m.point.concurrency in (4, 12):
                order, joined = engine_order(m)
                sim = replay(m.point, s["engine"], st, f.handoff_s, joined=joined, return_s=f.request_overhead_s)
                (b0, _, pm), mx = fit(m.records, 32)
                (b1, _, ps), _ = fit(sim.records, 32)
                line += (f" loop of {m.point.concurrency}: per prompt measured {1e3 * pm:.2f} ms, replayed "
                         f"{1e3 * ps:.2f} (base {1e3 * b0:.2f} / {1e3 * b1:.2f}; {mx[2] * 31:.1f} prompts a window);")
        print(line, flush=True)
