"""The batch sweep: the roofline's prediction against hand arithmetic, the table's derived columns, and the sweep
itself on the bundled tiny model (one row per batch, every cache measured as predicted, each stop rule)."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from kvviz.calc.dtypes import kv_dtype, weight_dtype
from kvviz.calc.params import count_params
from kvviz.calc.roofline import decode_estimate
from kvviz.engine import batch_sweep as bs
from kvviz.engine.batch import BatchError
from kvviz.engine.loading import load_model
from kvviz.i18n import said
from kvviz.serving.prompts import synthetic
from tests.batch_frames import BYTES_PER_TOKEN, DEVICE, NEW, PROMPT, STEPS, TINY, hand_frame

# tiny by hand: 4 layers of q (256×256 + 256), k and v (256×64 + 64 each), o (256×256), a gated MLP (3 × 256×768)
# and two norms (256 each), a final norm (256) and the tied 8,192 × 256 embedding.
TINY_PARAMS = 4 * (256 * 256 + 256 + 2 * (256 * 64 + 64) + 256 * 256 + 3 * 256 * 768 + 2 * 256) + 256 + 8192 * 256
TINY_MATMUL = 4 * (2 * 256 * 256 + 2 * 256 * 64 + 3 * 256 * 768) + 8192 * 256  # the tied head multiplies too


@pytest.mark.parametrize(("max_batch", "sizes"), [
    (1, [1]), (2, [1, 2]), (4, [1, 2, 4]), (6, [1, 2, 4, 6]), (64, [1, 2, 4, 8, 16, 32, 64]), (65, [1, 2, 4, 8, 16,
                                                                                                    32, 64, 65])])
def test_batch_sizes_double_and_end_at_the_max(max_batch, sizes):
    """B doubles from 1 and the largest batch asked for is always measured."""
    assert bs.batch_sizes(max_batch) == sizes


def test_decode_context_is_the_median_step_cache():
    """Decode steps read prompt + 0 .. new - 2 cached tokens: the median is prompt + (new - 2) // 2."""
    assert bs.decode_context(32, 16) == 39
    assert bs.decode_context(32, 2) == 32
    with pytest.raises(ValueError, match="at least 2 new tokens"):
        bs.decode_context(32, 1)


def test_prediction_at_batch_one_is_weight_bytes_over_bandwidth():
    """At B=1 on a 20 GB/s, 200 GFLOP/s device tiny's step reads its fp32 weights once plus 40 tokens of cache."""
    assert count_params(TINY).total == TINY_PARAMS == 5_115_648
    p = bs.predict_batch(TINY, DEVICE, "fp32", 1, PROMPT, NEW)
    weights = TINY_PARAMS * 4  # 20,462,592 bytes
    kv = (39 + 1) * BYTES_PER_TOKEN  # the 39 cached tokens read, the new token's K/V written
    assert p["weight_bytes_read_predicted"] == weights
    assert p["kv_read_bytes_predicted"] == kv == 81_920
    assert p["step_memory_s_predicted"] == pytest.approx((weights + kv) / 20e9, rel=1e-12)  # 1.027 ms
    # FLOPs: 2 per weight multiplied, plus attention 2 × 8 heads × (32 + 32) per key, 40 keys in each of 4 layers
    flops = 2 * TINY_MATMUL + 2 * 8 * 64 * 40 * 4
    assert p["step_compute_s_predicted"] == pytest.approx(flops / 200e9, rel=1e-12)
    assert p["bound_predicted"] == "memory" and p["step_s_predicted"] == p["step_memory_s_predicted"]
    assert p["tokens_per_s_total_predicted"] == pytest.approx(1 / p["step_s_predicted"])


def test_weights_are_read_once_for_the_whole_batch():
    """At B=16 the step reads the same weight bytes as at B=1; only the cache's share grows, 16-fold."""
    one, many = (bs.predict_batch(TINY, DEVICE, "fp32", b, PROMPT, NEW) for b in (1, 16))
    assert many["weight_bytes_read_predicted"] == one["weight_bytes_read_predicted"]
    assert many["kv_read_bytes_predicted"] == 16 * one["kv_read_bytes_predicted"]
    assert many["tokens_per_s_total_predicted"] > 15 * one["tokens_per_s_total_predicted"]


