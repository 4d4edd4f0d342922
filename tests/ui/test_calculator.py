"""The calculator tab's handler: right numbers, valid figures, clear refusals."""

from __future__ import annotations

import json

import pytest

from kvviz.calc.presets import load_preset
from kvviz.ui import figures
from kvviz.ui.calculator.answer import calculate, customise, preset_dims

ARGS = dict(preset="llama-2-7b", config="", batch=16, seq_len=4096, layers=32, kv_heads=32, head_dim=128,
            kv_dtype="bf16", gpu="h100-sxm", mem_util=0.9, block_size=16)
TITLES = {  # figure: (title, x axis, y axis), as the page shows them whatever the model
    "memory_fig": ("What fits on the device", "GiB (2^30 bytes)", ""),
    "curves_fig": ("KV cache grows linearly with sequence length and batch", "seq_len (tokens)", "KV cache (GiB)"),
    "attention_fig": ("Same model, other attention shapes", "attention", "KV cache (GiB)"),
    "roofline_fig": ("Roofline: prefill is compute-bound, decode memory-bound", "arithmetic intensity (FLOP/byte)",
                     "attainable FLOP/s"),
}


def test_lesson_example_in_the_calculator():
    """The lesson's 32 GiB appears in the summary and the JSON details."""
    r = calculate(**ARGS)
    assert r.details["kv_cache_bytes"] == 34_359_738_368
    assert "32.000 GiB" in r.summary and "34.360 GB" in r.summary
    assert "= 16 × 4096 × 32 × 2 × 32 × 128 × 2" in r.formula


def titles(fig) -> tuple[str, str, str]:
    return fig.layout.title.text, fig.layout.xaxis.title.text, fig.layout.yaxis.title.text


@pytest.mark.parametrize("preset,window", [("gemma-2-9b", 4096), ("deepseek-v3", None), ("mistral-7b-v0.1", 4096),
                                           ("gpt2", None), ("qwen2.5-0.5b", None)])
def test_every_figure_is_valid_plotly_with_its_titles(preset, window):
    """Each figure spec passes plotly's own validation, with its title and axis titles, and draws the report's
    numbers; the window figure draws the window where the model has one and says why it is blank otherwise."""
    layers, kv, hd = preset_dims(preset)
    r = calculate(**(ARGS | dict(preset=preset, layers=layers, kv_heads=kv, head_dim=hd)))
    for name, expected in TITLES.items():
        assert titles(figures.to_plotly(getattr(r, name))) == expected, name
    memory = figures.to_plotly(r.memory_fig)
    assert [t.name for t in memory.data] == ["weights", "KV cache", "runtime reserve"]
    assert memory.data[1].x[0] == pytest.approx(r.details["kv_cache_bytes"] / 2**30)
    curves = figures.to_plotly(r.curves_fig)
    assert [t.name for t in curves.data][:4] == ["batch 1", "batch 4", "batch 16 (yours)", "batch 64"]
    assert curves.data[4].x == (4096,) and curves.data[4].y[0] == pytest.approx(r.details["kv_cache_bytes"] / 2**30)
    window_fig = figures.to_plotly(r.window_fig)
    notes = [a.text for a in window_fig.layout.annotations]
    if window:
        assert titles(window_fig) == ("Sliding-window layers stop growing at the window", "seq_len (tokens)",
                                      "KV cache (GiB)")
        assert notes == [f"window {window:,}"]
    else:
        assert not window_fig.data
        assert notes == ["no sliding-window or chunked layers: every attention layer keeps every token"]


def test_several_gpus_draw_one_gpu():
    """Llama-3-70B on tp=8: the memory bar is one GPU's (16.43 GiB of weights, 2.5 GiB of KV for batch 8 × 8192),
    the KV curves are one GPU's share under one GPU's budget, and the summary says per GPU and in all."""
    r = calculate(**(ARGS | dict(preset="llama-3-70b", layers=80, kv_heads=8, head_dim=128, batch=8, seq_len=8192,
                                 tp=8)))
    memory = figures.to_plotly(r.memory_fig)
    assert memory.data[0].y == ("one H100 SXM of 8",)
    assert memory.data[0].x[0] == pytest.approx(17_640_734_720 / 2**30)  # 8,820,367,360 params × 2 bytes
    assert memory.data[1].x[0] == pytest.approx(8 * 8192 * 80 * 2 * 1 * 128 * 2 / 2**30) == 2.5
    curves = figures.to_plotly(r.curves_fig)
    assert titles(curves)[2] == "KV cache on one GPU (GiB)"
    assert [a.text for a in curves.layout.annotations] == ["KV budget on one GPU"]
    assert [t.name for t in curves.data] == ["batch 1", "batch 4", "batch 8 (yours)", "batch 16", "batch 64",
                                             "yours: batch 8 × seq_len 8,192 = 2.50 GiB"]
    assert curves.data[2].line.width > curves.data[0].line.width
    assert curves.data[5].y == (2.5,)  # the memory bar's KV, by hand above: the point lies on its own line
    batch_1 = curves.data[0]
    assert batch_1.y[-1] == pytest.approx(batch_1.x[-1] * 40_960 / 2**30)  # one GPU: 40,960 bytes a token
    assert "**On 8 × H100 SXM** (tp 8 × pp 1 × dp 1" in r.summary and "1 of 8 KV heads" in r.summary
    assert "largest batch at seq_len 8,192: **158**" in r.summary


