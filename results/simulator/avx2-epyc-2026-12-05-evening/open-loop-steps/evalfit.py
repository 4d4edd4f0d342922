# ruff: noqa: S301  (a scratch analysis of pickles written beside it, kept as run)
"""Offline: fit variants on saved calibration runs, scored on the held-out loads measured on the same start."""

import pickle
import sys
from pathlib import Path

import kvviz.sim.calibrate as C
from kvviz.sim.validate import _point, mape

HERE = Path(__file__).parent
SETS = [
    (HERE / "earlier-smol.pkl", "cal", "held"),
    (HERE / "earlier-smol.pkl", "cal2", "held2"),
    (HERE / "earlier-tiny.pkl", "cal", "held"),
    (HERE / "earlier-tiny.pkl", "cal2", "held2"),
    (HERE / "calibrated-128-16.pkl", "cal", "runs"),
    (HERE / "decode-sweep-smol.pkl", "cal", "runs"),
    (HERE / "decode-sweep-tiny.pkl", "cal", "runs"),
]
orig_add = C.Rows.add


def variant(name):
    def add(self, x, y, w, kind):
        if name == "rel":
            w = (w if kind == C.GAP else 1.0) / max(y, 1e-4) ** 2
        elif name == "sqrt":  # between: error relative to sqrt of the size
            w = w / max(y, 1e-4) if kind == C.GAP else (w * max(x[0], 1.0) ** 2) / max(y, 1e-4) / max(x[0], 1.0)
        elif name == "noTTFT" and kind == C.TTFT:
            w = w * 1e-3
        orig_add(self, x, y, w, kind)

    C.Rows.add = add


names = sys.argv[1:] or ["base", "rel", "sqrt"]
for v in names:
    variant(v)
    allrows = []
    for path, cal, held in SETS:
        d = pickle.load(open(path, "rb"))
        fitted = C.fit_runs(d[cal], d["engine"])
        rows = [_point("m", "held-out", m, d["engine"], fitted).row() for m in d[held]]
        allrows += rows
        r = mape(rows)
        print(
            v,
            path.name,
            cal,
            f"a={1e3 * fitted.step.a:.2f}ms c={1e3 * fitted.step.c:.3f}",
            " ".join(f"{k[:9]} {100 * x:.1f}" for k, x in r.items() if x is not None),
            flush=True,
        )
    r = mape(allrows)
    print(v, "ALL", " ".join(f"{k[:9]} {100 * x:.1f}" for k, x in r.items() if x is not None), flush=True)
