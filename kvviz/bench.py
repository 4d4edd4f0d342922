"""Benchmarks of kvviz's own figures: `python -m kvviz.bench overhead [--quick]`.

overhead: kvviz's instrumented cached loop against `model.generate` (greedy) and against the
lesson's plain loop (prefill, then one token at a time with the cache, nothing else), on the same
model, prompt and number of new tokens, interleaved, after a warm-up; median tokens/s and ratios.
Results go to a folder as CSV and JSON. This module imports only torch, transformers, pandas and
kvviz's core, so it runs on a GPU machine with nothing else installed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import torch

from kvviz.engine import Finished, GenerationRequest, TokenEvent, encode_prompt, generate
from kvviz.loading import LoadedModel, load_model

LESSON_PROMPT = "用三句话解释 LLM 推理中的 KV Cache。"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_kvviz(lm: LoadedModel, prompt: str, new_tokens: int) -> tuple[int, float]:
    """kvviz's instrumented loop, consumed whole: (tokens, seconds from call to last token)."""
    _sync(lm.device)
    start = time.perf_counter()
    n = 0
    for event in generate(lm, GenerationRequest(prompt, max_new_tokens=new_tokens, ignore_eos=True)):
        if isinstance(event, TokenEvent):
            n += 1
        elif isinstance(event, Finished) and event.error:
            raise RuntimeError(event.error)
    return n, time.perf_counter() - start


def run_generate(lm: LoadedModel, prompt: str, new_tokens: int) -> tuple[int, float]:
    """transformers' model.generate, greedy, forced to the same number of tokens."""
    _sync(lm.device)
    start = time.perf_counter()
    ids, _ = encode_prompt(lm, prompt, chat_template=True)
    input_ids = torch.tensor([ids], device=lm.device)
    with torch.inference_mode():
        out = lm.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                                max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                pad_token_id=lm.tokenizer.eos_token_id)
    _sync(lm.device)
    return out.shape[1] - input_ids.shape[1], time.perf_counter() - start


def run_plain(lm: LoadedModel, prompt: str, new_tokens: int) -> tuple[int, float]:
    """The lesson's loop: prefill, then feed one token at a time with the cache, nothing else."""
    from transformers import DynamicCache

    from kvviz.engine import _cache_kwarg

    _sync(lm.device)
    start = time.perf_counter()
    ids, _ = encode_prompt(lm, prompt, chat_template=True)
    generated = torch.tensor([ids], device=lm.device)
    cache = DynamicCache(config=lm.model.config)
    kw = {_cache_kwarg(lm.model): cache}
    with torch.inference_mode():
        for step in range(new_tokens):
            cur = generated if step == 0 else generated[:, -1:]
            out = lm.model(input_ids=cur, use_cache=True, **kw)
            next_token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
            generated = torch.cat([generated, next_token], dim=-1)
    _sync(lm.device)
    return new_tokens, time.perf_counter() - start


VARIANTS: dict[str, Callable[[LoadedModel, str, int], tuple[int, float]]] = {
    "kvviz": run_kvviz, "generate": run_generate, "plain": run_plain,
}


def overhead(lm: LoadedModel, prompt: str, new_tokens: int, repeats: int) -> pd.DataFrame:
    """Interleaved timed runs of every variant (the order rotates each repetition), after one warm-up each."""
    names = list(VARIANTS)
    for name in names:
        VARIANTS[name](lm, prompt, min(new_tokens, 4))
    rows = []
    for rep in range(repeats):
        for name in names[rep % len(names):] + names[: rep % len(names)]:
            n, seconds = VARIANTS[name](lm, prompt, new_tokens)
            rows.append({"model": lm.spec, "device": str(lm.device), "dtype": lm.dtype_name, "variant": name,
                         "repeat": rep, "new_tokens": n, "seconds": seconds, "tokens_per_s": n / seconds})
    return pd.DataFrame(rows)


def summarize_overhead(frame: pd.DataFrame) -> dict:
    """Median tokens/s per variant and kvviz's ratio to each alternative."""
    med = frame.groupby("variant")["tokens_per_s"].median().to_dict()
    return {"median_tokens_per_s": med, "kvviz_vs_generate": med["kvviz"] / med["generate"],
            "kvviz_vs_plain": med["kvviz"] / med["plain"], "repeats": int(frame["repeat"].nunique()),
            "new_tokens": int(frame["new_tokens"].iloc[0])}


