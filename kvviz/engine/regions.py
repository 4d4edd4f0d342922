"""What makes a CPU's compiled decode step quick to compile and fast to run: its linear layers call the kernel that
streams their weights fastest on this machine (chosen by timing them), on copies kvviz prepacks itself, and its
decoder layers are one nested compile region, traced once and stamped out for every layer.

Why not inductor's own way. With freezing, inductor makes every weight a constant of the program and prepacks it
for oneDNN; but then the 24 layers of the Qwen2.5-0.5B twin are 24 different programs to it, lowered, scheduled
and code-generated node by node: 35-38 s of a cold compile on 2 cores, nearly all of it inductor's per-node work
(measured part by part: docs/benchmarks.md). torch.compiler.nested_compile_region compiles a repeated layer
once, but inside it a weight is an input, not a constant, so freezing's prepacking does not reach it, and an
unpacked bf16 matrix-vector product streams its weights at a third of the speed (34 against 109 GB/s for one
4864 x 896 bf16 matrix measured on a 2-core EPYC). So the packing moves out of inductor: packed_linear is a
custom operator that calls a kernel on a copy of the weight made once, here, and inductor calls it as it calls any
external kernel.

Which kernel is measured, not assumed (choose_kernels): for each shape of product in the step, oneDNN's prepacked
linear, MKL's packed sgemm (fp32), torch's matrix-vector product or kvviz's own (kvviz.engine.stream, on x86-64
CPUs), whichever runs that shape's products fastest in timed passes over the model's own step. No one of them wins
everywhere: on a 2-core EPYC oneDNN's prepacked fp32 product streamed fastest of the first three; on a 2-core Xeon
with AMX, oneDNN ran the same products with an AVX2 kernel (57 ms a pass over SmolLM2's weights, against 32 for MKL
and 35 for torch.mv) and lost to torch.mv in bf16 (97 against 140 ms on the Qwen2.5-0.5B twin). kvviz's own kernel,
one sequential stream of the weight a core, took every shape on the EPYC (the Qwen twin's gate-up products 9.2 ms a
pass against oneDNN's 19.7, its lm_head 7.7 against 9.6).

How the layers become one trace. dynamo reuses a traced region only when every input is a tensor, a number, a
string or a module, and it guards the trace on what the body read. Handed a layer's bound forward and transformers'
StaticCache object it traced every layer anew (17 of 67 s of the Qwen2.5-0.5B twin's profiled cold compile on a
2-core Xeon). So a layer whose cache is a plain StaticLayer runs as _one_static_layer(layer, its cache tensors,
...): inside, a stand-in cache (_RegionCache) writes those tensors with transformers' own StaticLayer.update, and
the layer's index, which the stand-in does not read, stays out of the trace's key (region_keys: layers whose plain
attributes differ, a sliding window say, get traces of their own). dynamo traces one layer and stamps it out for
the others: 33.2-33.7 s became 23.9-27.4 s for that twin's first compile, 29.7 s became 21.6 s for SmolLM2's.
A layer that asks the cache for anything else fails to trace; the step then compiles the general way
(_one_layer, a trace per layer: kvviz.engine.compiled.StaticDecoder).

Outside a compile nothing changes: the model's modules are patched only while the step is traced (compiling()),
and a packed copy lives as long as the weight it was made from.
"""

from __future__ import annotations

import statistics
import threading
import time
import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from kvviz.base.cpu import mem_available
from kvviz.engine import hugepages, stream

# How a product runs, chosen on each machine per shape by timing the model's own step (choose_kernels):
#   "onednn": oneDNN's linear on a copy prepacked into its blocked layout (what inductor's freezing does);
#   "mkl": MKL's sgemm on a copy packed for one row (fp32 only; freezing's choice for fp32 linears);
#   "mv": torch's matrix-vector product on the weight as it is (no copy);
#   "stream": kvviz's own matrix-vector kernel on the weight as it is (kvviz.engine.stream; x86-64 CPUs).
# Which streams fastest depends on the CPU: on a 2-core EPYC oneDNN's packed fp32 product beat MKL's; on a 2-core
# Xeon with AMX oneDNN ran its fp32 products with an AVX2 kernel at 10-15 GB/s where MKL read 16-24 GB/s.
KERNELS = ("onednn", "mkl", "mv", "stream")
_NO_COPY = ("mv", "stream")  # kernels that read the weight as it is
CHOICE_ROUNDS = 5  # timed passes per kernel, after one that warms
Shape = tuple[torch.dtype, int, int]  # a product's weight: dtype, rows (out features), columns (in features)
# the kernel chosen on this machine for a shape (the last model measured says); oneDNN's for a shape never measured
_BY_SHAPE: dict[Shape, str] = {}
# model -> {shape: (the kernel chosen, how many of the step's products have that shape, {kernel: median seconds of
# those products in one pass})}
_CHOICES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _kernel_for(dtype: torch.dtype, rows: int, columns: int) -> str:
    """The kernel chosen for the shape, else (before the choice) the first on offer for the dtype."""
    return _BY_SHAPE.get((dtype, rows, columns)) or kernels(dtype)[0]


