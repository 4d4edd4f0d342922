"""The KV-cache calculator's answer for one position of its controls (its tab is kvviz.ui.calculator.tab).

`calculate` answers one slider position: it resolves the architecture (a preset, a config path or
hub id, and the layers / KV heads / head_dim sliders applied on top), runs kvviz's memory report and
sweeps, and returns the text and figure specs the tab shows, in English or Chinese (lang; the JSON details stay
English). It raises a kvviz.base.errors.InputError (a ValueError) for bad input, whose key the tab renders in the
page's language. What the sliders change is recorded on the architecture (Architecture.modified), not in its name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache

from kvviz.base.errors import InputError
from kvviz.base.inputs import choice, text, whole_number
from kvviz.base.units import GIB, fmt_bytes, fmt_int, fmt_ms
from kvviz.calc.arch import (
    Architecture,
    ConfigError,
    architecture_from_dict,
    architecture_from_source,
    config_with_layers,
)
from kvviz.calc.curves import attention_variants, kv_vs_seq_len, window_effect
from kvviz.calc.dtypes import KV_DTYPES
from kvviz.calc.dtypes import kv_dtype as dtype_named
from kvviz.calc.hardware import ACCELERATORS, DEFAULT_ACCELERATOR, device_accelerator
from kvviz.calc.parallel import gpu_architecture
from kvviz.calc.presets import load_preset, preset_names
from kvviz.calc.report import (
    MemoryQuery,
    accelerator_name,
    as_dict,
    describe,
    formula_text,
    memory_report,
    note_text,
    state_why,
)
from kvviz.i18n import t
from kvviz.ui import figures
from kvviz.ui.calculator import figures as calc_figures

DEFAULT_PRESET = "llama-3-8b"
CURVE_BATCHES = (1, 4, 16, 64)


@dataclass(frozen=True)
class CalcResult:
    summary: str  # markdown
    formula: str  # plain text, the formulas with numbers substituted
    memory_fig: dict
    curves_fig: dict
    attention_fig: dict
    window_fig: dict
    roofline_fig: dict
    details: dict  # the whole report as JSON (what `python -m kvviz memory --json` prints)


@lru_cache(maxsize=32)
def _from_source(source: str) -> Architecture:
    return architecture_from_source(source)


def preset_dims(preset: str) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of a preset, for the sliders it sets; ValueError for an unknown one."""
    a = load_preset(choice(preset, "preset", preset_names()))
    return a.num_layers, a.num_kv_heads, a.head_dim


def customise(arch: Architecture, layers: int, kv_heads: int, head_dim: int) -> Architecture:
    """The architecture with the sliders' layers, KV heads and head_dim; unchanged where they agree.

    Another depth is read from the config rewritten to that many layers, so the layer pattern (full, sliding,
    chunked, Mamba) is transformers' own for that depth. An MLA model's cache shape is
    set by its latent, so its KV-head and head_dim sliders do not apply.
    """
    layers = whole_number(layers, "layers", 1, 1024)
    kv_heads = whole_number(kv_heads, "kv_heads", 1, 1024)
    head_dim = whole_number(head_dim, "head_dim", 1, 4096)
    changes: dict = {}
    if layers != arch.num_layers and arch.has_weights:
        # The config with that depth, read as any config: transformers lays out the layer kinds (and which keep a
        # Mamba or linear-attention state) as it would for a real model of that many layers.
        deeper = architecture_from_dict(config_with_layers(json.loads(arch.config), layers), source=arch.source)
        changes |= {"num_layers": layers, "layer_types": deeper.layer_types, "state": deeper.state,
                    "config": deeper.config}
    elif layers != arch.num_layers:
        changes["num_layers"] = layers
        changes["layer_types"] = tuple(arch.layer_types[i % arch.num_layers] for i in range(layers))
    if arch.mla is None and kv_heads != arch.num_kv_heads:
        if arch.num_heads % kv_heads:
            raise InputError("calc.error.kv_heads", heads=arch.num_heads, kv_heads=kv_heads)
        changes["num_kv_heads"] = kv_heads
    if arch.mla is None and head_dim != arch.head_dim:
        changes["head_dim"] = changes["v_head_dim"] = head_dim
    if not changes:
        return arch
    what = tuple(f"{k.replace('num_', '')}={v}" for k, v in changes.items() if k in
                 ("num_layers", "num_kv_heads", "head_dim"))
    return replace(arch, modified=arch.modified + what, **changes)


def resolve(preset: str, config: str, layers: int, kv_heads: int, head_dim: int) -> Architecture:
    """The architecture the calculator shows: the config box wins over the preset, sliders on top."""
    config = text(config, "the config path or hub id", 512).strip()
    try:
        arch = _from_source(config) if config else load_preset(choice(preset, "preset", preset_names()))
    except ConfigError as exc:
        raise exc.recast(InputError) from exc
    return customise(arch, layers, kv_heads, head_dim)


