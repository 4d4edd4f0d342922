"""Static batching on the bundled tiny model and a shrunk random Qwen2.5-0.5B twin, in fp32: each row against the
same prompt alone, the cache's bytes by hand, rows ending on their own, cached against uncached, bad input, cancel."""

from __future__ import annotations

import threading

import pytest
import torch

from kvviz.engine.admission import encode_prompt, eos_ids
from kvviz.engine.batch import (
    BatchError,
    BatchFinished,
    BatchRequest,
    BatchStep,
    BatchTokenEvent,
    BatchTokenized,
    RowFinished,
    batch_against_single,
    generate_batch,
    run_batch,
)
from kvviz.engine.events import DeviceAcquired, PrefillDone, RequestReceived, TokenEvent, Waiting
from kvviz.engine.loading import build_twin, load_model
from kvviz.engine.loop import run_to_end
from kvviz.engine.queueing import device_lock
from kvviz.engine.request import GenerationRequest
from tests.tiny import FAMILIES

# Four lengths, so three rows are left-padded by different amounts (one is a single token).
PROMPTS = (
    "The KV cache keeps every layer's keys and values.",
    "Prefill reads the whole prompt at once; decode produces one token at a time, and each step reads the weights.",
    "缓存用显存换速度。",
    "Time",
)
# A near-tie. fp32 logits of these models are O(1-10); a padded batch reorders their sums, which moved the prefill
# logits of these prompts by at most 5e-6 against the prompt alone (tiny and twin, measured), while the single runs'
# smallest top-2 margin over 12 tokens was 0.016. A batched row may pick another token only where the single run's
# top two logits are closer than this bound, 200 times the measured drift.
NEAR_TIE = 1e-3
# On the bundled tiny model, alone and greedy: the first emits EOS after 15 tokens, the other two run past 30.
EOS_PROMPT, LONG_PROMPTS = "Paris is", ("The KV cache", "Hi!")


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu", dtype="fp32")


@pytest.fixture(scope="module")
def twin():
    """The random-weight Qwen2.5-0.5B with its first 2 layers: the real attention shape (14 query heads, 2 KV heads of
    64) and vocabulary, small enough for a 2-core CPU."""
    return build_twin("qwen2.5-0.5b", layers=2, device="cpu", dtype="fp32")


def _alone(lm, prompt: str, max_new_tokens: int, use_cache: bool = True) -> list[int]:
    tokens, fin = run_to_end(lm, GenerationRequest(prompt, max_new_tokens=max_new_tokens, use_cache=use_cache,
                                                   chat_template=False))
    assert fin.summary is not None, fin.error
    return [t.token_id for t in tokens]


def _margin(lm, prompt: str, prefix: list[int]) -> float:
    """Top-1 minus top-2 next-token logit of prompt + prefix run alone, straight through the model."""
    ids, _ = encode_prompt(lm, prompt, False)
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([ids + prefix])).logits[0, -1].float()
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


@pytest.mark.parametrize("which", ["tiny", "twin"])
def test_each_row_equals_its_prompt_generated_alone(request, which):
    """Every batched row's greedy tokens equal the single-sequence loop's for that prompt; a row may part only at a
    near-tie (top-2 margin < NEAR_TIE in the single run), and batch_against_single reports exactly that split."""
    lm = request.getfixturevalue(which)
    req = BatchRequest(PROMPTS, max_new_tokens=12)
    result = run_batch(lm, req)
    assert len({r.prompt_tokens for r in result.rows}) == len(PROMPTS), "the prompts must differ in length"
    assert sorted(r.padding for r in result.rows)[0] == 0 and max(r.padding for r in result.rows) > 0
    report = batch_against_single(lm, req, result).set_index("row")
    for row in result.rows:
        alone = _alone(lm, row.prompt, 12)
        batched = list(row.token_ids)
        split = next((i for i, (a, b) in enumerate(zip(alone, batched, strict=False)) if a != b), None)
        assert report.loc[row.row, "identical"] == (alone == batched), f"row {row.row}: report disagrees"
        if alone == batched:
            continue
        assert split is not None, f"row {row.row}: same tokens, different lengths {len(alone)} / {len(batched)}"
        margin = _margin(lm, row.prompt, alone[:split])
        assert report.loc[row.row, "first_divergence"] == split
        assert report.loc[row.row, "single_top2_margin"] == pytest.approx(margin, abs=1e-4)
        assert margin < NEAR_TIE, (f"row {row.row} (padding {row.padding}) parts from the prompt alone at token "
                                   f"{split} where the single run's top-2 margin is {margin:.3g}: padding, mask or "
                                   f"positions are wrong")


