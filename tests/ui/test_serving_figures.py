"""The Serving tab's figures, from requests and samples built by hand: every drawn number is worked out here
from the inputs, and every spec, filled or empty, is one plotly accepts."""

from __future__ import annotations

import time
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest

from kvviz.serving.endpoint import endpoint
from kvviz.serving.load import Load
from kvviz.serving.loadgen import RunResult
from kvviz.serving.metrics_reader import Sample, server_view
from kvviz.serving.record import RequestRecord
from kvviz.serving.stats import run_stats
from kvviz.ui.figures import to_plotly
from kvviz.ui.serving.figures import (
    arrival_times,
    client_phase_means,
    client_rate,
    client_vs_server,
    engine_vs_server,
    kv_usage_over_time,
    log_ticks,
    prefix_cache,
    request_timeline,
    requests_over_time,
    server_rate,
    sweep_latency,
    sweep_throughput,
    sweep_tradeoff,
    throughput_over_time,
    ttft_itl,
)
from tests.ui.test_serving_text import prefix_run


def records() -> list[RequestRecord]:
    """Three requests, three chunks each. On the run's clock the chunks arrive at 0.1 0.5 0.9 | 0.7 1.2 1.7 |
    1.3 2.1 2.4: four in the first second, three in the second, two in the third."""
    return [RequestRecord(0, 0.0, 16, 3, accepted_s=0.05, ttft_s=0.1, e2e_s=0.9, arrivals_s=(0.1, 0.5, 0.9)),
            RequestRecord(1, 0.5, 16, 3, accepted_s=0.02, ttft_s=0.2, e2e_s=1.2, arrivals_s=(0.2, 0.7, 1.2)),
            RequestRecord(2, 1.0, 16, 3, accepted_s=0.1, ttft_s=0.3, e2e_s=1.4, arrivals_s=(0.3, 1.1, 1.4))]


def failed() -> RequestRecord:
    return RequestRecord(3, 1.5, 16, 0, accepted_s=0.01, e2e_s=0.25, error="HTTP 500: the engine died")


def samples() -> list[Sample]:
    """Three scrapes a second apart: 0, 100 and 300 tokens generated, so 100 then 200 tokens/s."""
    return [Sample(t_s=0.0, generation_tokens=0, running=0, waiting=0, in_flight=0, kv_usage=0.0,
                   predicted_kv_usage=0.0, queue_time_sum=0.0, queue_time_count=0, prefill_time_sum=0.0,
                   prefill_time_count=0, decode_time_sum=0.0, decode_time_count=0, ttft_time_sum=0.0,
                   ttft_time_count=0, prefix_cache_hits=0, prefix_cache_queries=0),
            Sample(t_s=1.0, generation_tokens=100, running=2, waiting=1, in_flight=3, kv_usage=0.25,
                   predicted_kv_usage=0.24),
            Sample(t_s=2.0, generation_tokens=300, running=3, waiting=0, in_flight=3, kv_usage=0.5,
                   predicted_kv_usage=0.5, queue_time_sum=0.03, queue_time_count=3, prefill_time_sum=0.06,
                   prefill_time_count=3, decode_time_sum=3.0, decode_time_count=3, ttft_time_sum=0.18,
                   ttft_time_count=3, prefix_cache_hits=12, prefix_cache_queries=48)]


def result(recs: list[RequestRecord], samps: list[Sample], duration_s: float = 2.5) -> RunResult:
    ep = endpoint("http://127.0.0.1:8000", "tiny")
    return RunResult(ep.describe(), Load(concurrency=2, requests=len(recs)), tuple(recs),
                     run_stats(recs, duration_s), False, tuple(samps))


