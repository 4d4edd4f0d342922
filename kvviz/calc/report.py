"""One memory question, answered whole: the KV cache, paging, weights, capacity and roofline.

This is the single entry point the CLI and the app call. It validates the query, runs the memory
model, the parameter count, the capacity and roofline estimates, and renders the result as a
JSON-ready dict or as text with every formula shown. It holds no arithmetic of its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from kvviz.base.inputs import number, whole_number
from kvviz.base.units import GIB, fmt_bytes, fmt_int, fmt_seconds, fmt_si
from kvviz.calc.arch import Architecture
from kvviz.calc.capacity import Capacity, capacity
from kvviz.calc.dtypes import DType, kv_dtype, weight_dtype
from kvviz.calc.hardware import DEFAULT_ACCELERATOR, Accelerator, get_accelerator
from kvviz.calc.memory import KVBreakdown, PagedAllocation, kv_breakdown, paged_allocation
from kvviz.calc.params import ParamCount, count_params, weight_bytes
from kvviz.calc.roofline import PhaseEstimate, decode_estimate, prefill_estimate

MAX_BATCH = 1_000_000
MAX_SEQ_LEN = 100_000_000


@dataclass(frozen=True)
class MemoryQuery:
    """The knobs of the calculator. kv_dtype and weight_dtype default to the accelerator's 16-bit format."""

    batch: int = 1
    seq_len: int = 4096
    kv_dtype: str | None = None
    block_size: int = 16
    accelerator: str = DEFAULT_ACCELERATOR
    mem_util: float = 0.9
    weight_dtype: str | None = None
    reserve_gib: float = 1.0


@dataclass(frozen=True)
class MemoryReport:
    """Everything kvviz can say about one model under one query."""

    arch: Architecture
    query: MemoryQuery
    accelerator: Accelerator
    kv_dtype: DType
    weight_dtype: DType
    kv: KVBreakdown
    paged: PagedAllocation
    params: ParamCount | None
    weights_bytes: int | None
    capacity: Capacity
    prefill: PhaseEstimate | None
    decode: PhaseEstimate | None
    notes: tuple[str, ...] = field(default=())


def validate(query: MemoryQuery) -> MemoryQuery:
    """The query with its numbers checked; ValueError with one clear sentence otherwise."""
    batch = whole_number(query.batch, "batch", 1, MAX_BATCH)
    seq_len = whole_number(query.seq_len, "seq_len", 1, MAX_SEQ_LEN)
    block = whole_number(query.block_size, "block_size", 1, 4096)
    util = number(query.mem_util, "mem_util", 0, 1, low_open=True)
    reserve = number(query.reserve_gib, "reserve (GiB)", 0, 4096)
    return MemoryQuery(batch, seq_len, query.kv_dtype, block, query.accelerator, util, query.weight_dtype, reserve)


def memory_report(arch: Architecture, query: MemoryQuery, accel: Accelerator | None = None) -> MemoryReport:
    """Answer `query` for `arch`. Pass `accel` to reuse a measured CPU instead of measuring again."""
    query = validate(query)
    accel = accel or get_accelerator(query.accelerator)
    kvd = kv_dtype(query.kv_dtype or accel.default_dtype)
    wd = weight_dtype(query.weight_dtype or accel.default_dtype)
    notes = list(arch.notes)
    kv = kv_breakdown(arch, query.batch, query.seq_len, kvd)
    paged = paged_allocation(arch, query.batch, query.seq_len, kvd, query.block_size)
    params = count_params(arch) if arch.has_weights else None
    weights = weight_bytes(params, wd) if params else None
    if params is None:
        notes.append("weights unknown (KV dimensions only): capacity counts the KV cache alone")
    if arch.max_position_embeddings and query.seq_len > arch.max_position_embeddings:
        notes.append(f"seq_len {query.seq_len:,} is beyond the model's context of "
                     f"{arch.max_position_embeddings:,} tokens")
    cap = capacity(arch, accel, kvd, weights or 0, query.batch, query.seq_len, query.mem_util,
                   int(query.reserve_gib * GIB), query.block_size)
    if cap.kv_budget_bytes == 0:
        notes.append(f"weights ({(weights or 0) / 1e9:,.1f} GB) and reserve leave no room for a KV cache in "
                     f"{cap.usable_bytes / 1e9:,.1f} GB usable on one {accel.name}: shard the model over "
                     "several devices or quantise the weights")
    prefill = decode = None
    if params:
        prefill = prefill_estimate(arch, params, accel, wd, kvd, query.batch, query.seq_len)
        decode = decode_estimate(arch, params, accel, wd, kvd, query.batch, query.seq_len)
    return MemoryReport(arch, query, accel, kvd, wd, kv, paged, params, weights, cap, prefill, decode, tuple(notes))


