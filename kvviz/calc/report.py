"""One memory question, answered whole: the KV cache, paging, weights, capacity and roofline.

This is the single entry point the CLI and the app call. It validates the query, runs the memory
model, the parameter count, the capacity and roofline estimates, and renders the result as a
JSON-ready dict (English keys and notes, whatever the reader's language) or as text with every formula shown,
in English or Chinese (lang="zh": kvviz.i18n.calculator's texts). It holds no arithmetic of its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from kvviz.base.inputs import number, whole_number
from kvviz.base.units import GIB, display_width, fmt_bytes, fmt_int, fmt_seconds, fmt_si
from kvviz.calc.arch import CHUNKED, FULL, NONE, SLIDING, Architecture
from kvviz.calc.capacity import Capacity
from kvviz.calc.dtypes import DType, kv_dtype, weight_dtype
from kvviz.calc.formula import Formula
from kvviz.calc.hardware import DEFAULT_ACCELERATOR, Accelerator, get_accelerator
from kvviz.calc.memory import KVBreakdown, PagedAllocation, kv_breakdown, paged_allocation
from kvviz.calc.parallel import Deployment, Parallelism, Stage, deploy
from kvviz.calc.params import ParamCount, count_params, weight_bytes
from kvviz.calc.roofline import PhaseEstimate, decode_estimate, prefill_estimate
from kvviz.i18n import Said, normalize, said, t
from kvviz.i18n.calculator import COMPONENTS
from kvviz.i18n.errors import translate

MAX_BATCH = 1_000_000
MAX_SEQ_LEN = 100_000_000
MAX_TP = 1024  # tensor parallelism splits heads: no model has more than a few hundred
MAX_PP = 1024  # pipeline stages: at most one per layer (checked against the model in parallel.py)
MAX_DP = 100_000  # replicas


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
    tp: int = 1  # tensor-parallel GPUs per layer
    pp: int = 1  # pipeline stages
    dp: int = 1  # data-parallel replicas


@dataclass(frozen=True)
class MemoryReport:
    """Everything kvviz can say about one model under one query.

    capacity is one GPU's: the whole model's on one GPU, or with tp × pp > 1 the share one GPU holds
    (parallel.per_gpu); parallel says what each GPU of the deployment holds and what all of them hold.
    """

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
    parallel: Deployment
    notes: tuple[Said, ...] = field(default=())  # keyed texts: English in the JSON, rendered by note_text


def validate(query: MemoryQuery) -> MemoryQuery:
    """The query with its numbers checked; ValueError with one clear sentence otherwise."""
    batch = whole_number(query.batch, "batch", 1, MAX_BATCH)
    seq_len = whole_number(query.seq_len, "seq_len", 1, MAX_SEQ_LEN)
    block = whole_number(query.block_size, "block_size", 1, 4096)
    util = number(query.mem_util, "mem_util", 0, 1, low_open=True)
    reserve = number(query.reserve_gib, "reserve (GiB)", 0, 4096)
    tp = whole_number(query.tp, "tp", 1, MAX_TP)
    pp = whole_number(query.pp, "pp", 1, MAX_PP)
    dp = whole_number(query.dp, "dp", 1, MAX_DP)
    return replace(query, batch=batch, seq_len=seq_len, block_size=block, mem_util=util, reserve_gib=reserve,
                   tp=tp, pp=pp, dp=dp)


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
        notes.append(said("calc.note.no_weights"))
    if arch.max_position_embeddings and query.seq_len > arch.max_position_embeddings:
        notes.append(said("calc.note.beyond_context", seq_len=query.seq_len, context=arch.max_position_embeddings))
    par = Parallelism(query.tp, query.pp, query.dp)
    deployment = deploy(arch, params, par, accel, kvd, wd, query.batch, query.seq_len, query.mem_util,
                        int(query.reserve_gib * GIB), query.block_size)
    cap = deployment.per_gpu
    if cap.kv_budget_bytes == 0:
        notes.append(_no_room(cap, accel, par))
    prefill = decode = None
    if params:
        prefill = prefill_estimate(arch, params, accel, wd, kvd, query.batch, query.seq_len)
        decode = decode_estimate(arch, params, accel, wd, kvd, query.batch, query.seq_len)
        if par.gpus > 1:
            notes.append(said("calc.note.roofline_one", accel=accel.name))
    return MemoryReport(arch=arch, query=query, accelerator=accel, kv_dtype=kvd, weight_dtype=wd, kv=kv, paged=paged,
                        params=params, weights_bytes=weights, capacity=cap, prefill=prefill, decode=decode,
                        parallel=deployment, notes=tuple(notes))


def _no_room(cap: Capacity, accel: Accelerator, par: Parallelism) -> Said:
    """The note for a GPU whose weights and reserve leave nothing for the cache, with what would help."""
    weights, usable = cap.weights_bytes / 1e9, cap.usable_bytes / 1e9
    if par.gpus == 1:
        return said("calc.note.no_room", weights=weights, usable=usable, accel=accel.name)
    return said("calc.note.no_room_gpu", weights=weights, tp=par.tp, pp=par.pp, usable=usable, accel=accel.name)


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
    if r.parallel.gpus > 1:
        formulas += r.parallel.formulas
    return {
        "model": {
            "name": a.shown_name(), "source": a.source, "model_type": a.model_type, "attention": a.attention_kind,
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
        "state": None if a.state is None else {
            "kind": a.state.kind, "layers": a.state.layers, "conv_values": a.state.conv,
            "recurrent_values": a.state.recurrent, "shapes_per_layer": a.state.shapes, "bytes": kv.state_bytes,
            "why": STATE_WHY,
        },
        "layer_groups": [{"kind": g.group.kind, "window": g.group.window, "layers": g.group.count,
                          "tokens_kept": g.tokens_kept, "bytes": g.bytes} for g in kv.groups],
        "paged": {k: v for k, v in asdict(r.paged).items() if k != "formula"},
        "weights": None if r.params is None else {
            "params": r.params.total, "active_params_per_token": r.params.active,
            "matmul_params_per_token": r.params.matmul_per_token,
            "dtype": r.weight_dtype.name, "dtype_scheme": r.weight_dtype.scheme, "bytes": r.weights_bytes,
            "components": {c.name: c.total for c in r.params.components},
        },
        "capacity": {
            "accelerator": asdict(cap.accelerator),
            **{k: v for k, v in asdict(cap).items() if k not in ("accelerator", "formula")},
        },
        "parallel": _parallel_dict(r.parallel),
        "roofline": {"prefill": _phase_dict(r.prefill), "decode": _phase_dict(r.decode)},
        "formulas": [f.as_dict() for f in formulas if f is not None],
        "notes": list(r.notes),
    }


def _stage_dict(s: Stage) -> dict:
    cap = s.capacity
    return {"stage": s.index, "first_layer": s.first_layer, "layers": s.layers, "params_per_gpu": s.params,
            "weights_bytes_per_gpu": s.weights_bytes, "kv_cache_bytes_per_gpu": s.kv.bytes,
            "kv_bytes_per_token_per_gpu": s.kv.bytes_per_token, "kv_budget_bytes": cap.kv_budget_bytes,
            "token_slots": cap.token_slots, "max_batch": cap.max_batch, "max_seq_len": cap.max_seq_len,
            "fits": cap.fits}


def _parallel_dict(d: Deployment) -> dict:
    """The deployment in JSON: one GPU's share (the stage that fills first), the whole deployment, every stage."""
    p, one, cap = d.parallel, d.binding, d.per_gpu
    return {
        "tp": p.tp, "pp": p.pp, "dp": p.dp, "gpus": d.gpus, "kv_heads_per_gpu": d.kv_heads_per_gpu,
        "per_gpu": {"stage": one.index, "layers": one.layers, "params": one.params, "weights_bytes": one.weights_bytes,
                    "kv_cache_bytes": one.kv.bytes, "kv_bytes_per_token": one.kv.bytes_per_token,
                    "kv_budget_bytes": cap.kv_budget_bytes, "token_slots": cap.token_slots,
                    "max_batch": cap.max_batch, "max_seq_len": cap.max_seq_len, "fits": cap.fits},
        "deployment": {"gpus": d.gpus, "replicas": p.dp, "weights_bytes": d.weights_bytes_all,
                       "token_slots": d.token_slots, "max_batch": d.max_batch},
        "stages": [_stage_dict(s) for s in d.stages],
    }


