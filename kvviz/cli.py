"""Command line: `python -m kvviz memory|presets|generate|compare|batch`.

The CLI parses arguments, calls the same core the app calls, and prints a table or JSON. Any bad
input ends in one line on stderr naming the problem and exit status 2, never a traceback.
Every subcommand takes --lang en|zh (default: the locale's language, kvviz.i18n.locale_lang): its messages,
errors, text reports and --help in that language (kvviz/i18n/cli.py; the core's errors by kvviz.i18n.errors.translate).
JSON output stays English: its keys are what a script reads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from kvviz.base.errors import first_line
from kvviz.calc.arch import Architecture, ConfigError, architecture_from_dims, architecture_from_source
from kvviz.calc.dtypes import KV_DTYPES, WEIGHT_DTYPES
from kvviz.calc.hardware import DEFAULT_ACCELERATOR, accelerator_names
from kvviz.calc.params import count_params
from kvviz.calc.presets import HUB_IDS, load_preset, preset_names
from kvviz.calc.report import MemoryQuery, as_dict, describe, memory_report, render_text
from kvviz.engine.loading import BUNDLED_MODEL, INSTRUCT_MODEL, LoadError, default_model
from kvviz.i18n import LANGS, asked_lang, locale_lang, normalize, said, t
from kvviz.i18n.errors import translate

USAGE_ERROR = 2


class UsageError(Exception):
    """Bad input from the command line: reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print the whole usage block first
        raise UsageError(message)


def _help(lang: str):
    """The help texts of the parser in `lang`: helps("tp") is t("cli.help.tp", lang)."""
    def helps(key: str, **fields: object) -> str:
        return t(f"cli.help.{key}", lang, **fields)
    return helps


def _lang_arg(p: argparse.ArgumentParser, lang: str) -> None:
    p.add_argument("--lang", choices=LANGS, default=None, help=t("cli.help.lang", lang))


def _build_parser(lang: str = "en") -> argparse.ArgumentParser:
    """The whole command line, its help texts in `lang` (read from argv before parsing: see kvviz.i18n.asked_lang)."""
    h = _help(lang)
    parser = _Parser(prog="python -m kvviz", description=h("prog"))
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _memory_args(sub.add_parser("memory", help=h("memory")), lang)
    pre = sub.add_parser("presets", help=h("presets"))
    pre.add_argument("--json", action="store_true", help=h("presets.json"))
    _lang_arg(pre, lang)

    gen = sub.add_parser("generate", help=h("generate"))
    _generation_args(gen, lang)
    modes = gen.add_mutually_exclusive_group()
    modes.add_argument("--no-cache", action="store_true", help=h("no_cache"))
    modes.add_argument("--static", action="store_true", help=h("static"))
    cmp_ = sub.add_parser("compare", help=h("compare"))
    _generation_args(cmp_, lang)
    cmp_.add_argument("--static", action="store_true", help=h("compare.static", static=h("static")))
    _batch_args(sub.add_parser("batch", help=h("batch")), lang)
    for p in (gen, cmp_):
        _lang_arg(p, lang)
    return parser


def _memory_args(mem: argparse.ArgumentParser, lang: str) -> None:
    h = _help(lang)
    src = mem.add_argument_group(h("source"))
    src.add_argument("--preset", help=h("preset"))
    src.add_argument("--config", help=h("config"))
    src.add_argument("--layers", type=int, help=h("layers"))
    src.add_argument("--kv-heads", type=int, help=h("kv_heads"))
    src.add_argument("--head-dim", type=int, help=h("head_dim"))
    src.add_argument("--heads", type=int, help=h("heads"))
    src.add_argument("--sliding-window", type=int, help=h("sliding_window"))
    src.add_argument("--sliding-layers", type=int, default=0, help=h("sliding_layers"))
    mem.add_argument("--batch", type=int, default=1, help=h("batch_size"))
    mem.add_argument("--seq-len", type=int, default=4096, help=h("seq_len"))
    mem.add_argument("--kv-dtype", choices=list(KV_DTYPES), help=h("kv_dtype"))
    mem.add_argument("--weight-dtype", choices=list(WEIGHT_DTYPES), help=h("weight_dtype"))
    mem.add_argument("--block-size", type=int, default=16, help=h("block_size"))
    mem.add_argument("--gpu", default=DEFAULT_ACCELERATOR, choices=accelerator_names(),
                     help=h("gpu", default=DEFAULT_ACCELERATOR))
    mem.add_argument("--mem-util", type=float, default=0.9, help=h("mem_util"))
    mem.add_argument("--reserve-gib", type=float, default=1.0, help=h("reserve_gib"))
    mem.add_argument("--tp", type=int, default=1, help=h("tp"))
    mem.add_argument("--pp", type=int, default=1, help=h("pp"))
    mem.add_argument("--dp", type=int, default=1, help=h("dp"))
    mem.add_argument("--json", action="store_true", help=h("memory.json"))
    _lang_arg(mem, lang)


