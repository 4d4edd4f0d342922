"""kvviz's own matrix-vector kernel (kvviz.engine.stream), checked against products worked in float64 by torch, and
its bf16 rounding against sums worked by hand; each of its paths (AVX-512 with AVX512-BF16's dot product, AVX-512
with bf16 widened to fp32, AVX2 with FMA) is built and checked where the CPU can run it."""

from __future__ import annotations

import ctypes
import mmap

import pytest
import torch

from kvviz.base.cpu import this_cpu
from kvviz.engine import stream

# On an x86-64 CPU with AVX-512 or AVX2 and FMA (CI's have AVX-512 BF16) the kernel must be built: a failed build
# fails here, not skips.
pytestmark = pytest.mark.skipif(not stream.supported_cpu(),
                                reason="the kernel needs an x86-64 CPU with AVX-512 or AVX2 and FMA")

# the builds an AVX-512 CPU also runs, by the flags that turn its wider paths off: gcc's -mno-avx512f turns off
# every AVX-512 extension with it, which leaves AVX2 and FMA
VARIANTS = {"avx512": ("-mno-avx512bf16",), "avx2": ("-mno-avx512f",)}


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[str, object]:
    """This machine's build ("native") and, on an AVX-512 CPU, the builds of each narrower path it can run, keyed by
    the path each is built for."""
    libs = {"native": stream.library()}
    assert libs["native"] is not None, "an x86-64 CPU with AVX-512 or AVX2 and FMA and a C compiler builds the kernel"
    if stream.path(libs["native"]).startswith("avx512"):
        out = tmp_path_factory.mktemp("stream")
        libs |= {name: stream.load(stream.build(out, flags)) for name, flags in VARIANTS.items()}
    return libs