@pytest.mark.parametrize("which", ["tiny", "twin"])
def test_kv_bytes_are_batch_times_padded_length_by_hand(request, which):
    """At every step the cache tensors hold B × seq_len × layers × 2 × kv_heads × head_dim × 4 bytes (fp32), with
    seq_len the padded prompt + the step, and the padding's share is its positions × the same per-position bytes."""
    lm = request.getfixturevalue(which)
    cfg = lm.model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    per_position = cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * head_dim * 4
    lengths = [len(encode_prompt(lm, p, False)[0]) for p in PROMPTS]
    batch, width = len(PROMPTS), max(lengths)
    result = run_batch(lm, BatchRequest(PROMPTS, max_new_tokens=6, ignore_eos=True))
    steps = result.steps
    assert list(steps["step"]) == list(range(6)) and list(steps["seq_len"]) == [width + s for s in range(6)]
    for s in steps.itertuples():
        expected = batch * (width + s.step) * per_position
        assert s.kv_bytes == expected, f"step {s.step}: measured {s.kv_bytes}, by hand {expected}"
        assert s.kv_bytes_predicted == expected, f"step {s.step}: the memory model says {s.kv_bytes_predicted}"
        assert s.padding_tokens == batch * width - sum(lengths), "every row runs on: only the left padding is padding"
        assert s.padding_bytes == s.padding_tokens * per_position
    rows = result.tokens
    assert (rows["kv_bytes"] * batch == rows["seq_len"].map(lambda n: batch * n * per_position)).all()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_measured_kv_bytes_equal_predicted_every_step_in_every_family(tiny_models, family):
    """With padding, sliding windows and MLA, the batch's cache bytes equal transformers_cache_bytes(B, seq_len), and
    the padding's bytes are its share of the positions each layer keeps."""
    lm = load_model(str(tiny_models[family]))
    result = run_batch(lm, BatchRequest(PROMPTS, max_new_tokens=10, ignore_eos=True))
    assert len(result.steps) == 10
    for s in result.steps.itertuples():
        assert s.kv_bytes == s.kv_bytes_predicted > 0, f"step {s.step} (seq_len {s.seq_len}): measured {s.kv_bytes}"
        if not lm.arch.n_sliding:  # all positions kept: padding's share of the bytes is its share of the positions
            assert s.padding_bytes * len(PROMPTS) * s.seq_len == s.padding_tokens * s.kv_bytes > 0
        else:  # a sliding layer keeps the last window - 1 positions: the left padding falls out of it
            assert 0 <= s.padding_bytes < s.kv_bytes


