"""What the live-generation, comparison, lifecycle and history tabs say in Chinese, from the known numbers of
test_present: every expected string here is typed out by hand, not computed with kvviz.i18n.t."""

from __future__ import annotations

import pytest

from kvviz.engine.request import MODE_LABELS, mode_label
from kvviz.ui.compare.text import agreement, compare_verdict, static_verdict
from kvviz.ui.figures import to_plotly
from kvviz.ui.generation.figures import decode_bandwidth, lifecycle, step_work, token_latency, ttft_parts
from kvviz.ui.generation.history import RunHistory
from kvviz.ui.generation.text import final_metrics, time_limit_message
from tests.ui.test_compare_figures import prediction
from tests.ui.test_present import LOADED, comparison, finished_record, static_run


def test_time_limit_in_chinese():
    """The refusal and the note under a stopped run, in the host's seconds."""
    assert time_limit_message(120, "zh") == "已因时间上限而停止：本演示每个请求最多运行 120 秒"
    assert time_limit_message(0.5, "zh-CN") == "已因时间上限而停止：本演示每个请求最多运行 0.5 秒"
    assert final_metrics(finished_record(), 8, "zh").endswith(
        "\n\n**已因时间上限而停止：本演示每个请求最多运行 8 秒。**")


def test_metrics_in_chinese():
    """The table's header, the run's line and the prefill/decode explanation, with the run's own numbers."""
    lines = final_metrics(finished_record(), None, "zh").splitlines()
    assert lines[0] == "| TTFT | TPOT | tokens/s | 解码 tokens/s | ITL p50 / p90 / p99 | 排队 | 预填充 | 带宽 |"
    assert lines[2].endswith("| 40.00 ms | 2.00 GB/s，为上限 8.0 GB/s 的 25% |")
    assert lines[4] == ("运行 7：tiny，设备 cpu，精度 fp32，有缓存模式；提示词 10 个 token，新生成 5 个，"
                        "结束原因 max_new_tokens。")
    assert lines[5].startswith("预填充用 40.00 ms 读完 10 个提示词 token（250 tokens/s）；之后解码每 10.00 ms 生成一个 "
                               "token（100 tokens/s）。预填充每秒处理的 token 是解码的 2.5 倍")
    assert lines[6] == "设备工作进程在这台 CPU 上用 2 个 torch 线程运行这个模型。"


def test_compare_verdict_in_chinese():
    """The headline, agreement, what ran where and the modes' table, in Chinese with the same numbers."""
    assert compare_verdict(comparison(), LOADED, "zh") == (
        "### 有缓存快 3.50×（每个解码 token 快 4.00×）\n\n"
        "两者生成的 token 完全相同。tiny，设备 cpu，精度 fp32。\n\n"
        "| 模式 | TTFT | TPOT | 解码 tokens/s | 耗时（不含排队和编译） | × 无缓存 | 带宽（解码） | 占上限 |\n"
        "|---|---|---|---|---|---|---|---|\n"
        "| 有缓存 | 50.00 ms | 10.00 ms | 100.0 | 89.00 ms | 3.50× | 2.00 GB/s | 上限 8.0 GB/s 的 25% |\n"
        "| 无缓存 | 50.00 ms | 40.00 ms | 25.0 | 311.50 ms | 1.00× | n/a | n/a |")


def test_static_verdict_in_chinese():
    assert static_verdict(comparison(static=static_run()), "zh") == (
        "**有缓存（静态缓存 + 编译）**：每个解码 token 的速度是普通有缓存循环的 2.00×；生成的 token 与有缓存循环相同；"
        "编译解码步用了 12.3 s，不计入它的耗时。它的缓存在第一步之前就按 64 个 token 分配好。")
    verdict = compare_verdict(comparison(static=static_run()), LOADED, "zh")
    assert "普通循环每个 token 读 20.0 MB" in verdict and "光是这次读取就要 2.50 ms：这是 TPOT 的下限" in verdict


