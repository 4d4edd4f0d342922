"""What the Serving tab says, from runs built by hand: every number expected here is worked out from the
records and samples by hand, and the API key never reaches the history."""

from __future__ import annotations

from dataclasses import asdict, replace

import pandas as pd
import pytest

from kvviz.serving.endpoint import endpoint
from kvviz.serving.load import Load
from kvviz.serving.loadgen import RunResult
from kvviz.serving.metrics_reader import Sample
from kvviz.serving.overhead import BUSY, LATE_READS, ClientOverhead
from kvviz.serving.record import RequestRecord
from kvviz.serving.stats import Distribution, Slo, run_stats
from kvviz.serving.sweep import sweep_frame as level_frame
from kvviz.ui.serving.text import (
    Q5,
    Q6,
    engine_vs_server_markdown,
    history_row,
    prefix_markdown,
    run_markdown,
    saturation_level,
    sweep_markdown,
)

SECRET = "sk-do-not-print-0123456789"  # noqa: S105 (a made-up key the history must leave out)


def records() -> list[RequestRecord]:
    """Two completed requests of 4 tokens (TTFT 100 and 200 ms, E2E 400 and 500 ms, so TPOT 100 ms each, ITL
    100 ms) and one that failed."""
    return [RequestRecord(0, 0.0, 16, 4, accepted_s=0.01, ttft_s=0.1, e2e_s=0.4, arrivals_s=(0.1, 0.2, 0.3, 0.4)),
            RequestRecord(1, 0.5, 16, 4, accepted_s=0.01, ttft_s=0.2, e2e_s=0.5, arrivals_s=(0.2, 0.3, 0.4, 0.5)),
            RequestRecord(2, 1.0, 16, 0, error="HTTP 500: the engine died")]


def samples(max_waiting: float = 2) -> list[Sample]:
    """The server's counters over the run: 2 requests queued 20 ms in all, prefilled 100 ms, decoded 600 ms,
    TTFT 240 ms; 30 of 120 prompt tokens hit the prefix cache; 1 preemption; KV usage up to 3%, predicted 2.9%."""
    zero = dict(queue_time_sum=0.0, queue_time_count=0, prefill_time_sum=0.0, prefill_time_count=0,
                decode_time_sum=0.0, decode_time_count=0, ttft_time_sum=0.0, ttft_time_count=0,
                prefix_cache_hits=0, prefix_cache_queries=0, preemptions=0)
    return [Sample(t_s=0.0, kv_usage=0.01, predicted_kv_usage=0.01, running=0, waiting=0, **zero),
            Sample(t_s=1.0, kv_usage=0.03, predicted_kv_usage=0.029, running=2, waiting=max_waiting, **zero),
            Sample(t_s=2.0, kv_usage=0.0, predicted_kv_usage=0.0, running=0, waiting=0, queue_time_sum=0.02,
                   queue_time_count=2, prefill_time_sum=0.1, prefill_time_count=2, decode_time_sum=0.6,
                   decode_time_count=2, ttft_time_sum=0.24, ttft_time_count=2, prefix_cache_hits=30,
                   prefix_cache_queries=120, preemptions=1)]


def result(recs=None, samps=(), duration_s: float = 2.0, concurrency: int = 2, ep: dict | None = None,
           slo: Slo | None = None) -> RunResult:
    recs = records() if recs is None else recs
    ep = ep if ep is not None else endpoint("http://127.0.0.1:8000/v1", "tiny", api_key=SECRET).describe()
    return RunResult(ep, Load(concurrency=concurrency, requests=max(1, len(recs)), output_tokens=4), tuple(recs),
                     run_stats(recs, duration_s, slo), False, tuple(samps))