def test_a_row_that_meets_eos_stops_while_the_others_run_on(tiny):
    """The row that emits EOS ends there (fewer tokens than the limit, reported once, its tokens as alone); the others
    run to the limit; from then on the finished row's fed positions count as padding."""
    prompts = (EOS_PROMPT, *LONG_PROMPTS)
    limit = 30
    events = list(generate_batch(tiny, BatchRequest(prompts, max_new_tokens=limit)))
    ends = [e for e in events if isinstance(e, RowFinished)]
    assert sorted(e.row for e in ends) == [0, 1, 2], "each row is reported finished exactly once"
    by_row = {e.row: e for e in ends}
    assert by_row[0].reason == "eos" and by_row[0].new_tokens < limit
    assert by_row[1].reason == by_row[2].reason == "max_new_tokens"
    assert by_row[1].new_tokens == by_row[2].new_tokens == limit
    row0 = [e for e in events if isinstance(e, BatchTokenEvent) and e.row == 0]
    assert len(row0) == by_row[0].new_tokens and row0[-1].token_id in eos_ids(tiny)
    assert [e.token_id for e in row0] == _alone(tiny, EOS_PROMPT, limit), "the EOS row differs from its prompt alone"
    steps = [e for e in events if isinstance(e, BatchStep)]
    first_pad = steps[0].padding_tokens
    for s in steps:
        stopped = max(0, s.step - by_row[0].new_tokens + 1)  # passes that fed row 0 a pad after its EOS
        assert s.active_rows == (3 if stopped == 0 else 2)
        assert s.padding_tokens == first_pad + stopped, f"step {s.step}: the finished row's positions are padding"
    assert isinstance(events[-1], BatchFinished) and events[-1].reason == "completed"


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_batch_of_one_is_the_single_run_token_for_token(tiny, use_cache):
    """A batch of one prompt goes through the same admission, meter and events as the single loop: the same tokens
    with the same index, phase, text, seq_len, cache bytes (measured and predicted), finish reason and whole text;
    only the times differ. A field that differs names a rule the two paths no longer share."""
    limit = 30  # EOS_PROMPT ends on its own before this: the EOS rule is compared too
    single, fin = run_to_end(tiny, GenerationRequest(EOS_PROMPT, max_new_tokens=limit, use_cache=use_cache,
                                                     chat_template=False))
    events = list(generate_batch(tiny, BatchRequest((EOS_PROMPT,), max_new_tokens=limit, use_cache=use_cache)))
    batched = [e for e in events if isinstance(e, BatchTokenEvent)]
    fields = ("index", "token_id", "text", "phase", "seq_len", "kv_bytes", "kv_bytes_predicted")
    assert [tuple(getattr(e, f) for f in fields) for e in batched] == [
        tuple(getattr(e, f) for f in fields) for e in single]
    (end,) = [e for e in events if isinstance(e, RowFinished)]
    assert end.reason == fin.reason == "eos", "the EOS rule differs"
    assert end.text == fin.text and end.new_tokens == len(single) < limit


def test_uncached_batch_equals_cached_batch(tiny):
    """Without a cache the batch re-reads every padded position each step and picks the same tokens; it holds no KV."""
    req = BatchRequest(PROMPTS, max_new_tokens=16)
    cached = run_batch(tiny, req)
    uncached = run_batch(tiny, BatchRequest(PROMPTS, max_new_tokens=16, use_cache=False))
    assert [r.token_ids for r in cached.rows] == [r.token_ids for r in uncached.rows], "the cache changed the result"
    assert (uncached.steps["kv_bytes"] == 0).all() and uncached.summary.mode == "uncached"


@pytest.mark.parametrize("kwargs, words", [
    (dict(prompts=()), "between 1 and"),
    (dict(prompts=("a", "")), "prompt 2 of the batch is empty"),
    (dict(prompts=("  \n",)), "prompt 1 of the batch is empty"),
    (dict(prompts="abc"), "tuple"),
    (dict(prompts=("a", 3)), "prompt 2"),
    (dict(prompts=("a",), max_new_tokens=0), "max_new_tokens"),
    (dict(prompts=("a",), max_new_tokens=2.0), "max_new_tokens"),
    (dict(prompts=("a",), use_cache="yes"), "use_cache"),
])
def test_bad_input_is_one_line_value_error(kwargs, words):
    """Each bad value is refused when the request is built, in one line that names it."""
    with pytest.raises(ValueError) as info:
        BatchRequest(**kwargs)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_a_prompt_longer_than_the_context_is_bad_input(short_context_model):
    """A row longer than the context ends the stream as bad input; run_batch raises it as ValueError."""
    lm = load_model(str(short_context_model))
    req = BatchRequest(("hi", "the cache " * 40), max_new_tokens=4)
    last = list(generate_batch(lm, req))[-1]
    assert isinstance(last, BatchFinished) and last.bad_input and "context" in last.error
    with pytest.raises(ValueError, match="context"):
        run_batch(lm, req)