def _pad(text: str, width: int, left: bool) -> str:
    fill = " " * (width - display_width(text))
    return text + fill if left else fill + text


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(display_width(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    line = lambda cells: "  ".join(_pad(str(c), w, left=not i)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _headers(key: str, lang: str) -> list[str]:
    return t(key, lang).split("|")


def _indent(text: str, by: str = "  ") -> str:
    return "\n".join(by + line for line in text.splitlines())


def formula_text(f: Formula, lang: str = "en") -> str:
    """A formula as Formula.text renders it in `lang`: its label, the words inside its formula and a unit that is a
    word (keyed texts, kvviz.i18n.Said) in that language, its identifiers (batch, seq_len, kv_heads) and numbers as
    they are."""
    return f.text(lang)


def accelerator_name(acc: Accelerator, lang: str = "en") -> str:
    """The accelerator's name in `lang`: a preset's as it is, the measured CPU's ("this CPU, 2 cores", a keyed
    text) rendered in it."""
    return translate(acc.name, lang)


def note_text(note: str, lang: str = "en") -> str:
    """One of a report's notes, a format's scheme or an accelerator's note (a keyed text, English in
    MemoryReport.notes and the JSON) in `lang`; a plain text (a format's bare name) as it is."""
    return translate(note, lang)


def state_why(lang: str = "en") -> str:
    """Why a linear layer's state does not grow with seq_len, in `lang` (STATE_WHY is the English)."""
    return t("calc.state_why", lang)


def _deployment_text(r: MemoryReport, lang: str = "en") -> list[str]:
    """The deployment section of the text report: the rules with their numbers, each stage, one GPU and all."""
    d, q = r.parallel, r.query
    p, one = d.parallel, d.binding
    out = [t("report.deployment", lang, tp=p.tp, pp=p.pp, dp=p.dp, gpus=f"{d.gpus:,}",
             accel=accelerator_name(r.accelerator, lang)),
           *(_indent(formula_text(f, lang)) for f in d.formulas)]
    if len(d.stages) > 1:
        out.append(_indent(_table(
            _headers("report.stages", lang),
            [[str(s.index), f"{s.first_layer}-{s.first_layer + s.layers - 1}", f"{s.weights_bytes / 1e9:,.3f}",
              f"{s.kv.bytes / 1e9:,.3f}", fmt_int(s.kv.bytes_per_token), fmt_int(s.capacity.token_slots),
              fmt_int(s.capacity.max_batch)] for s in d.stages])))
    return [
        *out,
        t("report.per_gpu", lang, stage=one.index, weights=fmt_bytes(one.weights_bytes), batch=f"{q.batch:,}",
          seq_len=f"{q.seq_len:,}", kv=fmt_bytes(one.kv.bytes)),
        t("report.in_all", lang, gpus=f"{d.gpus:,}", weights=fmt_bytes(d.weights_bytes_all), dp=f"{p.dp:,}",
          hold=t("report.replicas_hold" if p.dp > 1 else "report.replica_holds", lang), slots=fmt_int(d.token_slots),
          batch=fmt_int(d.max_batch), seq_len=f"{q.seq_len:,}"),
    ]


STATE_WHY = state_why()  # in the JSON report (as_dict), which stays English


def describe(a: Architecture, lang: str = "en") -> str:
    """One line on the attention shape: what drives the cache."""
    if a.kv_layers == 0:
        shape = t("calc.describe.no_attention", lang)
    elif a.mla is not None:
        shape = t("calc.describe.mla", lang, heads=a.num_heads, rank=a.mla.kv_lora_rank, rope=a.mla.qk_rope_head_dim)
    elif a.attention_kind == "MHA":
        shape = t("calc.describe.mha", lang, heads=a.num_heads, head_dim=a.head_dim)
    else:
        shape = t("calc.describe.shared", lang, kind=a.attention_kind, heads=a.num_heads, kv_heads=a.num_kv_heads,
                  s="s" if a.num_kv_heads > 1 else "", head_dim=a.head_dim)
    return t("calc.describe", lang, model_type=a.model_type, shape=shape, layers=describe_layers(a, lang))


def describe_layers(a: Architecture, lang: str = "en") -> str:
    """The layers by what they cache: "48 layers (36 chunked, chunk 8,192; 12 full)", "32 layers (4 full;
    28 keep a Mamba state, no per-token KV)"."""
    parts = []
    all_full = False
    for kind, key in ((FULL, "calc.layers.full"), (SLIDING, "calc.layers.sliding"), (CHUNKED, "calc.layers.chunked")):
        n = sum(k == kind for k in a.layer_types)
        window = a.window_of(kind)
        if n:
            span = "calc.layers.chunk" if kind == CHUNKED else "calc.layers.window"
            parts.append(t(key, lang, n=n) + (t(span, lang, window=f"{window:,}") if window else ""))
            all_full = kind == FULL and n == a.num_layers and not window
    state_only = sum(k == NONE for k in a.layer_types)
    if a.state is not None:
        hybrid = a.state.layers - state_only
        parts.append(t("calc.layers.state", lang, n=a.state.layers, kind=a.state.kind) + (
            t("calc.layers.hybrid", lang, hybrid=hybrid) if hybrid > 0 else t("calc.layers.state_only", lang)))
        state_only = max(state_only - a.state.layers, 0)
    if state_only:
        parts.append(t("calc.layers.nothing", lang, n=state_only))
    if all_full and len(parts) == 1:
        return t("calc.layers.count", lang, n=a.num_layers)
    return t("calc.layers.parts", lang, n=a.num_layers, parts=t("calc.layers.sep", lang).join(parts))


def _capacity_text(r: MemoryReport, lang: str = "en") -> list[str]:
    """The capacity section: one GPU's budget and what fits (the whole model's GPU, or one GPU's share of it)."""
    acc, q, cap = r.accelerator, r.query, r.capacity
    name = accelerator_name(acc, lang)
    where = name if r.parallel.gpus == 1 else t("report.one_of", lang, accel=name, gpus=f"{r.parallel.gpus:,}")
    return [
        t("report.capacity", lang, where=where, memory=f"{acc.memory_bytes / 1e9:,.1f}",
          measured=t("report.measured", lang) if acc.measured else "", util=f"{cap.mem_util:g}",
          reserve=f"{q.reserve_gib:g}"),
        _indent(formula_text(cap.formula, lang)),
        t("report.slots", lang, slots=fmt_int(cap.token_slots)),
        t("report.largest", lang, seq_len=f"{q.seq_len:,}", batch=fmt_int(cap.max_batch)),
        t("report.longest", lang, batch=f"{q.batch:,}", longest=fmt_int(cap.max_seq_len))
        + (t("report.context_limit", lang) if cap.seq_len_capped else ""),
        t("report.fits", lang, batch=f"{q.batch:,}", seq_len=f"{q.seq_len:,}",
          answer=t("report.yes" if cap.fits else "report.no", lang)),
    ]


def _weights_text(r: MemoryReport, lang: str) -> list[str]:
    """The text report's weights: parameters by component, the total, the bytes, the active share of an MoE."""
    zh = normalize(lang) == "zh"
    name = (lambda c: COMPONENTS.get(c, c)) if zh else (lambda c: c)
    out = [t("report.weights_title", lang, dtype=r.weight_dtype.name, scheme=note_text(r.weight_dtype.scheme, lang)),
           _indent(_table(_headers("report.params", lang),
                          [[name(c.name), fmt_int(c.total)] for c in r.params.components if c.total]
                          + [[t("report.total", lang), fmt_int(r.params.total)]])),
           t("report.weights", lang, bytes=fmt_bytes(r.weights_bytes))]
    if r.params.active != r.params.total:
        out.append(t("report.active", lang, active=fmt_int(r.params.active)))
    return out


def _roofline_text(r: MemoryReport, lang: str) -> list[str]:
    """The text report's roofline: the accelerator's ceilings, prefill and decode with their bounds and formulas."""
    acc, q, zh, phases = r.accelerator, r.query, normalize(lang) == "zh", (r.prefill, r.decode)
    out = [t("report.roofline", lang, accel=accelerator_name(acc, lang), flops=fmt_si(acc.peak_flops, "FLOP/s"),
             dtype=acc.peak_dtype, bandwidth=fmt_si(acc.bandwidth, "B/s"), ridge=f"{acc.ridge_point:,.0f}"),
           _indent(_table(_headers("report.phases", lang),
                          [[t(f"calc.phase.{p.phase}", lang) if zh else p.phase, fmt_si(p.flops, "FLOP"),
                            fmt_si(p.bytes, "B"), f"{p.intensity:,.1f}", t(f"report.bound.{p.bound}", lang),
                            fmt_seconds(p.lower_bound_s)] for p in phases]))]
    out += [_indent(formula_text(f, lang)) for p in phases for f in p.formulas]
    out.append(t("report.tokens_per_s", lang, batch=f"{q.batch:,}", tps=f"{q.batch / r.decode.lower_bound_s:,.1f}"))
    return out


def render_text(r: MemoryReport, lang: str = "en") -> str:
    """The report as a reader wants it in a terminal, in `lang`: each figure with its formula."""
    a, q, kv, pg = r.arch, r.query, r.kv, r.paged
    acc = r.accelerator
    out = [
        t("report.model", lang, name=a.shown_name(lang), describe=describe(a, lang)),
        t("report.source", lang, source=a.source),
        t("report.query", lang, batch=f"{q.batch:,}", seq_len=f"{q.seq_len:,}", dtype=r.kv_dtype.name,
          block=q.block_size),
        t("report.format", lang, scheme=note_text(r.kv_dtype.scheme, lang)),
        "",
        t("report.kv", lang),
        _indent(formula_text(kv.formula, lang)),
        _indent(formula_text(kv.per_token_formula, lang)),
    ]
    for extra in (kv.no_window_formula, kv.mla_expanded_formula):
        if extra is not None:
            out.append(_indent(formula_text(extra, lang)))
    if kv.state_formula is not None:
        out += ["", t("report.state", lang, kind=a.state.kind, shapes=a.state.shapes),
                _indent(formula_text(kv.state_formula, lang)), f"  {state_why(lang)}"]
    if len(kv.groups) > 1:
        out.append(_indent(_table(_headers("report.groups", lang),
                                  [[g.group.kind, str(g.group.count), str(g.group.window or "-"),
                                    fmt_int(g.tokens_kept), fmt_int(g.bytes)] for g in kv.groups])))
    out += [
        "",
        t("report.paged", lang, block=pg.block_size),
        t("report.blocks", lang, blocks=f"{pg.blocks_per_seq:,}", bytes=fmt_bytes(pg.block_bytes)),
        _indent(formula_text(pg.formula, lang)),
        t("report.wasted", lang, per_seq=fmt_bytes(pg.wasted_bytes_per_seq), all=fmt_bytes(pg.wasted_bytes)),
    ]
    if r.params is not None:
        out += ["", *_weights_text(r, lang)]
    if r.parallel.gpus > 1:
        out += ["", *_deployment_text(r, lang)]
    out += ["", *_capacity_text(r, lang)]
    if r.prefill is not None:
        out += ["", *_roofline_text(r, lang)]
    if acc.measured:
        out.append(f"  ({note_text(acc.note, lang)})")
    if r.notes:
        out += ["", *[t("report.note", lang, note=note_text(n, lang)) for n in r.notes]]
    return "\n".join(out)
