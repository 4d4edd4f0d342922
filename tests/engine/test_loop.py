"""The generation engine on tiny real models saved to disk: equivalence, exact memory, streaming, queueing."""

from __future__ import annotations

import threading
import time

import pytest

from kvviz.engine.admission import encode_prompt
from kvviz.engine.events import (
    DeviceAcquired,
    Finished,
    PrefillDone,
    PromptTokenized,
    RequestReceived,
    TokenEvent,
    Waiting,
)
from kvviz.engine.loading import LoadError, load_model
from kvviz.engine.loop import generate, run_to_end
from kvviz.engine.queueing import device_lock
from kvviz.engine.request import GenerationRequest
from kvviz.engine.streaming import REPLACEMENT, TextStream
from tests.tiny import FAMILIES

PROMPT = "用三句话解释 LLM 推理中的 KV Cache。"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_cached_and_uncached_tokens_identical_in_fp32(tiny_models, family):
    """Greedy fp32 decoding gives the same tokens with and without the cache, in every attention family."""
    lm = load_model(str(tiny_models[family]))
    cached, _ = run_to_end(lm, GenerationRequest(PROMPT, max_new_tokens=24, use_cache=True))
    uncached, _ = run_to_end(lm, GenerationRequest(PROMPT, max_new_tokens=24, use_cache=False))
    assert [t.token_id for t in cached] == [t.token_id for t in uncached], "the cache changed the result"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_measured_kv_bytes_equal_predicted_every_step(tiny_models, family):
    """The bytes in the cache tensors equal the memory model's prediction at every step, windows and MLA included."""
    lm = load_model(str(tiny_models[family]))
    tokens, fin = run_to_end(lm, GenerationRequest(PROMPT, max_new_tokens=30))
    assert fin.reason == "max_new_tokens" and len(tokens) == 30
    for t in tokens:
        assert t.kv_bytes == t.kv_bytes_predicted, f"step {t.index} (seq_len {t.seq_len}): measured {t.kv_bytes}"
    assert tokens[-1].kv_bytes > 0


def test_sliding_window_stops_cache_growth(tiny_models):
    """Mistral-shaped model with window 8: past the window the cache no longer grows."""
    lm = load_model(str(tiny_models["mistral"]))
    tokens, _ = run_to_end(lm, GenerationRequest("hi", max_new_tokens=20, chat_template=False))
    sizes = {t.kv_bytes for t in tokens if t.seq_len >= 8}
    assert len(sizes) == 1, f"cache kept growing past the window: {sorted(sizes)}"


def test_event_order_and_summary(tiny_models):
    """Events arrive in the life-cycle order and the summary follows the metric definitions."""
    lm = load_model(str(tiny_models["qwen2"]))
    events = list(generate(lm, GenerationRequest(PROMPT, max_new_tokens=10)))
    kinds = [type(e) for e in events]
    assert kinds[:4] == [RequestReceived, DeviceAcquired, PromptTokenized, PrefillDone]
    assert kinds[4:-1] == [TokenEvent] * 10 and kinds[-1] is Finished
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    s = events[-1].summary
    times = [t.t_s for t in tokens]
    assert times == sorted(times)
    assert s.ttft_s == tokens[0].t_s and s.e2e_s == tokens[-1].t_s
    assert s.tpot_s == pytest.approx((s.e2e_s - s.ttft_s) / 9)
    assert s.tokens_per_s == pytest.approx(10 / s.e2e_s)
    assert len(s.itl_s) == 9 and s.itl_s == pytest.approx([t.dt_s for t in tokens[1:]])
    assert s.itl_p50_s <= s.itl_p90_s <= s.itl_p99_s
    assert s.ttft_s >= s.queue_s + s.tokenize_s + s.prefill_s - 1e-9
    assert set(s.lesson()) == {"prompt_tokens", "new_tokens", "ttft_s", "tpot_s", "tokens_per_s"}
    assert tokens[0].phase == "prefill" and all(t.phase == "decode" for t in tokens[1:])
    assert [t.seq_len for t in tokens] == list(range(s.prompt_tokens, s.prompt_tokens + 10))
    assert s.bandwidth_achieved > 0 and s.bandwidth_bound > 0