def sweep() -> pd.DataFrame:
    """Five levels: TTFT p99 grows from 20 ms to 1 s (50×, so a log axis), TPOT from 5 to 20 ms."""
    return pd.DataFrame({"concurrency": [1, 2, 4, 8, 16], "output_tokens_per_s": [100.0, 180, 290, 300, 302],
                         "requests_per_s": [0.8, 1.4, 2.3, 2.4, 2.4], "ttft_p50_s": [0.01, 0.012, 0.02, 0.1, 0.5],
                         "ttft_p99_s": [0.02, 0.03, 0.05, 0.3, 1.0], "tpot_p50_s": [0.005, 0.0055, 0.007, 0.013, 0.02],
                         "tpot_p99_s": [0.006, 0.007, 0.009, 0.02, 0.04],
                         "tokens_per_s_per_user": [200.0, 181.8, 142.9, 76.9, 50.0]})


def trace(fig: dict, name: str, prefix: bool = False) -> dict:
    """The one trace named `name` (or whose name starts with it)."""
    found = [t for t in fig["data"] if t.get("name") == name or (prefix and t.get("name", "").startswith(name))]
    assert len(found) == 1, f"expected one trace named {name!r}, got {[t.get('name') for t in fig['data']]}"
    return found[0]


def test_client_tokens_per_second_are_the_arrivals_counted_per_bin():
    """4, 3 and 2 chunks in the run's first three seconds: 4, 3, 2 tokens/s at the bins' centres."""
    fig = throughput_over_time(arrival_times(records()), [], bin_s=1.0)
    client = trace(fig, "client: output chunks received")
    assert client["x"] == [0.5, 1.5, 2.5]
    assert client["y"] == [4.0, 3.0, 2.0]


def test_half_second_bins_and_a_last_bin_cut_short_by_the_clock():
    """Half-second bins count 1 3 2 1 2 chunks (2, 6, 4, 2, 4 per s); live at 2.25 s the last bin covered a
    quarter second, so its one chunk is 4 per s, not 2 (a run in progress must not seem to slow down)."""
    times = arrival_times(records())
    assert client_rate(times, 0.5) == ([0.25, 0.75, 1.25, 1.75, 2.25], [2.0, 6.0, 4.0, 2.0, 4.0])
    x, y = client_rate([t for t in times if t < 2.25], 0.5, end_s=2.25)
    assert (x[-1], y[-1]) == (2.125, 4.0)


def test_server_tokens_per_second_are_the_counter_deltas_over_time():
    """generation_tokens 0, 100, 300 at 0, 1, 2 s: 100 then 200 tokens/s, each at its second's centre."""
    fig = throughput_over_time([], samples(), bin_s=1.0)
    server = trace(fig, "server: generation_tokens counter")
    assert server["x"] == [0.5, 1.5]
    assert server["y"] == [100.0, 200.0]


def test_server_rate_is_read_at_bin_edges_between_sparse_samples():
    """Scrapes at 0 and 2 s only (0 and 200 tokens): the counter at 1 s is interpolated to 100, so the client's
    1 s bins are met by 100 and 100 tokens/s, not by one 2 s average drawn at 1 s."""
    sparse = [Sample(t_s=0.0, generation_tokens=0), Sample(t_s=2.0, generation_tokens=200)]
    assert server_rate(sparse, 1.0) == ([0.5, 1.5], [100.0, 100.0])


def test_a_hundred_thousand_arrivals_draw_as_one_point_per_bin_quickly():
    """The live plot redraws every second: 100k arrivals over 100 s become 100 points, in well under a second."""
    times = np.random.default_rng(0).uniform(0, 100, 100_000)
    start = time.perf_counter()
    fig = throughput_over_time(times, samples(), bin_s=1.0)
    elapsed = time.perf_counter() - start
    client = trace(fig, "client: output chunks received")
    assert len(client["x"]) == 100 and sum(client["y"]) == pytest.approx(100_000)
    assert elapsed < 0.5, f"binning 100k arrivals took {elapsed:.2f} s"


def test_requests_over_time_draws_each_gauge_at_its_sample():
    fig = requests_over_time(samples())
    assert trace(fig, "server: running (in the batch)")["y"] == [0, 2, 3]
    assert trace(fig, "server: waiting (queued)")["y"] == [0, 1, 0]
    assert trace(fig, "client: requests in flight")["y"] == [0, 3, 3]
    assert trace(fig, "client: requests in flight")["x"] == [0.0, 1.0, 2.0]


