# ruff: noqa: S301  (a scratch analysis of a committed pickle, kept as run)
"""Where the simulator's TPOT under tiny's Poisson loads runs long, from the client's clock alone: for every request
of 16 tokens, its decode window (last token less first) against what happened in it, the other requests' prompts
finished in it (their first tokens) and the other requests' tokens in it (their decodes beside its own), fitted as
window / 15 = base + per_decode x others' tokens / 15 + per_prompt x prompts / 15, for each measured load and for
the same load simulated from its start's calibration as kvviz now fits it (with the lone prompts). python window.py
PKL (../../amx-xeon-2026-12-05/spread/spread.pkl), from the repository root with PYTHONPATH=."""

import pickle
import sys

import numpy as np

from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted


def design(records):
    """Rows (1, others' decode tokens / 15, prompts finished / 15) and the windows / 15, for the 16-token requests."""
    ok = [r for r in records if r.ok and len(r.arrivals_s) == r.new_tokens == 16]
    firsts = np.array([r.sent_s + r.arrivals_s[0] for r in ok])
    rest = np.sort(np.concatenate([r.sent_s + np.array(r.arrivals_s[1:]) for r in ok]))
    rows, y = [], []
    for r in ok:
        first, last = r.sent_s + r.arrivals_s[0], r.sent_s + r.arrivals_s[-1]
        prompts = np.count_nonzero((firsts > first) & (firsts <= last))
        decodes = np.searchsorted(rest, last, "right") - np.searchsorted(rest, first, "right") - 15
        rows.append((1.0, decodes / 15, prompts / 15))
        y.append((last - first) / 15)
    return np.array(rows), np.array(y)


def fit(records):
    x, y = design(records)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    return coef, x.mean(axis=0), y.mean(), float(np.sqrt(np.mean(resid ** 2)))


with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)
print("per 16-token request: window/15 = base + per_decode * others' tokens/15 + per_prompt * prompts/15 (ms)")
for i, s in enumerate(starts):
    f = fit_runs(s["cal"] + s["lone"], s["engine"])
    st = f.step
    print(f"start {i}: a {1e3 * st.a:.2f} ms, b {1e6 * st.b:.1f} us, c {1e6 * st.c:.0f} us, d {1e9 * st.d:.1f} ns, "
          f"e {1e12 * st.e:.0f} ps; a 128-token prompt {1e3 * (st.b * 128 + st.d * 128 * 129 / 2):.2f} ms")
    for m in s["held"]:
        sim = _predicted(m.point, s["engine"], f)[2]
        for name, records in (("measured", m.records), ("simulated", sim.records)):
            (base, per_dec, per_prompt), mx, my, rms = fit(records)
            print(f"  {m.point.rate:g}/s {name:9s}: mean TPOT {1e3 * my:.2f} ms = base {1e3 * base:.2f} "
                  f"+ {1e6 * per_dec:.0f} us x {mx[1]:.2f} decodes + {1e3 * per_prompt:.2f} ms x {mx[2]:.3f} prompts"
                  f" (rms {1e3 * rms:.2f} ms)", flush=True)
