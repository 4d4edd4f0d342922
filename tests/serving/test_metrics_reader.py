"""The metrics reader: Prometheus text parsed for real, the series summed over engines as the server labels
them, polled during a run against the test server, and kvviz's KV prediction worked out by hand."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from kvviz.calc.arch import architecture_from_source
from kvviz.calc.dtypes import kv_dtype
from kvviz.serving.endpoint import EndpointError, endpoint
from kvviz.serving.load import Load
from kvviz.serving.loadgen import run
from kvviz.serving.metrics_reader import (
    KvModel,
    Sample,
    Watcher,
    cache_config,
    fetch,
    parse,
    read_lines,
    sample_from,
    server_view,
)
from kvviz.serving.prompts import synthetic
from kvviz.serving.vllm import TINY
from tests.serving.fake_server import METRICS, MODEL, fake_server


def test_series_are_summed_over_engines_and_fractions_averaged():
    """Running 3 + 1 on two engines is 4; KV usage 0.25 and 0.75 is 0.5 of the whole; a histogram's sum
    and count are kept; a series the server lacks is None."""
    sample = sample_from(parse(METRICS), 1.5)
    assert (sample.running, sample.waiting, sample.kv_usage) == (4, 2, 0.5)
    assert (sample.generation_tokens, sample.queue_time_sum, sample.queue_time_count) == (1234, 0.5, 4)
    assert sample.preemptions is None and sample.t_s == 1.5


def test_sglang_names_feed_the_same_series():
    text = ('sglang:num_running_reqs{model_name="m"} 5\nsglang:num_queue_reqs{model_name="m"} 1\n'
            'sglang:token_usage{model_name="m"} 0.3\nsglang:max_total_num_tokens{model_name="m"} 4096\n')
    sample = sample_from(parse(text), 0.0)
    assert (sample.running, sample.waiting, sample.kv_usage) == (5, 1, 0.3)
    assert cache_config(parse(text)).capacity_tokens == 4096


def test_only_the_lines_read_are_parsed_and_they_give_the_same_sample():
    """The test server's text with 200 histogram buckets added (as vLLM's /metrics, mostly buckets): the lines kept
    are the series' and the cache config's (no comments, no buckets), and they give the same sample and config."""
    buckets = "".join(f'vllm:e2e_request_latency_seconds_bucket{{le="{i}",model_name="fake"}} {i}\n'
                      for i in range(200))
    text = METRICS + "# TYPE vllm:e2e_request_latency_seconds histogram\n" + buckets
    kept = read_lines(text).splitlines()
    # of the test server's 10 sample lines, all but its one histogram bucket: running ×2, waiting, KV usage ×2,
    # generation tokens, queue time sum and count, cache config
    assert len(kept) == 9 and not any(line.startswith("#") or "_bucket" in line for line in kept), kept
    assert sample_from(parse(read_lines(text)), 0.0) == sample_from(parse(text), 0.0)
    assert cache_config(parse(read_lines(text))) == cache_config(parse(text))


def test_cache_config_gives_the_servers_capacity():
    cfg = cache_config(parse(METRICS))
    assert (cfg.num_blocks, cfg.block_size, cfg.capacity_tokens) == (8192, 128, 8192 * 128)


@pytest.mark.parametrize("text", ['{"running": 3}', "<html><body>metrics</body></html>", "running requests 3"])
def test_text_that_is_not_prometheus_is_one_clear_line(text):
    with pytest.raises(ValueError, match="not Prometheus text") as err:
        parse(text)
    assert "\n" not in str(err.value)


def test_fetch_names_the_url_of_bad_metrics():
    async def go(url: str):
        async with httpx.AsyncClient() as client:
            return await fetch(client, endpoint(url, MODEL))

    with fake_server(metrics="<html>no</html>") as (url, _), \
            pytest.raises(EndpointError, match="/metrics: /metrics is not"):
        asyncio.run(go(url))


def test_kv_prediction_by_hand_for_tiny():
    """tiny keeps 4 layers × 2 (K, V) × 2 KV heads × 32 dims × 2 bytes (bf16) = 1,024 bytes a token. Lengths
    16 and 200 hold 1 + 2 blocks of 128 tokens; the pool has 8,192 blocks less vLLM's null block."""
    kv = KvModel(architecture_from_source(TINY), kv_dtype("bf16"), block_size=128, num_blocks=8192)
    assert kv.usage([16, 200]) == pytest.approx(3 / 8191)
    assert kv.usage([]) == 0


