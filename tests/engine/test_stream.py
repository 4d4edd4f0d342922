"""kvviz's own matrix-vector kernel (kvviz.engine.stream), checked against products worked in float64 by torch, and
its bf16 rounding against sums worked by hand; both of its bf16 paths (AVX512-BF16's dot product, and bf16 widened
to fp32) are built and checked where the CPU can run them."""

from __future__ import annotations

import pytest
import torch

from kvviz.engine import stream

# On an AVX-512 CPU (CI's have AVX-512 BF16) the kernel must be built: a failed build fails here, not skips.
pytestmark = pytest.mark.skipif(not stream.supported_cpu(), reason="the kernel needs an x86-64 CPU with AVX-512")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[str, object]:
    """This machine's build, and one with AVX512-BF16's instructions turned off (the widening path)."""
    libs = {"native": stream.library()}
    assert libs["native"] is not None, "an AVX-512 CPU with a C compiler builds the kernel"
    libs["widened"] = stream.load(stream.build(tmp_path_factory.mktemp("stream"), ("-mno-avx512bf16",)))
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
    assert stream.build(tmp_path, ("-mno-avx512bf16",)) != first
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, stream.build(
        tmp_path, ("-mno-avx512bf16",)).name])


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
