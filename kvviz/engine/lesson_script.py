"""The lesson's own generation script, run as it is written, beside kvviz's engine on the same prompt.

The lesson (its script: prefill the whole prompt once, then feed only the last token with past_key_values,
greedy argmax, break on EOS, time.perf_counter around the loop) prints five numbers: prompt_tokens,
new_tokens, ttft_s, tpot_s, tokens_per_s. lesson_script() is that loop on a kvviz LoadedModel, unchanged but
for four things: the device is synchronised before the clock is read (kvviz.base.device.sync: a CUDA kernel
is queued, not done, when the call returns); a cancel is heard between steps; the cache goes in under the name
this transformers gives it (past_key_values, `cache` in recent versions: kvviz.engine.steps.cache_kwarg); and
EOS is any of the model's end tokens (kvviz.engine.admission.eos_ids: the tokenizer's eos_token_id, as in the
script, and the generation config's, such as an instruct model's <|im_end|>), where kvviz's loop stops too.
run_lesson() then runs kvviz's own loop (kvviz.engine.loop) on the same prompt, tokenized raw as the script does
(chat_template off), greedy, so a page can show the script's dict beside kvviz's metrics for the same run and
check that both made the same tokens. It knows models and the engine, nothing of the page.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from kvviz.base.device import sync
from kvviz.base.errors import InputError, StateError
from kvviz.calc.arch import Architecture, architecture_from_source
from kvviz.calc.presets import load_preset
from kvviz.engine.admission import Refusal, admit, encode_prompt, eos_ids
from kvviz.engine.loading import BUNDLED, TWIN_PREFIX, LoadedModel
from kvviz.engine.loop import run_to_end
from kvviz.engine.metrics import RunSummary
from kvviz.engine.request import GenerationRequest
from kvviz.engine.steps import cache_kwarg
from kvviz.engine.streaming import whole_text

LESSON_PROMPT = "用三句话解释 LLM 推理中的 KV Cache。"
LESSON_MAX_NEW_TOKENS = 64


@dataclass(frozen=True)
class ScriptRun:
    """What the lesson's script printed: its dict (the five keys, its meanings) and its decoded text."""

    lesson: dict
    text: str  # tokenizer.decode(generated[0], skip_special_tokens=True): the prompt and the answer
    new_token_ids: tuple[int, ...]


@dataclass(frozen=True)
class LessonRun:
    """The script's run and kvviz's run of the same request, one after the other on one model."""

    script: ScriptRun
    summary: RunSummary  # kvviz's metrics; summary.lesson() has the script's five keys
    text: str  # kvviz's streamed answer (the answer only)
    new_token_ids: tuple[int, ...]
    model: str
    device: str
    dtype: str

    @property
    def tokens_identical(self) -> bool:
        return self.script.new_token_ids == self.new_token_ids

    def as_dict(self) -> dict:
        """What the page's two boxes and the /lesson_script API show: the script's dict beside kvviz's."""
        return {"model": self.model, "device": self.device, "dtype": self.dtype,
                "tokens_identical": self.tokens_identical,
                "script": {**self.script.lesson, "text": self.script.text},
                "kvviz": {**self.summary.lesson(), "queue_s": self.summary.queue_s,
                          "tokenize_s": self.summary.tokenize_s, "prefill_s": self.summary.prefill_s,
                          "decode_tokens_per_s": self.summary.decode_tokens_per_s, "text": self.text}}