def test_a_server_without_queue_gauges_draws_only_the_clients_count():
    fig = requests_over_time([Sample(t_s=0.0, in_flight=1), Sample(t_s=0.5, in_flight=2)])
    assert [t["name"] for t in fig["data"]] == ["client: requests in flight"]


def test_kv_usage_is_drawn_in_percent_beside_the_prediction():
    fig = kv_usage_over_time(samples())
    assert trace(fig, "server: KV cache used")["y"] == [0.0, 25.0, 50.0]
    assert trace(fig, "kvviz: predicted (in-flight lengths in whole blocks)")["y"] == pytest.approx([0.0, 24.0, 50.0])


def test_kv_usage_says_so_when_the_server_reports_none():
    fig = kv_usage_over_time([Sample(t_s=0.0, running=1), Sample(t_s=1.0, running=1)])
    assert fig["data"] == []
    assert "reports no KV-cache usage" in fig["layout"]["annotations"][0]["text"]


def test_the_timeline_stacks_each_requests_phases_on_the_runs_clock():
    """Request 1 (sent at 0.5 s): accepted 0.02 s later, first token at 0.2 s, done at 1.2 s, so its segments
    start at 0.5, 0.52, 0.7 and last 0.02, 0.18, 1.0 s."""
    fig = request_timeline(records())
    http = trace(fig, "sent → response accepted (HTTP)")
    wait = trace(fig, "accepted → first token (queue + prefill)")
    stream = trace(fig, "first token → done (streaming)")
    assert http["y"] == [0, 1, 2]
    assert [http["base"][1], wait["base"][1], stream["base"][1]] == pytest.approx([0.5, 0.52, 0.7])
    assert [http["x"][1], wait["x"][1], stream["x"][1]] == pytest.approx([0.02, 0.18, 1.0])
    assert "waiting for the first token" in fig["layout"]["title"]["text"]
    assert "streaming" in stream["hovertemplate"]


def test_the_timeline_ticks_each_chunk_and_crosses_out_failures():
    fig = request_timeline([*records(), failed()])
    ticks = trace(fig, "output chunk arrived")
    assert ticks["x"] == pytest.approx([0.1, 0.5, 0.9, 0.7, 1.2, 1.7, 1.3, 2.1, 2.4])
    cross = trace(fig, "failed")
    assert (cross["y"], cross["x"]) == ([3], [1.75])
    assert cross["customdata"] == ["HTTP 500: the engine died"]


def test_the_timeline_shows_the_first_requests_and_says_how_many_of_all():
    many = [RequestRecord(i, i * 0.1, 16, 2, ttft_s=0.05, e2e_s=0.1, arrivals_s=(0.05, 0.1)) for i in range(100)]
    fig = request_timeline(many, max_requests=10)
    assert trace(fig, "first token → done (streaming)")["y"] == list(range(10))
    assert "the first 10 of 100" in fig["layout"]["title"]["text"]
    assert "output chunk arrived" not in [t["name"] for t in fig["data"]], "ticks for 10 requests are clutter"


def test_ttft_per_request_and_the_itl_histogram():
    """TTFTs 100, 200, 300 ms at sends 0, 0.5, 1 s; six gaps (0.4 0.4 | 0.5 0.5 | 0.8 0.3 s) all in the histogram."""
    fig = ttft_itl(records())
    ttft = trace(fig, "TTFT of each request")
    assert ttft["x"] == [0.0, 0.5, 1.0] and ttft["y"] == pytest.approx([100.0, 200.0, 300.0])
    itl = trace(fig, "ITL (gaps between chunks)")
    assert sum(itl["y"]) == 6 and itl["xaxis"] == "x2"
    assert min(itl["x"]) >= 300 * 0.99 and max(itl["x"]) <= 800 * 1.01, "bins span the gaps, in ms"
    # the gaps sorted: 300 400 400 500 500 800 ms; p50 halfway between 400 and 500, p99 500 + 0.95 × 300 = 785 ms
    assert "p50 450.00 ms, p99 785.00 ms" in fig["layout"]["annotations"][1]["text"]


