"""The calculator tab's handler: right numbers, valid figures, clear refusals."""

from __future__ import annotations

import pytest

from kvviz.calc.presets import load_preset
from kvviz.ui import figures
from kvviz.ui.calculator import calculate, customise, preset_dims

ARGS = dict(preset="llama-2-7b", source="", batch=16, seq_len=4096, layers=32, kv_heads=32, head_dim=128,
            kv_dtype_name="bf16", accelerator="h100-sxm", mem_util=0.9, block_size=16)


def test_lesson_example_in_the_calculator():
    """The lesson's 32 GiB appears in the summary and the JSON details."""
    r = calculate(**ARGS)
    assert r.details["kv_cache_bytes"] == 34_359_738_368
    assert "32.000 GiB" in r.summary and "34.360 GB" in r.summary
    assert "= 16 × 4096 × 32 × 2 × 32 × 128 × 2" in r.formula


@pytest.mark.parametrize("preset", ["gemma-2-9b", "deepseek-v3", "mistral-7b-v0.1", "gpt2", "qwen2.5-0.5b"])
def test_every_figure_is_valid_plotly(preset):
    """Each figure spec passes plotly's own validation and has titled axes."""
    layers, kv, hd = preset_dims(preset)
    r = calculate(**(ARGS | dict(preset=preset, layers=layers, kv_heads=kv, head_dim=hd)))
    for fig in (r.memory_fig, r.curves_fig, r.attention_fig, r.window_fig, r.roofline_fig):
        plotted = figures.to_plotly(fig)
        if plotted.data:
            assert plotted.layout.xaxis.title.text and plotted.layout.yaxis.title.text is not None


def test_sliders_modify_the_preset():
    """Moving kv_heads from 8 to 1 turns Llama-3-8B's GQA into MQA: an eighth of the cache."""
    base = calculate(**(ARGS | dict(preset="llama-3-8b", kv_heads=8)))
    mqa = calculate(**(ARGS | dict(preset="llama-3-8b", kv_heads=1)))
    assert base.details["kv_cache_bytes"] == 8 * mqa.details["kv_cache_bytes"]
    assert "modified" in mqa.details["model"]["name"]


def test_more_layers_repeat_the_pattern():
    """Gemma-2-2B stretched to 30 layers keeps alternating sliding and full layers."""
    arch = customise(load_preset("gemma-2-2b"), 30, 4, 256)
    assert arch.num_layers == 30 and arch.n_sliding == 15


@pytest.mark.parametrize("change,message", [
    (dict(kv_heads=3), "divide"),
    (dict(batch=0), "batch"),
    (dict(seq_len=float("nan")), "seq_len"),
    (dict(layers=-1), "layers"),
    (dict(mem_util=2), "mem_util"),
    (dict(kv_dtype_name="int3"), "KV dtype"),
    (dict(accelerator="tpu"), "accelerator"),
    (dict(preset="nope"), "unknown preset"),
    (dict(source="/no/such/config.json"), "no such file"),
])
def test_bad_input_is_a_clear_message(change, message):
    """Out-of-range numbers, unknown names and missing files raise ValueError naming the problem."""
    with pytest.raises(ValueError, match=message):
        calculate(**(ARGS | change))