def _model_help(lang: str) -> str:
    return t("cli.help.model", lang, instruct=INSTRUCT_MODEL, bundled=BUNDLED_MODEL)


def _batch_args(p: argparse.ArgumentParser, lang: str) -> None:
    h = _help(lang)
    p.add_argument("--model", default=None, help=_model_help(lang))
    p.add_argument("--prompt-tokens", type=int, default=32, help=h("prompt_tokens"))
    p.add_argument("--new-tokens", type=int, default=16, help=h("new_tokens"))
    p.add_argument("--max-batch", type=int, default=16, help=h("max_batch"))
    p.add_argument("--repeats", type=int, default=1, help=h("repeats"))
    p.add_argument("--device", default="auto", help=h("device"))
    p.add_argument("--dtype", default="auto", help=h("dtype"))
    p.add_argument("--json", action="store_true", help=h("batch.json"))
    _lang_arg(p, lang)


def _generation_args(p: argparse.ArgumentParser, lang: str) -> None:
    h = _help(lang)
    p.add_argument("--model", default=None, help=_model_help(lang))
    p.add_argument("--prompt", required=True, help=h("prompt"))
    p.add_argument("--max-new-tokens", type=int, default=64, help=h("max_new_tokens"))
    p.add_argument("--device", default="auto", help=h("device"))
    p.add_argument("--dtype", default="auto", help=h("dtype"))
    p.add_argument("--temperature", type=float, default=0.0, help=h("temperature"))
    p.add_argument("--top-k", type=int, default=0, help=h("top_k"))
    p.add_argument("--top-p", type=float, default=1.0, help=h("top_p"))
    p.add_argument("--seed", type=int, default=None, help=h("seed"))
    p.add_argument("--no-chat-template", action="store_true", help=h("no_chat_template"))
    p.add_argument("--json", action="store_true", help=h("generate.json"))


def _architecture(args: argparse.Namespace) -> Architecture:
    dims = {"--layers": args.layers, "--kv-heads": args.kv_heads, "--head-dim": args.head_dim}
    given = [bool(args.preset), bool(args.config), any(v is not None for v in dims.values())]
    if sum(given) != 1:
        raise UsageError(t("cli.usage.one_source", args.lang))
    if args.preset:
        return load_preset(args.preset)
    if args.config:
        return architecture_from_source(args.config)
    missing = [flag for flag, v in dims.items() if v is None]
    if missing:
        raise UsageError(t("cli.usage.raw_missing", args.lang, missing=", ".join(missing)))
    return architecture_from_dims(args.layers, args.kv_heads, args.head_dim, heads=args.heads,
                                  sliding_window=args.sliding_window, sliding_layers=args.sliding_layers)


def _memory(args: argparse.Namespace) -> str:
    arch = _architecture(args)
    query = MemoryQuery(batch=args.batch, seq_len=args.seq_len, kv_dtype=args.kv_dtype, block_size=args.block_size,
                        accelerator=args.gpu, mem_util=args.mem_util, weight_dtype=args.weight_dtype,
                        reserve_gib=args.reserve_gib, tp=args.tp, pp=args.pp, dp=args.dp)
    report = memory_report(arch, query)
    if args.json:
        return json.dumps(as_dict(report), indent=2, allow_nan=False)
    return render_text(report, lang=args.lang)


def _presets(args: argparse.Namespace) -> str:
    rows = []
    for name in preset_names():
        a = load_preset(name)
        rows.append({"name": name, "hub_id": HUB_IDS.get(name), "model_type": a.model_type,
                     "attention": a.attention_kind, "layers": a.num_layers, "heads": a.num_heads,
                     "kv_heads": a.num_kv_heads, "head_dim": a.head_dim, "sliding_window": a.sliding_window,
                     "sliding_layers": a.n_sliding, "params": count_params(a).total,
                     "summary": describe(a, lang="en" if args.json else args.lang)})
    if args.json:
        return json.dumps(rows, indent=2)
    width = max(len(r["name"]) for r in rows)
    return "\n".join(t("cli.presets.row", args.lang, name=r["name"], width=width, params=r["params"] / 1e9,
                        summary=r["summary"]) for r in rows)