_LOAD_PROBE = """
import json, sys, time
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING
import transformers.initialization
from kvviz.loading import BUNDLED, TWIN_PREFIX, load_model
from kvviz.arch import load_config_dict
from kvviz.presets import PRESET_DIR
spec, mode = sys.argv[1], sys.argv[2]
if spec.startswith(TWIN_PREFIX):
    raw, _ = load_config_dict(PRESET_DIR / (spec[len(TWIN_PREFIX):] + ".json"))
else:
    raw, _ = load_config_dict(BUNDLED.get(spec, spec))
raw = dict(raw)
config = AutoConfig.for_model(raw.pop("model_type"), **raw)
# Import the family's modeling code first: a one-off cost of any process, not of building weights.
MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
start = time.perf_counter()
if mode == "load":
    load_model(spec)
else:  # transformers' default weight initialisation, the slow path twins avoid
    AutoModelForCausalLM.from_config(config)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def load_times(specs: list[str], repeats: int) -> pd.DataFrame:
    """Seconds to load each model with kvviz, each in a fresh process with the libraries already imported
    (imports are a one-off cost of any process); for twins also transformers' default initialisation."""
    import subprocess

    rows = []
    for rep in range(repeats):
        for spec in specs:
            for mode in ("load", "default_init") if spec.startswith("random:") else ("load",):
                proc = subprocess.run([sys.executable, "-c", _LOAD_PROBE, spec, mode],  # noqa: S603
                                      capture_output=True, text=True, check=True,
                                      cwd=Path(__file__).resolve().parent.parent)
                rows.append({"model": spec, "mode": mode, "repeat": rep,
                             "seconds": json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]})
    return pd.DataFrame(rows)


LONG_PROMPT = (
    "The KV cache keeps every layer's keys and values, so that decoding a token does not recompute the "
    "history of the sequence. Prefill reads the whole prompt at once; decode produces one token at a time. "
) * 8  # about 430 tokens of the bundled model: with 512 new ones it stays inside its 1,024 context


