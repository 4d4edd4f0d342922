"""Why are SmolLM2's steps slower under Poisson arrivals? Interleaved on one vLLM start (per-step log on):
  A closed loop of one (768/16) -- back to back, no idle
  B constant arrivals 0.4/s of 768/16 -- one at a time (a request lasts ~1.2 s), idle between: same steps as A
  C Poisson 0.5/s of 768/16 (the held-out load)
  D closed loop of 2 of 32/64, E Poisson 0.85/s of 32/64
Per load: TPOT p50 from the client, decode steps' elapsed (vLLM's clock) by batch size."""

import os
import pickle
import statistics
import sys
import time

from kvviz.serving.iterations import LogCursor
from kvviz.serving.load import CLOSED, CONSTANT, POISSON, Load
from kvviz.serving.loadgen import run
from kvviz.serving.prompts import synthetic
from kvviz.sim.calibrate import serving, warm_up

model, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
LOADS = {
    "A_closed1": (768, Load(CLOSED, 1, 6, 16)),
    "B_const": (768, Load(CONSTANT, 6, 6, 16, rate=0.4)),
    "C_poisson": (768, Load(POISSON, 8, 8, 16, rate=0.5, seed=0)),
    "D_closed2": (32, Load(CLOSED, 2, 6, 64)),
    "E_poisson": (32, Load(POISSON, 12, 12, 64, rate=0.85, seed=0)),
}
data = []


def cpu_of(pids):
    tot = {}
    for name, pid in pids.items():
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            tot[name] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return tot


def procs():
    out = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                c = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode()
                n = open(f"/proc/{p}/comm").read().strip()
            except (OSError, IndexError, ValueError):
                continue
            if "VLLM" in n or "vllm" in c:
                out[f"{n}:{p}"] = int(p)
    return out


with serving(model, 1024, engine_steps=True) as served:
    warm_up(served)
    pids = procs()
    print("procs", pids, flush=True)
    seed = 100
    for r in range(rounds):
        names = list(LOADS) if r % 2 == 0 else list(reversed(LOADS))
        for name in names:
            plen, load = LOADS[name]
            seed += 1
            prompts = synthetic(load.requests, plen, served.tokenizer, seed=seed)
            cur = LogCursor(served.server.log_path)
            c0, t0 = cpu_of(pids), time.time()
            res = run(served.server.endpoint(), load, prompts)
            c1, wall = cpu_of(pids), time.time() - t0
            time.sleep(0.5)
            steps = cur.steps()
            dec = {}
            for s in steps:
                if s.context_tokens == 0:
                    dec.setdefault(s.generation_requests, []).append(s.elapsed_s)
            gaps = [b - a for rec in res.records for a, b in zip(rec.arrivals_s, rec.arrivals_s[1:], strict=False)]
            cpu = {k: round(c1[k] - c0.get(k, 0), 2) for k in c1}
            data.append(
                dict(round=r, name=name, records=res.records, steps=steps, wall=wall, cpu=cpu, la=os.getloadavg()[0])
            )
            print(
                f"r{r} {name:10s} tpot50 {1e3 * res.stats.tpot.p50:6.1f} gap50 {1e3 * statistics.median(gaps):6.1f} "
                f"steps {len(steps)} "
                + " ".join(f"g{g}:{1e3 * statistics.median(v):.1f}({len(v)})" for g, v in sorted(dec.items()))
                + f" wall {wall:.1f} cpu {cpu} la {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            pickle.dump(data, open(out, "wb"))