def _whole(weights: list[Tensor]) -> Tensor:
    """A product's weight: one weight as it is, or a group's rows concatenated."""
    return weights[0] if len(weights) == 1 else torch.cat([w.detach() for w in weights])

# data_ptr of a weight -> (a weak reference to that weight, its copy for the kernel, the kernel). Keyed by address
# because the operator sees the weight as compiled code hands it over, not necessarily as the same Python object;
# the weak reference tells a live entry from one whose weight is gone and whose address was reused.
_PACKED: dict[int, tuple[weakref.ref, Tensor, str]] = {}
_PACKED_LOCK = threading.Lock()
PACKABLE_DTYPES = (torch.float32, torch.bfloat16)


def onednn_has_bf16() -> bool:
    """Whether oneDNN has bf16 kernels for this CPU (AVX-512 BF16 or AMX); without them it runs a bf16 product by
    converting to fp32 as it goes, below torch.mv's speed."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def kernels(dtype: torch.dtype) -> tuple[str, ...]:
    """The kernels this torch and CPU can run a `dtype` weight's product with, oneDNN first."""
    offered = {"onednn": torch.backends.mkldnn.is_available() and (dtype != torch.bfloat16 or onednn_has_bf16()),
               "mkl": dtype == torch.float32 and torch.backends.mkl.is_available(), "stream": stream.available(dtype)}
    return tuple(k for k in KERNELS if offered.get(k, True))


def _copy(kernel: str, weight: Tensor) -> Tensor:
    """`weight` ([out, in]) as `kernel` reads it: prepacked for one row, or itself; in 2 MB pages where Linux
    allows (kvviz.engine.hugepages: a weight used as it is collapses in place, its values unchanged)."""
    weight = weight.detach()
    if kernel == "onednn":
        copy = torch.ops.mkldnn._reorder_linear_weight(weight, 1)
    elif kernel == "mkl":
        copy = torch.ops.mkl._mkl_reorder_linear_weight(weight, 1)
    else:
        copy = weight.contiguous()  # mv and stream
    hugepages.collapse(copy)
    return copy


def _product(kernel: str, x: Tensor, copy: Tensor, bias: Tensor | None, rows: int) -> Tensor | None:
    """x @ weight.T + bias by `kernel` on its copy of a weight of `rows` output rows; None where the kernel
    serves only one row of x and x has more (the caller takes torch's linear)."""
    if kernel == "onednn":
        return torch.ops.mkldnn._linear_pointwise(x, copy, bias, "none", [], "")
    if x.numel() != x.shape[-1]:
        return None
    if kernel == "stream":
        return stream.gemv(x, copy, bias)
    if kernel == "mkl":
        # MKL's packed buffer does not carry the weight's shape: the call reads it from its "origin" argument,
        # which it otherwise uses only for other batch sizes (not reached here), so a zero-stride view serves.
        shape = x.new_zeros(()).expand(rows, x.shape[-1])
        return torch.ops.mkl._mkl_linear(x.reshape(1, -1), copy, shape, bias, 1).view(*x.shape[:-1], rows)
    vector = x.reshape(-1)
    out = torch.mv(copy, vector) if bias is None else torch.addmv(bias, copy, vector)
    return out.view(*x.shape[:-1], rows)


# Defined with torch.library's low-level calls, not custom_op: custom_op checks its outputs' aliasing on every
# call, some microseconds each, times the ~100 linears of a step.
torch.library.define("kvviz::packed_linear", "(Tensor x, Tensor weight, Tensor? bias) -> Tensor")
torch.library.define("kvviz::grouped_linear", "(Tensor x, Tensor[] weights, Tensor?[] biases) -> Tensor")


