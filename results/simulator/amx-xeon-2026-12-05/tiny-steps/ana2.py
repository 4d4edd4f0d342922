# ruff: noqa: S301  (a scratch analysis of the pickle written beside it, kept as run)
"""lab2.py's held-out Poisson loads predicted from the calibration as made, and from it refitted with the two closed
loops at the check's lengths added: python ana2.py PKL, from the repository root with PYTHONPATH=."""

import pickle
import sys

from kvviz.sim.calibrate import fit_runs
from kvviz.sim.validate import _predicted

with open(sys.argv[1], "rb") as handle:
    d = pickle.load(handle)
engine = d["engine"]
fits = {"as made": fit_runs(d["cal"], engine), "with 128/16": fit_runs(d["cal"] + d["extra"], engine)}
for name, f in fits.items():
    print(name, f.step, "overhead", round(f.request_overhead_s, 5), "handoff", f.handoff_s)
for m in d["held"]:
    line = f"{m.point.label}: TPOT p50 / p90 measured {1e3 * m.stats.tpot.p50:.2f} / {1e3 * m.stats.tpot.p90:.2f}"
    for name, f in fits.items():
        stats = _predicted(m.point, engine, f)[0]
        line += f"; {name} {1e3 * stats.tpot.p50:.2f} / {1e3 * stats.tpot.p90:.2f}"
    print(line)