def test_compute_bound_batch_is_where_the_flops_catch_the_bytes():
    """B × FLOPs(1) / peak = (weights + B × KV(1)) / bandwidth at B = 21.4 for tiny here: compute-bound from 22."""
    flops_1 = (2 * TINY_MATMUL + 2 * 8 * 64 * 40 * 4) / 200e9
    kv_1 = 40 * BYTES_PER_TOKEN / 20e9
    crossing = (TINY_PARAMS * 4 / 20e9) / (flops_1 - kv_1)
    assert 21 < crossing < 22
    assert bs.compute_bound_batch(TINY, DEVICE, "fp32", 39) == 22
    count, wd, kvd = count_params(TINY), weight_dtype("fp32"), kv_dtype("fp32")
    assert decode_estimate(TINY, count, DEVICE, wd, kvd, 21, 39).bound == "memory"
    assert decode_estimate(TINY, count, DEVICE, wd, kvd, 22, 39).bound == "compute"
    fast = replace(DEVICE, peak_flops=1e20)  # a ridge of 5e9 FLOP/B: no batch reaches it
    assert bs.compute_bound_batch(TINY, fast, "fp32", 39) is None


def test_memory_limit_is_the_calculators():
    """Budget = 24 GB × 0.9 − weights − 1 GiB; each sequence of 48 tokens needs 48 × 2,048 bytes."""
    limits = bs.sweep_limits(TINY, DEVICE, "fp32", PROMPT, NEW)
    budget = int(24e9 * 0.9) - TINY_PARAMS * 4 - 2**30
    assert limits.kv_budget_bytes == budget == 20_505_795_584
    assert limits.memory_limit_batch == budget // (48 * BYTES_PER_TOKEN) == 208_595
    assert limits.context_tokens == 39 and limits.weights_bytes == TINY_PARAMS * 4
    assert limits.ridge_point == pytest.approx(10.0)


def test_sweep_frame_derives_rates_and_ratios_from_the_measurements():
    """tokens/s total = B / step, per sequence = 1 / step, ratio = measured / predicted; limits on every row."""
    f = hand_frame()
    assert list(f.columns) == list(bs.COLUMNS) and list(f["batch"]) == list(STEPS)
    for _, r in f.iterrows():
        assert r["tokens_per_s_total"] == pytest.approx(r["batch"] / STEPS[r["batch"]])
        assert r["tokens_per_s_per_seq"] == pytest.approx(1 / STEPS[r["batch"]])
        assert r["step_over_predicted"] == pytest.approx(r["step_s"] / r["step_s_predicted"])
    assert set(f["compute_bound_batch"]) == {22} and set(f["memory_limit_batch"]) == {208_595}
    assert set(f["bound_predicted"]) == {"memory", "compute"}
    assert f.attrs["stop_reason"] == bs.STOP_MAX_BATCH


def test_summary_numbers():
    """summarize_sweep: ends of the sweep, growths, the lowest ratio and where, the limits."""
    s = bs.summarize_sweep(hand_frame())
    assert s["first"]["batch"] == 1 and s["last"]["batch"] == 64
    assert s["step_growth"] == pytest.approx(8.0 / 3.0)
    assert s["tokens_per_s_growth"] == pytest.approx(64 * 3.0 / 8.0)
    assert s["lowest_ratio_batch"] == 64 and s["kv_exact"] is True
    assert s["compute_bound_batch"] == 22 and s["memory_limit_batch"] == 208_595
    assert bs.summarize_sweep(hand_frame(kv_off=8))["kv_exact"] is False


# ---- the sweep on the bundled model -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


def _prompts(lm, n: int = 4, tokens: int = 12) -> list[str]:
    return [p.text for p in synthetic(n, tokens, lm.tokenizer)]