@pytest.mark.parametrize(("lo", "hi", "expected"), [(4.5, 52, [5, 10, 20, 50]), (5.5, 9.5, [6, 7, 8, 9]),
                                                    (0.3, 3, [0.5, 1, 2])])
def test_log_ticks_are_round_numbers_inside_the_range(lo, hi, expected):
    assert log_ticks(lo, hi) == pytest.approx(expected)


def test_client_means_and_the_servers_histograms_side_by_side():
    """Client: accepted after (50 + 20 + 100) / 3 ms, first token (50 + 180 + 200) / 3 ms later, done after
    (800 + 1000 + 1100) / 3 ms. Server: queued 30 / 3 = 10 ms, prefill 20 ms, decode 1000 ms, TTFT 60 ms."""
    recs = records()
    fig = client_vs_server(recs, server_view(samples()))
    assert trace(fig, "client: sent → accepted 56.67 ms")["x"] == pytest.approx([170 / 3])
    assert trace(fig, "client: accepted → first token 143.33 ms")["x"] == pytest.approx([430 / 3])
    assert trace(fig, "client: first token → done 966.67 ms")["x"] == pytest.approx([2900 / 3])
    assert [trace(fig, f"server: {p}", prefix=True)["x"][0] for p in ("queued", "prefill", "decode")] == \
        pytest.approx([10.0, 20.0, 1000.0])
    assert trace(fig, "server: TTFT mean 60.00 ms", prefix=True)["x"] == pytest.approx([60.0])
    assert client_phase_means(recs)["sent → accepted"] == pytest.approx(0.17 / 3)


def test_client_vs_server_without_histograms_says_so():
    fig = client_vs_server(records(), None)
    assert not [t for t in fig["data"] if t["name"].startswith("server")]
    assert "no request-time histograms" in fig["layout"]["annotations"][0]["text"]


def test_sweep_curves_draw_the_frames_columns():
    frame = sweep().sample(frac=1, random_state=1)  # the rows out of order: the curves sort by concurrency
    tput = sweep_throughput(frame)["data"][0]
    assert tput["x"] == [1, 2, 4, 8, 16] and tput["y"] == [100.0, 180, 290, 300, 302]
    assert tput["text"] == ["0.8 req/s", "1.4 req/s", "2.3 req/s", "2.4 req/s", "2.4 req/s"]
    latency = sweep_latency(frame)
    assert trace(latency, "TTFT p99")["y"] == pytest.approx([20.0, 30, 50, 300, 1000])
    assert trace(latency, "TPOT p50")["y"] == pytest.approx([5.0, 5.5, 7, 13, 20])
    assert latency["layout"]["yaxis"]["type"] == "log", "5 ms to 1 s spans 200×: a linear axis hides TPOT"
    trade = sweep_tradeoff(frame)
    point = trade["data"][0]
    assert point["x"] == [100.0, 180, 290, 300, 302] and point["y"] == [200.0, 181.8, 142.9, 76.9, 50.0]
    assert point["text"][0] == "1 in flight" and point["text"][-1] == "16 in flight"


def test_close_latencies_keep_a_linear_axis():
    frame = sweep().assign(ttft_p50_s=0.01, ttft_p99_s=0.02, tpot_p50_s=0.005, tpot_p99_s=0.008)
    assert sweep_latency(frame)["layout"]["yaxis"].get("type") != "log"


def test_prefix_cache_bars_and_hit_rate():
    """Without: TTFT 120 ms, prefill 0.8 / 8 = 100 ms, no hits. With: 30 ms, 20 ms, 3584 of 4096 = 88% hits."""
    fig = prefix_cache(prefix_run(0, 4800, 0.8, 0.12), prefix_run(3584, 4096, 0.16, 0.03))
    assert trace(fig, "no shared prefix")["y"] == pytest.approx([120.0, 100.0])
    assert trace(fig, "shared prefix")["y"] == pytest.approx([30.0, 20.0])
    assert "without 0%, with 88%" in fig["layout"]["title"]["text"]


