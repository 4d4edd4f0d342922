"""The batch sweep's figures: valid plotly, the frame's own numbers in their traces, the limits drawn where they
fall on the range and named where they do not."""

from __future__ import annotations

import pandas as pd
import pytest

from kvviz.base.units import MIB
from kvviz.ui.batch import sweep_figures as bf
from kvviz.ui.figures import to_plotly
from tests.batch_frames import hand_frame

FIGURES = (bf.step_time, bf.throughput, bf.prefill_time, bf.kv_bytes, bf.overview)


def _trace(fig: dict, name: str) -> dict:
    found = [t for t in fig["data"] if t["name"] == name]
    assert len(found) == 1, [t["name"] for t in fig["data"]]
    return found[0]


@pytest.mark.parametrize("draw", FIGURES)
def test_every_figure_is_valid_plotly_with_log_batch_axis(draw):
    """plotly accepts every spec; B is on a log axis."""
    fig = draw(hand_frame())
    to_plotly(fig)
    assert fig["layout"]["xaxis"]["type"] == "log"


@pytest.mark.parametrize("draw", FIGURES)
def test_empty_sweep_draws_a_message(draw):
    """No rows: an empty figure that says why."""
    fig = draw(hand_frame().iloc[0:0])
    assert fig["data"] == [] and "batch sweep" in fig["layout"]["annotations"][0]["text"]


def test_step_time_holds_measured_and_predicted_ms():
    """Measured median steps and the roofline's bound, both in ms, at the frame's batches; the bars span min-max."""
    f = hand_frame()
    fig = bf.step_time(f)
    measured = _trace(fig, "measured step (median)")
    assert measured["x"] == [1, 2, 4, 8, 16, 32, 64]
    assert measured["y"] == pytest.approx(list(f["step_s"] * 1e3))
    assert measured["error_y"]["array"] == pytest.approx(list((f["step_max_s"] - f["step_s"]) * 1e3))
    predicted = _trace(fig, "roofline: max(bytes / bandwidth, FLOPs / peak)")
    assert predicted["y"] == pytest.approx(list(f["step_s_predicted"] * 1e3))


def test_compute_bound_batch_drawn_inside_the_range_and_named_outside():
    """Sweeping to 64, the rule stands at B=22; sweeping to 8, the note names B=22 as beyond the sweep."""
    rule = _trace(bf.step_time(hand_frame()), "compute-bound batch (roofline)")
    assert rule["x"] == [22, 22] and "B=22" in rule["text"][1]
    short = bf.step_time(hand_frame(batches=(1, 2, 4, 8)))
    assert all(t["name"] != "compute-bound batch (roofline)" for t in short["data"])
    assert "compute-bound from B=22 (roofline), beyond the sweep" in short["layout"]["title"]["text"]


def test_throughput_holds_both_rates():
    """Total tokens/s = B / step and per sequence = 1 / step, as the frame has them."""
    f = hand_frame()
    fig = bf.throughput(f)
    assert _trace(fig, "total tokens/s, measured")["y"] == pytest.approx(list(f["batch"] / f["step_s"]))
    assert _trace(fig, "per sequence, measured")["y"] == pytest.approx(list(1 / f["step_s"]))
    assert _trace(fig, "total tokens/s, roofline")["y"] == list(f["tokens_per_s_total_predicted"])


def test_prefill_holds_ttft_in_ms():
    f = hand_frame()
    assert _trace(bf.prefill_time(f), "prefill, measured")["y"] == pytest.approx(list(f["prefill_s"] * 1e3))


def test_kv_holds_measured_on_predicted_and_the_budget():
    """KV in MiB, measured on the prediction; the budget's line; the memory limit named (it is 208,595, far off)."""
    f = hand_frame()
    fig = bf.kv_bytes(f)
    assert _trace(fig, "KV measured (cache tensors)")["y"] == pytest.approx(list(f["kv_bytes"] / MIB))
    assert _trace(fig, "KV predicted (memory model)")["y"] == pytest.approx(list(f["kv_bytes_predicted"] / MIB))
    budget = next(t for t in fig["data"] if t["name"].startswith("KV budget"))
    assert budget["y"] == pytest.approx([20_505_795_584 / MIB] * 2)
    assert "memory runs out after B=208,595" in fig["layout"]["title"]["text"]


