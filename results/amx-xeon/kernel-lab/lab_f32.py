"""The AVX-512 fp32 path, and the AVX-512 bf16 path without BF16 instructions (built with -mno-avx512bf16), of
kvviz's kernel against the same with a software prefetch 1 KB ahead, on SmolLM2's fp32 and the Qwen twin's bf16
shapes read from memory (copies of 400 MB or more a shape, cycled), interleaved with a streaming read:
python lab_f32.py ROUNDS. Run from the repository root with PYTHONPATH=."""

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
F32_LOOP = """        for (long k = 0; k < cols; k += 32) {
            __mmask16 m0 = lanes16(cols - k), m1 = lanes16(cols - k - 16);
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, row + k), _mm512_maskz_loadu_ps(m0, x + k), a0);"""
F32_PF = """        for (long k = 0; k < cols; k += 32) {
            _mm_prefetch((const char *)(row + k + 256), _MM_HINT_T0);
            _mm_prefetch((const char *)(row + k + 256 + 16), _MM_HINT_T0);
            __mmask16 m0 = lanes16(cols - k), m1 = lanes16(cols - k - 16);
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, row + k), _mm512_maskz_loadu_ps(m0, x + k), a0);"""
WIDEN_LOOP = """        for (; k < cols; k += 32) {
            __mmask16 m0 = lanes16(cols - k), m1 = lanes16(cols - k - 16);
            a0 = _mm512_fmadd_ps(widen(row + k, m0), widen(x + k, m0), a0);"""
WIDEN_PF = """        for (; k < cols; k += 32) {
            _mm_prefetch((const char *)(row + k + 512), _MM_HINT_T0);
            __mmask16 m0 = lanes16(cols - k), m1 = lanes16(cols - k - 16);
            a0 = _mm512_fmadd_ps(widen(row + k, m0), widen(x + k, m0), a0);"""
assert F32_LOOP in SOURCE and WIDEN_LOOP in SOURCE
VARIANTS = {"base": (SOURCE, ()), "pf": (SOURCE.replace(F32_LOOP, F32_PF).replace(WIDEN_LOOP, WIDEN_PF), ())}
VARIANTS |= {f"{n}-nobf16": (src, ("-mno-avx512bf16",)) for n, (src, _) in list(VARIANTS.items())}
SHAPES = [(torch.float32, (3072, 576)), (torch.float32, (49152, 576)), (torch.float32, (576, 1536)),
          (torch.bfloat16, (9728, 896)), (torch.bfloat16, (896, 4864))]


def build(name: str, src_text: str, extra: tuple, folder: Path):
    src = folder / f"{name}.c"
    src.write_text(src_text)
    out = folder / f"{name}.so"
    subprocess.run(["gcc", *stream.FLAGS, *extra, "-o", str(out), str(src)], check=True)  # noqa: S603, S607
    return stream.load(out)


def timed(fn, reps: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def main(rounds: int) -> None:
    torch.set_num_threads(2)
    folder = Path(tempfile.mkdtemp())
    libs = {n: build(n, src, extra, folder) for n, (src, extra) in VARIANTS.items()}
    print({n: lib.kvviz_gemv_path().decode() for n, lib in libs.items()})
    gen = torch.Generator().manual_seed(0)
    copies, xs = {}, {}
    for dt, s in SHAPES:
        w = torch.randn(s, generator=gen).to(dt)
        copies[(dt, s)] = [w] + [w.clone() for _ in range(-(-400_000_000 // (w.numel() * w.element_size())) - 1)]
        for c in copies[(dt, s)]:
            collapse(c)
        xs[(dt, s)] = torch.randn(s[1], generator=gen).to(dt)
    for key, group in copies.items():
        for n, lib in libs.items():  # a prefetch changes no sum: each variant gives its base's output exactly
            ref = stream.gemv(xs[key], group[0], None, libs["base-nobf16" if n.endswith("nobf16") else "base"])
            assert torch.equal(stream.gemv(xs[key], group[0], None, lib), ref), (n, key)
    big = torch.ones(128 * 2**20)
    gbs = {(n, k): [] for n in libs for k in copies}
    reads = []
    for r in range(rounds):
        reads.append(big.numel() * 4 / timed(big.sum, 3) / 1e9)
        order = list(libs) if r % 2 == 0 else list(reversed(libs))
        for key, group in copies.items():
            nbytes = group[0].numel() * group[0].element_size()
            reps = len(group) * max(1, int(3 * 4e8 // (nbytes * len(group))))
            for n in order:
                turn = iter(range(10**9))
                gbs[(n, key)].append(nbytes / timed(
                    lambda n=n, key=key, group=group, turn=turn: stream.gemv(
                        xs[key], group[next(turn) % len(group)], None, libs[n]), reps) / 1e9)
        reads.append(big.numel() * 4 / timed(big.sum, 3) / 1e9)
    read = statistics.median(reads)
    print(f"streaming read a.sum() 512 MiB: median {read:.1f} GB/s ({min(reads):.1f}-{max(reads):.1f}), "
          f"{rounds} rounds, {torch.get_num_threads()} threads")
    for key in copies:
        for n in libs:
            v = gbs[(n, key)]
            base = gbs[("base-nobf16" if n.endswith("nobf16") else "base", key)]
            ratio = [a / b for a, b in zip(v, base, strict=True)]
            print(f"{str(key[0])[6:]} {key[1][0]}x{key[1][1]} {n:11s} {statistics.median(v):5.1f} GB/s "
                  f"({min(v):.1f}-{max(v):.1f}) {statistics.median(v) / read:.2f} of the read; vs its base per round "
                  f"{statistics.median(ratio):.3f} ({min(ratio):.3f}-{max(ratio):.3f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)