def lesson_script(lm: LoadedModel, prompt: str, max_new_tokens: int = LESSON_MAX_NEW_TOKENS,
                  cancel: threading.Event | None = None) -> ScriptRun:
    """The lesson's loop, line for line, on `lm`: its printed dict and decoded text."""
    model, tokenizer, device = lm.model, lm.tokenizer, lm.device
    cache_arg, eos = cache_kwarg(model), eos_ids(lm)
    input_ids = tokenizer(prompt, return_tensors="pt").input_ids.to(device)  # [1, prompt_tokens]

    generated = input_ids
    past = None
    first_token_time = None
    sync(device)
    start = time.perf_counter()

    with torch.inference_mode():
        for step in range(max_new_tokens):
            if cancel is not None and cancel.is_set():
                break
            # Step 0: the whole prompt ([1, prompt_tokens]). After: only the last new token ([1, 1]).
            cur_input = generated if past is None else generated[:, -1:]

            out = model(input_ids=cur_input, **{cache_arg: past}, use_cache=True)  # past_key_values=past
            past = out[cache_arg]  # out.past_key_values

            next_token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)  # [1, 1], greedy
            generated = torch.cat([generated, next_token], dim=-1)

            if step == 0:
                sync(device)
                first_token_time = time.perf_counter() - start

            if next_token.item() in eos:  # the script: == tokenizer.eos_token_id
                break

    sync(device)
    elapsed = time.perf_counter() - start
    new_tokens = generated.shape[-1] - input_ids.shape[-1]
    first_token_time = elapsed if first_token_time is None else first_token_time

    lesson = {
        "prompt_tokens": input_ids.shape[-1],
        "new_tokens": new_tokens,
        "ttft_s": first_token_time,
        "tpot_s": (elapsed - first_token_time) / max(new_tokens - 1, 1),
        "tokens_per_s": new_tokens / elapsed,
    }
    # The script's decode(generated[0]); a run cut at max_new_tokens inside a character ends in U+FFFD: dropped.
    text = whole_text(tokenizer.decode(generated[0], skip_special_tokens=True))
    return ScriptRun(lesson=lesson, text=text, new_token_ids=tuple(generated[0, input_ids.shape[-1]:].tolist()))


def lesson_request(req: GenerationRequest) -> GenerationRequest:
    """The request as the script runs it: the raw prompt (no chat template), greedy, stopping at EOS."""
    return replace(req, chat_template=False, temperature=0.0, top_k=0, top_p=1.0, seed=None, use_cache=True,
                   static=False, static_tokens=None, ignore_eos=False)


def run_lesson(lm: LoadedModel, req: GenerationRequest, cancel: threading.Event | None = None) -> LessonRun:
    """The script, then kvviz's loop, on the same prompt and max_new_tokens, after one short warm-up of the
    script (so neither run pays the first call's set-up). ValueError when kvviz's run fails, and before anything
    runs when kvviz's admission refuses the request (the host's prompt limit, the context, the fit): the script
    itself checks nothing, so it must not be handed what kvviz's loop would refuse. StateError when `cancel` was
    set meanwhile: the two runs were cut short."""
    req = lesson_request(req)
    admitted = admit(lm, req, encode_prompt(lm, req.prompt, chat_template=False)[0])
    if isinstance(admitted, Refusal):
        raise InputError("run.failed", why=admitted.reason)
    lesson_script(lm, req.prompt, 2, cancel)  # warm-up
    script = lesson_script(lm, req.prompt, req.max_new_tokens, cancel)
    tokens, finished = run_to_end(lm, req, cancel)
    if cancel is not None and cancel.is_set():  # the two runs were cut short: comparing them would mislead
        raise StateError("lesson.stopped")
    if finished is None or finished.summary is None:
        raise (InputError("run.failed", why=finished.error) if finished is not None and finished.error else
               StateError("lesson.ended_early"))
    return LessonRun(script=script, summary=finished.summary, text=finished.text,
                     new_token_ids=tuple(t.token_id for t in tokens), model=lm.spec, device=str(lm.device),
                     dtype=lm.dtype_name)


def known_architecture(spec: str) -> Architecture | None:
    """The architecture of a model named without loading it or reaching the network: the bundled model, a
    random:<preset> twin, or a local folder; None for anything else (a hub id, a packaged model not fetched)."""
    spec = str(spec or "").strip()
    try:
        if spec in BUNDLED:
            return architecture_from_source(BUNDLED[spec], name=spec)
        if spec.startswith(TWIN_PREFIX):
            return load_preset(spec[len(TWIN_PREFIX):].split("@")[0])
        if spec and Path(spec).expanduser().is_dir():
            return architecture_from_source(Path(spec).expanduser(), name=spec)
    except (ValueError, OSError):
        return None
    return None
