# ruff: noqa: E501, S301  (a scratch analysis of pickles written beside it, kept as run)
import pickle
import statistics
import sys

import numpy as np

from kvviz.sim.validate import _predicted

data = pickle.load(open(sys.argv[1], "rb"))
fitted, engine = data["fitted"], data["engine"]
for ms in data["runs"]:
    p = ms.point
    stats, pre, sim = _predicted(p, engine, fitted)
    recs = ms.records
    sims = sim.records
    # arrivals: measured sent vs simulated sent
    ds = [r.sent_s - s.sent_s for r, s in zip(recs, sims, strict=False)]
    mt = [r.tpot_s for r in recs if r.tpot_s]
    st = [s.tpot_s for s in sims if s.tpot_s]
    print(
        p.label,
        f"sent lag med {1e3 * statistics.median(ds):.1f} ms max {1e3 * max(ds):.1f}",
        f"TPOT p50/p90 meas {1e3 * np.percentile(mt, 50):.1f}/{1e3 * np.percentile(mt, 90):.1f} sim {1e3 * np.percentile(st, 50):.1f}/{1e3 * np.percentile(st, 90):.1f}",
        f"mean meas {1e3 * np.mean(mt):.1f} sim {1e3 * np.mean(st):.1f}",
        f"TTFT p50 meas {1e3 * stats.ttft.p50 if False else 1e3 * np.median([r.ttft_s for r in recs]):.0f} sim {1e3 * stats.ttft.p50:.0f}",
        f"steps sim {len(sim.trace)}",
    )
    if p.rate:
        print(
            "  per request (meas TPOT ms, sim TPOT ms):",
            " ".join(f"{1e3 * r.tpot_s:.0f}/{1e3 * s.tpot_s:.0f}" for r, s in zip(recs, sims, strict=False))[:2000],
        )
