# ruff: noqa: S301  (a scratch analysis of committed pickles, kept as run)
"""sixth.py with f fitted where the prompts alone can tell it: the lone rows (a + f + b·p + d·pairs, a from the decode
rows) fit b, d and f together when they tell three apart (four rows or more: the loop of one at 64 and the lone
prompts of 128, 384 and 960), e (and the overhead) from the other rows with those kept; sixth.py fitted f on the
other rows, where it traded with b. Same scores as sixth.py. python sixth_lone.py, from this folder with PYTHONPATH
set to the repository root."""

import pickle
from dataclasses import dataclass

import numpy as np

from kvviz.sim import calibrate as cal
from kvviz.sim.validate import _predicted

KEPT = {"K": cal.K, "cumulative": cal._cumulative, "staged": cal.staged_fit, "linear": cal.LinearStepTime}
F = 5  # the sixth column


@dataclass(frozen=True)
class WithF:
    a: float
    b: float
    c: float
    d: float
    e: float = 0.0
    f: float = 0.0

    def seconds(self, step) -> float:
        return (self.a + self.b * step.prefill_tokens + self.c * step.decode_seqs + self.d * step.attention_pairs
                + self.e * step.prompt_cross + (self.f if step.prefill_tokens else 0.0))


def cumulative(trace):
    x = np.array([(1.0, s.prefill_tokens, s.decode_seqs, s.attention_pairs, s.prompt_cross,
                   1.0 if s.prefill_tokens else 0.0) for s in trace], dtype=float).reshape(-1, 6)
    return np.vstack([np.zeros((1, 6)), np.cumsum(x, axis=0)])


def staged(x, y, w, lone=None):
    """cal.staged_fit with the other rows' coefficients (e, f) kept from the last round in the lone stage."""
    coef, keep = cal.fit_setting_aside(x, y, w)
    decode = keep & (x[:, cal.COL_B] == 0)
    cols = list(cal.DECODE_COLS)
    if decode.sum() < len(cols) or np.linalg.matrix_rank(x[decode][:, cols]) < len(cols):
        return coef, keep
    rest = [j for j in range(x.shape[1]) if j not in cols and x[keep, j].any()]
    alone = keep & lone if lone is not None else np.zeros(len(y), dtype=bool)
    by_lone = np.linalg.matrix_rank(x[alone][:, list(cal.LONE_COLS)]) == len(cal.LONE_COLS)
    lone_cols = [*cal.LONE_COLS, F]
    three = np.linalg.matrix_rank(x[alone][:, lone_cols]) == 3 and alone.sum() > 3
    lone_cols = lone_cols if three else list(cal.LONE_COLS)
    others = [j for j in rest if j not in lone_cols]
    for _ in range(4 * cal.STAGE_ROUNDS):
        found = np.zeros(x.shape[1])
        found[cols] = cal._fit_cols(x, y, w, decode, cols, np.where(np.arange(x.shape[1]) == cal.COL_D, coef, 0.0))
        if by_lone:
            known = found.copy()
            known[others] = coef[others]
            found[lone_cols] = cal._fit_cols(x, y, w, alone, lone_cols, known)
            found[others] = cal._fit_cols(x, y, w, keep & ~alone, others, found)
        else:
            found[rest] = cal._fit_cols(x, y, w, keep, rest, found)
        if np.allclose(found, coef, rtol=1e-6, atol=0.0):
            break
        coef = found
    return coef, keep


def use(sixth: bool) -> None:
    cal.K = 6 if sixth else KEPT["K"]
    cal._cumulative = cumulative if sixth else KEPT["cumulative"]
    cal.staged_fit = staged if sixth else KEPT["staged"]
    cal.LinearStepTime = WithF if sixth else KEPT["linear"]


def say(f) -> str:
    st = f.step
    return (f"a {1e3 * st.a:.2f} ms, b {1e6 * st.b:.1f} us, c {1e6 * st.c:.0f} us, d {1e9 * st.d:.1f} ns, "
            f"e {1e12 * st.e:.0f} ps, f {1e3 * getattr(st, 'f', 0.0):.2f} ms")


errors = {"kept": [], "sixth": []}
for path in ("../../amx-xeon-2026-12-05/spread/spread.pkl", "hot-lab.pkl", "open-lab.pkl"):
    with open(path, "rb") as handle:
        starts = pickle.load(handle)
    for i, s in enumerate(starts):
        runs = s["cal"] + s.get("lone", [])
        for name in errors:
            use(name == "sixth")
            f = cal.fit_runs(runs, s["engine"])
            line = f"{path.split('/')[-1]} {i} {name:5s}: {say(f)};"
            for m in s["held"]:
                p = _predicted(m.point, s["engine"], f)[0]
                e = (p.tpot.p50 / m.stats.tpot.p50 - 1, p.tpot.p90 / m.stats.tpot.p90 - 1)
                errors[name].append(e)
                line += f" {m.point.rate:g}/s TPOT {e[0]:+.0%} {e[1]:+.0%};"
            print(line, flush=True)
use(False)
for name, e in errors.items():
    a = np.array(e)
    print(f"{name}: Poisson TPOT p50 / p90 mean |error| {np.abs(a[:, 0]).mean():.1%} / {np.abs(a[:, 1]).mean():.1%}, "
          f"signed {a[:, 0].mean():+.1%} / {a[:, 1].mean():+.1%}, worst p90 {np.abs(a[:, 1]).max():.1%}", flush=True)

with open("../../amx-xeon-2026-12-05/check-start/validation-loads.pkl", "rb") as handle:
    validation = pickle.load(handle)
for model, d in validation.items():
    for name in ("kept", "sixth"):
        use(name == "sixth")
        f = cal.fit_runs(d["cal"], d["engine"])
        mape = []
        for m in d["held"]:
            p = _predicted(m.point, d["engine"], f)[0]
            mape.append([abs(p.output_tokens_per_s / m.stats.output_tokens_per_s - 1),
                         abs(p.tpot.p50 / m.stats.tpot.p50 - 1), abs(p.ttft.p50 / m.stats.ttft.p50 - 1),
                         abs(p.e2e.p50 / m.stats.e2e.p50 - 1)])
        a = 100 * np.mean(mape, axis=0)
        print(f"validation {model} {name:5s}: {say(f)}; held-out MAPE tput / TPOT / TTFT / E2E p50 "
              f"{a[0]:.1f} / {a[1]:.1f} / {a[2]:.1f} / {a[3]:.1f}%", flush=True)
use(False)