def calculate(preset: str, config: str, batch: float, seq_len: float, layers: float, kv_heads: float,
              head_dim: float, kv_dtype: str, gpu: str, mem_util: float, block_size: float, tp: float = 1,
              pp: float = 1, dp: float = 1, lang: str = "en") -> CalcResult:
    """Everything the calculator tab shows for one position of its controls (named as the CLI names them).

    config: a config.json path or hub id, which wins over the preset; gpu: an accelerator preset, or cpu;
    tp, pp, dp: tensor- and pipeline-parallel GPUs and data-parallel replicas (the memory plot then shows one GPU);
    lang: the language of the summary, the formulas and the figures ("en" or "zh").
    """
    choice(kv_dtype, "KV dtype", list(KV_DTYPES))
    choice(gpu, "accelerator", [*ACCELERATORS, "cpu"])
    arch = resolve(preset, config, layers, kv_heads, head_dim)
    query = MemoryQuery(batch=batch, seq_len=seq_len, kv_dtype=kv_dtype, block_size=block_size,
                        accelerator=gpu, mem_util=mem_util, weight_dtype=None, tp=tp, pp=pp, dp=dp)
    accel = device_accelerator("cpu") if gpu == "cpu" else ACCELERATORS[gpu]
    report = memory_report(arch, query, accel)
    kvd = dtype_named(kv_dtype)
    top = max(report.query.seq_len, 1024)
    one = report.parallel.binding  # the GPU that fills first: its share of every sequence
    share = gpu_architecture(arch, report.query.tp, one.first_layer, one.first_layer + one.layers)
    curves = kv_vs_seq_len(share, kvd, [*CURVE_BATCHES, report.query.batch], top, also=report.query.seq_len)
    span = arch.sliding_window or arch.chunk_size  # Llama-4's chunked layers cap the cache as a window does
    window = (calc_figures.window_curves(window_effect(arch, kvd, report.query.batch, max(top, 2 * span)), span,
                                         "window" if arch.sliding_window else "chunk", lang=lang) if arch.n_sliding
              else figures.empty(t("calc.fig.no_window", lang)))
    return CalcResult(
        summary=_summary(report, lang),
        formula=_formulas(report, lang),
        memory_fig=calc_figures.memory_bar(report, lang=lang),
        curves_fig=calc_figures.kv_curves(curves, report.capacity.kv_budget_bytes, one_gpu=report.parallel.gpus > 1,
                                          lang=lang, yours=(report.query.batch, report.query.seq_len)),
        attention_fig=calc_figures.attention_bars(
            attention_variants(arch, kvd, report.query.batch, report.query.seq_len), lang=lang),
        window_fig=window,
        roofline_fig=calc_figures.roofline(report, lang=lang) if report.prefill else
        figures.empty(t("calc.fig.no_roofline", lang)),
        details=json.loads(json.dumps(as_dict(report))),
    )