def payoff(lm: LoadedModel, prompt: str, new_tokens: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cached against uncached on one prompt to `new_tokens` tokens (EOS ignored): per-token rows of both
    modes and the roofline prediction per step (kvviz.compare does the warm-up and both runs)."""
    from kvviz.compare import compare

    result = compare(lm, GenerationRequest(prompt, max_new_tokens=new_tokens, ignore_eos=True))
    return result.rows, result.prediction


def fit_payoff(rows: pd.DataFrame, prediction: pd.DataFrame) -> dict:
    """The growth laws the lesson claims, fitted to the measurements.

    Per decode step: latency = a + b × position (b near 0 with the cache, clearly positive without).
    Total time to n tokens: linear with the cache, quadratic without (R² of each fit). The roofline
    prediction is a lower bound far below a CPU's real step time, so it is scaled by one least-squares
    factor per mode and its shape error is the mean absolute relative error after scaling.
    """
    import numpy as np

    out = {}
    for mode, group in rows.groupby("mode"):
        decode = group[group["phase"] == "decode"]
        pos, step = decode["seq_len"].to_numpy(float), decode["dt_s"].to_numpy(float)
        slope, intercept = np.polyfit(pos, step, 1)
        n = group["index"].to_numpy(float) + 1
        total = group["t_s"].to_numpy(float)
        fits = {}
        for degree in (1, 2):
            coef = np.polyfit(n, total, degree)
            resid = total - np.polyval(coef, n)
            fits[degree] = 1 - resid.var() / total.var()
        pred = prediction.set_index("index").loc[decode["index"], f"{mode}_lower_bound_s"].to_numpy(float)
        scale = float(pred @ step / (pred @ pred))
        out[mode] = {
            "step_ms_at_start": float((intercept + slope * pos.min()) * 1e3),
            "step_ms_at_end": float((intercept + slope * pos.max()) * 1e3),
            "step_growth_ms_per_100_tokens": float(slope * 100 * 1e3),
            "new_tokens": len(group),
            "total_s": float(total[-1]),
            "total_r2_linear": float(fits[1]), "total_r2_quadratic": float(fits[2]),
            "roofline_scale": scale,
            "roofline_shape_error": float(np.mean(np.abs(scale * pred - step) / step)),
        }
    out["uncached_over_cached_total"] = out["uncached"]["total_s"] / out["cached"]["total_s"]
    return out


def hardware_limit(specs: list[str], accel, new_tokens: int, repeats: int) -> pd.DataFrame:
    """How close each model runs to the measured ceiling: decode bandwidth achieved against the measured
    memory bandwidth, and prefill FLOP/s achieved against the measured matmul peak.

    Decode bytes per step are the model's weight bytes plus the KV cache read (the engine's figure);
    prefill FLOPs are the memory model's count for the prompt (kvviz.roofline.prefill_estimate, which
    like the engine computes logits for the last prompt token only).
    """
    from kvviz.dtypes import kv_dtype, weight_dtype
    from kvviz.engine import run_to_end
    from kvviz.params import count_params
    from kvviz.roofline import prefill_estimate

    rows = []
    for spec in specs:
        lm = load_model(spec)
        req = GenerationRequest(LONG_PROMPT, max_new_tokens=new_tokens, ignore_eos=True, chat_template=False)
        run_to_end(lm, GenerationRequest(LONG_PROMPT, max_new_tokens=2, chat_template=False))  # warm-up
        for rep in range(repeats):
            _, fin = run_to_end(lm, req)
            s = fin.summary
            flops = prefill_estimate(lm.arch, count_params(lm.arch), accel, weight_dtype(lm.dtype_name),
                                     kv_dtype(lm.dtype_name), 1, s.prompt_tokens).flops
            achieved_bw = s.bytes_per_decode_step * s.decode_tokens_per_s
            rows.append({"model": spec, "repeat": rep, "prompt_tokens": s.prompt_tokens,
                         "bytes_per_decode_step": s.bytes_per_decode_step,
                         "decode_tokens_per_s": s.decode_tokens_per_s, "decode_bandwidth": achieved_bw,
                         "decode_bandwidth_utilisation": achieved_bw / accel.bandwidth,
                         "decode_tokens_per_s_ceiling": accel.bandwidth / s.bytes_per_decode_step,
                         "prefill_s": s.prefill_s, "prefill_flops": flops, "prefill_flop_per_s": flops / s.prefill_s,
                         "prefill_utilisation": flops / s.prefill_s / accel.peak_flops})
    return pd.DataFrame(rows)


def calculator_latency(repeats: int) -> pd.DataFrame:
    """Seconds the calculator's handler takes, all figures built and serialised, for every preset."""
    from kvviz.presets import preset_names
    from kvviz.ui.calculator import calculate, preset_dims

    rows = []
    for preset in preset_names():
        layers, kv_heads, head_dim = preset_dims(preset)
        args = (preset, "", 8, 8192, layers, kv_heads, head_dim, "bf16", "h100-sxm", 0.9, 16)
        calculate(*args)  # warm the caches a real session warms on its first move
        for rep in range(repeats):
            start = time.perf_counter()
            r = calculate(*args)
            for fig in (r.memory_fig, r.curves_fig, r.attention_fig, r.window_fig, r.roofline_fig):
                json.dumps(fig)
            rows.append({"preset": preset, "repeat": rep, "seconds": time.perf_counter() - start})
    return pd.DataFrame(rows)