def test_a_run_keeps_the_servers_series_and_the_prediction():
    """Polling every 0.05 s during a 0.4 s run: several samples, each with the server's values and kvviz's
    prediction for what was in flight (2 requests of 8 + up to 5 tokens: 2 blocks of 8,191 at most)."""
    kv = KvModel(architecture_from_source(TINY), kv_dtype("bf16"), block_size=128, num_blocks=8192)
    with fake_server(ttft_s=0.2, itl_s=0.05, tokens=5) as (url, _):
        ep = endpoint(url, MODEL)
        watcher = Watcher(ep, kv, interval_s=0.05)
        result = run(ep, Load(concurrency=2, requests=2, output_tokens=5), synthetic(2, 8), watcher=watcher)
    assert result.metrics_error is None and len(result.samples) >= 4
    assert result.samples[0].in_flight == 0, "the first sample must come before the first request"
    assert result.samples[-1].in_flight == 0, "a last sample is taken after the run"
    assert all(s.running == 4 for s in result.samples)
    assert max(s.in_flight for s in result.samples) == 2
    assert max(s.predicted_kv_usage for s in result.samples) == pytest.approx(2 / 8191)
    assert watcher.cache.capacity_tokens == 8192 * 128


def test_bad_metrics_stop_the_polling_not_the_run():
    with fake_server(tokens=2, ttft_s=0.01, metrics="not prometheus at all") as (url, _):
        ep = endpoint(url, MODEL)
        result = run(ep, Load(requests=2, output_tokens=2), synthetic(2, 8), watcher=Watcher(ep, interval_s=0.01))
    assert result.stats.completed == 2
    assert "not Prometheus text" in result.metrics_error and result.samples == ()


def test_the_server_view_of_a_run_by_hand():
    """Between the first and last samples 4 requests finished, having waited 1 s for their first tokens,
    queued 0.2 s, been prefilled 0.4 s and decoded 2 s in all: 0.25, 0.05, 0.1 and 0.5 s each; 30 of 100
    queried prompt tokens were prefix-cache hits."""
    first = Sample(t_s=0, ttft_time_sum=3.0, ttft_time_count=10, queue_time_sum=1.0, queue_time_count=10,
                   prefill_time_sum=2.0, prefill_time_count=10, decode_time_sum=5.0, decode_time_count=10,
                   prefix_cache_hits=50, prefix_cache_queries=200, generation_tokens=1000, preemptions=1,
                   running=0, kv_usage=0.0)
    mid = Sample(t_s=1, running=4, waiting=2, kv_usage=0.3, predicted_kv_usage=0.25)
    last = Sample(t_s=2, ttft_time_sum=4.0, ttft_time_count=14, queue_time_sum=1.2, queue_time_count=14,
                  prefill_time_sum=2.4, prefill_time_count=14, decode_time_sum=7.0, decode_time_count=14,
                  prefix_cache_hits=80, prefix_cache_queries=300, generation_tokens=1512, preemptions=1,
                  running=0, kv_usage=0.0)
    view = server_view([first, mid, last])
    assert view.requests == 4 and view.ttft_mean_s == pytest.approx(0.25)
    assert (view.queue_mean_s, view.prefill_mean_s, view.decode_mean_s) == pytest.approx((0.05, 0.1, 0.5))
    assert view.prefix_hit_rate == pytest.approx(0.3) and view.generated_tokens == 512 and view.preemptions == 0
    assert (view.max_running, view.max_waiting, view.max_kv_usage, view.max_predicted_kv_usage) == (4, 2, 0.3, 0.25)
    assert server_view([first]) is None
