"""The Serving tab in Chinese: its text and figures say the same numbers as in English, in words typed here by
hand (not computed with t()), and a language kvviz does not speak falls back to English."""

from __future__ import annotations

import pandas as pd

from kvviz.i18n import CATALOG
from kvviz.serving.metrics_reader import server_view
from kvviz.serving.stats import Slo
from kvviz.ui.serving.figures import (
    client_vs_server,
    engine_vs_server,
    kv_usage_over_time,
    prefix_cache,
    request_timeline,
    requests_over_time,
    sweep_throughput,
)
from kvviz.ui.serving.text import engine_vs_server_markdown, prefix_markdown, run_markdown, sweep_markdown
from tests.ui import test_serving_figures as figs
from tests.ui.test_serving_text import level, prefix_run, result, samples, sweep_frame


def test_the_run_table_in_chinese():
    """The hand-built run of test_serving_text (2 of 3 completed, goodput 0.50) with its headers in Chinese."""
    text = run_markdown(result(slo=Slo(ttft_s=0.15, tpot_s=0.2)), lang="zh")
    assert "| 完成 | 失败 | 输出 tokens/s | 请求/s | 有效吞吐（goodput，满足 SLO 的请求/s） | 时长 |" in text
    assert "| 2 / 3 | 1 | 4.0 | 1.00 | 0.50（TTFT ≤ 150.00 ms，TPOT ≤ 200.00 ms） | 2.00 s |" in text
    assert "| TTFT（首 token 延迟） | 150.00 ms | 150.00 ms | 190.00 ms | 199.00 ms |" in text
    assert "**1 个请求失败**；第一个：" in text


def test_the_servers_view_in_chinese():
    text = run_markdown(result(samps=samples()), lang="zh")
    assert "**服务端视角**（其 /metrics）：每个请求平均排队 10.00 ms、预填充 50.00 ms、解码 300.00 ms；" in text
    assert "服务端 TTFT 均值 120.00 ms，客户端测得 150.00 ms（差值来自 HTTP、分词和流式传输）" in text
    assert "1 次抢占（preemption）；最多 2 个运行中、2 个排队；KV Cache 峰值占用 3.00%（kvviz 预测 2.90%）。" in text


def test_the_sweep_in_chinese():
    """The same sweep as test_the_sweep_answers_q5_with_its_own_numbers: 1 → 16 in flight, 100 → 302 tokens/s."""
    frame = sweep_frame([100.0, 180, 290, 300, 302])
    text = sweep_markdown(frame, [level(1, 0), level(8, 3), level(16, 9, queue_sum=2.0)], lang="zh")
    assert "并发从 1 增加到 16 时，总输出吞吐从 100 变为 302 tokens/s（3.0×）" in text
    assert "（每个用户的解码速度从 200 变为 50 tokens/s）" in text
    assert "吞吐在并发约 4 时停止增长（290 tokens/s）" in text
    assert "服务端在这些并发下有请求排队：并发 8（最多 3 个）、并发 16（最多 9 个）" in text
    assert "并发 16 时，服务端平均每个请求排队 200.00 ms、预填充用时 30.00 ms" in text
    assert sweep_markdown(frame.iloc[:1], [], lang="zh") == "只有一级（并发 1）：问题 5 和 6 的权衡至少要两级才能看出。"
    assert sweep_markdown(None, [], lang="zh") == "还没有扫描结果。"


def test_the_prefix_and_the_engine_comparison_in_chinese():
    text = prefix_markdown(prefix_run(0, 4800, 0.8, 0.12), prefix_run(3584, 4096, 0.16, 0.03), lang="zh")
    assert "有共享前缀时，服务端查找的提示词 token 中有 87.5% 已在前缀缓存中（没有共享前缀时：0.0%）。" in text
    assert "TTFT p50 从 120.00 ms 变为 30.00 ms（-90.0 ms，-75%）。" in text
    assert "服务端的平均预填充时间从 100.00 ms 变为 20.00 ms（-80.0 ms，-80%）。" in text
    text = engine_vs_server_markdown(result(duration_s=2.0), result(duration_s=4.0), lang="zh")
    assert text.startswith("**同样的负载：并发 2，3 个请求，每个 4 个 token。** vLLM（连续批处理）：4 tokens/s")
    assert "批处理让每秒 token 数达到原来的 2.0×" in text and "等待前面 1 个请求完成的时间" in text


def test_figures_in_chinese():
    """Titles, axes, legend names and empty states in Chinese; the numbers in them unchanged."""
    recs = figs.records()
    fig = requests_over_time(figs.samples(), "zh")
    assert fig["layout"]["title"]["text"] == "运行期间的请求数"
    assert fig["layout"]["xaxis"]["title"]["text"] == "自运行开始的秒数"
    assert {d["name"] for d in fig["data"]} <= {"服务端：运行中（在批中）", "服务端：等待中（排队）",
                                                "客户端：进行中的请求"}
    assert kv_usage_over_time([], "zh")["layout"]["annotations"][0]["text"].startswith("服务端没有报告 KV Cache 占用")
    timeline = request_timeline([*recs, figs.failed()], lang="zh")
    assert timeline["layout"]["title"]["text"] == "请求的一生：先等待首 token，再流式输出"
    assert [d["name"] for d in timeline["data"]][:3] == [
        "发送 → 响应被接受（HTTP）", "接受 → 首 token（排队 + 预填充）", "首 token → 完成（流式输出）"]
    means = client_vs_server(recs, server_view(figs.samples()), "zh")
    assert means["layout"]["title"]["text"] == "平均每个请求的时间花在哪里：客户端与服务端"
    assert means["data"][0]["name"].startswith("客户端：发送 → 接受 ")
    assert sweep_throughput(figs.sweep(), "zh")["layout"]["xaxis"]["title"]["text"] == "并发请求数（对数坐标）"
    prefix = prefix_cache(figs.prefix_run(0, 4800, 0.8, 0.12), figs.prefix_run(3584, 4096, 0.16, 0.03), "zh")
    assert [d["name"] for d in prefix["data"]] == ["无共享前缀", "有共享前缀"]
    assert prefix["layout"]["title"]["text"].startswith("共享前缀省下了什么（前缀缓存命中：")
    engine = engine_vs_server(pd.DataFrame(), "zh")
    assert engine["layout"]["annotations"][0]["text"] == "还没有可比较的内容"


def test_an_unknown_language_is_english():
    frame = sweep_frame([100.0, 180])
    assert sweep_markdown(frame, [], lang="fr") == sweep_markdown(frame, [])
    assert requests_over_time(figs.samples(), "xx") == requests_over_time(figs.samples())


def test_plotly_braces_survive_the_catalogue():
    """Hover texts filled with fields write %{{x}} in the catalogue and come out as plotly's %{x}; the others are
    used as they are, so no catalogue text of this area leaves a doubled brace where it is not formatted."""
    fig = request_timeline(figs.records(), lang="zh")
    assert fig["data"][0]["hovertemplate"].startswith("请求 %{y}：")
    for lang in ("en", "zh"):
        unformatted = [k for k, v in CATALOG[lang].items() if k.startswith("serving.fig.") and "%{{" in v
                       and not any(f in v for f in ("{label}", "{part}", "{metric}", "{name}"))]
        assert not unformatted, unformatted
