"""Tables behind the calculator's plots: the memory model swept over one variable at a time.

Each function returns a pandas DataFrame that a figure function (kvviz.ui.figures) draws as it is.
Sweeps use the same memory model and roofline as every other answer, so a plot and the formula
beside it can never disagree. Nothing here draws.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from kvviz.base.units import GIB
from kvviz.calc.arch import FULL, NONE, Architecture
from kvviz.calc.dtypes import DType
from kvviz.calc.memory import kv_cache_bytes


def seq_len_grid(max_seq_len: int, points: int = 48) -> list[int]:
    """Sequence lengths from 1 to max_seq_len, denser at the start (where windows and blocks bite)."""
    grid = np.unique(np.round(np.geomspace(1, max(max_seq_len, 2), points)).astype(int))
    return [int(x) for x in grid]


def kv_vs_seq_len(arch: Architecture, dtype: DType, batches: list[int], max_seq_len: int,
                  also: int | None = None) -> pd.DataFrame:
    """KV bytes against seq_len for each batch size (window applied, MLA latent); `also`: a seq_len the grid
    must hold (the one the user chose, so that their point lies on the curve)."""
    lengths = sorted({*seq_len_grid(max_seq_len), *([also] if also else [])})
    rows = [{"batch": b, "seq_len": s, "kv_bytes": kv_cache_bytes(arch, b, s, dtype)}
            for b in sorted(set(batches)) for s in lengths]
    frame = pd.DataFrame(rows)
    frame["kv_gib"] = frame["kv_bytes"] / GIB
    return frame


def window_effect(arch: Architecture, dtype: DType, batch: int, max_seq_len: int) -> pd.DataFrame:
    """KV bytes against seq_len with the sliding window applied and as if every layer kept every token."""
    rows = []
    for s in seq_len_grid(max_seq_len):
        rows.append({"seq_len": s, "variant": "window applied", "kv_bytes": kv_cache_bytes(arch, batch, s, dtype)})
        rows.append({"seq_len": s, "variant": "window ignored (every layer keeps every token)",
                     "kv_bytes": kv_cache_bytes(arch, batch, s, dtype, apply_window=False)})
    frame = pd.DataFrame(rows)
    frame["kv_gib"] = frame["kv_bytes"] / GIB
    return frame


def attention_variants(arch: Architecture, dtype: DType, batch: int, seq_len: int) -> pd.DataFrame:
    """The same model's cache under MHA (kv_heads = heads), its own GQA, MQA (one KV head), and MLA where
    the model has it; full attention on every layer so only the attention shape differs."""
    full = replace(arch, layer_types=tuple(FULL if kind != NONE else NONE for kind in arch.layer_types),
                   sliding_window=None, chunk_size=None)
    plain = full.with_kv_heads(arch.num_heads)  # for an MLA model: per-head K (nope + rope) and V, expanded
    variants = [("MHA", plain.num_heads, plain)]
    if arch.mla is None and 1 < arch.num_kv_heads < arch.num_heads:
        variants.append(("GQA (this model)", arch.num_kv_heads, plain.with_kv_heads(arch.num_kv_heads)))
    variants.append(("MQA", 1, plain.with_kv_heads(1)))
    if arch.mla is not None:
        variants.append(("MLA (this model)", 0, full))
    rows = [{"attention": label, "kv_heads": kv, "kv_bytes": kv_cache_bytes(a, batch, seq_len, dtype)}
            for label, kv, a in variants]
    frame = pd.DataFrame(rows)
    frame["kv_gib"] = frame["kv_bytes"] / GIB
    frame["vs_mha"] = frame["kv_bytes"] / frame["kv_bytes"].iloc[0]
    return frame