def test_the_run_table_has_the_runs_counts_rates_and_percentiles():
    """8 tokens in 2 s: 4.0 tokens/s, 1.00 request/s; TTFT p50 150 ms, p99 100 + 0.99 × 100 = 199 ms; goodput:
    only request 0 meets TTFT ≤ 150 ms and TPOT ≤ 200 ms, so 0.50 requests/s."""
    text = run_markdown(result(slo=Slo(ttft_s=0.15, tpot_s=0.2)))
    assert "| 2 of 3 | 1 | 4.0 | 1.00 | 0.50 (TTFT ≤ 150.00 ms, TPOT ≤ 200.00 ms) | 2.00 s |" in text
    assert "| TTFT (time to first token) | 150.00 ms | 150.00 ms | 190.00 ms | 199.00 ms |" in text
    assert "| TPOT (time per output token) | 100.00 ms | 100.00 ms | 100.00 ms | 100.00 ms |" in text
    assert "| E2E (whole request) | 450.00 ms | 450.00 ms | 490.00 ms | 499.00 ms |" in text
    assert "**1 request(s) failed**; the first: HTTP 500: the engine died" in text


def test_the_servers_view_is_said_with_its_numbers():
    """Per request: queued 20 / 2 = 10 ms, prefill 50 ms, decode 300 ms; server TTFT 120 ms against the client's
    150 ms; 30 / 120 = 25.0% prefix hits; 1 preemption; KV peak 3.00% against 2.90% predicted."""
    text = run_markdown(result(samps=samples()))
    assert "queued 10.00 ms, prefill 50.00 ms, decode 300.00 ms" in text
    assert "TTFT mean 120.00 ms on the server against 150.00 ms at the client" in text
    assert "prefix-cache hits 25.0%" in text
    assert "1 preemptions" in text and "at most 2 running and 2 waiting" in text
    assert "peak KV-cache usage 3.00% (kvviz predicted 2.90%)" in text


def test_without_server_samples_there_is_no_server_line():
    text = run_markdown(result())
    assert "server's view" not in text and "| 2 of 3 |" in text


def sweep_frame(throughput: list[float]) -> pd.DataFrame:
    """Levels 1, 2, 4, ...: TPOT p50 from 5 to 20 ms (200 to 50 tokens/s per user), TTFT p50 from 10 to 500 ms."""
    n = len(throughput)
    tpot = [0.005, 0.0055, 0.007, 0.013, 0.02][:n]
    return pd.DataFrame({"concurrency": [2**i for i in range(n)], "output_tokens_per_s": throughput,
                         "ttft_p50_s": [0.01, 0.012, 0.02, 0.1, 0.5][:n],
                         "ttft_p99_s": [0.02, 0.03, 0.05, 0.3, 1.0][:n],
                         "tpot_p50_s": tpot, "tokens_per_s_per_user": [1 / t for t in tpot]})


def level(concurrency: int, max_waiting: float, queue_sum: float = 0.0) -> RunResult:
    """A level's result whose server had at most max_waiting requests waiting, and queued 10 requests queue_sum s."""
    samps = [Sample(t_s=0.0, waiting=0, queue_time_sum=0.0, queue_time_count=0, prefill_time_sum=0.0,
                    prefill_time_count=0),
             Sample(t_s=1.0, waiting=max_waiting, queue_time_sum=queue_sum, queue_time_count=10,
                    prefill_time_sum=0.3, prefill_time_count=10)]
    return result(samps=samps, concurrency=concurrency)


def test_the_sweep_answers_q5_with_its_own_numbers():
    """100 → 302 tokens/s from 1 to 16 in flight is 3.0×; TPOT p50 5.0 → 20.00 ms; 200 → 50 tokens/s per user."""
    text = sweep_markdown(sweep_frame([100.0, 180, 290, 300, 302]), [])
    assert Q5 in text
    assert "From 1 to 16 in flight, total output throughput went from 100 to 302 tokens/s (3.0×)" in text
    assert "TPOT p50 went from 5.00 ms to 20.00 ms (each user's decode speed from 200 to 50 tokens/s)" in text
    assert "TTFT p50 from 10.00 ms to 500.00 ms" in text
    assert "takes longer (4.0× the TPOT)" in text, "20 ms / 5 ms"


