"""Is a prompt computed alone dearer after the engine idled than the same prompt beside a running request? One vLLM
start of tiny as the SLO check makes it (kvviz.sim.calibrate.serving: 1 GiB of KV, the worker in the engine core),
then in interleaved rounds the calibration's lone-prompt load (one request at a time, 8 tokens out) cold, as the
calibration runs it (the engine idle between requests), and hot (a request of 1,000 tokens streaming beside it,
so that the engine never idles and each prompt's step holds one decode beside): vLLM's mean prefill time (its
clock: the step that computed the prompt) and the client's TTFT, each. python hot.py, from the repository root with
PYTHONPATH=. (kvviz's vLLM set up)."""

import statistics
import threading
import time

import httpx

from kvviz.sim.calibrate import LoadPoint, Mix, measure, serving, warm_up


def background(base_url: str, name: str, done: threading.Event) -> None:
    httpx.post(base_url + "/v1/completions", timeout=120.0,
               json={"model": name, "prompt": "Hi", "max_tokens": 1000, "ignore_eos": True})
    done.set()


with serving("tiny", 1024) as served:
    warm_up(served)
    spec = served.server.spec
    print("rows: round, prompt tokens, cold/hot: vLLM mean prefill ms, client TTFT median ms, decode gap mean ms")
    for rnd in range(4):
        for tokens in (128, 384):
            for mode in ("cold", "hot"):
                done = threading.Event()
                if mode == "hot":
                    thread = threading.Thread(target=background, args=(spec.base_url, spec.name, done))
                    thread.start()
                    time.sleep(0.2)
                m = measure(served, LoadPoint(Mix(tokens, 8), 6, concurrency=1))
                beside = not done.is_set()
                if mode == "hot":
                    thread.join()
                ttft = statistics.median(r.ttft_s for r in m.records if r.ok)
                gaps = [b - a for r in m.records if r.ok for a, b in zip(r.arrivals_s, r.arrivals_s[1:], strict=False)]
                print(f"{rnd} {tokens} {mode}{'' if mode == 'cold' or beside else ' (background ended first)'}: "
                      f"{1e3 * m.server.prefill_mean_s:.2f} {1e3 * ttft:.2f} {1e3 * statistics.mean(gaps):.2f}",
                      flush=True)
