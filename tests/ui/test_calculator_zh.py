"""The calculator in Chinese: its summary, figures, formulas, refusals and text report, with the expected texts typed
out by hand, and no English sentence left where a person reads Chinese."""

from __future__ import annotations

import json
import re

import gradio as gr
import pytest

from kvviz.calc.presets import load_preset
from kvviz.calc.report import MemoryQuery, describe_layers, formula_text, memory_report, render_text
from kvviz.engine.hosting import HostPolicy
from kvviz.ui.calculator.answer import calculate, preset_dims
from kvviz.ui.calculator.tab import calculator_tab
from kvviz.ui.lang import language_switch

ARGS = dict(preset="llama-2-7b", config="", batch=16, seq_len=4096, layers=32, kv_heads=32, head_dim=128,
            kv_dtype="bf16", gpu="h100-sxm", mem_util=0.9, block_size=16)
# Three or more English words in a row, separated by spaces: a sentence left untranslated. Identifiers
# (kv_heads, seq_len), names with digits (H100, Qwen2.5) and units after numbers are not words here.
ENGLISH_RUN = re.compile(r"(?<![\w/.-])[A-Za-z]+(?:'[a-z]+)?(?: [A-Za-z]+(?:'[a-z]+)?){2,}(?![\w/.-])")


def english_runs(text: str) -> list[str]:
    """The runs of 3+ English words in `text`."""
    return ENGLISH_RUN.findall(text)


def test_the_helper_finds_english_sentences():
    """The helper flags a sentence and passes identifiers, units, numbers and model names."""
    assert english_runs("- note: the roofline bounds are for one GPU") == ["the roofline bounds are for one GPU"]
    assert english_runs("batch 16 × seq_len 4,096，bf16；H100 SXM 上 KV Cache 1,126 tokens/s，gated DeltaNet") == []


@pytest.fixture(scope="module")
def kv_memory():
    """The tab's /kv_memory handler, built as the page builds it."""
    with gr.Blocks():
        tab = calculator_tab(HostPolicy(), language_switch())
    return tab.answer


def test_summary_headline_in_chinese(kv_memory):
    """The lesson's example: the model line, the KV cache headline and the query line, typed by hand."""
    summary = kv_memory(**ARGS, lang="zh")[0]
    lines = summary.splitlines()
    assert lines[0] == "**llama-2-7b** — llama，MHA：32 个头，各有自己的 K/V，head_dim 128，32 层"
    assert lines[2] == "### KV Cache：32.000 GiB = 34.360 GB"
    assert lines[3] == "batch 16 × seq_len 4,096，bf16；所有层合计每 token 524,288 字节"
    assert "- seq_len 4,096 时最大 batch：**26**；token 槽位：**109,568**" in lines
    assert "- 这个 batch × seq_len 放得下" in lines


def test_figures_in_chinese():
    """Titles, axes, legend names and notes of the figures, typed by hand."""
    r = calculate(**ARGS, lang="zh")
    assert r.memory_fig["layout"]["title"]["text"] == "设备上放得下什么"
    assert r.memory_fig["layout"]["xaxis"]["title"]["text"] == "GiB（2^30 字节）"
    assert [d["name"] for d in r.memory_fig["data"]] == ["权重", "KV Cache", "运行时预留"]
    assert r.curves_fig["layout"]["title"]["text"] == "KV Cache 随序列长度和 batch 线性增长"
    assert r.roofline_fig["layout"]["title"]["text"] == "屋顶线模型（roofline）：预填充受算力限制，解码受带宽限制"
    assert [d["name"] for d in r.roofline_fig["data"]][2:] == ["预填充", "解码"]
    assert r.attention_fig["data"][0]["x"] == ["MHA", "MQA"]
    assert r.window_fig["layout"]["annotations"][0]["text"] == "没有滑动窗口层或分块层：每个注意力层都保留全部 token"
    gemma = calculate(**_preset("gemma-2-9b"), lang="zh")
    assert gemma.window_fig["layout"]["title"]["text"] == "滑动窗口层长到窗口大小就不再增长"
    assert [a["text"] for a in gemma.window_fig["layout"]["annotations"]] == ["窗口 4,096"]
    assert gemma.attention_fig["data"][0]["x"] == ["MHA", "GQA（本模型）", "MQA"]


