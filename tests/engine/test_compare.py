"""Cached against uncached side by side, and the random-weight twins."""

from __future__ import annotations

import json
import time

import pytest

from kvviz.cli import main
from kvviz.engine.admission import encode_prompt
from kvviz.engine.compare import compare, first_divergence
from kvviz.engine.loading import load_model, twin_tokenizer
from kvviz.engine.loop import run_to_end
from kvviz.engine.request import GenerationRequest

PROMPT = "The KV cache keeps every layer's keys and values."


def test_compare_fp32_agrees_and_predicts_both_curves(tiny_models):
    """In fp32 both runs give the same tokens; the prediction grows per step without the cache only."""
    lm = load_model(str(tiny_models["qwen2"]))
    result = compare(lm, GenerationRequest(PROMPT, max_new_tokens=16))
    assert result.tokens_identical and result.first_divergence is None
    assert result.compared_tokens == 16
    assert set(result.rows["mode"]) == {"cached", "uncached"} and len(result.rows) == 32
    assert result.speedup > 0
    pred = result.prediction
    assert len(pred) == 16
    assert pred["uncached_flops"].is_monotonic_increasing and pred["uncached_flops"].iloc[-1] > \
        5 * pred["cached_flops"].iloc[-1], "without the cache each step redoes the whole sequence"
    decode = pred.iloc[1:]
    growth = decode["cached_flops"].iloc[-1] / decode["cached_flops"].iloc[0]
    assert growth < 1.1, "a cached step's work should stay almost flat"
    assert (result.rows.query("mode == 'uncached'")["kv_bytes"] == 0).all()


def test_compare_reports_where_the_runs_part(tiny_models, monkeypatch):
    """When the uncached run is made to choose another token at step K (its forward pass is steered there),
    compare reports K as the first divergence: the index a plain walk over both runs' tokens finds."""
    import functools

    lm = load_model(str(tiny_models["qwen2"]))
    req = GenerationRequest(PROMPT, max_new_tokens=16, ignore_eos=True)
    reference = [t.token_id for t in run_to_end(lm, req)[0]]
    prompt_len = len(encode_prompt(lm, PROMPT, chat_template=True)[0])
    parting = 6  # after the warm-up's four tokens, before the end
    forced = (reference[parting] + 1) % lm.arch.vocab_size
    real_forward = lm.model.forward

    @functools.wraps(real_forward)
    def steered(*args, **kwargs):
        out = real_forward(*args, **kwargs)
        if not kwargs.get("use_cache") and kwargs["input_ids"].shape[1] == prompt_len + parting:
            out.logits[0, -1, forced] = out.logits.max() + 10  # the uncached run's step `parting` only
        return out

    monkeypatch.setattr(lm.model, "forward", steered)
    result = compare(lm, req)
    cached = result.rows.query("mode == 'cached'")["token_id"].tolist()
    uncached = result.rows.query("mode == 'uncached'")["token_id"].tolist()
    assert cached == reference, "the cached run should not have been touched"
    assert uncached[:parting] == reference[:parting] and uncached[parting] == forced
    walked = None
    for index in range(min(len(cached), len(uncached))):
        if cached[index] != uncached[index]:
            walked = index
            break
    assert walked == parting
    assert result.first_divergence == parting, f"compare reported {result.first_divergence}, the runs part at 6"
    assert result.tokens_identical is False and result.compared_tokens == 16


@pytest.mark.parametrize("a,b,expected", [([1, 2, 3], [1, 2, 3], None), ([1, 2, 3], [1, 5, 3], 1),
                                          ([4], [5], 0), ([1, 2], [1, 2, 3], None)])
def test_first_divergence(a, b, expected):
    """The first index where two token lists differ, within the shorter one."""
    assert first_divergence(a, b) == expected


def test_twin_builds_fast_and_says_its_text_is_noise():
    """random:<preset> builds the preset's shape with random weights, offline, in seconds."""
    start = time.perf_counter()
    lm = load_model("random:smollm2-135m")
    assert time.perf_counter() - start < 60  # loose: CI machines vary; the benchmark measures it properly
    assert lm.random_weights and "noise" in lm.tokenizer_note
    assert sum(p.numel() for p in lm.model.parameters()) == 134_515_008
    tokens, fin = run_to_end(lm, GenerationRequest("用三句话解释 KV Cache", max_new_tokens=5))
    assert fin.reason == "max_new_tokens" and len(tokens) == 5
    assert all(t.kv_bytes == t.kv_bytes_predicted for t in tokens)


def test_twin_tokenizer_round_trips_any_text():
    """The twin tokenizer encodes any UTF-8 text byte by byte and decodes it back unchanged."""
    tok = twin_tokenizer(1000)
    text = "KV cache 预填充 🙂 ü"
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text.encode())
    assert tok.decode(ids) == text
    assert tok.decode([500]) == "<500>" and tok.eos_token_id == 999