def app_against_cli(model: str, prompt: str, new_tokens: int, repeats: int) -> pd.DataFrame:
    """Decode speed of the same generation shown in the running app (through gradio_client) and from the
    CLI, interleaved. The app is started here on a free loopback port and stopped at the end."""
    import os
    import socket
    import subprocess

    from gradio_client import Client

    root = Path(__file__).resolve().parent.parent
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = os.environ | {"GRADIO_ANALYTICS_ENABLED": "False"}
    app = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=root, env=env,  # noqa: S603
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        rows = []
        for rep in range(repeats + 1):  # the first round warms both up and is dropped
            job = client.submit(model, prompt, new_tokens, 0, 0, 1, 0, True, True, api_name="/generate")
            for _ in job:
                pass
            app_summary = job.outputs()[-1][-1]["summary"]
            cli = subprocess.run([sys.executable, "-m", "kvviz", "generate", "--model", model, "--prompt", prompt,  # noqa: S603
                                  "--max-new-tokens", str(new_tokens), "--json"], cwd=root, env=env,
                                 capture_output=True, text=True, check=True)
            cli_summary = json.loads(cli.stdout)["summary"]
            if rep:
                for where, summ in (("app", app_summary), ("cli", cli_summary)):
                    rows.append({"where": where, "repeat": rep, "new_tokens": summ["new_tokens"],
                                 "tpot_s": summ["tpot_s"], "decode_tokens_per_s": summ["decode_tokens_per_s"]})
        return pd.DataFrame(rows)
    finally:
        app.terminate()
        app.wait(30)


def _write(out: Path, tag: str, frame: pd.DataFrame, summary: dict, argv: Sequence[str] | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / f"{tag}.csv", index=False)
    (out / f"{tag}.json").write_text(json.dumps(
        {"machine": machine(), "command": "python -m kvviz.bench " + " ".join(sys.argv[1:] if argv is None else argv),
         "results": summary}, indent=2))
    print(json.dumps(summary, indent=2))


