"""Run summaries from synthetic timestamps whose answers are known in advance (by hand or by numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from kvviz.engine.metrics import percentile, summarize

# A run with hand-picked times: first token at 0.5 s, then gaps of 0.125, 0.125, 0.25 and 0.25 s.
TIMES = [0.5, 0.625, 0.75, 1.0, 1.25]
WEIGHT_BYTES = 1_000
KV_READ = [100, 200, 300, 400]  # what each of the four decode steps read from the cache


def _summary(token_times: list[float], kv_bytes_read: list[int], **kw):
    args = dict(model="m", device="cpu", dtype="fp32", mode="cached", finish_reason="max_new_tokens",
                prompt_tokens=20, token_times=token_times, queue_s=0.125, tokenize_s=0.0625, prefill_s=0.25,
                weight_bytes=WEIGHT_BYTES, kv_bytes_read=kv_bytes_read, bandwidth_bound=10_000.0,
                bandwidth_source="test")
    return summarize(**(args | kw))


def test_latency_figures_of_a_hand_made_run():
    """TTFT is the first token's time, E2E the last's, TPOT (E2E - TTFT) / (n - 1), ITL the gaps after the first."""
    s = _summary(TIMES, KV_READ)
    assert s.new_tokens == 5
    assert s.ttft_s == 0.5, "TTFT is the first token's time since the request arrived"
    assert s.e2e_s == 1.25, "E2E is the last token's time"
    assert s.tpot_s == pytest.approx(0.75 / 4), "TPOT divides the decode time by n - 1, not n"
    assert s.itl_s == pytest.approx([0.125, 0.125, 0.25, 0.25]), "ITL is the gaps between consecutive tokens"
    assert s.prefill_tokens_per_s == pytest.approx(20 / 0.25)


def test_rates_of_a_hand_made_run():
    """tokens/s counts every token over E2E; decode tokens/s counts the n - 1 decoded ones over E2E - TTFT."""
    s = _summary(TIMES, KV_READ)
    assert s.tokens_per_s == pytest.approx(5 / 1.25)
    assert s.decode_tokens_per_s == pytest.approx(4 / 0.75)


def test_bandwidth_is_weights_plus_mean_cache_read_per_decode_step_times_decode_rate():
    """By hand: each step reads 1,000 weight bytes and on average 250 cache bytes; 16/3 steps per second."""
    s = _summary(TIMES, KV_READ)
    assert s.bytes_per_decode_step == pytest.approx(1_250)
    assert s.bandwidth_achieved == pytest.approx(1_250 * 16 / 3)
    assert s.bandwidth_utilisation == pytest.approx(1_250 * 16 / 3 / 10_000)


def test_itl_percentiles_match_numpy():
    """p50, p90 and p99 of the inter-token latencies are numpy's linear-interpolation percentiles."""
    gaps = np.random.default_rng(3).exponential(0.02, size=57)
    times = list(0.4 + np.concatenate([[0.0], np.cumsum(gaps)]))
    s = _summary(times, [0] * 57)
    for q, got in ((50, s.itl_p50_s), (90, s.itl_p90_s), (99, s.itl_p99_s)):
        assert got == pytest.approx(np.percentile(gaps, q), rel=1e-9), f"p{q}"


@pytest.mark.parametrize("values", [[7.0], [1.0, 2.0], [3.0, 1.0, 2.0], [0.5, 0.1, 0.9, 0.3, 0.7, 0.2]])
@pytest.mark.parametrize("q", [0, 10, 50, 90, 99, 100])
def test_percentile_is_numpys_default(values, q):
    """percentile() interpolates linearly between the closest ranks, as numpy.percentile does by default."""
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_of_nothing_is_none():
    """No values, no percentile (a one-token run has no gaps)."""
    assert percentile([], 50) is None


def test_one_token_has_no_decode_figures():
    """One token: TTFT = E2E, no gaps, no decode rate, no bandwidth; TPOT is 0 (no decode time to divide)."""
    s = _summary([0.3], [])
    assert s.new_tokens == 1 and s.ttft_s == s.e2e_s == 0.3
    assert s.tpot_s == 0.0
    assert s.tokens_per_s == pytest.approx(1 / 0.3)
    assert s.itl_s == [] and s.itl_p50_s is None and s.itl_p99_s is None
    assert s.decode_tokens_per_s is None and s.bytes_per_decode_step is None and s.bandwidth_achieved is None


def test_no_token_has_no_figures():
    """A run cancelled before its first token: every time and rate is None, not zero."""
    s = _summary([], [], finish_reason="cancelled", prefill_s=None)
    assert s.new_tokens == 0
    assert None is s.ttft_s is s.e2e_s is s.tpot_s is s.tokens_per_s is s.decode_tokens_per_s
    assert s.prefill_tokens_per_s is None and s.bandwidth_achieved is None


def test_lesson_keys_carry_the_same_values():
    """The lesson's five keys are the summary's own fields, not recomputed."""
    s = _summary(TIMES, KV_READ)
    assert s.lesson() == {"prompt_tokens": 20, "new_tokens": 5, "ttft_s": 0.5, "tpot_s": pytest.approx(0.1875),
                          "tokens_per_s": pytest.approx(4.0)}
