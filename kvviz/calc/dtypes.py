"""Storage formats for the KV cache and for weights, and what each one really costs in bytes.

A 16- or 32-bit format costs its width and nothing else. The 8- and 4-bit formats also store
scales, and the scheme assumed is written on each format so the app and the CLI can say it: a keyed text
(kvviz.i18n.said), English as a str and rendered in the reader's language where it is shown, or a bare name.
This module knows nothing about models; it only turns a count of numbers into bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvviz.base.errors import InputError
from kvviz.i18n import said


@dataclass(frozen=True)
class DType:
    """One storage format.

    bits: width of one stored element.
    group_size / group_overhead_bytes: quantised formats store, for every `group_size` elements
        of one vector, `group_overhead_bytes` of scale and zero-point beside the packed values.
    tensor_overhead_bytes: a constant per layer (per-tensor scales), independent of tokens.
    """

    name: str
    bits: int
    scheme: str  # a keyed text (kvviz.i18n.Said), or a bare name ("IEEE float32")
    group_size: int | None = None
    group_overhead_bytes: int = 0
    tensor_overhead_bytes: int = 0

    def vector_bytes(self, n_elems: int) -> int:
        """Bytes to store one vector of n_elems values, packed values plus their group scales."""
        packed = math.ceil(n_elems * self.bits / 8)
        if self.group_size is None:
            return packed
        return packed + math.ceil(n_elems / self.group_size) * self.group_overhead_bytes

    @property
    def nominal_bytes(self) -> float:
        """Bytes per element before any scale overhead (0.5 for int4)."""
        return self.bits / 8


# The KV formats' group-wise scheme: group-wise asymmetric quantisation along each head vector, groups of 64 values,
# one fp16 scale and one fp16 zero-point per group, as transformers' QuantizedCache does (calc.scheme.kv_groupwise).
KV_DTYPES: dict[str, DType] = {
    "fp32": DType("fp32", 32, said("calc.scheme.no_scales", fmt="IEEE float32")),
    "fp16": DType("fp16", 16, said("calc.scheme.no_scales", fmt="IEEE float16")),
    "bf16": DType("bf16", 16, said("calc.scheme.no_scales", fmt="bfloat16")),
    "fp8": DType("fp8", 8, said("calc.scheme.kv_fp8"), tensor_overhead_bytes=8),
    "int8": DType("int8", 8, said("calc.scheme.kv_groupwise", fmt="int8"), group_size=64, group_overhead_bytes=4),
    "int4": DType("int4", 4, said("calc.scheme.kv_groupwise", fmt="int4"), group_size=64, group_overhead_bytes=4),
}

# The weight formats' group-wise scheme: groups of 128 values along each matrix's input dimension, one fp16 scale and
# one fp16 zero-point per group, GPTQ/AWQ's layout (calc.scheme.weight_groupwise).
WEIGHT_DTYPES: dict[str, DType] = {
    "fp32": DType("fp32", 32, "IEEE float32"),
    "fp16": DType("fp16", 16, "IEEE float16"),
    "bf16": DType("bf16", 16, "bfloat16"),
    "fp8": DType("fp8", 8, said("calc.scheme.weight_fp8")),
    "int8": DType("int8", 8, said("calc.scheme.weight_groupwise", fmt="int8"), group_size=128,
                  group_overhead_bytes=4),
    "int4": DType("int4", 4, said("calc.scheme.weight_groupwise", fmt="int4"), group_size=128,
                  group_overhead_bytes=4),
}


def kv_dtype(name: str) -> DType:
    """The KV-cache format called `name`; ValueError listing the choices otherwise."""
    return _lookup(KV_DTYPES, name, "KV dtype")


def weight_dtype(name: str) -> DType:
    """The weight format called `name`; ValueError listing the choices otherwise."""
    return _lookup(WEIGHT_DTYPES, name, "weight dtype")


def _lookup(table: dict[str, DType], name: str, what: str) -> DType:
    key = str(name).strip().lower()
    if key not in table:
        raise InputError("input.unknown_choice", name=what, value=repr(name), choices=", ".join(table))
    return table[key]