def test_sliders_modify_the_preset():
    """Moving kv_heads from 8 to 1 turns Llama-3-8B's GQA into MQA: an eighth of the cache."""
    base = calculate(**(ARGS | dict(preset="llama-3-8b", kv_heads=8)))
    mqa = calculate(**(ARGS | dict(preset="llama-3-8b", kv_heads=1)))
    assert base.details["kv_cache_bytes"] == 8 * mqa.details["kv_cache_bytes"]
    assert "modified" in mqa.details["model"]["name"]


def test_what_the_sliders_change_is_a_field_beside_the_name():
    """customise keeps the model's name and records the change as data; the summary shows both, in either
    language, as the page always has ("(modified: ...)", "（已修改：...）")."""
    arch = customise(load_preset("llama-3-8b"), 32, 1, 128)
    assert (arch.name, arch.modified) == ("llama-3-8b", ("kv_heads=1",))
    assert arch.shown_name() == "llama-3-8b (modified: kv_heads=1)"
    assert arch.shown_name("zh") == "llama-3-8b（已修改：kv_heads=1）"
    assert load_preset("llama-3-8b").shown_name("zh") == "llama-3-8b"


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
    (dict(kv_dtype="int3"), "KV dtype"),
    (dict(gpu="tpu"), "accelerator"),
    (dict(preset="nope"), "unknown preset"),
    (dict(config="/no/such/config.json"), "no such file"),
    (dict(tp=3), "tp 3 does not divide the model's 32 query heads"),
    (dict(pp=33), "pp 33 is more than the model's 32 layers"),
    (dict(dp=0), "dp must be between 1"),
    (dict(tp="8"), "tp must be a whole number"),
])
def test_bad_input_is_a_clear_message(change, message):
    """Out-of-range numbers, unknown names and missing files raise ValueError naming the problem."""
    with pytest.raises(ValueError, match=message):
        calculate(**(ARGS | change))


def _preset_args(name: str, **changes) -> dict:
    a = load_preset(name)
    return ARGS | {"preset": name, "layers": a.num_layers, "kv_heads": a.num_kv_heads, "head_dim": a.head_dim} | changes


def test_a_hybrid_model_shows_its_state_apart_and_why_it_does_not_grow():
    """Qwen3-Next: the summary gives the DeltaNet state of its 36 linear layers apart from the KV of its 12 full
    ones, with why it does not grow; the memory bar stacks it as its own part. By hand, per sequence in bf16:
    36 × (8,192 × 4 × 2 + 32 × 128 × 128 × 4) = 36 × 2,162,688 = 77,856,768 bytes."""
    r = calculate(**_preset_args("qwen3-next-80b-a3b", batch=2, seq_len=4096))
    line = next(x for x in r.summary.splitlines() if "gated DeltaNet state of 36 layers" in x)
    assert "does not grow with seq_len" in line
    assert r.details["state"]["bytes"] == 2 * 36 * (8_192 * 4 * 2 + 32 * 128 * 128 * 4)
    parts = [trace["name"] for trace in r.memory_fig["data"]]
    assert parts == ["weights", "KV cache", "linear-layer state", "runtime reserve"]


def test_chunked_layers_get_the_window_plot_at_their_chunk():
    """Llama-4-Scout has no sliding window but 36 chunked layers: the window plot marks the 8,192-token chunk."""
    r = calculate(**_preset_args("llama-4-scout", seq_len=20_000))
    assert r.window_fig["layout"]["title"]["text"] == "Chunked layers keep at most one chunk"
    assert any("chunk 8,192" in a["text"] for a in r.window_fig["layout"]["annotations"])


