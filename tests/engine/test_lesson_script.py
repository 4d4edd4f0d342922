"""The lesson's own script on a tiny real model saved to disk, beside kvviz's loop on the same request."""

from __future__ import annotations

import threading

import pytest

import kvviz.engine.lesson_script as lesson_module
from kvviz.engine.lesson_script import LESSON_PROMPT, lesson_script, run_lesson
from kvviz.engine.loading import load_model
from kvviz.engine.loop import run_to_end
from kvviz.engine.request import GenerationRequest

KEYS = ["prompt_tokens", "new_tokens", "ttft_s", "tpot_s", "tokens_per_s"]


def test_script_tokens_equal_kvvizs_cached_greedy_tokens(tiny_models):
    """The script's new tokens are kvviz's cached greedy tokens on the raw prompt; both count the same."""
    lm = load_model(str(tiny_models["qwen2"]), device="cpu", dtype="fp32")
    for prompt in (LESSON_PROMPT, "The kernel", "A package is"):
        script = lesson_script(lm, prompt, 24)
        tokens, finished = run_to_end(lm, GenerationRequest(prompt, 24, chat_template=False))
        assert script.new_token_ids == tuple(t.token_id for t in tokens), f"{prompt!r}: the loops part"
        lesson = finished.summary.lesson()
        assert script.lesson["prompt_tokens"] == lesson["prompt_tokens"], "the script tokenizes the raw prompt"
        assert script.lesson["new_tokens"] == lesson["new_tokens"] == len(tokens), "EOS is one rule in both"


def test_run_lesson_returns_the_scripts_dict_beside_kvvizs(tiny_models):
    """run_lesson: the script's five keys and decoded text, kvviz's metrics for the same run, the same tokens."""
    lm = load_model(str(tiny_models["qwen2"]), device="cpu", dtype="fp32")
    result = run_lesson(lm, GenerationRequest("The kernel", 16))  # chat_template True is turned off, as the script
    shown = result.as_dict()
    assert list(shown["script"]) == [*KEYS, "text"]
    assert result.tokens_identical and shown["tokens_identical"]
    assert shown["script"]["prompt_tokens"] == shown["kvviz"]["prompt_tokens"]
    assert shown["script"]["new_tokens"] == shown["kvviz"]["new_tokens"] == len(result.new_token_ids) > 0
    assert shown["script"]["text"].startswith("The kernel"), "the script decodes the prompt and the answer"
    assert all(shown["kvviz"][k] is not None for k in ("ttft_s", "tokens_per_s", "prefill_s"))


def test_a_script_cut_inside_a_character_ends_at_the_last_whole_one(tiny_models):
    """A run stopped by max_new_tokens between the bytes of one character shows no U+FFFD: its text is the
    tokenizer's decoding less the one U+FFFD that Python's UTF-8 decoder (errors="replace") makes of the cut
    character's leading bytes; kvviz's streamed text for the same run ends at the same character."""
    lm = load_model(str(tiny_models["llama"]), device="cpu", dtype="fp32")  # its answer: 显存 ×10, then 2-byte æİ
    prompt = "缓存用显存"
    prompt_ids = lm.tokenizer(prompt)["input_ids"]
    ids = list(lesson_script(lm, prompt, 40).new_token_ids)
    decode = lambda k: lm.tokenizer.decode(prompt_ids + ids[:k], skip_special_tokens=True)  # noqa: E731
    cuts = [k for k in range(1, len(ids) + 1) if decode(k).endswith("\ufffd")]
    assert cuts, "the random model's 40 tokens never stop inside a character: the test needs another prompt"
    k = cuts[0]  # the first cut: whole characters, then one character's leading bytes
    script = lesson_script(lm, prompt, k)
    assert script.text == decode(k)[:-1]
    _, finished = run_to_end(lm, GenerationRequest(prompt, k, chat_template=False))
    assert prompt + finished.text == script.text, "kvviz's streamed text keeps the cut character's bytes"


def test_a_prompt_kvviz_would_refuse_is_refused_before_the_script_runs(tiny_models, monkeypatch):
    """The script checks nothing itself: a prompt over the host's limit is refused by kvviz's admission before the
    script runs (once the script ran on it, in a hosted demo to the time limit, and kvviz refused it after)."""
    lm = load_model(str(tiny_models["qwen2"]), device="cpu", dtype="fp32")
    ran: list[str] = []
    monkeypatch.setattr(lesson_module, "lesson_script", lambda _lm, prompt, *a: ran.append(prompt))
    with pytest.raises(ValueError, match=r"^the prompt has \d+ tokens; this demo allows 4$"):
        run_lesson(lm, GenerationRequest("The kernel runs the package manager", 8, max_prompt_tokens=4))
    assert not ran, "the script ran on a prompt kvviz refuses"


def test_a_stopped_lesson_says_so_rather_than_comparing_cut_runs(tiny_models):
    """A stop (the page's, or a hosted demo's time limit) cuts both runs short: the lesson reports the stop, not
    "the tokens differ" between two cut runs."""
    lm = load_model(str(tiny_models["qwen2"]), device="cpu", dtype="fp32")
    stop = threading.Event()
    stop.set()
    with pytest.raises(RuntimeError, match=r"^the lesson's script was stopped before both runs finished$"):
        run_lesson(lm, GenerationRequest("The kernel", 16), stop)
