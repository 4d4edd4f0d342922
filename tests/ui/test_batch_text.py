"""The batch sweep's explanation: every sentence's numbers come from the frame, and each departure from the
roofline is claimed only where the data shows it."""

from __future__ import annotations

import string

from kvviz.engine.batch_sweep import STOP_MEMORY
from kvviz.i18n.batch import EN, ZH
from kvviz.ui.batch.sweep_text import sweep_markdown, sweep_table
from tests.batch_frames import hand_frame


def test_headline_uses_the_runs_numbers():
    """Step 3.00 → 8.00 ms (2.7×) while tokens/s 333 → 8,000 (24.0×); the weights' 20.5 MB read once a step."""
    text = sweep_markdown(hand_frame())
    assert ("From B=1 to B=64 the decode step went from 3.00 ms to 8.00 ms (2.7×) while tokens/s went from 333 to "
            "8,000 (24.0×)") in text
    assert "the weights (20.5 MB) are read once per step for the whole batch" in text
    assert "Each sequence's own rate went from 333 to 125 tokens/s" in text
    assert "stopped at the largest batch asked for (B=64)" in text


def test_departure_names_the_ratios_and_the_compute_bound_batch():
    """measured / predicted at both ends; the bandwidth B=1 reached and tiny's fixed per-step cost; compute-bound
    from B=22 inside the sweep, and the FLOP/s the last batch reached."""
    text = sweep_markdown(hand_frame())
    assert "measured / predicted is 2.92 at B=1 and 2.41 at B=64 (lowest 2.41, at B=64)" in text
    # 20,462,592 bytes of weights + 81,920 of cache in 3 ms: 6.85 GB/s of 20 GB/s
    assert "At B=1 the step moves 20.5 MB in 3.00 ms: 6.8 GB/s, 34% of the 20.0 GB/s this device measured" in text
    assert "not the fixed cost of running a step" in text and "weights read in 1.02 ms" in text
    assert "From B=22 the roofline turns compute-bound" in text
    assert "1.09 ms at B=16 to 3.32 ms at B=64 (3.1×); measured, the step grew 2.1× over the same batches" in text
    # the step's FLOPs: its compute term 3.324 ms × 200 GFLOP/s = 0.66 GFLOP, in 8 ms: 83 GFLOP/s, 42% of the peak
    assert "At B=64 it does 0.66 GFLOP in 8.00 ms: 83 GFLOP/s, 42% of the peak" in text
    assert "matrix-vector" not in text, "3.0 to 3.1 ms from B=1 to B=2 is no kernel switch"


def test_a_jump_from_one_row_to_two_is_reported():
    """B=2 twice as slow as B=1 where the roofline barely moves: the kernel change is named."""
    f = hand_frame()
    f.loc[f["batch"] == 2, ["step_s", "step_min_s", "step_max_s"]] = [6e-3, 5.4e-3, 7.2e-3]  # above B=1's 3.6 ms
    text = sweep_markdown(f)
    assert "From B=1 to B=2 the measured step grew 2.0× (3.00 ms to 6.00 ms) where the roofline's grows 1.00×" in text
    assert "matrix-vector product, the kernel a batch of one runs" in text


def test_compute_bound_beyond_the_sweep_is_said_so():
    text = sweep_markdown(hand_frame(batches=(1, 2, 4, 8)))
    assert "stays memory-bound over the whole sweep" in text and "only at B=22, beyond B=8" in text
    assert "turns compute-bound:" not in text


def test_no_overhead_claim_when_the_step_is_near_the_bound():
    """A step 1.1× its bound at B=1 is not blamed on fixed per-step cost."""
    f = hand_frame()
    f = f.assign(step_s=f["step_s_predicted"] * 1.1)
    f = f.assign(step_over_predicted=f["step_s"] / f["step_s_predicted"])
    text = sweep_markdown(f)
    assert "fixed cost" not in text and "measured / predicted is 1.10 at B=1" in text
    assert "A batch of one is a memory-bound step, as the roofline says" in text


def test_ratio_falling_then_rising_is_reported():
    """Fixed cost shared (ratio falls from 2.92 to 1.0 at B=16), then the step grows faster than the roofline."""
    f = hand_frame()
    ratio = {1: 2.92, 2: 2.0, 4: 1.5, 8: 1.2, 16: 1.0, 32: 1.5, 64: 2.0}
    f = f.assign(step_over_predicted=f["batch"].map(ratio))
    f = f.assign(step_s=f["step_over_predicted"] * f["step_s_predicted"])
    text = sweep_markdown(f)
    assert "The batch shares the fixed cost, so the ratio falls to 1.00 at B=16" in text
    assert "Past B=16 the ratio rises again, to 2.00 at B=64" in text
    assert "as the step's arithmetic grows" in text  # B=64 is compute-bound by the roofline


def test_kv_text_states_agreement_and_the_memory_limit():
    text = sweep_markdown(hand_frame())
    assert "equal to the memory model's prediction at every batch, to the byte" in text
    assert "memory runs out after B=208,595 sequences of 48 tokens" in text
    assert "different from the memory model's prediction at B=64" in sweep_markdown(hand_frame(kv_off=8))


def test_prefill_text():
    text = sweep_markdown(hand_frame())
    assert "TTFT, the batch's prefill, went from 2.00 ms at B=1 to 128.00 ms at B=64 (64.0×)" in text
    assert "every sequence waits for all B prompts (64 × " in text


def test_prefill_text_does_not_claim_a_growth_it_did_not_see():
    """A noisy B=1 prefill of 500 ms against 128 ms at B=64: the text says TTFT did not grow."""
    frame = hand_frame()
    frame.loc[frame["batch"] == 1, "prefill_s"] = 0.5
    text = sweep_markdown(frame)
    assert "went from 500.00 ms at B=1 to 128.00 ms at B=64" in text and "it did not grow here" in text
    assert "memory-bound at B=1, compute-bound from B=2" in text