def _summary(r, lang: str = "en") -> str:
    kv, cap, q = r.kv, r.capacity, r.query
    lines = [
        t("calc.sum.model", lang, name=r.arch.shown_name(lang), describe=describe(r.arch, lang)),
        "",
        t("calc.sum.kv", lang, gib=f"{kv.bytes / GIB:,.3f}", gb=f"{kv.bytes / 1e9:,.3f}"),
        t("calc.sum.query", lang, batch=f"{q.batch:,}", seq_len=f"{q.seq_len:,}", dtype=r.kv_dtype.name,
          per_token=fmt_int(kv.bytes_per_token)),
    ]
    if kv.no_window_bytes is not None:
        lines.append(t("calc.sum.no_window", lang, bytes=fmt_bytes(kv.no_window_bytes)))
    if kv.mla_expanded_bytes is not None:
        lines.append(t("calc.sum.mla_expanded", lang, bytes=fmt_bytes(kv.mla_expanded_bytes)))
    if r.arch.state is not None:
        st = r.arch.state
        lines.append(t("calc.sum.state", lang, kind=st.kind, layers=st.layers, bytes=fmt_bytes(kv.state_bytes),
                       per_seq=fmt_bytes(kv.state_bytes // q.batch), shapes=st.shapes, why=state_why(lang)))
    lines += [
        t("calc.sum.paged", lang, block=q.block_size, allocated=fmt_bytes(r.paged.allocated_bytes),
          wasted=fmt_bytes(r.paged.wasted_bytes_per_seq))
        + (t("calc.sum.paged_scales", lang, scales=f"{r.paged.scale_bytes:,} B") if r.paged.scale_bytes else ""),
        "",
        *(_one_device(r, lang) if r.parallel.gpus == 1 else _deployment(r, lang)),
        t("calc.sum.longest", lang, batch=f"{q.batch:,}", longest=fmt_int(cap.max_seq_len))
        + (t("calc.sum.context_limit", lang) if cap.seq_len_capped else ""),
        t("calc.sum.fits" if cap.fits else "calc.sum.no_fit", lang),
    ]
    if r.decode is not None:
        lines.append(t("calc.sum.bounds", lang, ms=fmt_ms(r.decode.lower_bound_s),
                       decode_bound=t(f"calc.bound.{r.decode.bound}", lang),
                       tps=f"{q.batch / r.decode.lower_bound_s:,.0f}", s=f"{r.prefill.lower_bound_s:,.3f}",
                       prefill_bound=t(f"calc.bound.{r.prefill.bound}", lang)))
    lines += [t("calc.sum.note", lang, note=note_text(n, lang)) for n in r.notes]
    return "\n".join(lines)


def _one_device(r, lang: str = "en") -> list[str]:
    cap, q = r.capacity, r.query
    return [
        t("calc.sum.one_device", lang, accel=accelerator_name(r.accelerator, lang),
          memory=f"{r.accelerator.memory_bytes / 1e9:,.0f}",
          util=f"{cap.mem_util:g}", weights=fmt_bytes(r.weights_bytes or 0),
          budget=f"{cap.kv_budget_bytes / GIB:,.2f}"),
        t("calc.sum.largest", lang, seq_len=f"{q.seq_len:,}", batch=fmt_int(cap.max_batch),
          slots=fmt_int(cap.token_slots)),
    ]


def _heads_per_gpu(r, lang: str = "en") -> str:
    """What one GPU caches of each token and layer, in words."""
    a, d = r.arch, r.parallel
    if d.kv_heads_per_gpu is None:
        return t("calc.sum.mla_heads", lang, n=a.mla.latent_dim)
    copies = d.parallel.tp // a.num_kv_heads if d.parallel.tp > a.num_kv_heads else 1
    return t("calc.sum.kv_heads", lang, n=d.kv_heads_per_gpu, total=a.num_kv_heads) + (
        t("calc.sum.copies", lang, copies=copies) if copies > 1 else "")


def _deployment(r, lang: str = "en") -> list[str]:
    """The summary's deployment lines: one GPU's share, then the whole deployment's."""
    d, cap, q = r.parallel, r.capacity, r.query
    p, one = d.parallel, d.binding
    replicas = t("calc.sum.replicas", lang, dp=f"{p.dp:,}", gpus=f"{p.tp * p.pp:,}") if p.dp > 1 else ""
    return [
        t("calc.sum.deployment", lang, gpus=f"{d.gpus:,}", accel=accelerator_name(r.accelerator, lang), tp=p.tp,
          pp=p.pp, dp=p.dp,
          memory=f"{r.accelerator.memory_bytes / 1e9:,.0f}", util=f"{cap.mem_util:g}"),
        t("calc.sum.per_gpu", lang, weights=f"{one.weights_bytes / 1e9:,.2f}", kv=f"{one.kv.bytes / GIB:,.3f}",
          layers=one.layers, heads=_heads_per_gpu(r, lang), per_token=fmt_int(one.kv.bytes_per_token),
          budget=f"{cap.kv_budget_bytes / GIB:,.2f}"),
        t("calc.sum.in_all", lang, replicas=replicas, weights=f"{d.weights_bytes_all / 1e9:,.2f}",
          seq_len=f"{q.seq_len:,}", batch=fmt_int(d.max_batch), slots=fmt_int(d.token_slots),
          per_replica=t("calc.sum.per_replica", lang, batch=fmt_int(cap.max_batch), slots=fmt_int(cap.token_slots))
          if p.dp > 1 else ""),
    ]


def _formulas(r, lang: str = "en") -> str:
    kv = r.kv
    parts = [kv.formula, kv.per_token_formula, kv.no_window_formula, kv.mla_expanded_formula, kv.state_formula,
             r.paged.formula,
             *(r.parallel.formulas if r.parallel.gpus > 1 else ()), r.capacity.formula]
    if r.decode is not None:
        parts += [*r.prefill.formulas, *r.decode.formulas]
    return "\n\n".join(formula_text(f, lang) for f in parts if f is not None)


def _defaults() -> dict:
    layers, kv_heads, head_dim = preset_dims(DEFAULT_PRESET)
    return {"preset": DEFAULT_PRESET, "config": "", "batch": 8, "seq_len": 8192, "layers": layers,
            "kv_heads": kv_heads, "head_dim": head_dim, "kv_dtype": "bf16", "gpu": DEFAULT_ACCELERATOR,
            "mem_util": 0.9, "block_size": 16, "tp": 1, "pp": 1, "dp": 1}


INPUT_DEFAULTS = _defaults()  # calculate's arguments as the page opens, by name: calculate(**INPUT_DEFAULTS)