def test_engine_beside_the_server_in_three_panels():
    frame = pd.DataFrame({"source": ["kvviz engine (one at a time)", "vLLM (continuous batching)"],
                          "output_tokens_per_s": [233.0, 1106.0], "ttft_p50_s": [0.0056, 0.055],
                          "tpot_p50_s": [0.004, 0.0065]})
    fig = engine_vs_server(frame)
    vllm = [t for t in fig["data"] if t["name"] == "vLLM (continuous batching)"]
    assert [t["y"][0] for t in vllm] == pytest.approx([1106.0, 55.0, 6.5])
    assert [t["xaxis"] for t in vllm] == ["x", "x2", "x3"]
    assert [t["showlegend"] for t in vllm] == [True, False, False], "one legend entry per source"
    domains = [fig["layout"][a]["domain"] for a in ("xaxis", "xaxis2", "xaxis3")]
    assert all(a[1] < b[0] for a, b in pairwise(domains)), "panels must not overlap"


FILLED = {
    "throughput": lambda: throughput_over_time(arrival_times(records()), samples()),
    "requests": lambda: requests_over_time(samples()),
    "kv": lambda: kv_usage_over_time(samples()),
    "timeline": lambda: request_timeline([*records(), failed()]),
    "ttft_itl": lambda: ttft_itl(records()),
    "client_vs_server": lambda: client_vs_server(records(), server_view(samples())),
    "client_only": lambda: client_vs_server(records(), None),
    "sweep_throughput": lambda: sweep_throughput(sweep()),
    "sweep_latency": lambda: sweep_latency(sweep()),
    "sweep_tradeoff": lambda: sweep_tradeoff(sweep()),
    "prefix": lambda: prefix_cache(prefix_run(0, 4800, 0.8, 0.12), prefix_run(3584, 4096, 0.16, 0.03)),
    "engine": lambda: engine_vs_server(pd.DataFrame({"source": ["a", "b"], "output_tokens_per_s": [1.0, 2.0],
                                                     "ttft_p50_s": [0.1, None], "tpot_p50_s": [0.01, 0.02]})),
}
EMPTY = {
    "throughput": lambda: throughput_over_time([], []),
    "requests": lambda: requests_over_time([]),
    "kv": lambda: kv_usage_over_time([]),
    "timeline": lambda: request_timeline([]),
    "ttft_itl": lambda: ttft_itl([failed()]),
    "client_vs_server": lambda: client_vs_server([failed()], None),
    "sweep_throughput": lambda: sweep_throughput(pd.DataFrame()),
    "sweep_latency": lambda: sweep_latency(pd.DataFrame()),
    "sweep_tradeoff": lambda: sweep_tradeoff(pd.DataFrame(columns=["concurrency", "tokens_per_s_per_user"])),
    "engine": lambda: engine_vs_server(pd.DataFrame()),
}


# Axes of categories, labelled by their ticks or by the panel's title rather than an axis title.
CATEGORY_AXES = {"client_vs_server": {"yaxis"}, "client_only": {"yaxis"}, "prefix": {"xaxis"},
                 "engine": {"xaxis", "xaxis2", "xaxis3"}}


@pytest.mark.parametrize("name", FILLED)
def test_every_figure_is_valid_plotly_with_titled_axes(name):
    fig = FILLED[name]()
    to_plotly(fig)
    layout = fig["layout"]
    assert fig["data"] and layout["title"]["text"]
    axes = [k for k in layout if k.startswith(("xaxis", "yaxis")) and k not in CATEGORY_AXES.get(name, set())]
    untitled = [a for a in axes if not layout[a]["title"]["text"]]
    assert not untitled, f"{name}: axes without a title (and its unit): {untitled}"


@pytest.mark.parametrize("name", EMPTY)
def test_every_figure_has_an_empty_state(name):
    fig = EMPTY[name]()
    to_plotly(fig)
    assert fig["data"] == [] and fig["layout"]["annotations"][0]["text"]
