"""The CPU step's own linear operators and the pass that groups them (kvviz.engine.regions), checked against
torch's linear on the same weights: packed, grouped, unpacked, and after the weights are gone."""

from __future__ import annotations

import gc
import time

import pytest
import torch

from kvviz.engine import regions

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="oneDNN is part of every x86 torch")


def _weights(*rows: int, cols: int = 64, dtype=torch.float32) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(sum(rows))
    return [torch.nn.Parameter(torch.randn(r, cols, generator=gen, dtype=dtype), requires_grad=False) for r in rows]


def test_a_packed_linear_is_torchs_linear():
    """fp32: oneDNN on the packed copy gives F.linear's numbers (to fp32 rounding), with and without bias."""
    w, = _weights(48)
    b = torch.randn(48)
    x = torch.randn(1, 1, 64)
    regions.pack(w)
    for bias in (None, b):
        got = torch.ops.kvviz.packed_linear(x, w, bias)
        torch.testing.assert_close(got, torch.nn.functional.linear(x, w, bias), rtol=1e-5, atol=1e-5)


def test_an_unpacked_weight_falls_back_and_a_freed_one_is_forgotten():
    """A weight never packed still gives the right product; a packed copy goes when its weight does."""
    w, = _weights(40)
    x = torch.randn(1, 64)
    torch.testing.assert_close(torch.ops.kvviz.packed_linear(x, w, None), x @ w.T, rtol=1e-5, atol=1e-5)
    before = regions.packed_count()
    regions.pack(w)
    regions.pack(w)
    assert regions.packed_count() == before + 1, "packing one weight twice keeps one copy"
    del w
    gc.collect()
    assert regions.packed_count() == before


def test_grouped_linears_are_the_separate_products_side_by_side():
    """q, k and v of different heights, two with a bias and one without: one product, split by the rows."""
    q, k, v = _weights(64, 16, 16)
    bq, bv = torch.randn(64), torch.randn(16)
    x = torch.randn(1, 1, 64)
    got = torch.ops.kvviz.grouped_linear(x, [q, k, v], [bq, None, bv])
    want = torch.cat([x @ q.T + bq, x @ k.T, x @ v.T + bv], dim=-1)
    assert got.shape == (1, 1, 96)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    groups = regions.grouped_count()
    assert groups >= 1
    del q, k, v
    gc.collect()
    assert regions.grouped_count() == groups - 1, "a group goes when its weights do"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_kernel_gives_torchs_linear_alone_grouped_and_for_many_rows(dtype, monkeypatch):
    """Each kernel on offer for the dtype, one weight with and without bias and a group of three (the kernel
    chosen for its shape, 56 x 64): F.linear's numbers for one row (the kernel's own product) and for five rows
    (where mkl and mv hand over to torch)."""
    if dtype == torch.bfloat16 and not regions.can_pack(torch.zeros(1, dtype=dtype)):
        pytest.skip("no bf16 kernel here: oneDNN has none for this CPU and kvviz's own cannot be built")
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    for kernel in regions.kernels(dtype):
        w, q, k, v = _weights(48, 32, 16, 8, dtype=dtype)
        b, bq = torch.randn(48, dtype=dtype), torch.randn(32, dtype=dtype)
        for p in (w, q, k, v):
            regions.pack(p, kernel)
        monkeypatch.setitem(regions._BY_SHAPE, (dtype, 32 + 16 + 8, 64), kernel)
        for rows in (1, 5):
            x = torch.randn(1, rows, 64, dtype=dtype)
            for bias in (None, b):
                got = torch.ops.kvviz.packed_linear(x, w, bias)
                torch.testing.assert_close(got, torch.nn.functional.linear(x, w, bias), **tol, msg=kernel)
            got = torch.ops.kvviz.grouped_linear(x, [q, k, v], [bq, None, None])
            want = torch.cat([x @ q.T + bq, x @ k.T, x @ v.T], dim=-1)
            torch.testing.assert_close(got, want, **tol, msg=kernel)
        assert regions._PACKED[w.data_ptr()][2] == kernel
        narrower = w[:40]  # a view at the packed weight's address, of another shape: torch's linear, not the copy
        x = torch.randn(1, 1, 64, dtype=dtype)
        torch.testing.assert_close(torch.ops.kvviz.packed_linear(x, narrower, None), x @ narrower.T, **tol, msg=kernel)
        assert regions._GROUPS[(q.data_ptr(), k.data_ptr(), v.data_ptr())][3] == kernel, "a group takes its shape's"