def test_the_sweep_does_not_claim_tpot_grew_when_it_did_not():
    """A busy machine can make level 1 the slowest: TPOT 8 ms at 1 in flight, 6 ms at 4. The text then says the
    TPOT did not grow rather than the textbook sentence."""
    frame = sweep_frame([100.0, 180, 290])
    frame["tpot_p50_s"] = [0.008, 0.007, 0.006]
    text = sweep_markdown(frame, [])
    assert "TPOT p50 went from 8.00 ms to 6.00 ms" in text
    assert "did not grow" in text and "takes longer" not in text


def test_the_sweep_says_where_throughput_stopped_growing():
    """Best 302 tokens/s at 16; 4 in flight made 290, within 5% of it (8 in flight's 300 too, but 4 came first):
    302 / 290 - 1 = 4.1% more for 4 times the requests."""
    frame = sweep_frame([100.0, 180, 290, 300, 302])
    assert saturation_level(frame) == 4
    text = sweep_markdown(frame, [])
    assert "Throughput stopped growing at about 4 in flight (290 tokens/s)" in text
    assert "16 in flight, made 302 tokens/s, 4.1% more" in text


def test_a_sweep_still_growing_says_the_server_was_not_saturated():
    text = sweep_markdown(sweep_frame([100.0, 200, 400]), [])
    assert "still growing at the sweep's last level (4 in flight, 400 tokens/s)" in text


def test_a_sweep_whose_first_level_was_its_best_compares_first_and_last():
    """100 then 90 tokens/s: the sentence runs from 1 to 2 in flight (0.9×), not from 1 to 1."""
    text = sweep_markdown(sweep_frame([100.0, 90.0]), [])
    assert "From 1 to 2 in flight, total output throughput went from 100 to 90 tokens/s (0.9×)" in text
    assert "Throughput stopped growing at about 1 in flight" in text


def test_a_single_level_says_it_cannot_show_a_trade_off():
    assert sweep_markdown(sweep_frame([100.0]), []).startswith("One level only (1 in flight)")


def test_the_sweep_answers_q6_with_the_levels_that_queued():
    """Waiting requests only at 8 (up to 3) and 16 (up to 9); at 16 the server queued 2 s over 10 requests = 200 ms
    each and prefilled 0.3 s / 10 = 30 ms each."""
    results = [level(1, 0), level(2, 0), level(4, 0), level(8, 3), level(16, 9, queue_sum=2.0)]
    text = sweep_markdown(sweep_frame([100.0, 180, 290, 300, 302]), results)
    assert Q6 in text
    assert "TTFT p50 grew from 10.00 ms at 1 in flight to 500.00 ms at 16 (p99 1,000.00 ms)" in text
    assert "The server had requests waiting at 8 in flight (up to 3), 16 in flight (up to 9)" in text
    assert "At 16 in flight the server's mean request queued 200.00 ms and was prefilled in 30.00 ms" in text


def test_a_sweep_without_a_queue_says_the_server_never_had_one():
    results = [level(1, 0), level(2, 0)]
    text = sweep_markdown(sweep_frame([100.0, 180]), results)
    assert "never had a request waiting" in text and "had requests waiting at" not in text


def prefix_run(hits: float, queries: float, prefill_sum: float, ttft_s: float) -> RunResult:
    """Eight requests of one TTFT; the server's counters: hits of queries, prefill_sum over 8 prefills."""
    recs = [RequestRecord(i, 0.1 * i, 600, 2, ttft_s=ttft_s, e2e_s=ttft_s + 0.01, arrivals_s=(ttft_s, ttft_s + 0.01))
            for i in range(8)]
    samps = [Sample(t_s=0.0, prefix_cache_hits=0, prefix_cache_queries=0, prefill_time_sum=0, prefill_time_count=0),
             Sample(t_s=1.0, prefix_cache_hits=hits, prefix_cache_queries=queries, prefill_time_sum=prefill_sum,
                    prefill_time_count=8)]
    return result(recs, samps, duration_s=1.0)


