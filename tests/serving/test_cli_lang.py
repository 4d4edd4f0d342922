"""`python -m kvviz.serving` in Chinese and English, against the test server on 127.0.0.1: --lang zh and a
zh_CN locale print a run's line, a sweep's levels, notes and refusals in Chinese; --lang en under a zh_CN locale
prints English; --json is the same object in both languages. Expected Chinese is typed out here, not computed."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kvviz.serving.capacity import CapacityRow
from kvviz.serving.cli import capacity_line, client_line, main, rate_line, server_line
from kvviz.serving.metrics_reader import Sample
from kvviz.serving.overhead import BUSY, LATE_READS, ClientOverhead
from kvviz.serving.stats import Distribution
from tests.serving.fake_server import MODEL, fake_server
from tests.serving.test_cli import serving

NO_LOCALE = {"LC_ALL": "", "LC_MESSAGES": "", "LANG": "", "LANGUAGE": ""}
ESTIMATED_ZH = "注意：没有分词器，提示词约 16 个 token（按一个词一个 token 估算）；用 --tokenizer DIR 可准确计数\n"
LOAD = ["--concurrency", "2", "--requests", "4", "--output-tokens", "3"]


@pytest.mark.parametrize(("args", "env"), [
    (["--lang", "zh"], NO_LOCALE),
    ([], NO_LOCALE | {"LANG": "zh_CN.UTF-8"}),
])
def test_run_speaks_chinese_by_flag_and_by_locale(args, env):
    """4 requests at 2 in flight: the result line's words in Chinese, its numbers and units as in English."""
    with fake_server(ttft_s=0.02, itl_s=0.0, tokens=3) as (url, _):
        proc = serving("run", "--url", url, "--model", MODEL, *LOAD, *args, env=env)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.splitlines()[0]
    assert line.startswith("c=2    4/4 成功  "), line
    assert " tok/s  " in line and "  TTFT p50/p99 " in line and "  有效吞吐（goodput）" in line, line
    assert line.endswith(" req/s  服务器运行中<=4"), "the fake server's /metrics reports 4 running"
    assert proc.stderr == ESTIMATED_ZH


def test_lang_en_under_a_chinese_locale_prints_english():
    with fake_server(ttft_s=0.02, itl_s=0.0, tokens=3) as (url, _):
        proc = serving("run", "--url", url, "--model", MODEL, *LOAD, "--lang", "en", env={"LANG": "zh_CN.UTF-8"})
    assert proc.returncode == 0, proc.stderr
    first, client = proc.stdout.splitlines()[:2]
    assert first.startswith("c=2    4/4 ok  ") and first.endswith("server running<=4"), first
    assert client.startswith("      client: CPU "), client
    assert proc.stderr.startswith("note: no tokenizer, so prompts of about 16 tokens")


def test_sweep_levels_in_chinese():
    with fake_server(ttft_s=0.02, itl_s=0.0, tokens=2) as (url, _):
        proc = serving("sweep", "--url", url, "--model", MODEL, "--max-concurrency", "2", "--per-level", "1",
                       "--output-tokens", "2", "--lang", "zh")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line[:13] for line in lines if line.startswith("c=")] == ["c=1    8/8 成功", "c=2    8/8 成功"], lines
    assert sum(line.startswith("      客户端：CPU") for line in lines) == 2, lines
    assert lines[-1] in ("扫描在最后一级 c=2 结束", "扫描在 c=2 停止：吞吐不再增长（服务器已饱和）"), lines


def test_json_is_the_same_object_in_both_languages():
    """--json keeps English keys and prints nothing else on stdout, whatever the language."""
    with fake_server(ttft_s=0.02, itl_s=0.0, tokens=3) as (url, _):
        zh = serving("run", "--url", url, "--model", MODEL, *LOAD, "--json", "--lang", "zh")
    assert zh.returncode == 0, zh.stderr
    out = json.loads(zh.stdout)
    assert set(out) == {"endpoint", "load", "stats", "client", "cancelled", "requests", "server"}
    assert out["stats"]["completed"] == 4
    assert {"client_cpu_s", "client_busy", "client_read_wait_p90_s", "client_headers_p50_s", "client_limited"} <= \
        set(out["client"])


