"""What the batch tab and the life-cycle tab show of a batch (kvviz.ui.batch.run_text's functions and the batch
figures in kvviz.ui.figures), from a real batch of three prompts of different lengths on the bundled tiny model.
Expected values come from the tokenizer and the run's own rows, not from the functions under test."""

from __future__ import annotations

import pytest

from kvviz.engine.batch import BatchRequest, run_batch
from kvviz.engine.loading import load_model
from kvviz.ui import figures
from kvviz.ui.batch import run_figures as brf
from kvviz.ui.batch.run_text import batch_history_rows, batch_markdown, batch_rows

PROMPTS = ("The kernel", "What is a package in the Debian system?", "A")


@pytest.fixture(scope="module")
def batch():
    lm = load_model("tiny")
    return lm, run_batch(lm, BatchRequest(PROMPTS, max_new_tokens=6, ignore_eos=True))


def test_one_row_per_sequence_with_its_padding(batch):
    """Left padding = the longest prompt's tokens - this prompt's, counted with the tokenizer."""
    lm, result = batch
    lengths = [len(lm.tokenizer(p).input_ids) for p in PROMPTS]
    frame = batch_rows(result)
    assert frame["row"].tolist() == [0, 1, 2]
    assert frame["prompt_tokens"].tolist() == lengths
    assert frame["padding"].tolist() == [max(lengths) - n for n in lengths]
    assert frame["new_tokens"].tolist() == [6, 6, 6]


def test_the_history_gets_one_row_per_sequence_and_a_batch_id(batch):
    _, result = batch
    rows, again = batch_history_rows(result), batch_history_rows(result)
    assert [r["row"] for r in rows] == [0, 1, 2] and {r["kind"] for r in rows} == {"batch"}
    assert len({r["batch"] for r in rows}) == 1 and rows[0]["batch"] != again[0]["batch"], "one id per batch"
    assert all(r["batch_size"] == 3 and r["new_tokens"] == 6 for r in rows)
    assert [r["tokens_per_s"] for r in rows] == [pytest.approx(6 / r.end_s) for r in result.rows]


def test_the_headline_says_the_batchs_numbers(batch):
    _, result = batch
    s = result.summary
    text = batch_markdown(result, None)
    assert f"### 3 sequences decoded together: {s.tokens_per_s:,.1f} tokens/s in all" in text
    assert f"left-padded to {s.padded_len} each" in text and f"{sum(s.prompt_tokens)} tokens" in text


def test_the_life_cycle_draws_the_shared_phases_once_and_each_row(batch):
    """One bar each for queued, tokenize and prefill (ending at the batch's TTFT), one decode bar per row from
    the TTFT to the row's end, and one tick per token."""
    _, result = batch
    s = result.summary
    fig = brf.batch_lifecycle(s, result.rows, result.tokens)
    figures.to_plotly(fig)
    shared = fig["data"][:3]
    assert [len(t["y"]) for t in shared] == [1, 1, 1] and len({t["y"][0] for t in shared}) == 1
    assert shared[-1]["base"][0] + shared[-1]["x"][0] == pytest.approx(s.ttft_s * 1e3)
    decode = fig["data"][3]
    assert decode["y"] == ["row 0", "row 1", "row 2"]
    assert decode["x"] == [pytest.approx((r.end_s - r.ttft_s) * 1e3) for r in result.rows]
    assert len(fig["data"][4]["x"]) == 18, "3 rows × 6 tokens"
    low, high = fig["layout"]["xaxis"]["range"]  # from the batch's arrival to just past its last row's end
    assert low == 0 and max(r.end_s for r in result.rows) * 1e3 < high


def test_the_pass_and_cache_figures_hold_the_steps(batch):
    _, result = batch
    steps = result.steps
    for fig in (brf.batch_steps(steps), brf.batch_kv(steps), brf.batch_ttft_parts(result.summary)):
        figures.to_plotly(fig)
    passes = brf.batch_steps(steps)["data"]
    decode = steps[steps["phase"] == "decode"]
    assert passes[0]["y"] == pytest.approx((decode["dt_s"] * 1e3).tolist()) and len(passes[0]["y"]) == 5
    kv = brf.batch_kv(steps)["data"]
    assert kv[0]["y"] == pytest.approx((steps["kv_bytes"] / 2**20).tolist())
    assert kv[0]["y"] == kv[1]["y"], "measured equals predicted at every pass"
    parts = brf.batch_ttft_parts(result.summary)["data"]
    assert sum(p["y"][0] for p in parts) == pytest.approx(result.summary.ttft_s * 1e3)


def test_english_is_the_default_language(batch):
    _, result = batch
    assert batch_markdown(result, None, "en") == batch_markdown(result, None)
    assert batch_rows(result, "en").columns.tolist() == ["row", "prompt_tokens", "padding", "new_tokens", "finish",
                                                          "end_ms", "prompt", "text"]
    assert brf.batch_lifecycle(result.summary, result.rows, result.tokens, "en") == brf.batch_lifecycle(
        result.summary, result.rows, result.tokens)


def test_the_batch_in_chinese(batch):
    """The headline, the table's columns, the history's label and the figures in Chinese (typed by hand), with the
    batch's own numbers."""
    _, result = batch
    s = result.summary
    text = batch_markdown(result, None, "zh")
    assert text.startswith(f"### 3 条序列一起解码：合计 {s.tokens_per_s:,.1f} tokens/s，"
                           f"每条序列 {s.tokens_per_s_per_sequence:,.1f} tokens/s")
    assert f"每行左填充到 {s.padded_len}）" in text and "有缓存" in text
    assert "sequences" not in text and "decode pass" not in text
    assert batch_rows(result, "zh").columns.tolist() == ["行", "提示词 token 数", "填充", "新 token 数", "结束原因",
                                                          "结束时刻 ms", "提示词", "文本"]
    rows = batch_history_rows(result, "zh")
    assert rows[1]["label"] == f"批次 {rows[1]['batch']} 第 1 行" and rows[1]["kind"] == "batch"
    life = brf.batch_lifecycle(s, result.rows, result.tokens, "zh")
    figures.to_plotly(life)
    assert life["layout"]["title"]["text"] == "批次的生命周期：共享阶段只画一次，然后每条序列一行"
    assert life["data"][0]["y"] == ["3 条序列的批次（共享）"] and life["data"][0]["name"].startswith("排队 ")
    assert life["data"][3]["y"] == ["第 0 行", "第 1 行", "第 2 行"]
    steps = brf.batch_steps(result.steps, "zh")
    assert steps["layout"]["title"]["text"] == "批次的每次前向" and steps["data"][0]["name"] == "解码前向"
    assert brf.batch_kv(result.steps, "zh")["data"][2]["name"] == "其中的填充"
    parts = brf.batch_ttft_parts(s, "zh")
    figures.to_plotly(parts)
    assert [p["name"] for p in parts["data"]] == ["排队", "分词", "预填充（3 行）"]
    assert parts["layout"]["title"]["text"] == f"批次的首 token 延迟（TTFT）{s.ttft_s * 1e3:,.2f} ms，按成因拆分"


def test_the_empty_rows_table_is_headed_by_its_columns():
    """Before any batch, the table shows the columns it will hold (typed by hand), in the page's language, not
    gradio's default headers 1 2 3."""
    assert batch_rows(None, "en").columns.tolist() == ["row", "prompt_tokens", "padding", "new_tokens", "finish",
                                                        "end_ms", "prompt", "text"]
    assert batch_rows(None, "zh").columns.tolist()[:2] == ["行", "提示词 token 数"]
    assert batch_rows(None).empty