def test_chinese_streams_without_replacement_characters(tiny_models):
    """Streaming the tokens of Chinese text yields exactly the text, never a U+FFFD for a split character."""
    lm = load_model(str(tiny_models["qwen2"]))
    tok = lm.tokenizer
    text = "缓存用显存换速度，显存随批量、序列长度和层数线性增长。KV cache 预填充"
    ids = tok(text)["input_ids"]
    assert len(ids) > len(text) / 2, "the test needs characters split over several byte-level tokens"
    stream = TextStream(tok)
    deltas = [stream.put(i) for i in ids]
    assert all(REPLACEMENT not in d for d in deltas)
    assert "".join(deltas) + stream.end() == text


def _decode(tokenizer, ids: list[int]) -> str:
    """The tokenizer's own decoding of ids, with the options TextStream uses."""
    return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)


def test_streamed_text_is_the_tokenizers_decoding_of_the_run(tiny_models):
    """Each token's streamed text extends the decoding of the ids so far; together they are the decoding of
    all of them (less the bytes of a character the run stopped inside), and that text is the one
    transformers' model.generate produces greedily from the same prompt."""
    import torch

    lm = load_model(str(tiny_models["gemma2"]))
    tokens, fin = run_to_end(lm, GenerationRequest(PROMPT, max_new_tokens=40))
    ids = [t.token_id for t in tokens]
    streamed = ""
    for i, t in enumerate(tokens):
        streamed += t.text
        assert _decode(lm.tokenizer, ids[: i + 1]).startswith(streamed), f"token {i} streamed text not yet decoded"
        assert not t.text.endswith(REPLACEMENT), f"token {i} ends mid-character"
    decoded = _decode(lm.tokenizer, ids)
    assert fin.text == decoded
    held_back = decoded[len(streamed):]
    assert held_back == "" or held_back.endswith(REPLACEMENT), "the stream held back whole characters"
    prompt_ids = torch.tensor([encode_prompt(lm, PROMPT, chat_template=True)[0]])
    with torch.inference_mode():
        out = lm.model.generate(prompt_ids, attention_mask=torch.ones_like(prompt_ids), do_sample=False,
                                max_new_tokens=40, pad_token_id=lm.tokenizer.eos_token_id)
    assert out[0, prompt_ids.shape[1]:].tolist() == ids, "the loop's greedy tokens are not model.generate's"
    assert fin.text == _decode(lm.tokenizer, out[0, prompt_ids.shape[1]:].tolist())


def test_eos_stops(tiny_models):
    """Generation ends at the first EOS token, with reason eos."""
    lm = load_model(str(tiny_models["gemma2"]))
    ids = [t.token_id for t in run_to_end(lm, GenerationRequest(PROMPT, max_new_tokens=20))[0]]
    # Make EOS the first token that had not appeared before it: the run must stop right there.
    stop = max(i for i in range(len(ids)) if ids[i] not in ids[:i])
    eos_before = lm.model.generation_config.eos_token_id
    lm.model.generation_config.eos_token_id = [ids[stop]]
    try:
        tokens, fin = run_to_end(lm, GenerationRequest(PROMPT, max_new_tokens=50))
    finally:
        lm.model.generation_config.eos_token_id = eos_before
    assert fin.reason == "eos"
    assert len(tokens) == stop + 1 and stop > 0, "the test needs a stop after the first token"


def test_cancel_mid_stream_frees_the_device(tiny_models):
    """Setting the cancel event stops the run at the next token and releases the device lock."""
    lm = load_model(str(tiny_models["qwen2"]))
    cancel = threading.Event()
    seen = 0
    for event in generate(lm, GenerationRequest(PROMPT, max_new_tokens=200), cancel):
        if isinstance(event, TokenEvent):
            seen += 1
            if seen == 3:
                cancel.set()
        if isinstance(event, Finished):
            assert event.reason == "cancelled"
    assert seen == 3
    assert not device_lock(lm.device).locked()