def test_fewer_layers_of_a_hybrid_follow_its_own_pattern():
    """Jamba cut to 16 layers by the slider: transformers' own pattern (attention every 8th layer from the 4th)
    gives 2 attention layers and 14 Mamba layers, not a repeat of the 32-layer list."""
    a = load_preset("jamba-1.5-mini")
    b = customise(a, 16, a.num_kv_heads, a.head_dim)
    assert (b.num_layers, b.kv_layers, b.state.layers) == (16, 2, 14)


@pytest.mark.parametrize("config,message", [({"model_type": "distilbert"}, "encoder-only"),
                                            ({"model_type": "mystery"}, "unknown model_type"),
                                            ({"model_type": "mimo_v2_flash"}, "kvviz does not model")])
def test_configs_kvviz_cannot_answer_are_one_clear_message(config, message, tmp_path):
    """An encoder-only family, an unknown model_type, a family kvviz does not model: the calculator raises one
    ValueError (the page shows it as a message) naming the problem."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match=message):
        calculate(**ARGS | {"config": str(path)})


def test_the_lessons_example_sets_every_input_its_figure_depends_on():
    """The Lesson's question 3 sets the calculator to 16 × 4096 × 32 layers × 2 × 32 KV heads × 128 × 2 bytes =
    32 GiB (worked by hand), from any position of the controls: every input it leaves alone (the accelerator,
    mem_util, block size) leaves the KV bytes as they are, and each input it sets does move them."""
    from kvviz.ui.calculator.answer import INPUT_DEFAULTS
    from kvviz.ui.calculator.tab import INPUT_NAMES
    from kvviz.ui.lesson.tab import LESSON_EXAMPLE

    def kv_bytes(**inputs) -> int:
        return calculate(**(INPUT_DEFAULTS | LESSON_EXAMPLE | inputs)).details["kv_cache_bytes"]

    assert set(LESSON_EXAMPLE) <= set(INPUT_NAMES) and preset_dims("llama-2-7b") == (32, 32, 128)
    assert kv_bytes() == 16 * 4096 * 32 * 2 * 32 * 128 * 2 == 32 * 2**30
    others = {"gpu": "a100-80gb-sxm", "mem_util": 0.5, "block_size": 256}
    assert set(INPUT_NAMES) - set(LESSON_EXAMPLE) - {"lang"} == set(others)
    assert all(kv_bytes(**{name: value}) == 32 * 2**30 for name, value in others.items())
    # The preset acts through the sliders it sets (and the name shown); tp, pp and dp split the figure per GPU.
    moved = {"batch": 8, "seq_len": 2048, "layers": 16, "kv_heads": 8, "head_dim": 64, "kv_dtype": "fp8"}
    assert all(kv_bytes(**{name: value}) != 32 * 2**30 for name, value in moved.items()), \
        "an input the example sets does not change the figure: the example would not need it"


def test_the_roofline_and_the_memory_bar_read_cleanly():
    """H100 SXM (989 TFLOP/s dense bf16): the roofline's FLOP/s ticks are decades in one notation up to 1,000 T
    (not plotly's 100T beside 10^15); the memory bar's two labels sit on opposite sides of their lines (usable
    to the left below, device to the right above), and the axis runs past the device's 74.5 GiB to hold it."""
    r = calculate(**ARGS)
    roof = figures.to_plotly(r.roofline_fig)
    assert list(roof.layout.yaxis.ticktext)[-4:] == ["1 T", "10 T", "100 T", "1,000 T"]
    memory = figures.to_plotly(r.memory_fig)
    usable, device = memory.layout.annotations
    assert (usable.xanchor, usable.yanchor, device.xanchor, device.yanchor) == ("right", "bottom", "left", "top")
    assert memory.layout.xaxis.range[1] > 80e9 / 2**30 * 1.2


def test_fp8_says_where_its_scales_are():
    """Llama-2-7B in fp8 at 16 × 4,096: the KV total is 16 GiB (16 × 4,096 × 32 layers × 2 × 32 heads × 128 × 1
    byte) plus 32 layers × 8 bytes of scales = 256 B, which a paged pool does not hold: the paged line says so,
    so that its 16 GiB and the total's extra 256 B agree. bf16 has no scales and no such words."""
    fp8 = calculate(**(ARGS | dict(kv_dtype="fp8")))
    assert fp8.details["kv_cache_bytes"] == 16 * 2**30 + 256
    assert "= 16.000 GiB = 17.180 GB, 0 B = 0.000 GiB = 0.000 GB wasted per sequence; the 256 B of per-layer " \
           "scales in the total above are layer parameters, outside the blocks" in fp8.summary
    assert "per-layer scales" not in calculate(**ARGS).summary
    zh = calculate(**(ARGS | dict(kv_dtype="fp8", lang="zh")))
    assert "每层的缩放因子共 256 B" in zh.summary