def test_memory_limit_rule_when_it_falls_on_the_range():
    """A sweep whose memory runs out after B=40 shows the rule at 40 and no note."""
    f = hand_frame().assign(memory_limit_batch=40)
    fig = bf.kv_bytes(f)
    assert _trace(fig, "memory-limit batch (calculator)")["x"] == [40, 40]
    assert "<sup>" not in fig["layout"]["title"]["text"]


def test_overview_has_four_panels_per_model_and_each_legend_entry_once():
    """Two models: eight panels, each trace on its own axes, a legend entry per kind of line (budgets differ)."""
    two = pd.concat([hand_frame(), hand_frame(batches=(1, 2, 4), model="other")], ignore_index=True)
    fig = bf.overview(two)
    to_plotly(fig)
    assert {t["xaxis"] for t in fig["data"]} == {"x", *(f"x{k}" for k in range(2, 9))}
    shown = [t["name"] for t in fig["data"] if t["showlegend"]]
    assert len(shown) == len(set(shown))
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert len(titles) == 8 and titles[0].startswith("tiny: Decode step") and titles[4].startswith("other: ")
    other_step = next(t for t in fig["data"] if t["xaxis"] == "x5" and t["name"] == "measured step (median)")
    assert other_step["x"] == [1, 2, 4]


@pytest.mark.parametrize("draw", FIGURES)
def test_english_is_the_default_language(draw):
    """lang="en" and no lang draw the same figure."""
    assert draw(hand_frame(), lang="en") == draw(hand_frame())


def test_chinese_titles_axes_and_legend():
    """Titles, axes, legend names and notes in Chinese (typed by hand); the numbers are the same."""
    f = hand_frame()
    step = bf.step_time(f, lang="zh")
    assert step["layout"]["title"]["text"] == "解码步耗时"
    assert step["layout"]["xaxis"]["title"]["text"] == "批大小 B（对数）"
    assert step["layout"]["yaxis"]["title"]["text"] == "每个解码步 ms（对数）"
    assert _trace(step, "实测步耗时（中位数）")["y"] == pytest.approx(list(f["step_s"] * 1e3))
    assert _trace(step, "计算受限的批次（屋顶线）")["text"][1] == "从 B=22 起计算受限 "
    short = bf.step_time(hand_frame(batches=(1, 2, 4, 8)), lang="zh")
    assert short["layout"]["title"]["text"] == "解码步耗时<br><sup>从 B=22 起计算受限（屋顶线），超出扫描范围</sup>"
    kv = bf.kv_bytes(f, lang="zh")
    assert kv["layout"]["title"]["text"] == "最后一步之后的 KV Cache<br><sup>B=208,595 之后内存耗尽（计算器）</sup>"
    assert [t["name"] for t in kv["data"]] == ["KV 预测（显存模型）", "KV 实测（缓存张量）",
                                              "KV 预算（计算器）：19.1 GiB"]
    assert {t["name"] for t in bf.throughput(f, lang="zh")["data"]} == {
        "总 tokens/s，实测", "总 tokens/s，屋顶线", "每条序列，实测", "每条序列，屋顶线"}
    empty = bf.prefill_time(f.iloc[0:0], lang="zh")
    assert empty["layout"]["annotations"][0]["text"] == "运行一次批处理扫描即可看到此图"
    overview = bf.overview(f, lang="zh")
    to_plotly(overview)
    assert overview["layout"]["title"]["text"] == "批处理扫描：实测与屋顶线模型对比"
    assert overview["layout"]["annotations"][1]["text"] == "tiny: tokens/s：总计与每条序列"
