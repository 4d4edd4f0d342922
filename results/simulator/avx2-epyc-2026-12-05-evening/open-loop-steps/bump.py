# ruff: noqa: E501, S301  (a scratch analysis of pickles written beside it, kept as run)
import dataclasses
import pickle
import sys

import numpy as np

from kvviz.sim.validate import _predicted

data = pickle.load(open(sys.argv[1], "rb"))
fitted, engine = data["fitted"], data["engine"]
for bump in (0.0, 0.0025, 0.0046):
    f2 = dataclasses.replace(fitted, step=dataclasses.replace(fitted.step, a=fitted.step.a + bump))
    for ms in data["runs"]:
        if not ms.point.rate:
            continue
        stats, pre, sim = _predicted(ms.point, engine, f2)
        mt = [r.tpot_s for r in ms.records if r.tpot_s]
        st = [s.tpot_s for s in sim.records if s.tpot_s]
        mf = [r.ttft_s for r in ms.records if r.ttft_s]
        sf = [s.ttft_s for s in sim.records if s.ttft_s]
        print(
            f"a+{1e3 * bump:.1f}ms seed {ms.point.seed}: TPOT p50/p90/mean meas {1e3 * np.percentile(mt, 50):.1f}/{1e3 * np.percentile(mt, 90):.1f}/{1e3 * np.mean(mt):.1f}"
            f" sim {1e3 * np.percentile(st, 50):.1f}/{1e3 * np.percentile(st, 90):.1f}/{1e3 * np.mean(st):.1f}"
            f"  TTFT p50/p90 meas {1e3 * np.percentile(mf, 50):.0f}/{1e3 * np.percentile(mf, 90):.0f} sim {1e3 * np.percentile(sf, 50):.0f}/{1e3 * np.percentile(sf, 90):.0f}"
        )
