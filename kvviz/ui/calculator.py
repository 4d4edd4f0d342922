"""The KV-cache calculator's answer for one position of its controls (its tab is kvviz.ui.tabs.calculator).

`calculate` answers one slider position: it resolves the architecture (a preset, a config path or
hub id, and the layers / KV heads / head_dim sliders applied on top), runs kvviz's memory report and
sweeps, and returns the text and figure specs the tab shows. It raises ValueError with a sentence for
bad input; the tab turns that into a message in the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache

from kvviz.base.inputs import choice, text, whole_number
from kvviz.base.units import GIB, fmt_bytes, fmt_int
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
from kvviz.calc.report import STATE_WHY, MemoryQuery, as_dict, describe, memory_report
from kvviz.ui import calc_figures, figures

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
            raise ValueError(f"kv_heads must divide the model's {arch.num_heads} query heads; {kv_heads} does not")
        changes["num_kv_heads"] = kv_heads
    if arch.mla is None and head_dim != arch.head_dim:
        changes["head_dim"] = changes["v_head_dim"] = head_dim
    if not changes:
        return arch
    what = ", ".join(f"{k.replace('num_', '')}={v}" for k, v in changes.items() if k in
                     ("num_layers", "num_kv_heads", "head_dim"))
    return replace(arch, name=f"{arch.name} (modified: {what})", **changes)


def resolve(preset: str, config: str, layers: int, kv_heads: int, head_dim: int) -> Architecture:
    """The architecture the calculator shows: the config box wins over the preset, sliders on top."""
    config = text(config, "the config path or hub id", 512).strip()
    try:
        arch = _from_source(config) if config else load_preset(choice(preset, "preset", preset_names()))
    except ConfigError as exc:
        raise ValueError(str(exc)) from exc
    return customise(arch, layers, kv_heads, head_dim)


def calculate(preset: str, config: str, batch: float, seq_len: float, layers: float, kv_heads: float,
              head_dim: float, kv_dtype: str, gpu: str, mem_util: float, block_size: float, tp: float = 1,
              pp: float = 1, dp: float = 1) -> CalcResult:
    """Everything the calculator tab shows for one position of its controls (named as the CLI names them).

    config: a config.json path or hub id, which wins over the preset; gpu: an accelerator preset, or cpu;
    tp, pp, dp: tensor- and pipeline-parallel GPUs and data-parallel replicas (the memory plot then shows one GPU).
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
    curves = kv_vs_seq_len(share, kvd, list(CURVE_BATCHES), top)
    span = arch.sliding_window or arch.chunk_size  # Llama-4's chunked layers cap the cache as a window does
    window = (calc_figures.window_curves(window_effect(arch, kvd, report.query.batch, max(top, 2 * span)), span,
                                    "window" if arch.sliding_window else "chunk") if arch.n_sliding else
              figures.empty("no sliding-window or chunked layers: every attention layer keeps every token"))
    return CalcResult(
        summary=_summary(report),
        formula=_formulas(report),
        memory_fig=calc_figures.memory_bar(report),
        curves_fig=calc_figures.kv_curves(curves, report.capacity.kv_budget_bytes, one_gpu=report.parallel.gpus > 1),
        attention_fig=calc_figures.attention_bars(
            attention_variants(arch, kvd, report.query.batch, report.query.seq_len)),
        window_fig=window,
        roofline_fig=calc_figures.roofline(report) if report.prefill else
        figures.empty("weights unknown for raw dimensions: no roofline"),
        details=json.loads(json.dumps(as_dict(report))),
    )


def _summary(r) -> str:
    kv, cap, q = r.kv, r.capacity, r.query
    lines = [
        f"**{r.arch.name}** — {describe(r.arch)}",
        "",
        f"### KV cache: {kv.bytes / GIB:,.3f} GiB = {kv.bytes / 1e9:,.3f} GB",
        f"batch {q.batch:,} × seq_len {q.seq_len:,} in {r.kv_dtype.name}; "
        f"{fmt_int(kv.bytes_per_token)} bytes per token across all layers",
    ]
    if kv.no_window_bytes is not None:
        lines.append(f"- an engine that ignores the sliding window would allocate {fmt_bytes(kv.no_window_bytes)}")
    if kv.mla_expanded_bytes is not None:
        lines.append(f"- expanded per-head K/V (a naive implementation) would take {fmt_bytes(kv.mla_expanded_bytes)}")
    if r.arch.state is not None:
        st = r.arch.state
        lines.append(f"- **plus the {st.kind} state of {st.layers} layers: {fmt_bytes(kv.state_bytes)}** for the "
                     f"batch ({fmt_bytes(kv.state_bytes // q.batch)} a sequence; each layer {st.shapes}), the same at "
                     f"any seq_len: {STATE_WHY}")
    lines += [
        f"- paged in blocks of {q.block_size}: {fmt_bytes(r.paged.allocated_bytes)}, "
        f"{fmt_bytes(r.paged.wasted_bytes_per_seq)} wasted per sequence",
        "",
        *(_one_device(r) if r.parallel.gpus == 1 else _deployment(r)),
        f"- longest seq_len at batch {q.batch:,}: **{fmt_int(cap.max_seq_len)}**"
        + (" (the model's context limit)" if cap.seq_len_capped else ""),
        f"- this batch × seq_len {'fits' if cap.fits else '**does not fit**'}",
    ]
    if r.decode is not None:
        lines.append(f"- decode step ≥ {r.decode.lower_bound_s * 1e3:,.2f} ms ({r.decode.bound}-bound), so at most "
                     f"{q.batch / r.decode.lower_bound_s:,.0f} tokens/s; prefill ≥ {r.prefill.lower_bound_s:,.3f} s "
                     f"({r.prefill.bound}-bound). Lower bounds.")
    lines += [f"- note: {n}" for n in r.notes]
    return "\n".join(lines)


