"""Part 1, loop overhead: kvviz's instrumented cached loop against `model.generate` (greedy) and against the
lesson's plain loop (prefill, then one token at a time with the cache, nothing else), on the same model,
prompt and number of new tokens, interleaved, after a warm-up; median tokens/s and the ratios.
Also the time to load models (`load`): twins against transformers' default weight initialisation.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch

from kvviz.base.device import Stopwatch, sync
from kvviz.engine.admission import encode_prompt
from kvviz.engine.events import Finished, TokenEvent
from kvviz.engine.loading import LoadedModel
from kvviz.engine.loop import generate
from kvviz.engine.request import GenerationRequest
from kvviz.engine.steps import cache_kwarg, new_cache


def run_kvviz(lm: LoadedModel, prompt: str, new_tokens: int) -> tuple[int, float]:
    """kvviz's instrumented loop, consumed whole: (tokens, seconds from call to last token)."""
    sync(lm.device)
    watch = Stopwatch(lm.device)
    n = 0
    for event in generate(lm, GenerationRequest(prompt, max_new_tokens=new_tokens, ignore_eos=True)):
        if isinstance(event, TokenEvent):
            n += 1
        elif isinstance(event, Finished) and event.error:
            raise RuntimeError(event.error)
    return n, watch.elapsed()


def run_generate(lm: LoadedModel, prompt: str, new_tokens: int) -> tuple[int, float]:
    """transformers' model.generate, greedy, forced to the same number of tokens."""
    sync(lm.device)
    watch = Stopwatch(lm.device)
    ids, _ = encode_prompt(lm, prompt, chat_template=True)
    input_ids = torch.tensor([ids], device=lm.device)
    with torch.inference_mode():
        out = lm.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                                max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                pad_token_id=lm.tokenizer.eos_token_id)
    return out.shape[1] - input_ids.shape[1], watch.elapsed()


def run_plain(lm: LoadedModel, prompt: str, new_tokens: int) -> tuple[int, float]:
    """The lesson's loop: prefill, then feed one token at a time with the cache, nothing else.

    Deliberately not the engine's prefill/decode_step: the lesson's loop computes the logits of every
    prompt position (no logits_to_keep), and this variant measures exactly that loop.
    """
    sync(lm.device)
    watch = Stopwatch(lm.device)
    ids, _ = encode_prompt(lm, prompt, chat_template=True)
    generated = torch.tensor([ids], device=lm.device)  # [1, prompt_len]
    kw = {cache_kwarg(lm.model): new_cache(lm.model)}
    with torch.inference_mode():
        for step in range(new_tokens):
            cur = generated if step == 0 else generated[:, -1:]  # [1, prompt_len], then [1, 1]
            out = lm.model(input_ids=cur, use_cache=True, **kw)
            next_token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)  # [1, 1]
            generated = torch.cat([generated, next_token], dim=-1)
    return new_tokens, watch.elapsed()


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
from kvviz.engine.loading import TWIN_PREFIX, load_model, named_folder
from kvviz.calc.arch import load_config_dict
from kvviz.calc.presets import PRESET_DIR
spec, mode = sys.argv[1], sys.argv[2]
if spec.startswith(TWIN_PREFIX):
    raw, _ = load_config_dict(PRESET_DIR / (spec[len(TWIN_PREFIX):] + ".json"))
else:
    raw, _ = load_config_dict(named_folder(spec) or spec)
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
                                      cwd=Path(__file__).resolve().parents[2])
                rows.append({"model": spec, "mode": mode, "repeat": rep,
                             "seconds": json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]})
    return pd.DataFrame(rows)