@pytest.mark.parametrize(("behaviour", "args", "env", "expected"), [
    ({}, ["--concurrency", "0", "--lang", "zh"], NO_LOCALE, "错误：concurrency 须在 1 到 1,024 之间，收到 0"),
    ({"api_key": "sk-right"}, ["--api-key", "sk-wrong"], NO_LOCALE | {"LANG": "zh_CN.UTF-8"},
     "错误：HTTP 401：服务器拒绝了 API 密钥：Invalid API key（请设置 KVVIZ_API_KEY 或传入 --api-key）"),
    ({}, ["--prompt-file", "/no/such/prompts.jsonl", "--lang", "zh"], NO_LOCALE,
     "错误：/no/such/prompts.jsonl 处没有提示词文件"),
    ({}, ["--lang", "zh", "--bogus"], NO_LOCALE, "错误：unrecognized arguments: --bogus"),
])
def test_refusals_are_one_chinese_line_and_status_2(behaviour, args, env, expected):
    with fake_server(**behaviour) as (url, _):
        proc = serving("run", "--url", url, "--model", MODEL, "--requests", "1", *args, env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == expected, proc.stderr
    assert "Traceback" not in proc.stderr and "sk-wrong" not in proc.stderr + proc.stdout


def test_start_without_vllms_environment_says_so_in_chinese(tmp_path, capsys, monkeypatch):
    for name in NO_LOCALE:
        monkeypatch.delenv(name, raising=False)
    assert main(["start", "tiny", "--venv", str(tmp_path / "none"), "--lang", "zh"]) == 2
    venv = tmp_path / "none"
    assert capsys.readouterr().err == f"错误：{venv} 没有 vLLM 环境：请用 `python -m kvviz.serving setup` 构建\n"


def test_server_line_in_chinese():
    """Two samples 4 requests apart: queued 10 ms, prefill 20 ms, decode 30 ms each; half the prefix hit."""
    first = Sample(0.0, kv_usage=0.1, preemptions=0, prefix_cache_hits=0, prefix_cache_queries=0, queue_time_sum=0,
                   queue_time_count=0, prefill_time_sum=0, prefill_time_count=0, decode_time_sum=0,
                   decode_time_count=0, ttft_time_sum=0, ttft_time_count=0, predicted_kv_usage=0.1)
    last = Sample(1.0, kv_usage=0.25, preemptions=1, prefix_cache_hits=50, prefix_cache_queries=100,
                  queue_time_sum=0.04, queue_time_count=4, prefill_time_sum=0.08, prefill_time_count=4,
                  decode_time_sum=0.12, decode_time_count=4, ttft_time_sum=0.12, ttft_time_count=4,
                  predicted_kv_usage=0.3125)
    # what server_line reads of a run: the server's samples and the client's TTFT
    run = SimpleNamespace(samples=[first, last], stats=SimpleNamespace(ttft=SimpleNamespace(mean=0.0315)))
    assert server_line(run, "zh") == (
        "      服务器端，每个请求：排队 10.0 ms，预填充 20.0 ms，解码 30.0 ms；TTFT 均值 30.0 ms"
        "（客户端：31.5 ms）  前缀缓存命中 50%  抢占 1 次  KV Cache 使用 <= 25.00%（kvviz 预测 31.25%）")
    assert server_line(run) == ("      server, per request: queued 10.0 ms, prefill 20.0 ms, decode 30.0 ms; TTFT mean "
                                "30.0 ms (client: 31.5 ms)  prefix-cache hits 50%  preemptions 1  KV used <= 25.00% "
                                "(kvviz predicted 31.25%)")


def test_capacity_line_in_chinese():
    row = CapacityRow(model="tiny", attention="GQA 4/2", kv_space_gib=1, dtype="bf16", vllm_dtype="bf16",
                      bytes_per_token=4096, block_size=128, max_model_len=1024, kvviz_token_slots=262144,
                      vllm_num_blocks=2048, modelled_num_blocks=2048, modelled_pool_tokens=262144,
                      vllm_pool_tokens=262144, kvviz_logged_tokens=262144, vllm_logged_tokens=262144,
                      layer_groups="all full")
    verdict = "一致" if row.agree else "不一致"
    assert capacity_line(row, "zh") == (
        "tiny                   GQA 4/2                          bf16/bf16   4,096 B/token  块大小 128  "
        "池：vLLM    262,144 模型计算    262,144  日志：vLLM    262,144 模型计算    262,144  "
        f"kvviz 槽位    262,144  {verdict}")


def _dist(p50: float, p90: float) -> Distribution:
    return Distribution(mean=p50, p50=p50, p90=p90, p99=p90)


def test_client_line_and_its_warning_in_both_languages():
    """A client busy 80% of a 2 s run (1.6 s of CPU over 4,000 tokens: 400 µs a token) whose reads waited 30 ms at
    p90 against a 1 s request: both reasons of the rule, each with its numbers."""
    client = ClientOverhead(cpu_s=1.6, busy=0.8, cpu_us_per_token=400.0, read_wait=_dist(0.002, 0.03),
                            headers=_dist(0.0042, 0.005), limits=(BUSY, LATE_READS))
    run = SimpleNamespace(client=client, stats=SimpleNamespace(e2e=SimpleNamespace(p50=1.0)))
    assert client_line(run).splitlines() == [
        "      client: CPU 1.60 s (80% of a core, 400.0 µs/token)  reads waited p50/p90 2.0/30.0 ms  "
        "chunks read together 0%  headers p50 4.2 ms",
        "      warning: the client, not the server, limited this run (its loop was busy 80% of the run, over 75%; "
        "its reads waited 30.0 ms at p90, over 2.5% of a request's 1,000.0 ms); its figures understate the server"]
    assert client_line(run, "zh").splitlines() == [
        "      客户端：CPU 1.60 秒（单核的 80%，每 token 400.0 µs）  读取等待 p50/p90 2.0/30.0 ms  "
        "一起读到的输出块 0%  响应头 p50 4.2 ms",
        "      警告：限制本次运行的是客户端而不是服务器（其事件循环忙碌了运行时间的 80%，超过 75%；其读取在 p90 等待了 "
        "30.0 ms，超过请求耗时 1,000.0 ms 的 2.5%）；其数据低估了服务器"]


def test_rate_line_says_asked_sent_completed_and_the_cap_in_both_languages():
    """10 requests/s asked under a cap of 8 that carries 8 / 1.075 s = 7.44 requests/s: 21 of 32 arrivals held
    back 126.6 ms on average, the rate bounded."""
    stats = SimpleNamespace(rate_asked_per_s=10.0, rate_sent_per_s=7.74, requests_per_s=6.3, cap_rate_per_s=7.44,
                            held_by_cap=21, held_mean_s=0.1266, cap_bound=True, requests=32)
    run = SimpleNamespace(stats=stats, load=SimpleNamespace(concurrency=8))
    assert rate_line(run) == (
        "      open loop: asked 10.00 req/s, sent 7.74, completed 6.30; the cap of 8 in flight held back 21 of 32 "
        "arrivals (mean wait 126.6 ms) and BOUNDED THE RATE: it carries at most 7.44 req/s at these requests' "
        "duration, less than the rate asked")
    assert rate_line(run, "zh") == (
        "      开环：请求速率 10.00 req/s，实际发送 7.74，完成 6.30；并发上限 8 挡住了 32 个到达中的 21 个（平均等待 "
        "126.6 ms），并限制了速率：按这些请求的耗时它最多承载 7.44 req/s，低于请求速率")
    closed = SimpleNamespace(stats=SimpleNamespace(rate_asked_per_s=None))
    assert rate_line(closed) is None, "a closed loop has no rates to say"
