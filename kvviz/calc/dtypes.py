"""Storage formats for the KV cache and for weights, and what each one really costs in bytes.

A 16- or 32-bit format costs its width and nothing else. The 8- and 4-bit formats also store
scales, and the scheme assumed is written on each format so the app and the CLI can say it.
This module knows nothing about models; it only turns a count of numbers into bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvviz.base.errors import InputError


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
    scheme: str
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


_GROUPWISE = (
    "group-wise asymmetric quantisation along each head vector, groups of 64 values, one fp16 scale "
    "and one fp16 zero-point per group (4 bytes per 64 values), as transformers' QuantizedCache "
    "does; its full-precision window of recent tokens is not counted"
)

KV_DTYPES: dict[str, DType] = {
    "fp32": DType("fp32", 32, "IEEE float32, no scales"),
    "fp16": DType("fp16", 16, "IEEE float16, no scales"),
    "bf16": DType("bf16", 16, "bfloat16, no scales"),
    "fp8": DType(
        "fp8",
        8,
        "float8 e4m3 with one fp32 scale for K and one for V per layer (vLLM's per-tensor kv scales, "
        "8 bytes per layer)",
        tensor_overhead_bytes=8,
    ),
    "int8": DType("int8", 8, "int8, " + _GROUPWISE, group_size=64, group_overhead_bytes=4),
    "int4": DType("int4", 4, "int4, " + _GROUPWISE, group_size=64, group_overhead_bytes=4),
}

_WEIGHT_GROUPWISE = (
    "group-wise quantisation of every weight matrix, groups of 128 values along the input dimension, "
    "one fp16 scale and one fp16 zero-point per group (GPTQ/AWQ-style layout); vectors (norms, biases) "
    "stay in bf16"
)

WEIGHT_DTYPES: dict[str, DType] = {
    "fp32": DType("fp32", 32, "IEEE float32"),
    "fp16": DType("fp16", 16, "IEEE float16"),
    "bf16": DType("bf16", 16, "bfloat16"),
    "fp8": DType("fp8", 8, "float8 e4m3, per-tensor scales (negligible, not counted); vectors stay in bf16"),
    "int8": DType("int8", 8, "int8, " + _WEIGHT_GROUPWISE, group_size=128, group_overhead_bytes=4),
    "int4": DType("int4", 4, "int4, " + _WEIGHT_GROUPWISE, group_size=128, group_overhead_bytes=4),
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
