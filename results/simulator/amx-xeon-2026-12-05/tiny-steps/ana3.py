# ruff: noqa: S301  (a scratch analysis of the pickle written beside it, kept as run)
"""The hypothesis that a prompt costs the client more per token than vLLM's step does: lab2.py's Poisson loads
predicted with each calibration's b replaced by the per-token cost vLLM's own clock gives a step (the slope of
prefill.txt: B_ENGINE), the rest of the fit as it is: python ana3.py PKL B_ENGINE_S."""

import pickle
import sys
from dataclasses import replace

from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted

with open(sys.argv[1], "rb") as handle:
    d = pickle.load(handle)
engine, b_engine = d["engine"], float(sys.argv[2])
fits = {"as made": fit_runs(d["cal"], engine), "with 128/16": fit_runs(d["cal"] + d["extra"], engine)}
fits |= {f"{n}, b from vLLM's clock": replace(f, step=replace(f.step, b=b_engine)) for n, f in list(fits.items())}
for m in d["held"]:
    line = f"{m.point.label}: TPOT p50 / p90 measured {1e3 * m.stats.tpot.p50:.2f} / {1e3 * m.stats.tpot.p90:.2f}"
    for name, f in fits.items():
        stats = _predicted(m.point, engine, f)[0]
        line += f"; {name} {1e3 * stats.tpot.p50:.2f} / {1e3 * stats.tpot.p90:.2f}"
    print(line)