def _stack_with_one_fast_kernel_a_shape(monkeypatch) -> tuple[_Stack, dict, list]:
    """A three-layer stack whose first layer's a and b are one group (24 + 8 rows, as a step's first call groups
    q, k and v), with every kernel but one per shape made 2 ms slower a call: the model, {(rows, columns): the
    fast kernel}, and the kernels called so far. Skips where fp32 has one kernel (not CI's: oneDNN and mv are
    everywhere)."""
    offered = regions.kernels(torch.float32)
    if len(offered) < 2:
        pytest.skip("one fp32 kernel on offer: nothing to choose")
    model = _Stack()
    layer = model.layers[0]
    torch.ops.kvviz.grouped_linear(torch.randn(1, 32), [layer.a.weight, layer.b.weight], [layer.a.bias, None])
    # c (and the group of a and b: the same shape); the head; a and b alone (layers 2 and 3)
    fast = {(32, 32): offered[1], (10, 32): offered[0], (24, 32): offered[-1], (8, 32): offered[0]}
    product, calls = regions._product, []

    def slowed(kernel, x, copy, bias, rows):
        calls.append(kernel)
        if kernel != fast[rows, x.shape[-1]]:
            time.sleep(0.002)
        return product(kernel, x, copy, bias, rows)

    monkeypatch.setattr(regions, "_product", slowed)
    return model, fast, calls


@pytest.mark.alone  # the slowed kernels are 2 ms slower a call: a busy core could blur that
def test_the_choice_takes_the_fastest_kernel_per_shape_once_per_model(monkeypatch):
    """choose_kernels keeps, for each shape of product, the kernel whose calls are quickest, groups included, holds
    every product for it, and measures a model once."""
    model, fast, calls = _stack_with_one_fast_kernel_a_shape(monkeypatch)
    layer = model.layers[0]
    assert regions.choose_kernels(model) == {(torch.float32, r, c): k for (r, c), k in fast.items()}
    assert regions._GROUPS[(layer.a.weight.data_ptr(), layer.b.weight.data_ptr())][3] == fast[32, 32]
    for m in (model.layers[1].a, model.layers[2].b, model.layers[0].c, model.head):
        assert regions._PACKED[m.weight.data_ptr()][2] == fast[tuple(m.weight.shape)]
    record = regions.kernel_choice(model)["float32 32x32"]
    offered = regions.kernels(torch.float32)
    assert record["kernel"] == fast[32, 32] and record["products"] == 4 and set(record["pass_ms"]) == set(offered)
    before = len(calls)
    regions.choose_kernels(model)
    assert len(calls) == before, "measured once per model"


@pytest.mark.alone  # the slowed kernels are 2 ms slower a call: a busy core could blur that
def test_past_its_memory_budget_the_choice_times_one_product_a_shape_and_still_holds_all(monkeypatch):
    """With no bytes to spend on copies for timing, the pass times one product of each shape (4 shapes, each
    kernel on offer, every round) and every product, timed or not, ends held for its shape's kernel."""
    model, fast, calls = _stack_with_one_fast_kernel_a_shape(monkeypatch)
    layer = model.layers[0]
    monkeypatch.setattr(regions, "_choice_budget", lambda: 0)
    assert regions.choose_kernels(model) == {(torch.float32, r, c): k for (r, c), k in fast.items()}
    offered = regions.kernels(torch.float32)
    assert len(calls) == (regions.CHOICE_ROUNDS + 1) * len(fast) * len(offered), "one product of each shape"
    assert regions._GROUPS[(layer.a.weight.data_ptr(), layer.b.weight.data_ptr())][3] == fast[32, 32]
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) and m not in (layer.a, layer.b):
            assert regions._PACKED[m.weight.data_ptr()][2] == fast[tuple(m.weight.shape)]