def test_abandoned_stream_frees_the_device(tiny_models):
    """A consumer that stops iterating (a closed browser tab) releases the device too."""
    lm = load_model(str(tiny_models["qwen2"]))
    stream = generate(lm, GenerationRequest(PROMPT, max_new_tokens=200))
    for event in stream:
        if isinstance(event, TokenEvent):
            break
    assert device_lock(lm.device).locked()
    stream.close()
    assert not device_lock(lm.device).locked()


def test_two_concurrent_requests_queue(tiny_models):
    """A second request waits for the first, reports Waiting, and its queue time covers the wait: at least from
    its arrival to the moment the first request's consumer had its last token (the device is held until then)."""
    lm = load_model(str(tiny_models["qwen2"]))
    first_holding = threading.Event()
    last_token_seen: list[float] = []

    def first() -> None:
        for event in generate(lm, GenerationRequest(PROMPT, max_new_tokens=8, ignore_eos=True)):
            if isinstance(event, TokenEvent):
                first_holding.set()
                time.sleep(0.05)  # a slow consumer keeps the device busy
                last_token_seen[:] = [time.perf_counter()]

    thread = threading.Thread(target=first)
    thread.start()
    assert first_holding.wait(30)
    second = generate(lm, GenerationRequest(PROMPT, max_new_tokens=2))
    arrived_by = time.perf_counter()  # the second request's t0 is no later than this
    events = list(second)
    thread.join(30)
    assert any(isinstance(e, Waiting) for e in events), "the second request did not queue"
    acquired = next(e for e in events if isinstance(e, DeviceAcquired))
    summary = events[-1].summary
    assert summary.queue_s == acquired.queue_s
    assert summary.queue_s >= last_token_seen[0] - arrived_by > 0, "the queue time misses part of the wait"
    assert summary.ttft_s > summary.queue_s


def test_sampling_is_seeded(tiny_models):
    """Same seed, same tokens; top_k=1 is greedy."""
    lm = load_model(str(tiny_models["llama"]))

    def ids(**kw):
        return [t.token_id for t in run_to_end(lm, GenerationRequest(PROMPT, max_new_tokens=12, **kw))[0]]

    a = ids(temperature=1.5, seed=7)
    assert a == ids(temperature=1.5, seed=7)
    assert ids(temperature=1.0, top_k=1, seed=3) == ids()
    assert ids(temperature=1.0, top_p=1e-6, seed=3) == ids()


def test_chat_template_switch(tiny_models):
    """The chat template wraps the prompt when on; the raw prompt goes in when off."""
    lm = load_model(str(tiny_models["qwen2"]))

    def tokenized(chat: bool) -> PromptTokenized:
        events = generate(lm, GenerationRequest("hello", max_new_tokens=1, chat_template=chat))
        return next(e for e in events if isinstance(e, PromptTokenized))

    on, off = tokenized(True), tokenized(False)
    assert on.chat_template and not off.chat_template
    assert on.prompt_tokens > off.prompt_tokens


def test_prompt_longer_than_context_fails_clearly(short_context_model):
    """A prompt beyond the context ends the run with a clear, input-caused failure."""
    lm = load_model(str(short_context_model))
    _, fin = run_to_end(lm, GenerationRequest("the KV cache " * 40, max_new_tokens=4))
    assert fin.reason == "failed" and fin.bad_input
    assert "context" in fin.error
    assert not device_lock(lm.device).locked()


def test_generation_stops_when_context_is_full(short_context_model):
    """Asking for more tokens than the context holds makes exactly context - prompt tokens, then says so."""
    lm = load_model(str(short_context_model))
    prompt_tokens = len(lm.tokenizer("hi")["input_ids"])
    tokens, fin = run_to_end(lm, GenerationRequest("hi", max_new_tokens=100, chat_template=False, ignore_eos=True))
    assert fin.reason == "context_full"
    assert len(tokens) == 32 - prompt_tokens, "the run should fill the 32-token context exactly"
    assert tokens[-1].seq_len == 31 and tokens[-1].seq_len < 32
    assert fin.summary.new_tokens == 32 - prompt_tokens