class RunFailed(Exception):
    """The generation started but failed on the device: exit status 1."""


def _request(args: argparse.Namespace, use_cache: bool = True, static: bool = False):
    from kvviz.engine.request import GenerationRequest

    return GenerationRequest.from_untrusted(
        args.prompt, args.max_new_tokens, use_cache=use_cache, static=static, temperature=args.temperature,
        top_k=args.top_k, top_p=args.top_p, seed=args.seed, chat_template=not args.no_chat_template)


COMPARE_PROGRESS_S = 2.0  # a comparison's token counts, at most this often (its phases at once)


def _progress(args: argparse.Namespace, every_s: float = 0.0):
    """A progress(fraction, message) that prints "[ 40%] message" to stderr in the asked language (nothing with
    --json): each new kind of message at once (a compile's note before it starts), the same kind again at most
    every `every_s` seconds."""
    last = {"at": float("-inf"), "key": None}

    def progress(fraction: float, message: str) -> None:
        key, now = getattr(message, "key", message), time.monotonic()
        if args.json or (key == last["key"] and now - last["at"] < every_s):
            return
        last.update(at=now, key=key)
        print(f"[{fraction:4.0%}] {translate(message, args.lang)}", file=sys.stderr, flush=True)
    return progress


def _load(args: argparse.Namespace):
    from kvviz.engine.loading import load_model

    lm = load_model(args.model or default_model(), device=args.device, dtype=args.dtype, progress=_progress(args))
    if lm.random_weights and not args.json:
        print(t("cli.note", args.lang, note=translate(lm.tokenizer_note, args.lang)), file=sys.stderr, flush=True)
    return lm


def _summary_text(summary) -> str:
    lines = [json.dumps(summary.lesson(), ensure_ascii=False)]
    rest = {k: v for k, v in summary.as_dict().items() if k not in summary.lesson() and k != "itl_s"}
    width = max(map(len, rest))
    lines += [f"{k:<{width}}  {v:.6g}" if isinstance(v, float) else f"{k:<{width}}  {v}" for k, v in rest.items()]
    return "\n".join(lines)


def _generate(args: argparse.Namespace) -> str:
    from kvviz.engine.compare import token_frame
    from kvviz.engine.events import Finished, TokenEvent
    from kvviz.engine.loop import generate

    req = _request(args, use_cache=not args.no_cache, static=args.static)
    lm = _load(args)
    if req.static and not args.json:
        print(t("cli.static.compiling", args.lang), file=sys.stderr, flush=True)
    tokens, finished = [], None
    for event in generate(lm, req):
        if isinstance(event, TokenEvent):
            tokens.append(event)
            if not args.json:
                sys.stdout.write(event.text)
                sys.stdout.flush()
        elif isinstance(event, Finished):
            finished = event
    if finished.error:
        raise (ValueError if finished.bad_input else RunFailed)(finished.error)
    if args.json:
        return json.dumps({"model": lm.spec, "random_weights": lm.random_weights, "tokenizer": lm.tokenizer_note,
                           "text": finished.text, "lesson": finished.summary.lesson(),
                           "summary": finished.summary.as_dict(),
                           "tokens": token_frame(tokens, req.mode).to_dict(orient="records")},
                          ensure_ascii=False, indent=2)
    return "\n\n" + _summary_text(finished.summary)


def _compare(args: argparse.Namespace) -> str:
    from kvviz.engine.compare import CompareError, compare
    from kvviz.engine.request import mode_label

    req = _request(args)
    lm = _load(args)
    try:
        result = compare(lm, req, static=args.static, report=_progress(args, COMPARE_PROGRESS_S))
    except CompareError as exc:
        raise RunFailed(str(exc)) from exc
    if args.json:
        return json.dumps({"model": lm.spec, "random_weights": lm.random_weights, **result.as_dict()},
                          ensure_ascii=False, indent=2)
    lang = args.lang
    parted = (t("cli.compare.identical", lang) if result.tokens_identical else
              t("cli.compare.part_at", lang, index=result.first_divergence)
              if result.first_divergence is not None else t("cli.compare.longer", lang))
    lines = [
        t("cli.compare.cached", lang), result.cached_text, "", t("cli.compare.uncached", lang), result.uncached_text,
        "", t("cli.compare.speedup", lang, speedup=result.speedup)
        + (t("cli.compare.per_token", lang, speedup=result.decode_speedup) if result.decode_speedup else ""),
        t("cli.compare.tokens", lang, parted=parted, compared=result.compared_tokens)]
    if result.static is not None:
        lines += _static_lines(result, lang)
    lines += ["", t("cli.compare.cached_run", lang), _summary_text(result.cached), "",
              t("cli.compare.uncached_run", lang), _summary_text(result.uncached)]
    if result.static is not None:
        lines += ["", t("cli.compare.mode_run", lang, label=mode_label(result.static.mode, lang)),
                  _summary_text(result.static.summary)]
    return "\n".join(lines)