class _Block(torch.nn.Module):
    """Two linears on one input (grouped), one on another (left alone)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(32, 24), torch.nn.Linear(32, 8, bias=False), torch.nn.Linear(32, 32)

    def forward(self, x):
        return self.c(torch.cat([self.a(x), self.b(x)], dim=-1)).relu()


class _Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(_Block() for _ in range(3))
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


@pytest.mark.parametrize("kernel", regions.kernels(torch.float32))
def test_a_stack_compiled_with_regions_and_groups_matches_eager(tmp_path, monkeypatch, kernel):
    """A three-layer stack compiled inside compiling(), its linears run by each kernel in turn (the only one on
    offer to the choice): the eager output (torch's linear, unpatched modules), its 10 linears packed for that
    kernel, the layers found as the repeated stack, a and b of each layer grouped, the modules as they were
    afterwards."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(regions, "kernels", lambda dtype: (kernel,))
    torch.manual_seed(0)
    model = _Stack().eval()
    x = torch.randn(1, 32)
    assert regions.repeated_layers(model) == list(model.layers)
    with torch.inference_mode():
        want = model(x)
        step = torch.compile(model, dynamic=False)
        with torch._inductor.config.patch({"post_grad_custom_pre_pass": regions.GROUP_LINEARS}), \
                regions.compiling(model) as packed:
            got = step(x)
    assert packed == 10
    assert {c["kernel"] for c in regions.kernel_choice(model).values()} == {kernel}
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert regions.grouped_count(model) == 3, "each layer's a and b made one product"
    assert all("forward" not in vars(m) for m in model.modules())
    torch._dynamo.reset()


class _Widening(torch.nn.Module):
    """Layers of one class whose widths differ, as OpenELM's do."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16 * (i + 1)) for i in range(3))


def test_layers_that_differ_are_not_one_region_and_an_own_forward_comes_back():
    """A ModuleList of one class but three shapes is no repeated stack; a layer's own forward (a hook's, say)
    is the same object after compiling() as before it."""
    assert regions.repeated_layers(_Widening()) == []
    model = _Stack()
    own = model.layers[1].forward
    model.layers[1].forward = own
    with regions.compiling(model):
        assert model.layers[1].forward is not own and "forward" in vars(model.layers[0])
    assert model.layers[1].forward is own and "forward" not in vars(model.layers[0])
    assert all("forward" not in vars(m) for m in model.modules() if m is not model.layers[1])


def test_a_torch_without_reuse_hash_fn_leaves_the_layer_function_plain(monkeypatch):
    """torch before 2.13 (the GPU machine's 2.11) takes no reuse_hash_fn: the layer function stays a plain function
    there, so kvviz's core still imports; with it, the function is wrapped as a region."""
    def region_2_11(fn=None):  # 2.11's signature: the function alone
        return ("region", fn)

    def region_2_13(fn=None, *, reuse_hash_fn=None):
        return lambda f: ("region", f, reuse_hash_fn)

    def layer(*args):
        return args

    monkeypatch.setattr(torch.compiler, "nested_compile_region", region_2_11)
    assert regions._as_region(layer) is layer
    monkeypatch.setattr(torch.compiler, "nested_compile_region", region_2_13)
    assert regions._as_region(layer) == ("region", layer, regions._region_key)


def test_without_onednn_bf16_kernels_a_bf16_weight_goes_to_kvvizs_own(monkeypatch):
    """A CPU whose oneDNN has no bf16 kernels (AVX2 alone): oneDNN is not offered for bf16 (it would convert as it
    goes), fp32 keeps it; a bf16 weight is still chosen for where kvviz's kernel runs, and left to torch where it
    does not (no compiler); on a CPU whose oneDNN has them, bf16 is offered oneDNN."""
    monkeypatch.setattr(regions, "onednn_has_bf16", lambda: False)
    monkeypatch.setattr(regions.stream, "available", lambda dtype: True)
    assert "onednn" not in regions.kernels(torch.bfloat16) and "stream" in regions.kernels(torch.bfloat16)
    assert "onednn" in regions.kernels(torch.float32)
    assert regions.can_pack(torch.zeros(2, 2, dtype=torch.bfloat16))
    monkeypatch.setattr(regions.stream, "available", lambda dtype: False)
    assert regions.kernels(torch.bfloat16) == ("mv",)
    assert not regions.can_pack(torch.zeros(2, 2, dtype=torch.bfloat16))
    assert regions.can_pack(torch.zeros(2, 2)) and not regions.can_pack(torch.zeros(2, 2, dtype=torch.float16))
    monkeypatch.setattr(regions.stream, "available", lambda dtype: dtype in (torch.float32, torch.bfloat16))
    w = torch.randn(24, 40, dtype=torch.bfloat16)  # a shape no choice has seen: held for the first kernel on offer
    regions.pack(w)
    assert regions._PACKED[w.data_ptr()][2] == "mv"
    monkeypatch.setattr(regions, "onednn_has_bf16", lambda: True)
    assert regions.kernels(torch.bfloat16) == ("onednn", "mv", "stream")
    assert regions.can_pack(torch.zeros(2, dtype=torch.bfloat16))
