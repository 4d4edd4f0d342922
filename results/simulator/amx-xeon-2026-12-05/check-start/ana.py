# ruff: noqa: S301  (a scratch analysis of the pickles written beside it, kept as run)
"""The fit before and after a prompt's time moved to vLLM's clock (kvviz.sim.calibrate.fit_runs, front_alone_s), on
the loads lab.py and lab2.py measured: each held-out load's TPOT p50 / p90 and TTFT p50, measured and predicted,
and the MAPE per metric over the validation's loads. "before": calibrate.front_alone_s made to find nothing, so
the fit takes the client's TTFTs as it did. python ana.py, from the repository root with PYTHONPATH=."""

import pickle
from pathlib import Path

from kvviz.sim import calibrate
from kvviz.sim.validate import _point, _predicted, mape

HERE = Path(__file__).parent
FOUND = calibrate.front_alone_s


def fit(runs, engine, how):
    calibrate.front_alone_s = FOUND if how == "now" else (lambda runs: None)
    return calibrate.fit_runs(runs, engine)


def line(m, engine, fitted):
    p = _predicted(m.point, engine, fitted)[0]
    return (f"  {m.point.label:44s} TPOT p50 {1e3 * m.stats.tpot.p50:7.2f} / {1e3 * p.tpot.p50:7.2f}  "
            f"p90 {1e3 * m.stats.tpot.p90:7.2f} / {1e3 * p.tpot.p90:7.2f}  "
            f"TTFT p50 {1e3 * m.stats.ttft.p50:7.1f} / {1e3 * p.ttft.p50:7.1f}")


def front_end(loads):
    """vLLM's TTFT less its queue and prefill times, per load: from its API server taking a request to its engine core
    queuing it (in a closed loop beyond one, the wait for the running step's end as well)."""
    for m in loads:
        s = m.server
        front = s.ttft_mean_s - s.queue_mean_s - s.prefill_mean_s
        print(f"  {m.point.label:44s} vLLM's TTFT {1e3 * s.ttft_mean_s:6.2f} ms, less queue "
              f"{1e3 * s.queue_mean_s:5.2f} and prefill {1e3 * s.prefill_mean_s:6.2f}: {1e3 * front:5.2f}")


def describe(name, how, fitted):
    s = fitted.step
    alone = f", of it front end alone {1e3 * fitted.front_alone_s:.2f} ms" if fitted.front_alone_s is not None else ""
    print(f"{name}, {how}: a {1e3 * s.a:.3f} ms, b {1e6 * s.b:.2f} us, c {1e6 * s.c:.1f} us, d {1e9 * s.d:.2f} ns; "
          f"overhead {1e3 * fitted.request_overhead_s:.2f} ms{alone}; handoff {1e3 * fitted.handoff_s:g} ms "
          "(measured / predicted, ms)")


with open(HERE / "check-start.pkl", "rb") as handle:
    d = pickle.load(handle)
print("tiny, the check's start (lab.py): the front end's time by vLLM's clock, means over each load's requests")
front_end(d["cal"] + d["extra"] + d["held"])
for how in ("before", "now"):
    fitted = fit(d["cal"], d["engine"], how)
    describe("tiny, the check's start (lab.py)", how, fitted)
    for m in d["cal"] + d["extra"] + d["held"]:
        print(line(m, d["engine"], fitted))
with open(HERE / "validation-loads.pkl", "rb") as handle:
    v = pickle.load(handle)
for model, d in v.items():
    for how in ("before", "now"):
        fitted = fit(d["cal"], d["engine"], how)
        describe(f"{model} (lab2.py)", how, fitted)
        for m in d["held"] + d["slo"]:
            print(line(m, d["engine"], fitted))
        r = mape([_point(model, "held-out", m, d["engine"], fitted).row() for m in d["held"]])
        print("  held-out MAPE: " + ", ".join(f"{k} {100 * x:.1f}%" for k, x in r.items() if x is not None))