def test_events_in_order_summary_and_lock(tiny):
    """Events follow the lifecycle; the device lock is held while the batch runs; the summary adds up."""
    req = BatchRequest(PROMPTS, max_new_tokens=5, ignore_eos=True)
    lock = device_lock(tiny.device)
    events, held = [], []
    for event in generate_batch(tiny, req):
        events.append(event)
        held.append(lock.locked())
    assert not lock.locked() and all(held[1:])
    kinds = [type(e) for e in events]
    assert kinds[:5] == [RequestReceived, DeviceAcquired, BatchTokenized, PrefillDone, BatchStep]
    assert kinds[5:9] == [BatchTokenEvent] * 4 and kinds[-1] is BatchFinished
    assert all(isinstance(e, TokenEvent) for e in events if isinstance(e, BatchTokenEvent))
    steps = [e for e in events if isinstance(e, BatchStep)]
    s = events[-1].summary
    assert s.batch_size == 4 and s.new_tokens == 20 and s.decode_steps == 4
    assert s.ttft_s == steps[0].t_s and s.e2e_s == steps[-1].t_s
    assert s.tokens_per_s == pytest.approx(20 / s.e2e_s) and s.tokens_per_s_per_sequence == pytest.approx(5 / s.e2e_s)
    assert s.decode_tokens_per_s == pytest.approx(16 / (s.e2e_s - s.ttft_s))
    dts = sorted(e.dt_s for e in steps[1:])
    assert s.decode_step_median_s == pytest.approx((dts[1] + dts[2]) / 2)
    first = [e for e in events if isinstance(e, BatchTokenEvent) and e.index == 0]
    assert {e.row for e in first} == {0, 1, 2, 3} and all(e.t_s == s.ttft_s and e.phase == "prefill" for e in first)


def test_cancel_stops_before_the_next_pass(tiny):
    """A cancel set after a step ends the batch before another forward pass: running rows end as cancelled."""
    cancel = threading.Event()
    events = []
    for event in generate_batch(tiny, BatchRequest(PROMPTS, max_new_tokens=50, ignore_eos=True), cancel):
        events.append(event)
        if isinstance(event, BatchStep) and event.step == 2:
            cancel.set()
    steps = [e for e in events if isinstance(e, BatchStep)]
    assert [s.step for s in steps] == [0, 1, 2], "a pass ran after the cancel"
    ends = [e for e in events if isinstance(e, RowFinished)]
    assert sorted(e.row for e in ends) == [0, 1, 2, 3] and {e.reason for e in ends} == {"cancelled"}
    assert all(e.new_tokens == 3 for e in ends)
    assert isinstance(events[-1], BatchFinished) and events[-1].reason == "cancelled"
    cancel.set()
    with pytest.raises(BatchError, match="stopped"):
        run_batch(tiny, BatchRequest(PROMPTS, max_new_tokens=4), cancel)


def test_cancel_while_waiting_for_the_device(tiny):
    """A batch queued behind the device's lock can be cancelled before it gets the device."""
    cancel = threading.Event()
    lock = device_lock(tiny.device)
    with lock:
        stream = generate_batch(tiny, BatchRequest(PROMPTS, max_new_tokens=4), cancel)
        assert isinstance(next(stream), RequestReceived) and isinstance(next(stream), Waiting)
        cancel.set()
        last = list(stream)[-1]
    assert isinstance(last, BatchFinished) and last.reason == "cancelled" and last.summary is None


def test_a_batch_tells_its_progress(tiny, monkeypatch):
    """Two prompts, 5 new tokens each, EOS ignored: the prefill is told first (fraction 0), then decode steps 1 to
    4 (the fifth token comes from step 4: the prefill made the first) as k/5, with both rows running."""
    monkeypatch.setattr("kvviz.engine.batch.REPORT_S", 0.0)
    seen = []
    run_batch(tiny, BatchRequest(("The kernel", "A package is"), max_new_tokens=5, ignore_eos=True),
              report=lambda fraction, phase: seen.append((fraction, phase.render("en"))))
    assert seen == [(0.0, "prefill: 2 prompts in one forward pass")] + [
        (k / 5, f"decode step {k} of at most 5, 2 row(s) still running") for k in range(1, 5)]