@pytest.mark.parametrize("kw,message", [
    (dict(prompt=""), "empty"),
    (dict(prompt="   "), "empty"),
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(max_new_tokens=10**6), "max_new_tokens"),
    (dict(max_new_tokens=2.5), "max_new_tokens"),
    (dict(temperature=-1), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(top_k=-2), "top_k"),
    (dict(top_p=0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(seed=-1), "seed"),
    (dict(seed=2**64), "seed"),
    (dict(top_k=10**9), "top_k"),
    (dict(max_new_tokens=10**400), "max_new_tokens must be between 1 and 4,096, got a number with about 401 digits"),
    (dict(use_cache="yes"), "use_cache must be true or false"),
    (dict(max_prompt_tokens=0), "max_prompt_tokens"),
])
def test_bad_requests_are_refused_at_once(tiny_models, kw, message):
    """A malformed request raises ValueError naming the field before anything runs."""
    lm = load_model(str(tiny_models["qwen2"]))
    with pytest.raises(ValueError, match=message):
        generate(lm, GenerationRequest(**({"prompt": "hi"} | kw)))


@pytest.mark.parametrize("spec,kw,message", [
    ("/no/such/folder", {}, "no such model"),
    ("random:not-a-preset", {}, "unknown preset"),
    ("random:deepseek-v3", {}, "GB free"),
    ("random:gpt2", {"device": "cuda"}, "CUDA"),
    ("random:gpt2", {"device": "tpu"}, "device"),
    ("random:gpt2", {"dtype": "fp7"}, "dtype"),
    ("", {}, "no model"),
])
def test_bad_models_fail_with_a_clear_message(spec, kw, message):
    """Unknown, unloadable or oversized models raise LoadError with a one-line reason."""
    with pytest.raises(LoadError, match=message) as info:
        load_model(spec, **kw)
    assert "\n" not in str(info.value)


def test_corrupt_model_folder(tmp_path, tiny_models):
    """A folder whose weights are garbage is refused with a clear message."""
    folder = tmp_path / "broken"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((tiny_models["qwen2"] / name).read_bytes())
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(LoadError, match="cannot load"):
        load_model(str(folder))


def test_models_are_loaded_once(tiny_models):
    """The same (model, device, dtype) returns the same loaded object."""
    a = load_model(str(tiny_models["llama"]))
    assert load_model(str(tiny_models["llama"])) is a
    assert load_model(str(tiny_models["llama"]), dtype="fp16") is not a


def test_no_deprecation_warnings(tiny_models, caplog, recwarn):
    """The loop uses the current cache API: neither Python nor transformers warns of deprecation."""
    lm = load_model(str(tiny_models["qwen2"]))
    with caplog.at_level("WARNING"):
        run_to_end(lm, GenerationRequest(PROMPT, max_new_tokens=4))
        run_to_end(lm, GenerationRequest(PROMPT, max_new_tokens=4, use_cache=False))
    messages = [r.getMessage() for r in caplog.records] + [str(w.message) for w in recwarn]
    assert not [m for m in messages if "deprecat" in m.lower()], messages


def test_prompt_over_the_hosts_token_limit_is_refused_with_both_numbers(tiny_models):
    """max_prompt_tokens is checked once the prompt is tokenized: the run fails as bad input, naming both counts."""
    lm = load_model(str(tiny_models["qwen2"]))
    prompt = "The cache keeps keys and values. " * 10
    tokens, fin = run_to_end(lm, GenerationRequest(prompt, max_new_tokens=4, max_prompt_tokens=8, chat_template=False))
    n = len(lm.tokenizer(prompt)["input_ids"])
    assert not tokens and fin.reason == "failed" and fin.bad_input
    assert fin.error == f"the prompt has {n:,} tokens; this demo allows 8"
    tokens, fin = run_to_end(lm, GenerationRequest(prompt, max_new_tokens=4, max_prompt_tokens=n,
                                                   chat_template=False))
    assert fin.reason != "failed" and len(tokens) >= 1, "a prompt exactly at the limit runs"


