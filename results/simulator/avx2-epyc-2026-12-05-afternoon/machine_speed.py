"""How far this machine's own speed moves, with nothing of kvviz's running: one thread times a fixed compute
kernel (20 fp32 matrix products of 512 x 512) and a fixed memory-bound one (10 matrix-vector products over a
64 MiB matrix) every half second for a minute. Their spread is the floor under any measured serving figure here.
Run as: python results/simulator/avx2-epyc-2026-12-05-afternoon/machine_speed.py 60 (output: machine_speed.txt)"""

import statistics
import sys
import time

import torch


def main(seconds: float) -> None:
    torch.set_num_threads(1)
    a, w = torch.randn(512, 512), torch.randn(4096, 4096)
    rows = []
    end = time.time() + seconds
    while time.time() < end:
        t = time.perf_counter()
        for _ in range(20):
            a @ a
        compute = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(10):
            w @ torch.randn(4096)
        rows.append((compute, time.perf_counter() - t))
        time.sleep(0.5)
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average {open('/proc/loadavg').read()[:14]}")
    for name, k in (("compute, 20 matmul 512x512", 0), ("memory, 10 matvec over 64 MiB", 1)):
        xs = sorted(1e3 * r[k] for r in rows)
        print(f"{name}: ms min {xs[0]:.1f}, p10 {xs[len(xs) // 10]:.1f}, median {statistics.median(xs):.1f}, "
              f"p90 {xs[9 * len(xs) // 10]:.1f}, max {xs[-1]:.1f} (n = {len(xs)})")
        print("  in order: " + " ".join(f"{1e3 * r[k]:.0f}" for r in rows))


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 60.0)