@torch.library.impl("kvviz::packed_linear", "CPU")
def packed_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """x @ weight.T + bias, by the kernel pack() chose for `weight`, on its copy. A weight never packed (or one
    whose copy was dropped) takes torch's own linear: the same numbers' worth of work, at eager speed."""
    entry = _PACKED.get(weight.data_ptr())
    packed_from = None if entry is None else entry[0]()
    if packed_from is None or packed_from.shape != weight.shape:  # a view of another shape at the same address
        return torch.nn.functional.linear(x, weight, bias)
    out = _product(entry[2], x, entry[1], bias, weight.shape[0])
    return torch.nn.functional.linear(x, weight, bias) if out is None else out


@torch.library.register_fake("kvviz::packed_linear")
def _packed_linear_shape(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


# (data_ptr of each weight) -> (weak references to them, their rows concatenated in the kernel's copy, the
# concatenated biases or None, the kernel): the linears that read one input, made one product (grouped_linear).
_GROUPS: dict[tuple[int, ...], tuple[tuple[weakref.ref, ...], Tensor, Tensor | None, str]] = {}


def _group(weights: list[Tensor], biases: list[Tensor | None]) -> tuple[Tensor, Tensor | None, str] | None:
    """The concatenation of `weights` as the kernel chosen for its shape reads it (and their biases, zeros
    standing for a missing one), made on first use and kept while every weight lives; None where a weight cannot
    be packed."""
    key = tuple(w.data_ptr() for w in weights)
    entry = _GROUPS.get(key)
    if entry is not None and all(r() is not None for r in entry[0]):
        return entry[1], entry[2], entry[3]
    with _PACKED_LOCK:
        if not all(can_pack(w) for w in weights):
            return None
        kernel = _kernel_for(weights[0].dtype, sum(w.shape[0] for w in weights), weights[0].shape[1])
        packed = _copy(kernel, _whole(weights))
        bias = None
        if any(b is not None for b in biases):
            bias = torch.cat([w.new_zeros(w.shape[0]) if b is None else b.detach() for w, b in zip(weights, biases,
                                                                                                    strict=True)])

        def drop(ref, key=key):
            with _PACKED_LOCK:
                if key in _GROUPS and ref in _GROUPS[key][0]:
                    del _GROUPS[key]
        _GROUPS[key] = (tuple(weakref.ref(w, drop) for w in weights), packed, bias, kernel)
        return packed, bias, kernel


@torch.library.impl("kvviz::grouped_linear", "CPU")
def grouped_linear(x: Tensor, weights: list[Tensor], biases: list[Tensor | None]) -> Tensor:
    """x times every weight and plus every bias, as one product over the weights' rows concatenated (one taller
    matrix streams faster than two or three short ones, and in one call): [..., sum of out features]."""
    group = _group(weights, biases)
    out = None
    if group is not None:
        out = _product(group[2], x, group[0], group[1], sum(w.shape[0] for w in weights))
    if out is None:
        return torch.cat([torch.nn.functional.linear(x, w, b) for w, b in zip(weights, biases, strict=True)], -1)
    return out


@torch.library.register_fake("kvviz::grouped_linear")
def _grouped_linear_shape(x: Tensor, weights: list[Tensor], biases: list[Tensor | None]) -> Tensor:
    return x.new_empty((*x.shape[:-1], sum(w.shape[0] for w in weights)))


class GroupLinears(CustomGraphPass):
    """inductor's pass (before its own, after autograd): packed_linear calls that read the same input and whose
    weights and biases are inputs of the graph become one grouped_linear (q, k and v; gate and up)."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        by_input: dict[torch.fx.Node, list[torch.fx.Node]] = {}
        for node in graph.nodes:
            if node.op == "call_function" and node.target is torch.ops.kvviz.packed_linear.default:
                by_input.setdefault(node.args[0], []).append(node)
        for x, nodes in by_input.items():
            operands = [a for n in nodes for a in n.args[1:3] if a is not None]
            if len(nodes) < 2 or any(not isinstance(a, torch.fx.Node) or a.op not in ("placeholder", "get_attr")
                                     for a in operands):
                continue
            weights, biases = [n.args[1] for n in nodes], [n.args[2] for n in nodes]
            with graph.inserting_before(nodes[0]):
                grouped = graph.call_function(torch.ops.kvviz.grouped_linear.default, (x, weights, biases))
                grouped.meta["val"] = _grouped_linear_shape(x.meta["val"], [w.meta["val"] for w in weights], [])
                start = 0
                for node in nodes:
                    end = start + node.meta["val"].shape[-1]
                    piece = graph.call_function(torch.ops.aten.slice.Tensor, (grouped, -1, start, end))
                    piece.meta["val"] = grouped.meta["val"][..., start:end]
                    node.replace_all_uses_with(piece)
                    start = end
            for node in nodes:
                graph.erase_node(node)

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__,))


GROUP_LINEARS = GroupLinears()


def can_pack(weight: Tensor) -> bool:
    """Whether a step's products on `weight` go to the per-shape choice: a CPU tensor of fp32, or of bf16 where
    oneDNN has bf16 kernels or kvviz's own kernel runs (on a CPU with AVX2 alone, kvviz's is the one that reads
    bf16 at speed; without it the product stays inductor's)."""
    if weight.device.type != "cpu" or weight.dtype not in PACKABLE_DTYPES:
        return False
    return weight.dtype != torch.bfloat16 or bool({"onednn", "stream"} & set(kernels(weight.dtype)))


def _drop(key: int, ref: weakref.ref) -> None:
    with _PACKED_LOCK:
        if key in _PACKED and _PACKED[key][0] is ref:
            del _PACKED[key]


def pack(weight: Tensor, kernel: str | None = None, copy: Tensor | None = None) -> None:
    """Make `weight`'s ([out, in]) copy for `kernel` (by default the one chosen for its shape; or keep `copy`, made
    for it already), once per weight and kernel; the copy goes when the weight does."""
    kernel = kernel or _kernel_for(weight.dtype, *weight.shape)
    key = weight.data_ptr()
    with _PACKED_LOCK:
        entry = _PACKED.get(key)
        if entry is not None and entry[0]() is weight and entry[2] == kernel:
            return
        ref = weakref.ref(weight, lambda ref, key=key: _drop(key, ref))
        _PACKED[key] = (ref, _copy(kernel, weight) if copy is None else copy, kernel)


def _packable_linears(model: torch.nn.Module) -> list[torch.nn.Linear]:
    return [m for m in model.modules()
            if type(m) is torch.nn.Linear and "forward" not in vars(m) and can_pack(m.weight)]


def _products(model: torch.nn.Module) -> list[tuple[tuple | None, list[Tensor], Tensor | None]]:
    """The products a step of `model` runs, in the model's order: each group grouped_linear made of its weights
    (its key in _GROUPS, its weights, its concatenated bias) in place of its first weight, and each other packable
    weight alone (None, [weight], bias)."""
    with _PACKED_LOCK:
        live = [(key, [r() for r in refs], bias) for key, (refs, _, bias, _) in _GROUPS.items()]
    groups = {id(ws[0]): (key, ws, bias) for key, ws, bias in live if all(w is not None for w in ws)}
    grouped = {id(w) for _, ws, _ in groups.values() for w in ws}
    products = []
    for m in _packable_linears(model):
        if id(m.weight) in groups:
            products.append(groups[id(m.weight)])
        elif id(m.weight) not in grouped:
            products.append((None, [m.weight], m.bias))
    return products


def choose_kernels(model: torch.nn.Module) -> dict[Shape, str]:
    """The kernel each shape of product in `model`'s step runs with on this machine, measured once per model: one
    pass over the step's products (its groups as made so far, the other weights alone), in the model's order and
    one row each, with each kernel on offer, timed call by call; the kernel whose calls of a shape take least (the
    median of CHOICE_ROUNDS passes, in interleaved rounds, after one that warms) is that shape's. Every product is
    then held for its shape's kernel, and later copies of that shape are made for it. On a model larger than the
    last-level cache a pass reads the weights from memory, as a step does.

    The copies made only to be timed stay within _choice_budget(): past it, a product whose shape is timed already
    is left out of the pass (a model's layers repeat, so its first layers carry every shape); the copy each
    product is held with now is timed as it is, not made again."""
    if model not in _CHOICES:
        products = _products(model)
        shapes = [(ws[0].dtype, sum(w.shape[0] for w in ws), ws[0].shape[1]) for _, ws, _ in products]
        budget, timed, copies, inputs = _choice_budget(), [], [], {}
        for n, ((key, weights, _), shape) in enumerate(zip(products, shapes, strict=True)):
            offered, held = kernels(shape[0]), _held(key, weights)
            held = held if held is not None and held[0] in offered else None
            made = [k for k in offered if held is None or k != held[0]]
            cost = sum(w.numel() * w.element_size() for w in weights) * sum(
                1 for k in made if k not in _NO_COPY or len(weights) > 1)
            if cost > budget and any(shapes[t] == shape for t in timed):
                continue
            budget -= cost
            whole = _whole(weights)
            copies.append({k: _copy(k, whole) for k in made} | ({} if held is None else {held[0]: held[1]}))
            timed.append(n)
            inputs.setdefault((shape[0], shape[2]), torch.randn(1, 1, shape[2], dtype=shape[0]))
        seconds: dict[tuple[Shape, str], list[float]] = {}
        with torch.no_grad():
            for r in range(CHOICE_ROUNDS + 1):
                for k in KERNELS[r % len(KERNELS):] + KERNELS[:r % len(KERNELS)]:
                    spent: dict[Shape, float] = {}
                    for n, mine in zip(timed, copies, strict=True):
                        if k in mine:
                            shape, bias = shapes[n], products[n][2]
                            start = time.perf_counter()
                            _product(k, inputs[shape[0], shape[2]], mine[k], bias, shape[1])
                            spent[shape] = spent.get(shape, 0.0) + time.perf_counter() - start
                    if r:
                        for shape, t in spent.items():
                            seconds.setdefault((shape, k), []).append(t)
        choice: dict[Shape, tuple[str, int, dict[str, float]]] = {}
        for shape in dict.fromkeys(shapes):
            medians = {k: statistics.median(seconds[shape, k]) for k in KERNELS if (shape, k) in seconds}
            choice[shape] = (min(medians, key=medians.get), shapes.count(shape), medians)
        _CHOICES[model] = choice
        _BY_SHAPE.update({shape: kernel for shape, (kernel, _, _) in choice.items()})
        for n, mine in zip(timed, copies, strict=True):
            kernel = choice[shapes[n]][0]
            _hold(products[n][0], products[n][1], kernel, mine[kernel])
        del copies  # before the products left out of the pass get copies of their own
        was_timed = set(timed)
        for n, (key, weights, _) in enumerate(products):
            held, kernel = _held(key, weights), choice[shapes[n]][0]
            if n not in was_timed and (held is None or held[0] != kernel):
                _hold(key, weights, kernel, _copy(kernel, _whole(weights)))
    _BY_SHAPE.update({shape: kernel for shape, (kernel, _, _) in _CHOICES[model].items()})
    return {shape: kernel for shape, (kernel, _, _) in _CHOICES[model].items()}


def _choice_budget() -> int:
    """Bytes choose_kernels may spend on copies made only to be timed: a quarter of the memory available now
    (Linux's MemAvailable), at most 4 GiB; 1 GiB where that cannot be read."""
    available = mem_available()
    return 1 << 30 if available is None else min(4 << 30, available // 4)


def _held(key: tuple | None, weights: list[Tensor]) -> tuple[str, Tensor] | None:
    """The kernel and copy a product is held with now (a group by its key, one weight by its address), or None."""
    if key is not None:
        entry = _GROUPS.get(key)
        return None if entry is None else (entry[3], entry[1])
    entry = _PACKED.get(weights[0].data_ptr())
    return None if entry is None or entry[0]() is not weights[0] else (entry[2], entry[1])


def _hold(key: tuple | None, weights: list[Tensor], kernel: str, copy: Tensor) -> None:
    """Keep `copy` as the product's copy for `kernel`: a group's (by its key) or one weight's."""
    if key is None:
        pack(weights[0], kernel, copy)
        return
    with _PACKED_LOCK:
        entry = _GROUPS.get(key)
        if entry is not None:
            _GROUPS[key] = (entry[0], copy, entry[2], kernel)


def kernel_choice(model: torch.nn.Module) -> dict[str, dict]:
    """What choose_kernels measured for `model`, per shape ("float32 3072x576"): the kernel chosen, how many of
    the step's products have that shape, and each kernel's time for them in one pass, in ms (empty before it
    ran)."""
    return {f"{str(dtype).removeprefix('torch.')} {rows}x{columns}":
            {"kernel": kernel, "products": count, "pass_ms": {k: 1e3 * t for k, t in medians.items()}}
            for (dtype, rows, columns), (kernel, count, medians) in _CHOICES.get(model, {}).items()}


def packed_count(model: torch.nn.Module | None = None) -> int:
    """Weights held prepacked one by one in this process now (of `model`'s weights only, if given)."""
    mine = None if model is None else {id(p) for p in model.parameters()}
    with _PACKED_LOCK:
        weights = [ref() for ref, *_ in _PACKED.values()]
    return sum(1 for w in weights if w is not None and (mine is None or id(w) in mine))


def grouped_count(model: torch.nn.Module | None = None) -> int:
    """Groups of linears held as one prepacked product in this process now (of `model`'s weights only, if
    given)."""
    mine = None if model is None else {id(p) for p in model.parameters()}
    with _PACKED_LOCK:
        groups = [[r() for r in refs] for refs, *_ in _GROUPS.values()]
    return sum(1 for ws in groups if all(w is not None and (mine is None or id(w) in mine) for w in ws))


def _drop_grouped_copies(model: torch.nn.Module) -> None:
    """Free the one-by-one packed copies of `model`'s weights that its step reads only inside a group (q, k, v,
    gate, up): the group holds its own concatenated copy, and a second one would cost the step's memory twice over
    for those weights (about 470 MB on the Qwen2.5-0.5B twin in bf16)."""
    mine = {id(p) for p in model.parameters()}
    with _PACKED_LOCK:
        grouped = [r() for refs, *_ in _GROUPS.values() for r in refs]
        for w in grouped:
            if w is not None and id(w) in mine:
                entry = _PACKED.get(w.data_ptr())
                if entry is not None and entry[0]() is w:
                    del _PACKED[w.data_ptr()]


def forget_packed() -> None:
    """Drop every prepacked copy (benchmarks free memory with it between models)."""
    with _PACKED_LOCK:
        _PACKED.clear()
        _GROUPS.clear()


def _signature(layer: torch.nn.Module) -> tuple:
    return type(layer), tuple((name, tuple(p.shape), p.dtype) for name, p in layer.named_parameters())


def repeated_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's stack of decoder layers: the longest ModuleList whose entries are all of one class with the same
    parameters, name for name and shape for shape (for a transformers causal LM, model.model.layers). Empty when
    it has none of two or more: layers that differ (as OpenELM's, whose widths change from layer to layer) would
    each need a program of their own, and torch refuses a region past 8 of them, so they compile whole."""
    best: list[torch.nn.Module] = []
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) >= 2 and len(module) > len(best):
            if len({_signature(m) for m in module}) == 1:
                best = list(module)
    return best


@torch.compiler.nested_compile_region
def _one_layer(forward, *args, **kwargs):
    """A decoder layer's forward as a region (the general case: traced again at every layer, its inputs being a
    bound method and the cache object, which dynamo does not reuse a traced region over)."""
    return forward(*args, **kwargs)


class _LayerSlots:
    """One static cache layer's tensors as transformers' StaticLayer.update reads them (keys, values, the count
    written so far), made inside the region from its inputs."""

    def __init__(self, keys: Tensor, values: Tensor, length: Tensor) -> None:
        self.keys, self.values, self.cumulative_length = keys, values, length
        self.device, self.is_initialized = keys.device, True


class _RegionCache:
    """The cache as a decoder layer inside the region sees it: update writes the layer's own tensors with
    transformers' StaticLayer.update, whatever index the layer gives, so that one traced body serves every layer.
    A layer that asks the cache for anything else fails to trace, and the step compiles the general way."""

    def __init__(self, slots: _LayerSlots, update) -> None:
        self._slots, self._update = slots, update

    def update(self, key_states: Tensor, value_states: Tensor, layer_idx: int, *args, **kwargs):
        return self._update(self._slots, key_states, value_states, *args, **kwargs)


def _region_key(layer, *args, **kwargs) -> int:
    return layer.kvviz_region_key


_STATIC_UPDATE: list = []  # transformers' StaticLayer.update, looked up when a layer is first patched


def _as_region(fn):
    """`fn` as a nested compile region traced once per region key. torch before 2.13 has no reuse_hash_fn (the GPU
    machine's torch is 2.11): there `fn` stays a plain function, which dynamo inlines layer by layer, so that the
    core still imports; the CUDA path does not use regions."""
    try:
        return torch.compiler.nested_compile_region(reuse_hash_fn=_region_key)(fn)
    except TypeError:
        return fn


@_as_region
def _one_static_layer(layer, cache_name, keys, values, length, *args, **kwargs):
    """A decoder layer's forward on its own static cache tensors: traced once, and that trace reused for every
    layer of the same key (region_keys). Its inputs are the layer module, tensors and constants, which is what
    dynamo reuses a traced region over."""
    cache = _RegionCache(_LayerSlots(keys, values, length), _STATIC_UPDATE[0])
    return type(layer).forward(layer, *args, **{cache_name: cache}, **kwargs)


def region_keys(layers: list[torch.nn.Module]) -> list[int]:
    """For each layer, the number of its kind: layers whose modules hold the same plain attributes (numbers,
    strings, flags: a sliding window, a scaling, an attention type), their layer_idx aside, share one. The
    parameters' shapes are the same already (repeated_layers). transformers' layers read their index in forward only
    to reach their cache (a grep of its models, version 5.24), and anything but update fails to trace on
    _RegionCache."""
    kinds: dict[tuple, int] = {}
    keys = []
    for layer in layers:
        kind = tuple((name, tuple(sorted((k, v) for k, v in vars(m).items()
                                         if not k.startswith("_") and k != "layer_idx"
                                         and isinstance(v, (bool, int, float, str, type(None))))))
                     for name, m in layer.named_modules())
        keys.append(kinds.setdefault(kind, len(kinds)))
    return keys


def _in_region(layer: torch.nn.Module, index: int, reuse: bool):
    """layer's forward, patched: through _one_static_layer when reuse is asked and the layer's cache is a plain
    static one (transformers' StaticLayer), else through _one_layer."""
    forward = layer.forward
    if reuse and not _STATIC_UPDATE:
        from transformers.cache_utils import StaticLayer

        _STATIC_UPDATE.append(StaticLayer.update)

    def call(*args, **kwargs):
        name = "cache" if "cache" in kwargs else "past_key_values"
        cache = kwargs.get(name)
        slots = cache.layers[index] if reuse and hasattr(cache, "layers") and len(cache.layers) > index else None
        if slots is None or type(slots).update is not _STATIC_UPDATE[0]:
            return _one_layer(forward, *args, **kwargs)
        del kwargs[name]
        return _one_static_layer(layer, name, slots.keys, slots.values, slots.cumulative_length, *args, **kwargs)
    return call


def _packed_forward(self, x: Tensor) -> Tensor:
    return torch.ops.kvviz.packed_linear(x, self.weight, self.bias)


def _linear_packed(module: torch.nn.Linear):
    return types.MethodType(_packed_forward, module)


_NONE = object()  # a module had no forward of its own


@contextmanager
def compiling(model: torch.nn.Module, regions: bool = True, reuse: bool = True) -> Iterator[int]:
    """While a step of `model` is traced: every plain nn.Linear whose weight can be packed calls packed_linear, on a
    copy made for the kernel measured fastest for its shape (oneDNN's until measured: choose_kernels, run on leaving
    the block once the step's groups exist), and (with `regions`) every decoder layer runs inside the one nested
    compile region. Yields how many linears were packed. The modules are as they were afterwards; a compiled step
    keeps what was traced, so only code traced inside this block sees the change. The step runs inside the block
    (its groups are made on their first call), so that on leaving it the copies only groups use can go."""
    patched: list[tuple[torch.nn.Module, object]] = []  # each module, and its own forward before (or _NONE)
    packed, stepped = 0, False
    try:
        for module in _packable_linears(model):
            pack(module.weight)
            patched.append((module, _NONE))
            module.forward = _linear_packed(module)
            packed += 1
        if regions:
            layers = repeated_layers(model)
            for index, (layer, key) in enumerate(zip(layers, region_keys(layers), strict=True)):
                patched.append((layer, vars(layer).get("forward", _NONE)))
                layer.kvviz_region_key = key
                layer.forward = _in_region(layer, index, reuse)
        yield packed
        stepped = True
    finally:
        for module, before in reversed(patched):
            vars(module).pop("kvviz_region_key", None)
            if before is _NONE:
                vars(module).pop("forward", None)
            else:
                module.forward = before
        if stepped:
            choose_kernels(model)
        _drop_grouped_copies(model)