def _phase_dict(p: PhaseEstimate | None) -> dict | None:
    if p is None:
        return None
    out = {k: v for k, v in asdict(p).items() if k != "formulas"}
    out["is_lower_bound"] = True
    out["formulas"] = [f.as_dict() for f in p.formulas]
    if p.phase == "decode":
        out["tokens_per_s_upper_bound"] = p.batch / p.lower_bound_s
    return out


def as_dict(r: MemoryReport) -> dict:
    """JSON-ready form. kv_cache_bytes is what an engine supporting the architecture keeps."""
    a, kv, cap = r.arch, r.kv, r.capacity
    formulas = [kv.formula, kv.per_token_formula, kv.no_window_formula, kv.mla_expanded_formula, r.paged.formula,
                cap.formula, r.params.formula if r.params else None]
    return {
        "model": {
            "name": a.name, "source": a.source, "model_type": a.model_type, "attention": a.attention_kind,
            "layers": a.num_layers, "heads": a.num_heads, "kv_heads": a.num_kv_heads, "head_dim": a.head_dim,
            "v_head_dim": a.v_head_dim, "sliding_window": a.sliding_window, "sliding_layers": a.n_sliding,
            "layer_types": list(a.layer_types), "mla": asdict(a.mla) if a.mla else None,
            "max_position_embeddings": a.max_position_embeddings,
        },
        "query": asdict(r.query) | {"kv_dtype": r.kv_dtype.name, "weight_dtype": r.weight_dtype.name},
        "kv_dtype_scheme": r.kv_dtype.scheme,
        "kv_cache_bytes": kv.bytes,
        "kv_cache_gib": kv.bytes / 2**30,
        "kv_cache_gb": kv.bytes / 1e9,
        "kv_bytes_per_token": kv.bytes_per_token,
        "kv_cache_bytes_no_window": kv.no_window_bytes,
        "kv_cache_bytes_mla_expanded": kv.mla_expanded_bytes,
        "layer_groups": [{"kind": g.group.kind, "window": g.group.window, "layers": g.group.count,
                          "tokens_kept": g.tokens_kept, "bytes": g.bytes} for g in kv.groups],
        "paged": {k: v for k, v in asdict(r.paged).items() if k != "formula"},
        "weights": None if r.params is None else {
            "params": r.params.total, "matmul_params_per_token": r.params.matmul_per_token,
            "dtype": r.weight_dtype.name, "dtype_scheme": r.weight_dtype.scheme, "bytes": r.weights_bytes,
            "components": {c.name: c.total for c in r.params.components},
        },
        "capacity": {
            "accelerator": asdict(cap.accelerator),
            **{k: v for k, v in asdict(cap).items() if k not in ("accelerator", "formula")},
        },
        "roofline": {"prefill": _phase_dict(r.prefill), "decode": _phase_dict(r.decode)},
        "formulas": [f.as_dict() for f in formulas if f is not None],
        "notes": list(r.notes),
    }


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    line = lambda cells: "  ".join(str(c).rjust(w) if i else str(c).ljust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _indent(text: str, by: str = "  ") -> str:
    return "\n".join(by + line for line in text.splitlines())


def describe(a: Architecture) -> str:
    """One line on the attention shape: what drives the cache."""
    if a.mla is not None:
        shape = (f"MLA: {a.num_heads} heads, latent {a.mla.kv_lora_rank} + rope {a.mla.qk_rope_head_dim} "
                 "per token and layer")
    elif a.attention_kind == "MHA":
        shape = f"MHA: {a.num_heads} heads, each its own K/V, head_dim {a.head_dim}"
    else:
        shape = f"{a.attention_kind}: {a.num_heads} query heads share {a.num_kv_heads} KV heads, head_dim {a.head_dim}"
    layers = f"{a.num_layers} layers"
    if a.n_sliding:
        layers += f" ({a.n_sliding} sliding, window {a.sliding_window:,}; {a.num_layers - a.n_sliding} full)"
    return f"{a.model_type}, {shape}, {layers}"


def render_text(r: MemoryReport) -> str:
    """The report as a reader wants it in a terminal: each figure with its formula."""
    a, q, kv, pg, cap = r.arch, r.query, r.kv, r.paged, r.capacity
    acc = r.accelerator
    out = [
        f"model     {a.name}: {describe(a)}",
        f"source    {a.source}",
        f"query     batch {q.batch:,} × seq_len {q.seq_len:,}, KV {r.kv_dtype.name}, block {q.block_size}",
        f"KV format {r.kv_dtype.scheme}",
        "",
        "KV cache",
        _indent(kv.formula.text()),
        _indent(kv.per_token_formula.text()),
    ]
    for extra in (kv.no_window_formula, kv.mla_expanded_formula):
        if extra is not None:
            out.append(_indent(extra.text()))
    if len(kv.groups) > 1:
        out.append(_indent(_table(["layers", "count", "window", "tokens kept", "bytes"],
                                  [[g.group.kind, str(g.group.count), str(g.group.window or "-"),
                                    fmt_int(g.tokens_kept), fmt_int(g.bytes)] for g in kv.groups])))
    out += [
        "",
        f"Paged allocation (block_size {pg.block_size}, as vLLM)",
        f"  blocks per sequence (full layer): {pg.blocks_per_seq:,}; "
        f"one block, all layers: {fmt_bytes(pg.block_bytes)}",
        _indent(pg.formula.text()),
        f"  wasted in last blocks: {fmt_bytes(pg.wasted_bytes_per_seq)} per sequence, "
        f"{fmt_bytes(pg.wasted_bytes)} in all",
    ]
    if r.params is not None:
        out += ["", f"Weights ({r.weight_dtype.name}: {r.weight_dtype.scheme})",
                _indent(_table(["component", "params"], [[c.name, fmt_int(c.total)] for c in r.params.components
                                                         if c.total] + [["total", fmt_int(r.params.total)]])),
                f"  weights: {fmt_bytes(r.weights_bytes)}"]
    out += [
        "",
        f"Capacity on {acc.name} ({acc.memory_bytes / 1e9:,.1f} GB{', measured' if acc.measured else ''}), "
        f"mem_util {cap.mem_util:g}, reserve {q.reserve_gib:g} GiB",
        _indent(cap.formula.text()),
        f"  token slots (every layer keeps every token): {fmt_int(cap.token_slots)}",
        f"  largest batch at seq_len {q.seq_len:,}: {fmt_int(cap.max_batch)}",
        f"  longest seq_len at batch {q.batch:,}: {fmt_int(cap.max_seq_len)}"
        + (" (the model's context limit, not memory)" if cap.seq_len_capped else ""),
        f"  batch {q.batch:,} × seq_len {q.seq_len:,} fits: {'yes' if cap.fits else 'NO'}",
    ]
    if r.prefill is not None:
        out += ["", f"Roofline lower bounds on {acc.name} ({fmt_si(acc.peak_flops, 'FLOP/s')} {acc.peak_dtype}, "
                    f"{fmt_si(acc.bandwidth, 'B/s')}; ridge {acc.ridge_point:,.0f} FLOP/B)",
                _indent(_table(["phase", "FLOPs", "bytes", "FLOP/B", "bound", "time >="],
                               [[p.phase, fmt_si(p.flops, "FLOP"), fmt_si(p.bytes, "B"), f"{p.intensity:,.1f}",
                                 p.bound, fmt_seconds(p.lower_bound_s)] for p in (r.prefill, r.decode)]))]
        out += [_indent(f.text()) for p in (r.prefill, r.decode) for f in p.formulas]
        out.append(f"  decode tokens/s at batch {q.batch:,} cannot exceed {q.batch / r.decode.lower_bound_s:,.1f}")
    if acc.measured:
        out.append(f"  ({acc.note})")
    if r.notes:
        out += ["", *[f"note: {n}" for n in r.notes]]
    return "\n".join(out)