def test_prefix_markdown_says_what_the_shared_prefix_saved():
    """3584 of 4096 tokens hit (87.5%), none without; TTFT p50 120 → 30 ms (-90 ms, -75%); the server's prefill
    0.8 / 8 = 100 ms → 0.16 / 8 = 20 ms (-80 ms, -80%)."""
    text = prefix_markdown(prefix_run(0, 4800, 0.8, 0.12), prefix_run(3584, 4096, 0.16, 0.03))
    assert "87.5% of the prompt tokens the server looked up were already in its prefix cache (without it: 0.0%)" \
        in text
    assert "TTFT p50 went from 120.00 ms to 30.00 ms (-90.0 ms, -75%)" in text
    assert "mean prefill went from 100.00 ms to 20.00 ms (-80.0 ms, -80%)" in text


def test_history_row_is_flat_and_never_holds_the_key():
    """The endpoint had a key: the row says where the load went and what it measured, never the key, even when
    the endpoint's whole dataclass (key included) was recorded by mistake."""
    ep = endpoint("http://127.0.0.1:8000/v1", "tiny", api_key=SECRET)
    row = history_row(result(ep=ep.describe(), slo=Slo(ttft_s=0.15, tpot_s=0.2)), "c=2")
    assert SECRET not in repr(row) and "api_key" not in row
    assert row["kind"] == "serving" and row["label"] == "c=2"
    assert (row["url"], row["model"], row["api"]) == ("http://127.0.0.1:8000", "tiny", "completions")
    assert (row["concurrency"], row["requests"], row["output_tokens_per_request"]) == (2, 3, 4)
    assert (row["completed"], row["failed"], row["output_tokens_per_s"]) == (2, 1, 4.0)
    assert row["ttft_p50_s"] == pytest.approx(0.15) and row["goodput_requests_per_s"] == 0.5
    assert all(not isinstance(v, (dict, list, tuple)) for v in row.values()), "a history row is flat"
    leaked = history_row(result(ep=asdict(ep)), "c=2")  # the key held in the endpoint's dict
    assert SECRET not in repr(leaked) and "api_key" not in leaked


def test_the_engine_comparison_says_both_engines_numbers():
    """The hand-built run (8 tokens in 2 s: 4 tokens/s, TTFT p50 150 ms, TPOT 100 ms) as vLLM's at 2 in flight,
    and the same records over 4 s as the engine's: 2 tokens/s, so batching made 2.0× the tokens per second,
    and the engine's requests each wait for the 1 ahead."""
    text = engine_vs_server_markdown(result(duration_s=2.0), result(duration_s=4.0))
    assert "The same load, 2 in flight, 3 requests of 4 tokens" in text
    assert "vLLM (continuous batching): 4 tokens/s, TTFT p50 150.00 ms, TPOT p50 100.00 ms" in text
    assert "kvviz's engine (one request at a time): 2 tokens/s" in text
    assert "Batching made 2.0× the tokens per second" in text and "the 1 request(s) ahead" in text
    single = engine_vs_server_markdown(result(concurrency=1), result(concurrency=1, duration_s=1.0))
    assert "nothing to batch" in single and "(0.5×)" in single