@pytest.mark.parametrize("identical,divergence,sentence", [
    (True, None, "两者生成的 token 完全相同。"),
    (False, 3, "两者的 token 在位置 3 处出现分歧。"),
    (False, None, "在两者都运行到的部分 token 一致；其中一次运行提前结束。"),
])
def test_agreement_in_chinese(identical, divergence, sentence):
    assert agreement(comparison(identical, divergence), "zh") == sentence


def test_mode_labels():
    """English names are the engine's own (MODE_LABELS); Chinese ones are translated; an unknown mode as it is."""
    assert {m: mode_label(m) for m in MODE_LABELS} == MODE_LABELS
    assert [mode_label(m, "zh") for m in ("cached", "uncached", "static")] == \
        ["有缓存", "无缓存", "有缓存（静态缓存 + 编译）"]
    assert mode_label("other", "zh") == "other"


def test_comparison_figures_in_chinese():
    """Titles, bars, legend names and the limit's label of the comparison's figures."""
    bandwidth = to_plotly(decode_bandwidth(comparison(static=static_run()).runs, "zh"))
    assert bandwidth.layout.title.text == "解码带宽：实测与设备上限"
    assert list(bandwidth.data[0].x) == ["有缓存", "无缓存", "有缓存（静态缓存 + 编译）"]
    assert list(bandwidth.data[0].text) == ["上限的 25%", "n/a", "上限的 60%"]
    assert bandwidth.layout.annotations[0].text == "上限 8.0 GB/s"
    work = to_plotly(step_work(prediction(static=False), "zh"))
    assert [t.name for t in work.data] == ["有缓存（预测）", "无缓存（预测）"]
    assert work.layout.title.text == "每步计算量（预测）"


def test_run_figures_in_chinese():
    """One run's latency, life cycle and TTFT by cause: titles, axes and legend names in Chinese."""
    record = finished_record()
    latency = to_plotly(token_latency(record.frame, lang="zh"))
    assert latency.layout.title.text == "每 token 延迟" and latency.layout.xaxis.title.text == "输出 token 序号"
    assert [t.name for t in latency.data] == ["有缓存：解码", "有缓存：首 token（TTFT）"]
    life = to_plotly(lifecycle(record.phases, record.frame, "zh"))
    assert life.layout.title.text == "请求生命周期"
    assert [t.name for t in life.data] == \
        ["排队 0.00 ms", "分词 0.00 ms", "预填充 0.00 ms", "解码 90.00 ms", "输出的 token"]
    assert life.layout.annotations[0].text == "首 token 50.00 ms "
    parts = to_plotly(ttft_parts(record.phases, record.frame, "zh"))
    assert parts.layout.title.text == "TTFT 50.00 ms，按原因拆分"
    assert [t.name for t in parts.data] == ["排队", "分词", "预填充 + 首次采样"]


def test_run_figures_in_english_are_unchanged():
    """English figures keep their titles and names."""
    record = finished_record()
    assert to_plotly(lifecycle(record.phases, record.frame)).layout.title.text == "Request life cycle"
    assert [t.name for t in to_plotly(ttft_parts(record.phases, record.frame)).data] == \
        ["queue", "tokenize", "prefill + first sample"]
    assert to_plotly(token_latency(record.frame)).layout.title.text == "Per-token latency"


def test_history_headers_follow_the_language():
    """The history table names its columns in the page's language; English keeps the keys (the CSV's columns)."""
    history = RunHistory().with_run(finished_record(run_id=3))
    assert list(history.table().columns[:5]) == ["run", "model", "mode", "finish", "prompt"]
    zh = history.table("zh")
    assert list(zh.columns[:5]) == ["运行", "模型", "模式", "结束原因", "提示词"]
    assert zh["运行"].tolist() == [3] and "TTFT（s）" in zh and "新 token 数" in zh
    assert list(RunHistory().with_row({"run": 1, "unknown_key": 2}).table("zh").columns) == ["运行", "unknown_key"]