def _fit_figures(lm, req, prompt_tokens):
    from kvviz.calc.dtypes import kv_dtype
    from kvviz.calc.memory import activation_bytes, transformers_cache_bytes
    from kvviz.engine.loading import transformers_keeps_mla_latent

    total = prompt_tokens + req.max_new_tokens
    kv = transformers_cache_bytes(lm.arch, 1, total, kv_dtype(lm.dtype_name), transformers_keeps_mla_latent())
    return kv, activation_bytes(lm.arch, prompt_tokens, 4)


def test_a_run_that_cannot_fit_is_refused_with_the_numbers(tiny_models, monkeypatch):
    """Before the first token, the cache at full length plus the prefill's activations are checked against the
    device's free memory: one byte short is refused with the numbers, exactly enough runs."""
    import kvviz.engine.loading as loading

    lm = load_model(str(tiny_models["llama"]))
    req = GenerationRequest("The KV cache", max_new_tokens=6)
    kv, act = _fit_figures(lm, req, len(encode_prompt(lm, req.prompt, True)[0]))
    monkeypatch.setattr(loading, "free_bytes", lambda device: kv + act - 1)
    tokens, fin = run_to_end(lm, req)
    assert not tokens and fin.reason == "failed" and fin.bad_input
    assert "cannot fit" in fin.error and "KV cache for" in fin.error and "GiB free" in fin.error, fin.error
    monkeypatch.setattr(loading, "free_bytes", lambda device: kv + act)
    tokens, fin = run_to_end(lm, req)
    assert fin.error is None and len(tokens) >= 1


def test_out_of_memory_mid_run_frees_the_cache_and_the_next_run_works(tiny_models, monkeypatch):
    """An out-of-memory error on the third forward pass (a CUDA fault, injected: a CPU cannot raise it on
    demand) ends the run with a clear message and its tokens so far; the cache is freed, not kept alive by
    the exception, and the next run gives the same text as before."""
    import functools
    import gc
    import weakref

    import torch

    lm = load_model(str(tiny_models["qwen2"]))
    req = GenerationRequest("The KV cache", max_new_tokens=8, ignore_eos=True)
    _, reference = run_to_end(lm, req)
    real_forward = lm.model.forward
    calls, caches = [], []

    @functools.wraps(real_forward)  # the engine reads the forward's signature to name the cache argument
    def failing_forward(*args, **kwargs):
        calls.append(1)
        caches.extend(weakref.ref(v) for k, v in kwargs.items() if k in ("cache", "past_key_values") and v is not None)
        if len(calls) == 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB.\nmore detail")
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(lm.model, "forward", failing_forward)
    tokens, alive_at_report = [], None
    for event in generate(lm, req):
        if isinstance(event, TokenEvent):
            tokens.append(event)
        elif isinstance(event, Finished):
            fin = event
            gc.collect()  # the generator is suspended at its report: whatever it still holds stays alive
            alive_at_report = [ref() is not None for ref in caches]
    assert fin.reason == "failed" and len(tokens) == 2, fin
    assert fin.error.startswith("out of memory on cpu after 2 tokens: CUDA out of memory") and "\n" not in fin.error
    assert fin.text == "".join(t.text for t in tokens)
    assert caches and not any(alive_at_report), "the cache outlived the failure: the memory is not given back"
    monkeypatch.setattr(lm.model, "forward", real_forward)
    _, again = run_to_end(lm, req)
    assert again.text == reference.text and again.error is None


def test_a_stream_stopped_inside_a_character_ends_at_the_last_whole_one(tiny_models):
    """预填充 is four tokens of the tiny byte-level tokenizer: 预 (3 bytes), 填 (3), then 充's bytes as 2 + 1.
    Stopped after three tokens, the stream gives 预填 and nothing for the two bytes no token will complete."""
    tok = load_model(str(tiny_models["qwen2"])).tokenizer
    ids = tok("预填充")["input_ids"]
    assert len(ids) == 4 and tok.decode(ids[:3]) == "预填\ufffd", f"the tokenizer now splits 预填充 as {ids}"
    stream = TextStream(tok)
    shown = "".join(stream.put(i) for i in ids[:3]) + stream.end()
    assert shown == "预填"