def test_the_client_paragraph_and_its_warning_in_both_languages():
    """The two requests above (E2E p50 450 ms) measured by a client that spent 1.6 s of CPU in the 2 s run (80% of
    a core; 8 tokens: 200,000 µs a token) and whose reads waited 30 ms at p90: both reasons of the rule."""
    base = result()
    client = ClientOverhead(cpu_s=1.6, busy=0.8, cpu_us_per_token=200_000.0,
                            read_wait=Distribution(0.002, 0.002, 0.03, 0.03), headers=Distribution.of([0.01, 0.01]),
                            limits=(BUSY, LATE_READS))
    text = run_markdown(replace(base, client=client))
    assert ("**The client's own cost**: CPU 1.60 s (80% of a core, 200,000.0 µs per output token); its reads waited "
            "2.00 ms/30.00 ms (p50/p90) after the bytes arrived, and 0% of the output chunks came in one read with a "
            "later one (their gap reads 0); response headers 10.00 ms (p50) after each send.") in text
    assert ("**Warning: the client, not the server, limited this run** (its event loop was busy 80% of the run, over "
            "75%; its reads waited 30.00 ms at p90, over 2.5% of a request's 450.00 ms)") in text
    zh = run_markdown(replace(base, client=client), "zh")
    assert "**客户端自身的开销**：CPU 1.60 秒（单核的 80%，每个输出 token 200,000.0 µs）" in zh
    assert ("**警告：限制本次运行的是客户端而不是服务器**（其事件循环忙碌了运行时间的 80%，超过 75%；其读取在 p90 "
            "等待了 30.00 ms，超过请求耗时 450.00 ms 的 2.5%）") in zh
    assert "Warning" not in run_markdown(replace(base, client=replace(client, limits=()))), "no warning unless limited"


def test_an_open_loops_rates_and_its_cap_in_both_languages():
    """4 requests/s asked, the two completed sent 0.5 s apart (2.00/s), 1.00 completed/s over 2 s; a cap of 2 over
    requests of 450 ms mean E2E carries 2 / 0.45 = 4.44 requests/s, more than asked: the one held arrival (100 ms)
    was a burst, not a bound."""
    recs = [replace(r, due_s=0.5 * r.index, waited_s=0.1 if r.index == 1 else 0.0) for r in records()]
    stats = run_stats(recs, 2.0, rate=4.0, concurrency=2)
    run = RunResult({}, Load(arrivals="constant", rate=4.0, concurrency=2, requests=3, output_tokens=4), tuple(recs),
                    stats, False)
    text = run_markdown(run)
    assert ("**Open loop**: 4.00 requests/s asked, 2.00 sent, 1.00 completed. The cap of 2 in flight held back 1 of 3 "
            "arrivals in bursts (mean wait 100.00 ms); it carries at most 4.44 requests/s, more than the rate asked."
            ) in text
    assert "**开环**：请求速率 4.00 个/秒，实际发送 2.00，完成 1.00。并发上限 2 在突发时挡住了 3 个到达中的 1 个" in \
        run_markdown(run, "zh")
    bound = replace(run, stats=run_stats(recs, 2.0, rate=10.0, concurrency=2))
    assert "**The cap of 2 in flight bounded the rate**" in run_markdown(bound)
    assert "**Open loop**" not in run_markdown(result()), "a closed loop says nothing of rates"


def test_a_sweep_stopped_by_the_client_says_so_first():
    """Two levels, the second limited by the client: the sweep's text opens with why it stopped there."""
    client = ClientOverhead(cpu_s=1.9, busy=0.95, cpu_us_per_token=1.0, read_wait=None,
                            headers=Distribution.of([0.01]), limits=(BUSY,))
    runs = [result(concurrency=1), replace(result(concurrency=2), client=client)]
    frame = level_frame(runs)
    text = sweep_markdown(frame, runs)
    assert text.startswith("**The sweep stopped at 2 in flight because the client saturated there** (its event loop "
                           "was the bottleneck)")
    assert sweep_markdown(frame, runs, "zh").startswith("**扫描在并发 2 处停止，因为客户端在这一级已饱和**")
    fine = [runs[0], result(concurrency=2)]
    assert "client" not in sweep_markdown(level_frame(fine), fine)
