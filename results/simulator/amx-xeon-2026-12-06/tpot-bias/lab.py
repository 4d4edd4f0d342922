"""hot.py's finding put to the simulator: per vLLM start of tiny as the SLO check makes it, kvviz's calibration as it
is (its lone prompts cold: the engine idle between them), the same lone-prompt loads again hot (a request of up to
1,000 tokens streaming beside, cancelled after), then cold again, and the SLO check's Poisson loads (128/16 at 110
and 130 requests/s, 600 requests each). Three starts: python lab.py OUT.pkl, from the repository root with
PYTHONPATH=. (kvviz's vLLM set up). ana.py fits each start both ways."""

import pickle
import sys
import threading

import httpx

from kvviz.sim.calibrate import CALIBRATION, LoadPoint, Mix, calibrate, measure, serving, warm_up

LONE = [p for p in CALIBRATION if p.concurrency == 1 and p.mix.prompt_tokens >= 128]


def hot(served, point):
    """The load with a request decoding beside it the whole time (or None where it ended first)."""
    spec, stop, started, alive = served.server.spec, threading.Event(), threading.Event(), [True]

    def stream():
        body = {"model": spec.name, "prompt": "Hi", "max_tokens": 1000, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", spec.base_url + "/v1/completions", json=body, timeout=120.0) as reply:
            for n, _ in enumerate(reply.iter_lines()):
                if n == 4:
                    started.set()
                if stop.is_set():
                    return
        alive[0] = False
        started.set()

    thread = threading.Thread(target=stream)
    thread.start()
    started.wait(60)
    m = measure(served, point)
    ok = alive[0]
    stop.set()
    thread.join()
    return m if ok else None


out, starts = sys.argv[1], []
for start in range(3):
    with serving("tiny", 1024) as served:
        warm_up(served)
        fitted, runs = calibrate(served)
        hot_runs = [hot(served, p) for p in LONE]
        cold_again = [measure(served, p) for p in LONE]
        held = [measure(served, LoadPoint(Mix(128, 16), 600, rate=rate, seed=start)) for rate in (110.0, 130.0)]
        starts.append({"engine": served.engine, "cal": runs, "hot": hot_runs, "cold": cold_again, "held": held})
        for name, group in (("cold", [m for m in runs if m.point in LONE]), ("hot", hot_runs), ("cold2", cold_again)):
            print(start, name, [None if m is None else round(1e3 * m.server.prefill_mean_s, 2) for m in group],
                  flush=True)
        print(start, "poisson TPOT p50/p90 ms", [(round(1e3 * m.stats.tpot.p50, 2), round(1e3 * m.stats.tpot.p90, 2))
                                                  for m in held], flush=True)
        with open(out, "wb") as handle:
            pickle.dump(starts, handle)