def test_sweep_on_tiny_measures_one_row_per_batch(tiny):
    """B = 1, 2, 4: every row decoded its tokens, the cache measured what the memory model predicts (B × 17 cached
    tokens × 2,048 bytes), and tokens/s total is B over the measured median step."""
    frame = bs.batch_sweep(tiny, _prompts(tiny), 6, 4, accel=DEVICE)
    assert list(frame["batch"]) == [1, 2, 4] and set(frame["stop_reason"]) == {bs.STOP_MAX_BATCH}
    assert (frame["prompt_tokens"] == 12).all() and (frame["new_tokens"] == 6).all()
    assert (frame["padding_tokens"] == 0).all(), "equal-length prompts need no padding"
    assert (frame["kv_bytes"] == frame["kv_bytes_predicted"]).all(), frame[["batch", "kv_bytes", "kv_bytes_predicted"]]
    assert list(frame["kv_bytes"]) == [b * (12 + 6 - 1) * BYTES_PER_TOKEN for b in (1, 2, 4)]
    assert (frame["tokens_per_s_total"] == frame["batch"] / frame["step_s"]).all()
    assert (frame["step_min_s"] <= frame["step_s"]).all() and (frame["step_s"] <= frame["step_max_s"]).all()
    assert (frame["prefill_s"] > 0).all() and (frame["ttft_s"] >= frame["prefill_s"]).all()


def test_sweep_stops_before_a_batch_the_calculator_says_will_not_fit(tiny):
    """A device with room for 2.5 sequences beside the weights: B = 1 and 2 run, 4 is never tried."""
    per_seq = (12 + 6) * BYTES_PER_TOKEN
    small = replace(DEVICE, memory_bytes=TINY_PARAMS * 4 + int(2.5 * per_seq))
    frame = bs.batch_sweep(tiny, _prompts(tiny), 6, 4, accel=small, mem_util=1.0, reserve_bytes=0)
    assert list(frame["batch"]) == [1, 2] and set(frame["stop_reason"]) == {bs.STOP_MEMORY}
    assert set(frame["memory_limit_batch"]) == {2}


def test_sweep_stops_at_the_first_batch_out_of_memory(tiny, monkeypatch):
    """A batch that fails for memory on the device ends the sweep; what ran before it is kept."""
    real = bs.run_batch

    def failing(lm, req, cancel=None):
        if req.batch_size == 4:
            # as run_batch raises a batch that ran out of memory (kvviz.engine.loop.metered_run's failure)
            oom = said("run.oom", device="cpu", where=said("run.batch_of", n=4), why="(simulated)")
            raise BatchError("run.failed", why=oom)
        return real(lm, req, cancel)

    monkeypatch.setattr(bs, "run_batch", failing)
    frame = bs.batch_sweep(tiny, _prompts(tiny), 6, 4, accel=DEVICE)
    assert list(frame["batch"]) == [1, 2] and set(frame["stop_reason"]) == {"out of memory at B=4"}


def test_a_cancelled_sweep_keeps_what_it_measured(tiny):
    """Cancelling while B=2 starts ends the sweep there, with B=1's row and the reason."""
    cancel = threading.Event()

    def progress(batch: int, what: str) -> None:
        if batch == 2:
            cancel.set()

    frame = bs.batch_sweep(tiny, _prompts(tiny), 6, 4, accel=DEVICE, cancel=cancel, progress=progress)
    assert list(frame["batch"]) == [1] and frame.attrs["stop_reason"] == bs.STOP_CANCELLED


def test_sweep_refuses_too_few_prompts_and_too_long_runs(tiny):
    """Bad sweeps are refused before anything runs, naming the problem."""
    with pytest.raises(ValueError, match="needs 8 prompts"):
        bs.batch_sweep(tiny, _prompts(tiny), 6, 8, accel=DEVICE)
    with pytest.raises(ValueError, match="context of 1,024"):
        bs.batch_sweep(tiny, _prompts(tiny, 1), 1020, 1, accel=DEVICE)
