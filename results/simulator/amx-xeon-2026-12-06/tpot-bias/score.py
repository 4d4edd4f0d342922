# ruff: noqa: S301  (a scratch analysis of committed pickles, kept as run)
"""The scoring sixth.py and beside.py share: each step-time variant (a mode, set by use(mode), which patches
kvviz.sim.calibrate) refitted on the saved starts (spread.pkl, hot-lab.pkl, open-lab.pkl) and its Poisson loads'
TPOT p50 / p90 predicted, then on the validation's held-out loads of check-start/validation-loads.pkl, a line each;
say(fitted) names the coefficients. Run from this folder with PYTHONPATH set to the repository root."""

import pickle

import numpy as np

from kvviz.sim import calibrate as cal
from kvviz.sim.validate import _predicted

STARTS = ("../../amx-xeon-2026-12-05/spread/spread.pkl", "hot-lab.pkl", "open-lab.pkl")
VALIDATION = "../../amx-xeon-2026-12-05/check-start/validation-loads.pkl"


def score(modes, use, say, width: int) -> None:
    errors = {name: [] for name in modes}
    for path in STARTS:
        with open(path, "rb") as handle:
            starts = pickle.load(handle)
        for i, s in enumerate(starts):
            runs = s["cal"] + s.get("lone", [])
            for name in modes:
                use(name)
                f = cal.fit_runs(runs, s["engine"])
                line = f"{path.split('/')[-1]} {i} {name:{width}s}: {say(f)};"
                for m in s["held"]:
                    p = _predicted(m.point, s["engine"], f)[0]
                    e = (p.tpot.p50 / m.stats.tpot.p50 - 1, p.tpot.p90 / m.stats.tpot.p90 - 1)
                    errors[name].append(e)
                    line += f" {m.point.rate:g}/s TPOT {e[0]:+.0%} {e[1]:+.0%};"
                print(line, flush=True)
    use(modes[0])
    for name, e in errors.items():
        a = np.array(e)
        print(f"{name}: Poisson TPOT p50 / p90 mean |error| {np.abs(a[:, 0]).mean():.1%} / "
              f"{np.abs(a[:, 1]).mean():.1%}, signed {a[:, 0].mean():+.1%} / {a[:, 1].mean():+.1%}, worst p90 "
              f"{np.abs(a[:, 1]).max():.1%}", flush=True)
    with open(VALIDATION, "rb") as handle:
        validation = pickle.load(handle)
    for model, d in validation.items():
        for name in modes:
            use(name)
            f = cal.fit_runs(d["cal"], d["engine"])
            mape = []
            for m in d["held"]:
                p = _predicted(m.point, d["engine"], f)[0]
                mape.append([abs(p.output_tokens_per_s / m.stats.output_tokens_per_s - 1),
                             abs(p.tpot.p50 / m.stats.tpot.p50 - 1), abs(p.ttft.p50 / m.stats.ttft.p50 - 1),
                             abs(p.e2e.p50 / m.stats.e2e.p50 - 1)])
            a = 100 * np.mean(mape, axis=0)
            print(f"validation {model} {name:{width}s}: {say(f)}; held-out MAPE tput / TPOT / TTFT / E2E p50 "
                  f"{a[0]:.1f} / {a[1]:.1f} / {a[2]:.1f} / {a[3]:.1f}%", flush=True)
    use(modes[0])