def _one_device(r) -> list[str]:
    cap, q = r.capacity, r.query
    return [
        f"**On {r.accelerator.name}** ({r.accelerator.memory_bytes / 1e9:,.0f} GB, mem_util {cap.mem_util:g}): "
        f"weights {fmt_bytes(r.weights_bytes or 0)}; KV budget {cap.kv_budget_bytes / GIB:,.2f} GiB",
        f"- largest batch at seq_len {q.seq_len:,}: **{fmt_int(cap.max_batch)}**; "
        f"token slots: **{fmt_int(cap.token_slots)}**",
    ]


def _heads_per_gpu(r) -> str:
    """What one GPU caches of each token and layer, in words."""
    a, d = r.arch, r.parallel
    if d.kv_heads_per_gpu is None:
        return f"the whole {a.mla.latent_dim}-value MLA latent"
    copies = d.parallel.tp // a.num_kv_heads if d.parallel.tp > a.num_kv_heads else 1
    return f"{d.kv_heads_per_gpu} of {a.num_kv_heads} KV heads" + (f", each on {copies} GPUs" if copies > 1 else "")


def _deployment(r) -> list[str]:
    """The summary's deployment lines: one GPU's share, then the whole deployment's."""
    d, cap, q = r.parallel, r.capacity, r.query
    p, one = d.parallel, d.binding
    replicas = f" ({p.dp:,} replicas of {p.tp * p.pp:,} GPUs)" if p.dp > 1 else ""
    return [
        f"**On {d.gpus:,} × {r.accelerator.name}** (tp {p.tp} × pp {p.pp} × dp {p.dp}; "
        f"{r.accelerator.memory_bytes / 1e9:,.0f} GB each, mem_util {cap.mem_util:g})",
        f"- per GPU: weights **{one.weights_bytes / 1e9:,.2f} GB**, KV cache **{one.kv.bytes / GIB:,.3f} GiB** "
        f"({one.layers} layers × {_heads_per_gpu(r)}: {fmt_int(one.kv.bytes_per_token)} bytes per token); "
        f"KV budget {cap.kv_budget_bytes / GIB:,.2f} GiB",
        f"- in all{replicas}: weights {d.weights_bytes_all / 1e9:,.2f} GB; largest batch at seq_len {q.seq_len:,}: "
        f"**{fmt_int(d.max_batch)}**; token slots: **{fmt_int(d.token_slots)}**"
        + (f" ({fmt_int(cap.max_batch)} and {fmt_int(cap.token_slots)} per replica)" if p.dp > 1 else ""),
    ]


def _formulas(r) -> str:
    kv = r.kv
    parts = [kv.formula, kv.per_token_formula, kv.no_window_formula, kv.mla_expanded_formula, kv.state_formula,
             r.paged.formula,
             *(r.parallel.formulas if r.parallel.gpus > 1 else ()), r.capacity.formula]
    if r.decode is not None:
        parts += [*r.prefill.formulas, *r.decode.formulas]
    return "\n\n".join(f.text() for f in parts if f is not None)


def _defaults() -> dict:
    layers, kv_heads, head_dim = preset_dims(DEFAULT_PRESET)
    return {"preset": DEFAULT_PRESET, "config": "", "batch": 8, "seq_len": 8192, "layers": layers,
            "kv_heads": kv_heads, "head_dim": head_dim, "kv_dtype": "bf16", "gpu": DEFAULT_ACCELERATOR,
            "mem_util": 0.9, "block_size": 16, "tp": 1, "pp": 1, "dp": 1}


INPUT_DEFAULTS = _defaults()  # calculate's arguments as the page opens, by name: calculate(**INPUT_DEFAULTS)