def test_cli_generate_json(tiny_models, capsys):
    """`generate --json` prints one object with the lesson's keys, the text and per-token rows."""
    assert main(["generate", "--model", str(tiny_models["qwen2"]), "--prompt", PROMPT, "--max-new-tokens", "6",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["lesson"]) == {"prompt_tokens", "new_tokens", "ttft_s", "tpot_s", "tokens_per_s"}
    assert out["lesson"]["new_tokens"] == 6 and len(out["tokens"]) == 6
    assert out["text"] == "".join(t["text"] for t in out["tokens"])
    tokenizer = load_model(str(tiny_models["qwen2"])).tokenizer
    assert out["text"] == tokenizer.decode([t["token_id"] for t in out["tokens"]], skip_special_tokens=True,
                                           clean_up_tokenization_spaces=False)
    assert {"itl_p50_s", "queue_s", "prefill_tokens_per_s", "bandwidth_achieved"} <= set(out["summary"])


def test_cli_generate_streams_then_summarises(tiny_models, capsys):
    """Without --json the text streams to stdout, then the lesson's dict and the other metrics."""
    assert main(["generate", "--model", str(tiny_models["llama"]), "--prompt", PROMPT, "--max-new-tokens", "4",
                 "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert '"prompt_tokens"' in out and "itl_p90_s" in out and "uncached" in out


def test_cli_compare(tiny_models, capsys):
    """`compare --json` reports both runs, the speedup and the agreement."""
    assert main(["compare", "--model", str(tiny_models["mistral"]), "--prompt", PROMPT, "--max-new-tokens", "5",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens_identical"] is True and out["speedup"] > 0
    assert len(out["rows"]) == 10 and len(out["prediction"]) == 5


@pytest.mark.parametrize("args,message", [
    (["--prompt", ""], "empty"),
    (["--max-new-tokens", "0"], "max_new_tokens"),
    (["--max-new-tokens", "99999"], "max_new_tokens"),
    (["--top-p", "2"], "top_p"),
    (["--model", "/no/such/model"], "no such model"),
    (["--model", "org/not-cached"], "HF_HUB_OFFLINE"),
    (["--device", "cuda"], "CUDA"),
])
def test_cli_generation_bad_input(tiny_models, capsys, monkeypatch, args, message):
    """Bad generation input: one line naming the problem, exit status 2."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    base = {"--model": str(tiny_models["qwen2"]), "--prompt": "hi", "--max-new-tokens": "2"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = ["generate", *[x for kv in base.items() for x in kv]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("kvviz: error:") and message in err[-1]


def test_cli_prompt_beyond_context(short_context_model, capsys):
    """A prompt longer than the context: a clear line and exit status 2."""
    assert main(["generate", "--model", str(short_context_model), "--prompt", "the KV cache " * 40]) == 2
    assert "context" in capsys.readouterr().err


def test_compare_stops_when_cancelled(tiny_models):
    """A set cancel event ends the comparison at once with CompareError, not a result of cut-short runs."""
    import threading

    from kvviz.engine.compare import CompareError

    cancel = threading.Event()
    cancel.set()
    lm = load_model(str(tiny_models["qwen2"]))
    with pytest.raises(CompareError, match="stopped"):
        compare(lm, GenerationRequest(PROMPT, max_new_tokens=8), cancel=cancel)


def test_compare_refuses_a_prompt_over_the_limit_as_bad_input(tiny_models):
    """A prompt longer than the host allows is the asker's error (ValueError), with both numbers."""
    lm = load_model(str(tiny_models["qwen2"]))
    with pytest.raises(ValueError, match=r"the prompt has \d+ tokens; this demo allows 4"):
        compare(lm, GenerationRequest(PROMPT, max_new_tokens=4, max_prompt_tokens=4))


def test_compare_tells_its_progress(tiny_models, monkeypatch):
    """Each phase is told as it starts and each measured token counted: the warm-up first, then the runs with and
    without the cache, token k of 12 (k only growing within a run), the fraction never falling and never past 1,
    and the last report's fraction the tokens made over the 2 x (4 + 12) planned. Reports are made at most every
    REPORT_S: here every one, to count them."""
    monkeypatch.setattr("kvviz.engine.compare.REPORT_S", 0.0)
    lm = load_model(str(tiny_models["llama"]))
    seen = []
    compare(lm, GenerationRequest(PROMPT, max_new_tokens=12, ignore_eos=True),
            report=lambda fraction, phase: seen.append((fraction, phase.render("en"), phase.render("zh"))))
    assert seen[0][1] == "warming up both modes (a few tokens each, not measured)"
    texts = [text for _, text, _ in seen[1:]]
    assert texts == [f"with the cache: token {k} of 12" for k in range(1, 13)] + \
        [f"without the cache: token {k} of 12" for k in range(1, 13)]
    fractions = [f for f, _, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert seen[1][0] == pytest.approx(9 / 32)  # 8 warm-up tokens and the first measured one, of 32
    assert seen[-1][2] == "无缓存：第 12 个 token，共 12 个"


def test_the_static_compile_is_told_with_what_to_expect(tiny_models, monkeypatch, tmp_path):
    """With nothing recorded, the first static compile is announced as the first on this machine; it records its
    time (compile_times.json beside the compile cache), so a process without the compiled step announces that
    time; this process, which holds the step, says there is nothing to compile."""
    from kvviz.engine import compiled

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr("kvviz.engine.compare.REPORT_S", 0.0)
    compiled.forget_decoders()
    lm = load_model(str(tiny_models["llama"]))
    phases = []
    req = GenerationRequest(PROMPT, max_new_tokens=4)
    compare(lm, req, static=True, report=lambda f, phase: phases.append(phase.key))
    assert "progress.compiling_first" in phases
    recorded = compiled.last_compile_s(lm.model, 64)
    assert recorded is not None and recorded > 0
    phases.clear()
    compare(lm, req, static=True, report=lambda f, phase: phases.append(phase.key))
    assert "progress.static_warmup" in phases and "progress.compiling_first" not in phases
    compiled.forget_decoders()  # as a new process: the step is gone, the record stays
    phases.clear()
    compare(lm, req, static=True, report=lambda f, phase: phases.append(phase))
    again = next(p for p in phases if p.key == "progress.compiling_again")
    assert again.values["s"] == f"{recorded:,.0f}"