# rows past and short of a thread's band of 16, columns past and short of a vector (16 fp32, 32 bf16) and of the
# bf16 path's 64-column step
SHAPES = [(1, 1), (3, 5), (17, 33), (40, 64), (33, 95), (130, 896), (7, 4864)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_product_is_float64s_to_the_dtypes_rounding(libraries, dtype, threads, monkeypatch):
    """Every shape, with and without a bias, one row of x as [1, 1, in]: torch's float64 product of the same
    numbers, to an fp32 sum's rounding (fp32) or one bf16 rounding of the output (bf16)."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    gen = torch.Generator().manual_seed(threads)
    for name, lib in libraries.items():
        for rows, cols in SHAPES:
            w = torch.randn(rows, cols, generator=gen).to(dtype)
            x = torch.randn(1, 1, cols, generator=gen).to(dtype)
            b = torch.randn(rows, generator=gen).to(dtype)
            for bias in (None, b):
                got = stream.gemv(x, w, bias, lib)
                want = x.double() @ w.double().T + (0 if bias is None else bias.double())
                assert got.shape == (1, 1, rows) and got.dtype == dtype
                scale = (x.double().abs() @ w.double().abs().T).max().item() + 1
                tol = 2e-6 * scale if dtype == torch.float32 else 2**-8 * want.abs().max().item() + 1e-6 * scale
                err = (got.double() - want).abs().max().item()
                assert err <= tol, f"{name} {dtype} {rows}x{cols} bias={bias is not None}: {err} > {tol}"


def _guarded(values: torch.Tensor) -> torch.Tensor:
    """A copy of `values` whose last byte is the last before a page that may not be read: a read past its end
    faults (and the test process dies with SIGSEGV, which pytest's faulthandler reports under the test's name)."""
    nbytes = values.numel() * values.element_size()
    body = -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
    pages = mmap.mmap(-1, body + mmap.PAGESIZE)
    start = ctypes.addressof(ctypes.c_char.from_buffer(pages))
    protect = ctypes.CDLL(None).mprotect
    assert protect(ctypes.c_void_p(start + body), ctypes.c_size_t(mmap.PAGESIZE), 0) == 0  # PROT_NONE
    out = torch.frombuffer(pages, dtype=values.dtype, count=values.numel(), offset=body - nbytes)
    return out.copy_(values.reshape(-1)).view(values.shape)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("threads", [1, 2])
def test_row_tails_are_summed_and_nothing_past_the_end_is_read(libraries, dtype, threads, monkeypatch):
    """Columns around every path's vector steps (8, 16, 32, 64) and rows around a band of 16: each row's tail is in
    its sum and no other row's value is, to the fp32 or bf16 rounding; the weight, x and the bias each end where a
    page that may not be read begins, so a load past a row's end (of the last row, of x) faults."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    gen = torch.Generator().manual_seed(threads)
    for name, lib in libraries.items():
        for rows in (1, 2, 3, 17):
            for cols in (*range(1, 10), 15, 16, 17, 23, 31, 32, 33, 63, 64, 65, 97):
                w = torch.randn(rows, cols, generator=gen).to(dtype) + 4  # all far from 0: a lost value shows
                x, b = torch.rand(cols, generator=gen).to(dtype) + 1, torch.randn(rows, generator=gen).to(dtype)
                got = stream.gemv(_guarded(x), _guarded(w), _guarded(b), lib)
                want = x.double() @ w.double().T + b.double()
                tol = 1e-5 if dtype == torch.float32 else 2**-8
                err = ((got.double() - want).abs() / want.abs().clamp(min=1)).max().item()
                assert err <= tol, f"{name} {dtype} {rows}x{cols} threads={threads}: {err} > {tol}"


def test_each_build_runs_the_path_it_is_named_for(libraries):
    """The native build takes the widest path the CPU has (AVX512-BF16, AVX-512, AVX2 with FMA), and each narrower
    build the path it is named for: else a variant's checks would check another path twice."""
    isa = set(this_cpu()["isa"])
    widest = ("avx2" if not {"avx512f", "avx512bw"} <= isa else
              "avx512-bf16" if "avx512_bf16" in isa else "avx512")
    assert stream.path(libraries["native"]) == widest
    for name, lib in libraries.items():
        assert name == "native" or stream.path(lib) == name


def test_bf16_outputs_round_to_nearest_even(libraries):
    """Sums exact in fp32, rounded once to bf16 (8 significant bits): 257 is halfway between 256 and 258 and goes
    to 256 (even), 259 halfway between 258 and 260 goes to 260 (even), 3 and -5 are exact, 1000.5 rounds to 1000
    (bf16's step there is 4); and 257 with a bias of 1 is 258, exact: the bias is added before the one rounding
    (rounded first, 256 + 1 would round to 256)."""
    w = torch.zeros(5, 40, dtype=torch.bfloat16)
    w[0, :2] = torch.tensor([128, 129])        # 257
    w[1, :3] = torch.tensor([128, 128, 3])     # 259
    w[2, 0], w[3, 0] = 3, -5
    w[4, :3] = torch.tensor([512, 488, 0.5])   # 1000.5
    x = torch.ones(40, dtype=torch.bfloat16)
    bias = torch.tensor([1.0, 0, 0, 0, 0], dtype=torch.bfloat16)
    for lib in libraries.values():
        assert stream.gemv(x, w, None, lib).tolist() == [256.0, 260.0, 3.0, -5.0, 1000.0]
        assert stream.gemv(x, w, bias, lib).tolist() == [258.0, 260.0, 3.0, -5.0, 1000.0]


def test_what_the_kernel_does_not_serve_is_refused_not_miscomputed(libraries):
    """Two rows of x, an x of another dtype, a transposed (not contiguous) weight, a bias of another dtype: None,
    for the caller to take another kernel."""
    lib = libraries["native"]
    w = torch.randn(8, 16)
    assert stream.gemv(torch.randn(2, 16), w, None, lib) is None
    assert stream.gemv(torch.randn(16, dtype=torch.bfloat16), w, None, lib) is None
    assert stream.gemv(torch.randn(16), torch.randn(16, 8).T, None, lib) is None
    assert stream.gemv(torch.randn(16), w, torch.randn(8, dtype=torch.float64), lib) is None
    assert stream.gemv(torch.randn(16), torch.randn(8, 16, dtype=torch.float16), None, lib) is None


def test_a_build_is_kept_and_reused(tmp_path):
    """The same source, compiler, flags and CPU give one file, built once; other flags another."""
    first = stream.build(tmp_path)
    stamp = first.stat().st_mtime_ns
    assert stream.build(tmp_path) == first and first.stat().st_mtime_ns == stamp
    assert stream.build(tmp_path, ("-O2",)) != first
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, stream.build(tmp_path, ("-O2",)).name])


def test_without_a_compiler_the_kernel_is_not_on_offer(tmp_path, monkeypatch):
    """No C compiler: build raises, library() says None (logged), and the regions' choice is not offered it."""
    from kvviz.engine import regions

    monkeypatch.setenv("CC", "no-such-compiler-kvviz")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    stream.library.cache_clear()
    try:
        with pytest.raises(OSError):
            stream.build(tmp_path)
        assert stream.library() is None
        assert "stream" not in regions.kernels(torch.float32)
    finally:
        stream.library.cache_clear()