def test_a_refusal_in_chinese(kv_memory):
    """kv_heads that do not divide the query heads: the page's message in Chinese, typed by hand."""
    with pytest.raises(gr.Error) as refused:
        kv_memory(**(ARGS | dict(kv_heads=3)), lang="zh")
    assert refused.value.message == "kv_heads 须整除模型的 32 个查询头；3 不能整除"
    with pytest.raises(gr.Error) as refused:
        kv_memory(**(ARGS | dict(kv_heads=3)))
    assert refused.value.message == "kv_heads must divide the model's 32 query heads; 3 does not", "English by default"


def _preset(name: str, **changes) -> dict:
    layers, kv, hd = preset_dims(name)
    return ARGS | dict(preset=name, layers=layers, kv_heads=kv, head_dim=hd) | changes


@pytest.mark.parametrize("args", [
    ARGS,
    _preset("qwen3-next-80b-a3b", tp=4, dp=2),  # a state beside the KV, KV heads copied, replicas
    _preset("deepseek-v3", tp=8, pp=4, seq_len=200_000),  # MLA, beyond the context, does not fit
    _preset("gemma-2-9b", kv_heads=4),  # sliding window, modified by a slider
    _preset("llama-4-scout", seq_len=20_000),  # chunked layers
    _preset("llama-3-70b", gpu="l4"),  # no room for a KV cache
], ids=["llama-2-7b", "qwen3-next", "deepseek-v3", "gemma-2", "llama-4", "no-room"])
def test_no_english_sentence_in_the_chinese_answer(kv_memory, args):
    """kv_memory(lang="zh"): its summary and formulas, and every figure's texts, have no run of 3+ English words."""
    summary, formula, *plots, details = kv_memory(**args, lang="zh")
    assert english_runs(summary) == [], summary
    assert english_runs(formula) == [], formula
    for p in plots:
        fig = json.loads(p.plot)
        texts = [fig["layout"]["title"]["text"], fig["layout"]["xaxis"]["title"]["text"],
                 fig["layout"]["yaxis"]["title"]["text"], *(a["text"] for a in fig["layout"].get("annotations", [])),
                 *(str(d.get("name", "")) for d in fig["data"]), *(t for d in fig["data"] for t in d.get("text", []))]
        assert english_runs(" | ".join(texts)) == [], texts
    assert details["notes"] == kv_memory(**args)[-1]["notes"], "the JSON stays English"


def test_text_report_in_chinese():
    """python -m kvviz memory --lang zh: the report's sections in Chinese, typed by hand; English is the default."""
    a = load_preset("llama-3-70b")
    r = memory_report(a, MemoryQuery(batch=4, seq_len=8192, tp=4, pp=2))
    text = render_text(r, lang="zh")
    assert "分页分配（block_size 16，同 vLLM）" in text
    assert "部署：tp 4 × pp 2 × dp 1 = 8 块 GPU（H100 SXM）" in text
    assert "  batch 4 × seq_len 8,192 放得下：是" in text
    assert english_runs(text) == [], english_runs(text)
    assert render_text(r) == render_text(r, lang="en") and "Paged allocation (block_size 16, as vLLM)" in render_text(r)


def test_layers_and_formulas_in_chinese():
    """describe_layers and formula_text in Chinese, typed by hand."""
    assert describe_layers(load_preset("gemma-2-9b"), "zh") == "42 层（21 层全注意力；21 层滑动窗口，窗口 4,096）"
    r = memory_report(load_preset("llama-2-7b"), MemoryQuery(batch=16, seq_len=4096))
    assert formula_text(r.kv.formula, "zh").splitlines()[2:] == [
        "  = 34,359,738,368 字节", "  = 32.000 GiB（2^30 字节）", "  = 34.360 GB（10^9 字节）"]
    assert formula_text(r.capacity.formula, "zh").startswith("KV 预算: accelerator_memory × mem_util − weights")
