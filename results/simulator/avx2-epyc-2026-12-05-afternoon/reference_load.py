"""Does tiny's engine slow down as a run goes on, and with what? A reference load (closed 1, 64/32 x8) between
prompt-heavy loads (closed 10, 768/16 x40) and idle pauses, the engine core's resident and huge-page memory beside
it (/proc/<pid>/smaps_rollup); then a fresh start's reference. Run as it ran (output: reference_load.txt):
PYTHONPATH=. KVVIZ_VLLM_VENV=.venv-vllm python results/simulator/avx2-epyc-2026-12-05-afternoon/reference_load.py 5"""

import json
import subprocess
import sys
import time

from kvviz.sim import calibrate
from kvviz.sim.calibrate import LoadPoint, Mix

REF = LoadPoint(Mix(64, 32), 8, concurrency=1)
TOUCH = LoadPoint(Mix(768, 16), 40, concurrency=10)
T0 = time.time()


def engine_memory() -> dict:
    """The engine core processes' Rss and AnonHugePages, MiB."""
    out: dict[str, int] = {}
    pids = subprocess.run(["/usr/bin/pgrep", "-f", "VLLM::EngineCore"], capture_output=True, text=True).stdout
    for pid in pids.split():
        try:
            lines = open(f"/proc/{pid}/smaps_rollup").read().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(":")
            if key in ("Rss", "AnonHugePages"):
                out[key] = out.get(key, 0) + int(value.split()[0]) // 1024
    return out


def reference(served, tag: str) -> None:
    m = calibrate.measure(served, REF)
    print(json.dumps({"tag": tag, "t": round(time.time() - T0), "tpot_p50_ms": round(1e3 * m.stats.tpot.p50, 2),
                      "tok_s": round(m.stats.output_tokens_per_s), **engine_memory(), "load": m.load_average}),
          flush=True)


def main(touches: int) -> None:
    with calibrate.serving("tiny", 1024) as served:
        calibrate.warm_up(served)
        for tag in ("start", "start again"):
            reference(served, tag)
        for k in range(touches):
            calibrate.measure(served, TOUCH)
            reference(served, f"after touch {k + 1}")
        for k in range(3):
            time.sleep(20)
            reference(served, f"idle 20 s x{k + 1}")
    with calibrate.serving("tiny", 1024) as served:
        calibrate.warm_up(served)
        for tag in ("fresh start", "fresh start again"):
            reference(served, tag)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
