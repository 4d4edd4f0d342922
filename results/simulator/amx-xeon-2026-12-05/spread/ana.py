# ruff: noqa: S301  (a scratch analysis of the pickle written beside it, kept as run)
"""Each start of lab.py fitted three ways, and the Poisson loads' TPOT p50 / p90 predicted by each: the calibration as
kvviz makes it; with the lone prompts added to its loads; and that fit with b and d refitted on the lone prompts'
prefill times alone (vLLM's clock: one step each, a + b*P + d*P(P+1)/2, a as fitted). python ana.py PKL."""

import pickle
import sys
from dataclasses import replace

import numpy as np

from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted

with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)


def lone_pinned(fitted, runs):
    """b and d from the loops of one's mean prefill times, a kept."""
    rows = [(m.point.mix.prompt_tokens, m.server.prefill_mean_s) for m in runs
            if m.point.closed and m.point.concurrency == 1 and m.server and m.server.prefill_mean_s]
    x = np.array([(p, p * (p + 1) / 2) for p, _ in rows], dtype=float)
    y = np.array([t - fitted.step.a for _, t in rows])
    (b, d), *_ = np.linalg.lstsq(x, y, rcond=None)
    return replace(fitted, step=replace(fitted.step, b=max(float(b), 0.0), d=max(float(d), 0.0)))


errors = {}
for i, s in enumerate(starts):
    as_made = fit_runs(s["cal"], s["engine"])
    with_lone = fit_runs(s["cal"] + s["lone"], s["engine"])
    fits = {"as kvviz makes it": as_made, "lone prompts added": with_lone,
            "b, d from the lone prompts": lone_pinned(with_lone, s["cal"] + s["lone"])}
    for name, f in fits.items():
        st = f.step
        line = f"start {i}, {name}: b {1e6 * st.b:.1f} us, d {1e9 * st.d:.1f} ns;"
        for m in s["held"]:
            p = _predicted(m.point, s["engine"], f)[0]
            e50, e90 = p.tpot.p50 / m.stats.tpot.p50 - 1, p.tpot.p90 / m.stats.tpot.p90 - 1
            errors.setdefault(name, []).append((e50, e90))
            line += (f" {m.point.rate:g}/s TPOT p50 {1e3 * m.stats.tpot.p50:.2f} / {1e3 * p.tpot.p50:.2f} ({e50:+.0%}),"
                     f" p90 {1e3 * m.stats.tpot.p90:.2f} / {1e3 * p.tpot.p90:.2f} ({e90:+.0%})")
        print(line)
for name, e in errors.items():
    a = np.abs(np.array(e))
    print(f"{name}: mean |error| TPOT p50 {a[:, 0].mean():.1%}, p90 {a[:, 1].mean():.1%}; "
          f"worst p90 {a[:, 1].max():.1%}")