def _static_lines(result, lang: str = "en") -> list[str]:
    """The third mode's lines of `compare --static`: its speedups, compile, cache and agreement with cached."""
    from kvviz.engine.request import mode_label

    st, c = result.static, result.cached
    agree = (t("cli.static.identical", lang) if st.tokens_identical else
             t("cli.static.part_at", lang, index=st.first_divergence) if st.first_divergence is not None else
             t("cli.static.longer", lang))
    over_cached = c.tpot_s / st.summary.tpot_s if c.tpot_s and st.summary.tpot_s else None
    return [
        "", t("cli.compare.mode", lang, label=mode_label(st.mode, lang)), st.text, "",
        t("cli.static.speedup", lang, speedup=st.speedup)
        + (t("cli.compare.per_token", lang, speedup=st.decode_speedup) if st.decode_speedup else "")
        + (t("cli.static.over_cached", lang, speedup=over_cached) if over_cached else ""),
        t("cli.static.compile", lang, compile_s=st.compile_s, tokens=st.cache_tokens),
        t("cli.static.tokens", lang, agree=agree)]


def _batch(args: argparse.Namespace) -> str:
    from kvviz.base.inputs import whole_number
    from kvviz.bench.batch import sweep_prompts
    from kvviz.engine.batch_sweep import batch_sweep, summarize_sweep
    from kvviz.engine.request import MAX_BATCH, MAX_NEW_TOKENS
    from kvviz.serving.prompts import MAX_PROMPT_TOKENS
    from kvviz.ui.batch.sweep_text import sweep_markdown, sweep_table

    prompt_tokens = whole_number(args.prompt_tokens, "--prompt-tokens", 1, MAX_PROMPT_TOKENS)
    new_tokens = whole_number(args.new_tokens, "--new-tokens", 2, MAX_NEW_TOKENS)
    max_batch = whole_number(args.max_batch, "--max-batch", 1, MAX_BATCH)
    repeats = whole_number(args.repeats, "--repeats", 1, 100)
    lm = _load(args)

    def progress(batch: int, what: str) -> None:
        if not args.json:
            print(translate(what, args.lang), file=sys.stderr, flush=True)

    frame = batch_sweep(lm, sweep_prompts(lm, max_batch, prompt_tokens), new_tokens, max_batch, repeats=repeats,
                        progress=progress)
    if frame.empty:
        reason = translate(frame.attrs.get("stop_reason", said("sweep.first_failed")), args.lang)
        raise RunFailed(t("cli.batch.none_ran", args.lang, reason=reason))
    if args.json:
        rows = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
        return json.dumps({"model": lm.spec, "random_weights": lm.random_weights, "summary": summarize_sweep(frame),
                           "explanation": sweep_markdown(frame), "rows": rows}, ensure_ascii=False, indent=2)
    return "\n\n".join([sweep_table(frame, lang=args.lang), sweep_markdown(frame, lang=args.lang)])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    lang = asked_lang(argv)
    parser = _build_parser(lang)
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return USAGE_ERROR
        args.lang = lang = normalize(args.lang or locale_lang())
        output = {"memory": _memory, "presets": _presets, "generate": _generate, "compare": _compare,
                  "batch": _batch}[args.command](args)
    except RunFailed as exc:
        print(t("cli.error", lang, message=translate(str(exc), lang)), file=sys.stderr)
        return 1
    except (UsageError, ConfigError, ValueError, LoadError, OSError) as exc:
        # One line, never a traceback; OSError: a path the system cannot even look up, or read.
        print(t("cli.error", lang, message=translate(first_line(exc), lang)), file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130
    print(output)
    return 0