def test_stop_reasons_are_told():
    assert "the next batch would not fit by the calculator" in sweep_markdown(hand_frame(stop=STOP_MEMORY))
    assert "stopped after B=64: out of memory at B=128" in sweep_markdown(hand_frame(stop="out of memory at B=128"))


def test_table_has_a_line_per_batch():
    table = sweep_table(hand_frame())
    lines = table.splitlines()
    assert len(lines) == 2 + 7
    assert lines[2].startswith("| 1 | 3.00 ms | 1.03 ms | 2.92 | memory | 333 | 333 | 2.00 ms | 96.3 KB | yes |")


def test_single_batch_and_empty():
    assert sweep_markdown(hand_frame(batches=(1,))).startswith("Only B=1 ran")
    assert sweep_markdown(hand_frame().iloc[0:0]) == "No batch ran."


def test_english_is_the_default_language():
    """lang="en" and no lang give the same text, byte for byte."""
    assert sweep_markdown(hand_frame(), "en") == sweep_markdown(hand_frame())
    assert sweep_table(hand_frame(), lang="en") == sweep_table(hand_frame())


def test_the_sweep_in_chinese_keeps_the_runs_numbers():
    """The same numbers as the English text, in Chinese sentences (expected text typed by hand)."""
    text = sweep_markdown(hand_frame(), "zh")
    assert text.startswith("从 B=1 到 B=64，解码步从 3.00 ms 变为 8.00 ms（2.7×），"
                           "而 tokens/s 从 333 变为 8,000（24.0×）：权重（20.5 MB）每步只为整个批次读一遍")
    assert "扫描停在所要求的最大批次（B=64）。" in text
    assert "实测 / 预测在 B=1 时为 2.92，B=64 时为 2.41（最低 2.41，在 B=64）。" in text
    assert "B=1 时一步搬运 20.5 MB，耗时 3.00 ms：6.8 GB/s，是本设备实测带宽 20.0 GB/s 的 34%。" in text
    assert "从 B=22 起屋顶线模型判为计算受限（compute-bound）" in text
    assert "屋顶线模型判定预填充在 B=1 时为访存受限，从 B=2 起为计算受限" in text
    assert "在每个批次都与显存模型的预测相等，精确到字节" in text
    assert "所以在 B=208,595 条 48 token 的序列之后内存耗尽。" in text
    for english in ("the decode step", "roofline", "measured", "sequence", "memory"):
        assert english not in text, f"{english!r} left untranslated"


def test_chinese_stop_reasons_single_batch_and_empty():
    assert "按计算器估算，下一个批次放不下" in sweep_markdown(hand_frame(stop=STOP_MEMORY), "zh")
    one = sweep_markdown(hand_frame(batches=(1,)), "zh")
    assert one.startswith("只运行了 B=1：一次解码步耗时 3.00 ms（333 tokens/s）。")
    assert sweep_markdown(hand_frame().iloc[0:0], "zh") == "没有运行任何批次。"


def test_chinese_table():
    lines = sweep_table(hand_frame(), "zh").splitlines()
    assert lines[0].startswith("| B | 解码步 | 屋顶线 | 实测 / 屋顶线 | 瓶颈（屋顶线） |")
    assert lines[2].startswith("| 1 | 3.00 ms | 1.03 ms | 2.92 | 访存 | 333 | 333 | 2.00 ms | 96.3 KB | 是 |")


def test_the_batch_catalogue_has_the_same_fields_in_both_languages():
    """A Chinese template that drops or renames a {field} of the English one is a KeyError or a lost number."""
    fields = string.Formatter()
    for key, en in EN.items():
        if "%{" in en and "{{" not in en:
            continue  # a plotly hover template used without fields
        assert ({f for _, f, _, _ in fields.parse(en) if f} == {f for _, f, _, _ in fields.parse(ZH[key]) if f}), key


def test_no_kernel_change_is_read_into_steps_whose_ranges_overlap():
    """B=2's median step twice B=1's, but its fastest step (3.0 ms) under B=1's slowest (3.6 ms): no cause named."""
    f = hand_frame()
    f.loc[f["batch"] == 2, ["step_s", "step_min_s", "step_max_s"]] = [6e-3, 3.0e-3, 7.2e-3]
    assert "measured step grew" not in sweep_markdown(f)


def test_a_rate_gain_inside_the_steps_range_is_called_noise():
    """B=1: step 3.00 ms (2.70–3.60 ms), 333 tokens/s; B=2: step 5.00 ms (4.50–6.00 ms), 400 tokens/s. At the
    extremes B=2 makes 2 / 6.00 ms = 333 tokens/s and B=1 1 / 2.70 ms = 370: B=2 does not beat B=1."""
    f = hand_frame(batches=(1, 2))
    f.loc[f["batch"] == 2, ["step_s", "step_min_s", "step_max_s", "tokens_per_s_total"]] = [5e-3, 4.5e-3, 6e-3, 400.0]
    text = sweep_markdown(f)
    assert ("From B=1 to B=2 tokens/s went from 333 to 400, but a decode step ranged 2.70 ms–3.60 ms at B=1 and "
            "4.50 ms–6.00 ms at B=2: at those extremes B=2 does not beat B=1, so the two are within noise and this "
            "sweep shows no gain from batching to explain.") in text
    assert "read once per step" not in text
    zh = sweep_markdown(f, "zh")
    assert "两者在噪声范围内" in zh and "2.70 ms–3.60 ms" in zh
