# ruff: noqa: S301  (a scratch analysis of a committed pickle, kept as run)
"""Is a prompt dearer when it reaches an idle engine? In each Poisson load of spread.pkl, the requests sent when no
other was in flight (by the client's clock: every earlier request answered), their TTFT against the calibration's
lone-prompt price (overhead + a + b x 128 + d x 128 x 129 / 2), beside window.py's price of a prompt that joins a
running batch. python idle.py PKL, from the repository root with PYTHONPATH=."""

import pickle
import statistics
import sys

from kvviz.sim.calibrate import fit_runs

with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)
for i, s in enumerate(starts):
    f = fit_runs(s["cal"] + s["lone"], s["engine"])
    st = f.step
    lone = f.request_overhead_s + st.a + st.b * 128 + st.d * 128 * 129 / 2
    for m in s["held"]:
        ok = sorted((r for r in m.records if r.ok), key=lambda r: r.sent_s)
        idle, ends = [], []
        for r in ok:
            if not ends or max(ends) < r.sent_s:
                idle.append(r.ttft_s)
            ends.append(r.sent_s + r.e2e_s)
        print(f"start {i} {m.point.rate:g}/s: {len(idle)} of {len(ok)} sent to an idle server, TTFT median "
              f"{1e3 * statistics.median(idle):.2f} ms (quartiles {1e3 * statistics.quantiles(idle)[0]:.2f}-"
              f"{1e3 * statistics.quantiles(idle)[2]:.2f}); the fit's lone price {1e3 * lone:.2f} ms (overhead "
              f"{1e3 * f.request_overhead_s:.2f} + step {1e3 * (lone - f.request_overhead_s):.2f})")
