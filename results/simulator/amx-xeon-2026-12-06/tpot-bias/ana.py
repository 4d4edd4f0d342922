# ruff: noqa: S301  (a scratch analysis of the pickle lab.py wrote, kept as run)
"""lab.py's starts fitted two ways and their Poisson loads predicted: "cold", the calibration as kvviz makes it (its
lone prompts after the engine idled); "hot", the same with the lone-prompt loads measured beside a running request
(each of their rows then holds one more decode a step: the background request's; its attention pairs, at most 1,000
a step, left out). TPOT and TTFT p50 / p90 errors. python ana.py PKL, from the repository root with PYTHONPATH=."""

import pickle
import statistics
import sys

import numpy as np

from kvviz.sim import calibrate as cal
from kvviz.sim.calibrate import COL_A, COL_C, fit_runs
from kvviz.sim.validate import _predicted

HOT = set()
_load_rows, _engine_rows = cal.load_rows, cal.engine_rows


def beside(fn):
    def wrapped(measured, result, *args, **kwargs):
        rows = args[-1] if fn is _load_rows and len(args) >= 2 else (args[0] if args else kwargs["rows"])
        before = len(rows.y)
        fn(measured, result, *args, **kwargs)
        if id(measured) in HOT:
            for x in rows.x[before:]:
                x[COL_C] += x[COL_A]  # one decode more in each step: the request beside
    return wrapped


cal.load_rows, cal.engine_rows = beside(_load_rows), beside(_engine_rows)
with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)
errors = {}
for i, s in enumerate(starts):
    lone = [m for m in s["cal"] if m.point.concurrency == 1 and m.point.mix.prompt_tokens >= 128]
    pairs = [(c.point.mix.prompt_tokens, 1e3 * c.server.prefill_mean_s, 1e3 * h.server.prefill_mean_s,
              1e3 * c2.server.prefill_mean_s) for c, h, c2 in zip(lone, s["hot"], s["cold"], strict=True) if h]
    print(f"start {i}: vLLM's mean prefill ms, cold / hot / cold again: "
          + "; ".join(f"{p}: {c:.2f} / {h:.2f} / {c2:.2f}" for p, c, h, c2 in pairs))
    if any(h is None for h in s["hot"]):
        print("  a hot load's background request ended before it: start left out")
        continue
    HOT.clear()
    HOT.update(id(m) for m in s["hot"])
    fits = {"cold": fit_runs(s["cal"], s["engine"]),
            "hot": fit_runs([m for m in s["cal"] if m not in lone] + s["hot"], s["engine"])}
    for name, f in fits.items():
        st = f.step
        line = (f"  {name}: a {1e3 * st.a:.2f} ms, b {1e6 * st.b:.1f} us, c {1e6 * st.c:.0f} us, d {1e9 * st.d:.1f} ns,"
                f" e {1e12 * st.e:.0f} ps, overhead {1e3 * f.request_overhead_s:.2f} ms; 128 tokens "
                f"{1e3 * (st.b * 128 + st.d * 128 * 129 / 2):.2f} ms;")
        for m in s["held"]:
            p = _predicted(m.point, s["engine"], f)[0]
            e = (p.tpot.p50 / m.stats.tpot.p50 - 1, p.tpot.p90 / m.stats.tpot.p90 - 1,
                 p.ttft.p50 / m.stats.ttft.p50 - 1, p.ttft.p90 / m.stats.ttft.p90 - 1)
            errors.setdefault(name, []).append(e)
            line += f" {m.point.rate:g}/s TPOT {e[0]:+.0%} {e[1]:+.0%} TTFT {e[2]:+.0%} {e[3]:+.0%};"
        print(line, flush=True)
for name, e in errors.items():
    a = np.array(e)
    print(f"{name}: mean |error| TPOT p50 {np.abs(a[:, 0]).mean():.1%}, p90 {np.abs(a[:, 1]).mean():.1%}, TTFT p50 "
          f"{np.abs(a[:, 2]).mean():.1%}, p90 {np.abs(a[:, 3]).mean():.1%}; mean signed TPOT p50 "
          f"{a[:, 0].mean():+.1%}, p90 {a[:, 1].mean():+.1%}; worst |TPOT p90| {np.abs(a[:, 1]).max():.1%}")
print("median hot / cold prefill over the pairs:", statistics.median(
    h.server.prefill_mean_s / c.server.prefill_mean_s for s in starts
    for c, h in zip([m for m in s["cal"] if m.point.concurrency == 1 and m.point.mix.prompt_tokens >= 128], s["hot"],
                    strict=True) if h))
