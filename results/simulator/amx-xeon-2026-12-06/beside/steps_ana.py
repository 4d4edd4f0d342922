# ruff: noqa: S301  (pickles of its own runs)
"""steps_lab.py's pickle again: vLLM's logged steps of each Poisson load by the number of 128-token prompts they
compute (0-3, whole prompts only) and the decodes beside, and one least-squares fit over all of them,
elapsed = base + per_prompt × prompts + per_decode × decodes (+ F for a step with any prompt, where the fit can tell
it): does a step's second prompt cost what its first does? python steps_ana.py PKL, from this folder with PYTHONPATH
set to the repository root."""

import pickle
import sys

import numpy as np

with open(sys.argv[1], "rb") as handle:
    found = pickle.load(handle)
for model, loads in found.items():
    for m in loads:
        steps = [s for s in m.engine_steps if s.context_tokens == 128 * s.context_requests and s.context_requests <= 3]
        n = np.array([s.context_requests for s in steps], dtype=float)
        d = np.array([s.generation_requests for s in steps], dtype=float)
        t = np.array([1e3 * s.elapsed_s for s in steps])
        print(f"{model}, {m.point.label}: {len(steps)} steps of whole 128-token prompts (of {len(m.engine_steps)})")
        for k in range(4):
            sel = n == k
            if sel.any():
                print(f"  {k} prompts: {sel.sum()} steps, median {np.median(t[sel]):.2f} ms, median decodes beside "
                      f"{np.median(d[sel]):.0f}")
        for name, x in (("base + prompts + decodes", np.column_stack([np.ones_like(n), n, d])),
                        ("with F (any prompt)", np.column_stack([np.ones_like(n), (n > 0).astype(float), n, d]))):
            coef, *_ = np.linalg.lstsq(x, t, rcond=None)
            rms = float(np.sqrt(np.mean((t - x @ coef) ** 2)))
            print(f"  fit {name}: " + ", ".join(f"{c:.3f}" for c in coef) + f" ms (rms {rms:.2f} ms)")
        # robust: the same with the slowest 5% left out (stalls)
        keep = t <= np.quantile(t, 0.95)
        x = np.column_stack([np.ones_like(n), (n > 0).astype(float), n, d])[keep]
        coef, *_ = np.linalg.lstsq(x, t[keep], rcond=None)
        print("  fit with F, slowest 5% left out: base, F, per prompt, per decode "
              + ", ".join(f"{c:.3f}" for c in coef)
              + " ms")
