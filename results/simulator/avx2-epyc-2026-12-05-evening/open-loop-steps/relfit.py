# ruff: noqa: E501, S301  (a scratch analysis of pickles written beside it, kept as run)
"""Refit the saved calibration runs with relative weights (each row's squared error over its measured seconds
squared) and compare predictions with the measured loads of the same start."""

import pickle
import sys

import numpy as np

import kvviz.sim.calibrate as C
from kvviz.sim.validate import _predicted

mode = sys.argv[2]
orig_add = C.Rows.add


def rel_add(self, x, y, w, kind):
    if kind == C.GAP:
        w = w / max(y, 1e-4) ** 2
    else:
        w = 1.0 / max(y, 1e-4) ** 2
    orig_add(self, x, y, w, kind)


if mode == "rel":
    C.Rows.add = rel_add
data = pickle.load(open(sys.argv[1], "rb"))
engine = data["engine"]
fitted = C.fit_runs(data["cal"], engine)
print(mode, fitted.step, f"overhead {1e3 * fitted.request_overhead_s:.1f} ms handoff {fitted.handoff_s}", fitted.fit)
for k, v in fitted.residuals_by_load.items():
    print(
        "  ",
        k,
        f"gap res {1e3 * (v.get('gap_residual_mean_s') or 0):+.1f} rms {1e3 * (v.get('gap_residual_rms_s') or 0):.1f} ttft res {1e3 * (v.get('ttft_residual_mean_s') or 0):+.1f}",
    )
errs = {"tpot50": [], "tpot90": [], "tpotmean": [], "ttft50": [], "tput": []}
for ms in data["runs"]:
    stats, pre, sim = _predicted(ms.point, engine, fitted)
    mt = [r.tpot_s for r in ms.records if r.tpot_s]
    st = [s.tpot_s for s in sim.records if s.tpot_s]
    mf = [r.ttft_s for r in ms.records if r.ttft_s]
    row = dict(
        tpot50=(np.percentile(st, 50), np.percentile(mt, 50)),
        tpot90=(np.percentile(st, 90), np.percentile(mt, 90)),
        tpotmean=(np.mean(st), np.mean(mt)),
        ttft50=(stats.ttft.p50, np.percentile(mf, 50)),
        tput=(stats.output_tokens_per_s, ms.stats.output_tokens_per_s),
    )
    for k, (p, m) in row.items():
        errs[k].append((p - m) / m)
    print(
        "  ",
        ms.point.label,
        " ".join(
            f"{k} {1e3 * p if k != 'tput' else p:.1f}/{1e3 * m if k != 'tput' else m:.1f}" for k, (p, m) in row.items()
        ),
    )
print(
    mode,
    "MAPE %:",
    " ".join(f"{k} {100 * np.mean(np.abs(v)):.1f} (bias {100 * np.mean(v):+.1f})" for k, v in errs.items()),
)