def machine() -> dict:
    """What the figures were measured on."""
    info = {"python": platform.python_version(), "torch": torch.__version__, "platform": platform.platform(),
            "cpu_threads": torch.get_num_threads()}
    import transformers

    info["transformers"] = transformers.__version__
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvviz.bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    ov = sub.add_parser("overhead", help="kvviz's loop against model.generate and the lesson's plain loop")
    ov.add_argument("--models", nargs="+", default=["random:qwen2.5-0.5b"],
                    help="models as MODEL or MODEL@DTYPE (default random:qwen2.5-0.5b)")
    ov.add_argument("--new-tokens", type=int, default=64)
    ov.add_argument("--repeats", type=int, default=5)
    ov.add_argument("--prompt", default=LESSON_PROMPT)
    ov.add_argument("--device", default="auto")
    ov.add_argument("--quick", action="store_true", help="seconds, not minutes: a small twin, 8 tokens, 2 repeats")
    ov.add_argument("--out", type=Path, default=Path("results"), help="folder for CSV and JSON (default results/)")
    ld = sub.add_parser("load", help="time to load models (twins: against default weight initialisation)")
    ld.add_argument("--models", nargs="+", default=["tiny", "random:qwen2.5-0.5b"])
    ld.add_argument("--repeats", type=int, default=3)
    ld.add_argument("--out", type=Path, default=Path("results"))
    ca = sub.add_parser("calculator", help="latency of the calculator's handler, every preset")
    ca.add_argument("--repeats", type=int, default=20)
    ca.add_argument("--out", type=Path, default=Path("results"))
    ap = sub.add_parser("app", help="decode speed in the app against the CLI, same generation")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--prompt", default="What is a package?")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("results"))
    po = sub.add_parser("payoff", help="cached against uncached over new-token counts and two prompt lengths")
    po.add_argument("--model", default="tiny")
    po.add_argument("--new-tokens", type=int, default=512)
    po.add_argument("--quick", action="store_true", help="32 tokens, the short prompt only")
    po.add_argument("--out", type=Path, default=Path("results"))
    hw = sub.add_parser("hardware", help="measured bandwidth and matmul peak, and how close models run to them")
    hw.add_argument("--models", nargs="+", default=["tiny", "random:qwen2.5-0.5b"])
    hw.add_argument("--new-tokens", type=int, default=64)
    hw.add_argument("--repeats", type=int, default=3)
    hw.add_argument("--quick", action="store_true", help="small measurement, tiny only, 8 tokens, 1 repeat")
    hw.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    if args.part == "hardware":
        from kvviz.hardware import measure_device

        if args.quick:
            args.models, args.new_tokens, args.repeats = ["tiny"], 8, 1
        # The full run measures the peak with a 4096 matmul: smaller ones understate what a prefill reaches.
        accel = measure_device("cpu", 32, 512, 2) if args.quick else measure_device("cpu", 256, 4096, 5)
        frame = hardware_limit(args.models, accel, args.new_tokens, args.repeats)
        med = frame.groupby("model").median(numeric_only=True)
        summary = {"measured": {"bandwidth_gb_s": accel.bandwidth / 1e9, "peak_gflop_s": accel.peak_flops / 1e9,
                                "how": accel.note},
                   "models": {m: {k: float(med.loc[m, k]) for k in (
                       "decode_tokens_per_s", "decode_tokens_per_s_ceiling", "decode_bandwidth_utilisation",
                       "prefill_flop_per_s", "prefill_utilisation", "bytes_per_decode_step", "prompt_tokens")}
                       for m in med.index}}
        _write(args.out, "hardware-quick" if args.quick else "hardware", frame, summary, argv)
        return 0
    if args.part == "payoff":
        lm = load_model(args.model)
        prompts = {"short": LESSON_PROMPT} if args.quick else {"short": LESSON_PROMPT, "long": LONG_PROMPT}
        n = 32 if args.quick else args.new_tokens
        frames, summary = [], {}
        for name, prompt in prompts.items():
            rows, prediction = payoff(lm, prompt, n)
            summary[name] = {"prompt_tokens": int(rows["seq_len"].min()), **fit_payoff(rows, prediction)}
            frames.append(rows.assign(prompt=name).merge(prediction, on=["index"], suffixes=("", "_pred")))
        _write(args.out, "payoff-quick" if args.quick else "payoff", pd.concat(frames),
               {"model": lm.spec, "new_tokens": n, **summary}, argv)
        return 0
    if args.part == "load":
        return _load_main(args, argv)
    if args.part == "calculator":
        frame = calculator_latency(args.repeats)
        ms = frame["seconds"] * 1e3
        _write(args.out, "calculator", frame, {"p50_ms": ms.quantile(0.5), "p95_ms": ms.quantile(0.95),
                                               "max_ms": ms.max(), "calls": len(frame)}, argv)
        return 0
    if args.part == "app":
        frame = app_against_cli(args.model, args.prompt, args.new_tokens, args.repeats)
        med = frame.groupby("where")["tpot_s"].median()
        _write(args.out, "app", frame, {"median_tpot_ms": (med * 1e3).to_dict(),
                                        "app_tpot_over_cli": med["app"] / med["cli"], "repeats": args.repeats,
                                        "model": args.model}, argv)
        return 0
    if args.quick:
        args.models, args.new_tokens, args.repeats = ["random:smollm2-135m"], 8, 2
    args.out.mkdir(parents=True, exist_ok=True)
    frames, summaries = [], {}
    for spec in args.models:
        model, _, dtype = spec.partition("@")
        lm = load_model(model, device=args.device, dtype=dtype or None)
        frame = overhead(lm, args.prompt, args.new_tokens, args.repeats)
        frames.append(frame)
        summaries[f"{model}@{lm.dtype_name}"] = summarize_overhead(frame)
        print(json.dumps({spec: summaries[f"{model}@{lm.dtype_name}"]}, indent=2), flush=True)
    tag = "overhead-quick" if args.quick else "overhead"
    pd.concat(frames).to_csv(args.out / f"{tag}.csv", index=False)
    (args.out / f"{tag}.json").write_text(json.dumps(
        {"machine": machine(), "command": "python -m kvviz.bench " + " ".join(sys.argv[1:] if argv is None else argv),
         "results": summaries}, indent=2))
    return 0


def _load_main(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    frame = load_times(args.models, args.repeats)
    med = frame.groupby(["model", "mode"])["seconds"].median()
    summary = {"median_seconds": {f"{m} ({mode})": v for (m, mode), v in med.items()}, "repeats": args.repeats}
    print(json.dumps(summary, indent=2))
    frame.to_csv(args.out / "load.csv", index=False)
    (args.out / "load.json").write_text(json.dumps(
        {"machine": machine(), "command": "python -m kvviz.bench " + " ".join(sys.argv[1:] if argv is None else argv),
         "results": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
