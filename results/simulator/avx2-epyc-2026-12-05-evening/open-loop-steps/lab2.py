"""Uniprocess (kvviz's default serving): lone-decode gaps in open vs closed loops, from client arrivals.
A gap counts as lone when no other request of the load was in flight (sent..finished) over it."""

import itertools
import os
import pickle
import statistics
import sys

from kvviz.serving.load import CLOSED, CONSTANT, POISSON, Load
from kvviz.serving.loadgen import run
from kvviz.serving.prompts import synthetic
from kvviz.sim.calibrate import serving, warm_up

model, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
LOADS = {
    "A_closed1": (768, Load(CLOSED, 1, 4, 16)),
    "B_const": (768, Load(CONSTANT, 4, 4, 16, rate=0.2)),
    "C_poisson": (768, Load(POISSON, 8, 8, 16, rate=0.5, seed=0)),
    "D_closed1s": (32, Load(CLOSED, 1, 4, 64)),
    "E_poisson": (32, Load(POISSON, 12, 12, 64, rate=0.85, seed=0)),
}


def lone_gaps(records):
    spans = [(r.sent_s, r.sent_s + (r.e2e_s or 0)) for r in records]
    lone, other = [], []
    for i, r in enumerate(records):
        ts = [r.sent_s + a for a in r.arrivals_s]
        for a, b in itertools.pairwise(ts):
            busy = any(s < b and e > a for j, (s, e) in enumerate(spans) if j != i)
            (other if busy else lone).append(b - a)
    return lone, other


data = []
with serving(model, 1024) as served:
    warm_up(served)
    seed = 200
    for r in range(rounds):
        names = list(LOADS) if r % 2 == 0 else list(reversed(LOADS))
        for name in names:
            plen, load = LOADS[name]
            seed += 1
            prompts = synthetic(load.requests, plen, served.tokenizer, seed=seed)
            res = run(served.server.endpoint(), load, prompts)
            lone, other = lone_gaps(res.records)
            ttft = [x.ttft_s for x in res.records]
            data.append(dict(round=r, name=name, records=res.records, stats=res.stats))

            def med(v):
                return f"{1e3 * statistics.median(v):.1f}({len(v)})" if v else "-"

            print(
                f"r{r} {name:10s} tpot50 {1e3 * res.stats.tpot.p50:6.1f} lone {med(lone)} other {med(other)} "
                f"ttft50 {1e3 * statistics.median(ttft):.0f} la {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            pickle.dump(data, open(out, "wb"))
