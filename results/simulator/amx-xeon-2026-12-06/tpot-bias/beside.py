# ruff: noqa: S301  (a scratch analysis of committed pickles, kept as run)
"""Decodes beside a prompt: vLLM's per-step log of tiny under Poisson load (2026-12-05, tiny-steps/ana.txt) has the
steps that compute one 128-token prompt take 4.08, 4.10 and 3.86 ms with 0-3, 4-7 and 8-11 decodes beside it, where
the decode-only steps take 1.35, 2.01 and 2.45 ms: a decode costs the step next to nothing where the step computes a
prompt. The step model charges c for every decode. Prototyped here (kvviz.sim.calibrate patched in the script, not
in the package): the decode term split by the step's kind, c per decode in a step without prompt tokens, g per
decode in a step with them, t = a + b·P + c·D·[P = 0] + g·D·[P > 0] + d·pairs + e·cross. "free": g = 0; "fitted": g
fitted with e on the rows that are neither decode-only nor lone prompts (staged_fit as it is); "token": g = b (in
a step that computes prompts, a decode is one more token of the batch: the column of b counts it). Scored as sixth.py:
the saved starts' Poisson loads (128/16 at 110 and 130 requests/s) and the validation's held-out loads.
python beside.py, from this folder with PYTHONPATH set to the repository root."""

import pickle
from dataclasses import dataclass

import numpy as np

from kvviz.sim import calibrate as cal
from kvviz.sim.validate import _predicted

KEPT = {"K": cal.K, "cumulative": cal._cumulative, "linear": cal.LinearStepTime}


@dataclass(frozen=True)
class Beside:
    a: float
    b: float
    c: float
    d: float
    e: float = 0.0
    g: float = 0.0
    token: bool = False  # g = b

    def seconds(self, step) -> float:
        per_decode = (self.b if self.token else self.g) if step.prefill_tokens else self.c
        return (self.a + self.b * step.prefill_tokens + per_decode * step.decode_seqs
                + self.d * step.attention_pairs + self.e * step.prompt_cross)


def columns(with_g: bool, token: bool = False):
    def cumulative(trace):
        rows = [(1.0, s.prefill_tokens + (s.decode_seqs if token and s.prefill_tokens else 0),
                 0.0 if s.prefill_tokens else s.decode_seqs, s.attention_pairs, s.prompt_cross)
                + ((float(s.decode_seqs) if s.prefill_tokens else 0.0,) if with_g else ()) for s in trace]
        k = 6 if with_g else 5
        x = np.array(rows, dtype=float).reshape(-1, k)
        return np.vstack([np.zeros((1, k)), np.cumsum(x, axis=0)])
    return cumulative


def use(mode: str) -> None:
    cal.K = 6 if mode == "fitted" else KEPT["K"]
    cal._cumulative = KEPT["cumulative"] if mode == "kept" else columns(mode == "fitted", mode == "token")
    cal.LinearStepTime = (KEPT["linear"] if mode == "kept" else
                          (lambda *c: Beside(*c, token=True)) if mode == "token" else Beside)


def say(f) -> str:
    st = f.step
    return (f"a {1e3 * st.a:.2f} ms, b {1e6 * st.b:.1f} us, c {1e6 * st.c:.0f} us, d {1e9 * st.d:.1f} ns, "
            f"e {1e12 * st.e:.0f} ps, g {1e6 * (st.b if getattr(st, 'token', False) else getattr(st, 'g', st.c)):.1f}"
            " us")


MODES = ("kept", "free", "fitted", "token")
errors = {name: [] for name in MODES}
for path in ("../../amx-xeon-2026-12-05/spread/spread.pkl", "hot-lab.pkl", "open-lab.pkl"):
    with open(path, "rb") as handle:
        starts = pickle.load(handle)
    for i, s in enumerate(starts):
        runs = s["cal"] + s.get("lone", [])
        for name in MODES:
            use(name)
            f = cal.fit_runs(runs, s["engine"])
            line = f"{path.split('/')[-1]} {i} {name:6s}: {say(f)};"
            for m in s["held"]:
                p = _predicted(m.point, s["engine"], f)[0]
                e = (p.tpot.p50 / m.stats.tpot.p50 - 1, p.tpot.p90 / m.stats.tpot.p90 - 1)
                errors[name].append(e)
                line += f" {m.point.rate:g}/s TPOT {e[0]:+.0%} {e[1]:+.0%};"
            print(line, flush=True)
use("kept")
for name, e in errors.items():
    a = np.array(e)
    print(f"{name}: Poisson TPOT p50 / p90 mean |error| {np.abs(a[:, 0]).mean():.1%} / {np.abs(a[:, 1]).mean():.1%}, "
          f"signed {a[:, 0].mean():+.1%} / {a[:, 1].mean():+.1%}, worst p90 {np.abs(a[:, 1]).max():.1%}", flush=True)

with open("../../amx-xeon-2026-12-05/check-start/validation-loads.pkl", "rb") as handle:
    validation = pickle.load(handle)
for model, d in validation.items():
    for name in MODES:
        use(name)
        f = cal.fit_runs(d["cal"], d["engine"])
        mape = []
        for m in d["held"]:
            p = _predicted(m.point, d["engine"], f)[0]
            mape.append([abs(p.output_tokens_per_s / m.stats.output_tokens_per_s - 1),
                         abs(p.tpot.p50 / m.stats.tpot.p50 - 1), abs(p.ttft.p50 / m.stats.ttft.p50 - 1),
                         abs(p.e2e.p50 / m.stats.e2e.p50 - 1)])
        a = 100 * np.mean(mape, axis=0)
        print(f"validation {model} {name:6s}: {say(f)}; held-out MAPE tput / TPOT / TTFT / E2E p50 "
              f"{a[0]:.1f} / {a[1]:.1f} / {a[2]:.1f} / {a[3]:.1f}%", flush=True)
use("kept")
