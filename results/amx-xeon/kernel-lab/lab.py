"""The AVX-512 BF16 path of kvviz's kernel (kvviz/engine/stream_gemv.c) against variants of its inner loop, on the
bf16 shapes of the Qwen2.5-0.5B twin's step (each from copies of 400 MB or more, cycled: read from memory), interleaved
with a streaming read: python lab.py ROUNDS. Run from the repository root with PYTHONPATH=."""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from kvviz.engine import stream
from kvviz.engine.hugepages import collapse

SOURCE = stream.SOURCE.read_text()
BASE_LOOP = """        for (; k + 64 <= cols; k += 64) {
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(row + k), (__m512bh)_mm512_loadu_si512(x + k));
            a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_loadu_si512(row + k + 32),
                                  (__m512bh)_mm512_loadu_si512(x + k + 32));
        }"""
assert BASE_LOOP in SOURCE


def prefetched(ahead: int) -> str:
    return f"""        for (; k + 64 <= cols; k += 64) {{
            _mm_prefetch((const char *)(row + k + {ahead}), _MM_HINT_T0);
            _mm_prefetch((const char *)(row + k + {ahead} + 32), _MM_HINT_T0);
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(row + k), (__m512bh)_mm512_loadu_si512(x + k));
            a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_loadu_si512(row + k + 32),
                                  (__m512bh)_mm512_loadu_si512(x + k + 32));
        }}"""


FOUR = """        __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
        for (; k + 128 <= cols; k += 128) {
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(row + k), (__m512bh)_mm512_loadu_si512(x + k));
            a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_loadu_si512(row + k + 32),
                                  (__m512bh)_mm512_loadu_si512(x + k + 32));
            a2 = _mm512_dpbf16_ps(a2, (__m512bh)_mm512_loadu_si512(row + k + 64),
                                  (__m512bh)_mm512_loadu_si512(x + k + 64));
            a3 = _mm512_dpbf16_ps(a3, (__m512bh)_mm512_loadu_si512(row + k + 96),
                                  (__m512bh)_mm512_loadu_si512(x + k + 96));
        }
        a0 = _mm512_add_ps(a0, a2);
        a1 = _mm512_add_ps(a1, a3);
""" + BASE_LOOP

VARIANTS = {"base": BASE_LOOP, "pf512": prefetched(512), "pf1024": prefetched(1024), "pf256": prefetched(256),
            "acc4": FOUR}
SHAPES = [(9728, 896), (151936, 896), (896, 4864), (1152, 896)]


def build(name: str, loop: str, folder: Path):
    src = folder / f"{name}.c"
    src.write_text(SOURCE.replace(BASE_LOOP, loop))
    out = folder / f"{name}.so"
    subprocess.run(["gcc", *stream.FLAGS, "-o", str(out), str(src)], check=True)  # noqa: S603, S607
    lib = stream.load(out)
    assert lib.kvviz_gemv_path().decode() == "avx512-bf16"
    return lib


def timed(fn, reps: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def main(rounds: int) -> None:
    torch.set_num_threads(2)
    folder = Path(tempfile.mkdtemp())
    libs = {n: build(n, loop, folder) for n, loop in VARIANTS.items()}
    gen = torch.Generator().manual_seed(0)
    weights = {s: torch.randn(s, generator=gen).to(torch.bfloat16) for s in SHAPES}
    # copies enough to fill 400 MB or more a shape, cycled through, so that each pass reads from memory as a step
    # does (the L3 holds 105 MB), not from a cache the last pass filled
    copies = {s: [weights[s]] + [weights[s].clone() for _ in range(-(-400_000_000 // (w.numel() * 2)) - 1)]
              for s, w in weights.items()}
    for group in copies.values():
        for w in group:
            collapse(w)
    xs = {s: torch.randn(s[1], generator=gen).to(torch.bfloat16) for s in SHAPES}
    ref = {s: stream.gemv(xs[s], weights[s], None, libs["base"]) for s in SHAPES}
    for n, lib in libs.items():
        for s in SHAPES:
            got = stream.gemv(xs[s], weights[s], None, lib)
            if n == "acc4":  # another summation order: the same products to bf16's rounding
                assert torch.allclose(got.float(), ref[s].float(), rtol=2e-2, atol=0.5), (n, s)
            else:
                assert torch.equal(got, ref[s]), (n, s)
    big = torch.ones(128 * 2**20)  # 512 MiB fp32
    gbs = {(n, s): [] for n in libs for s in SHAPES}
    reads = []
    for r in range(rounds):
        reads.append(big.numel() * 4 / timed(big.sum, 3) / 1e9)
        order = list(libs) if r % 2 == 0 else list(reversed(libs))
        for s in SHAPES:
            nbytes = weights[s].numel() * 2
            group = copies[s]
            reps = len(group) * max(1, int(3 * 4e8 // (nbytes * len(group))))
            for n in order:
                turn = iter(range(10**9))
                gbs[(n, s)].append(nbytes / timed(
                    lambda n=n, s=s, group=group, turn=turn: stream.gemv(xs[s], group[next(turn) % len(group)], None,
                                                                         libs[n]), reps) / 1e9)
        reads.append(big.numel() * 4 / timed(big.sum, 3) / 1e9)
    read = statistics.median(reads)
    print(f"streaming read a.sum() 512 MiB: median {read:.1f} GB/s ({min(reads):.1f}-{max(reads):.1f}), "
          f"{rounds} rounds, {torch.get_num_threads()} threads")
    for s in SHAPES:
        base = gbs[("base", s)]
        for n in libs:
            v = gbs[(n, s)]
            ratio = [a / b for a, b in zip(v, base, strict=True)]
            print(f"{s[0]}x{s[1]} {n:7s} {statistics.median(v):5.1f} GB/s ({min(v):.1f}-{max(v):.1f}) "
                  f"{statistics.median(v) / read:.2f} of the read; vs base per round {statistics.median(ratio):.3f} "
                  f"({min(ratio):.3f}-{max(ratio):.3f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)
