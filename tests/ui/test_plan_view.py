"""The Plan tab's pure parts: figures and texts from hand-built curves and answers, the measured points' errors,
the loads the check runs, and the hosted demo's limits. Expected values are worked by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from kvviz.engine.hosting import HostPolicy, PolicyError
from kvviz.ui.figures import to_plotly
from kvviz.ui.plan import figures, text
from kvviz.ui.plan.predict import (
    CALIBRATIONS,
    CLOSED,
    HOSTED_SIM_REQUESTS,
    OPEN,
    PlanValues,
    check_loads,
    errors,
    setup_from_values,
    shown_source,
)
from kvviz.ui.plan.tab import check_load

# Three loads, 100 output tokens a request: tokens/s = 100 × requests/s; per user = 1 / TPOT p50.
CURVE = pd.DataFrame([
    {"load": 1.0, "requests": 50, "completed": 50, "requests_per_s": 1.0, "output_tokens_per_s": 100.0,
     "ttft_p50_s": 0.010, "ttft_p99_s": 0.020, "tpot_p50_s": 0.005, "tpot_p99_s": 0.008, "user_tokens_per_s": 200.0},
    {"load": 2.0, "requests": 50, "completed": 50, "requests_per_s": 2.0, "output_tokens_per_s": 200.0,
     "ttft_p50_s": 0.012, "ttft_p99_s": 0.030, "tpot_p50_s": 0.010, "tpot_p99_s": 0.016, "user_tokens_per_s": 100.0},
    {"load": 4.0, "requests": 50, "completed": 50, "requests_per_s": 3.0, "output_tokens_per_s": 300.0,
     "ttft_p50_s": 0.100, "ttft_p99_s": 0.400, "tpot_p50_s": 0.020, "tpot_p99_s": 0.050, "user_tokens_per_s": 50.0},
])
MARKS = figures.Marks(closed=False, knee_rate=3.0, knee_tokens_per_s=300.0, max_rate=2.5, ttft_s=0.25,
                      ttft_percentile=99, tpot_s=0.04, tpot_percentile=99, how="roofline lower bound, by hand")


def _rule_xs(fig: dict) -> list[float]:
    return [s["x0"] for s in fig["layout"]["shapes"] if s["xref"] == "x"]


def test_throughput_draws_the_curve_the_knee_and_the_slo_rate():
    """The line is the curve's tokens/s; vertical rules at the knee (3/s) and the SLO's rate (2.5/s), a horizontal
    one at the knee's 300 tokens/s; the title says how the curve was obtained."""
    fig = figures.throughput(CURVE, MARKS)
    to_plotly(fig)
    assert fig["data"][0]["x"] == [1.0, 2.0, 4.0] and fig["data"][0]["y"] == [100.0, 200.0, 300.0]
    assert sorted(_rule_xs(fig)) == [2.5, 3.0]
    assert [s["y0"] for s in fig["layout"]["shapes"] if s["yref"] == "y"] == [300.0]
    assert "roofline lower bound, by hand" in fig["layout"]["title"]["text"]
    assert len(fig["data"]) == 1, "no measured series before a check"


def test_the_saturated_label_keeps_clear_of_the_knees_label():
    """The knee's rate label ends at its rule, at the top; the saturated tokens/s label sits on its rule near the
    top too. Loads 1-4/s: a knee at 3/s (two thirds across) puts the tokens/s label at the left end; a knee at 1.5/s
    (a sixth across) at the right end; a closed loop (no rate rule) at the right end."""
    def note(marks):
        fig = figures.throughput(CURVE, marks)
        (n,) = [a for a in fig["layout"]["annotations"] if a["text"].startswith("saturated")]
        return n["x"], n["xanchor"]
    assert note(MARKS) == (0, "left")
    assert note(figures.Marks(**{**MARKS.__dict__, "knee_rate": 1.5, "max_rate": 1.2})) == (1, "right")
    assert note(figures.Marks(**{**MARKS.__dict__, "closed": True})) == (1, "right")


def test_a_closed_loop_marks_no_rate_on_its_concurrency_axis():
    """Requests in flight are not a rate: no vertical rule; the axis says requests in flight."""
    closed = figures.Marks(**{**MARKS.__dict__, "closed": True})
    fig = figures.throughput(CURVE, closed)
    assert _rule_xs(fig) == [] and fig["layout"]["xaxis"]["title"]["text"] == "requests in flight"


def test_latency_in_ms_with_the_slo_limit_and_measured_points():
    """TTFT p50 and p99 in ms (10, 12, 100 and 20, 30, 400), the SLO's 250 ms rule, and the measured points as
    their own series (p50 and p99) over the lines."""
    measured = CURVE.iloc[[1]].assign(ttft_p50_s=0.015, ttft_p99_s=0.045)
    fig = figures.latency(CURVE, MARKS, "ttft", measured)
    to_plotly(fig)
    by_name = {d["name"]: d for d in fig["data"]}
    assert by_name["TTFT p50 predicted"]["y"] == pytest.approx([10, 12, 100])
    assert by_name["TTFT p99 predicted"]["y"] == pytest.approx([20, 30, 400])
    assert by_name["TTFT p50 measured"]["x"] == [2.0] and by_name["TTFT p50 measured"]["y"] == pytest.approx([15])
    assert by_name["TTFT p99 measured"]["y"] == pytest.approx([45])
    limits = [s["y0"] for s in fig["layout"]["shapes"] if s["yref"] == "y"]
    assert limits == pytest.approx([250])
    assert any("SLO: TTFT p99 ≤ 250 ms" in a["text"] for a in fig["layout"]["annotations"])


def test_the_tradeoff_puts_per_user_speed_against_total_throughput():
    fig = figures.tradeoff(CURVE, MARKS, lang="zh")
    to_plotly(fig)
    assert fig["data"][0]["x"] == [100.0, 200.0, 300.0] and fig["data"][0]["y"] == [200.0, 100.0, 50.0]
    assert fig["layout"]["yaxis"]["title"]["text"] == "每用户 token/秒（1 / TPOT p50）"


def test_no_curve_draws_a_message():
    assert figures.throughput(pd.DataFrame(), MARKS)["layout"]["annotations"][0]["text"] == "nothing predicted yet"


def test_errors_are_signed_relative_to_the_measurement():
    """Predicted 110 tokens/s against 100 measured: +10%; TTFT p50 9 ms against 12 ms: -25%."""
    measured = CURVE.iloc[[0]].assign(output_tokens_per_s=100.0, ttft_p50_s=0.012)
    predicted = CURVE.iloc[[0]].assign(output_tokens_per_s=110.0, ttft_p50_s=0.009)
    frame = errors(measured, predicted).set_index("metric")
    assert frame.loc["output_tokens_per_s", "error"] == pytest.approx(0.10)
    assert frame.loc["ttft_p50_s", "error"] == pytest.approx(-0.25)
    shown = text.errors_table(errors(measured, predicted))
    row = shown[shown["metric"] == "TTFT p50 (ms)"].iloc[0]
    assert (row["predicted"], row["measured"], row["error"]) == (9.0, 12.0, "-25.0%")
    assert "Median error: output tokens/s 10%, TTFT p50 (ms) 25%" in text.check_markdown(frame.reset_index(), 8)


ANSWER = text.Answer(
    how="roofline", model="llama-3.1-8b", source="H100 SXM", device="H100 SXM", tp=2, pp=1, closed=False, load=20,
    asked_tokens_per_s=2400, asked_ttft_p99_s=0.0196, asked_tpot_p99_s=0.0054, knee_rate=90.79,
    knee_tokens_per_s=11621, max_rate=40, next_rate=41, output_tokens=128, target_rate=100, replicas=3,
    total_gpus=6, price=2.5, cost_at_max=0.2713, cost_at_target=0.3255, overhead_s=0.0)


def test_the_answer_states_the_knee_the_slo_rate_replicas_and_cost():
    """40/s held and 41/s not: the answer gives both; 40 × 128 = 5,120 tokens/s; ⌈100 / 40⌉ = 3 replicas of
    tp 2 = 6 GPUs; the costs as given."""
    md = text.answer_markdown(ANSWER)
    assert "llama-3.1-8b on H100 SXM (tp 2, pp 1)" in md and "roofline lower bound" in md
    assert "**knee**: throughput saturates at **90.79 requests/s** (11,621 output tokens/s)" in md
    assert "**highest rate under the SLO: 40 requests/s** (5,120 output tokens/s); 41 requests/s breaks it" in md
    assert "**3 replica(s)** × 2 GPU(s) = **6 GPU(s)**" in md
    assert "**0.2713 per million output tokens**" in md and "(2.5 per GPU-hour)" in md
    assert "TTFT p99 19.6 ms, TPOT p99 5.4 ms" in md


def test_the_answer_states_the_replicas_blocks_and_a_sliding_models_groups():
    """The replica's scheduler as given: 77,112 blocks of 16, 1,024 sequences and 8,192 tokens a step; Gemma 2's
    groups (one sliding of window 4,096, one full) named, in English and Chinese; a full-attention model's not."""
    from kvviz.sim.scheduler import FULL, SLIDING, KvGroupSpec, SchedulerConfig

    config = SchedulerConfig(num_blocks=77112, block_size=16, max_num_seqs=1024, max_num_batched_tokens=8192,
                             max_model_len=8192)
    md = text.answer_markdown(text.Answer(**{**ANSWER.__dict__, "config": config}))
    assert "one replica: 77,112 KV blocks of 16 tokens, at most 1,024 sequences and 8,192 tokens a step" in md
    assert "KV-cache groups" not in md
    gemma = text.Answer(**{**ANSWER.__dict__, "config": SchedulerConfig(
        **{**config.__dict__, "groups": (KvGroupSpec(SLIDING, 4096), KvGroupSpec(FULL))})})
    assert "KV-cache groups: 1 sliding (window 4,096), 1 full attention;" in text.answer_markdown(gemma)
    zh = text.answer_markdown(gemma, "zh")
    assert "一个副本：77,112 个 KV 块，每块 16 个 token；每步最多 1,024 个序列、8,192 个 token" in zh
    assert "KV Cache 分组：1 个滑动窗口组（窗口 4,096），1 个全注意力组" in zh


def test_an_answer_from_another_machines_calibration_says_whose_it_is():
    """`here` set (this machine, when the calibration names another): the answer names both, in English and
    Chinese; unset, nothing of it."""
    other = text.Answer(**{**ANSWER.__dict__, "how": "calibrated", "device": "Intel Xeon, 2 CPUs",
                           "here": "AMD EPYC, 2 CPUs"})
    assert "**measured on another machine**: this calibration is Intel Xeon, 2 CPUs's, not this machine's " \
           "(AMD EPYC, 2 CPUs)" in text.answer_markdown(other)
    assert "这份校准属于 Intel Xeon, 2 CPUs，不是本机（AMD EPYC, 2 CPUs）" in text.answer_markdown(other, "zh")
    assert "another machine" not in text.answer_markdown(ANSWER)
    assert text.short_how(other) == "predicted: calibrated fit H100 SXM, llama-3.1-8b on another machine"


def test_a_rate_held_and_the_next_print_apart():
    """The search resolves 1%: 0.1512/s held and 0.1527/s not read 0.15 and 0.15 to two decimals; the answer gives
    them to the digit where they differ (0.151 and 0.153), and 0.15 and 0.1502 to the fourth."""
    md = text.answer_markdown(text.Answer(**{**ANSWER.__dict__, "max_rate": 0.1512, "next_rate": 0.1527}))
    assert "SLO: 0.151 requests/s** (19 output tokens/s); 0.153 requests/s breaks it" in md
    md = text.answer_markdown(text.Answer(**{**ANSWER.__dict__, "max_rate": 0.15, "next_rate": 0.1502}))
    assert "SLO: 0.15 requests/s** (19 output tokens/s); 0.1502 requests/s breaks it" in md


def test_the_answer_in_chinese_and_when_nothing_holds():
    zh = text.answer_markdown(ANSWER, "zh")
    assert "**满足 SLO 的最高速率：40 请求/秒**" in zh and "**3 个副本** × 2 块 GPU = **6 块 GPU**" in zh
    assert "**每百万输出 token 0.2713**（每 GPU 小时 2.5）" in zh  # a space between 每 and GPU, as elsewhere
    here = text.answer_markdown(text.Answer(**{**ANSWER.__dict__, "how": "calibrated"}), "zh")
    assert "（每机器小时 2.5）" in here
    none = text.answer_markdown(text.Answer(**{**ANSWER.__dict__, "max_rate": 0.0, "next_rate": 0.1}))
    assert "**no rate meets the SLO**" in none


def test_a_calibrated_answer_names_its_file_machine_and_overhead():
    calibrated = text.Answer(**{**ANSWER.__dict__, "how": "calibrated", "source": "results/simulator/c.json",
                                "device": "Xeon, 2 CPUs", "overhead_s": 0.0388})
    md = text.answer_markdown(calibrated)
    assert "each step a calibrated fit, llama-3.1-8b on Xeon, 2 CPUs (calibration results/simulator/c.json)" in md
    assert "request overhead (38.8 ms)" in md and "machine(s)" in md and "per machine-hour" in md


def test_a_calibrated_answer_gives_its_band():
    """A calibrated plan's band, as given (0.534 requests/s with every step 10% slower, 0.704 faster), in English
    and Chinese; an answer without one says nothing of it."""
    from kvviz.sim.plan import Band

    calibrated = text.Answer(**{**ANSWER.__dict__, "how": "calibrated", "band": Band(0.1, 0.534, 0.704)})
    assert ("with every step 10% slower: 0.534 requests/s; 10% faster: 0.704 requests/s"
            in text.answer_markdown(calibrated))
    assert "每一步慢 10% 时：0.534 请求/秒；快 10% 时：0.704 请求/秒" in text.answer_markdown(calibrated, "zh")
    assert "slower" not in text.answer_markdown(ANSWER)


@pytest.mark.parametrize("loop,load,expected", [(OPEN, 4.0, [2.0, 4.0, 8.0]), (CLOSED, 1, [1, 2]),
                                                (CLOSED, 5, [2, 5, 10])])
def test_the_check_runs_half_the_load_the_load_and_twice_it(loop, load, expected):
    """Closed loops in whole requests in flight, at least one (1 → 0.5 rounds to 1, the same load once)."""
    setup = setup_from_values(PlanValues(model="smollm2-135m", gpu="l4", loop=loop, rate=load, concurrency=load,
                                         requests=10), HostPolicy())
    assert check_loads(setup) == expected


def test_a_hosted_demo_limits_the_simulated_requests_and_the_check(tmp_path):
    """Hosted: at most HOSTED_SIM_REQUESTS simulated requests a load, no model folder, and a measured load within
    the host's request limit (256 by default)."""
    hosted = HostPolicy(hosted=True)
    with pytest.raises(ValueError, match=f"requests per point must be between 1 and {HOSTED_SIM_REQUESTS}"):
        setup_from_values(PlanValues(requests=HOSTED_SIM_REQUESTS + 1), hosted)
    (tmp_path / "config.json").write_text("{}")  # a model folder: refused hosted before it is read
    with pytest.raises(ValueError, match="unknown model"):
        setup_from_values(PlanValues(model=str(tmp_path), requests=10), hosted)
    setup = setup_from_values(PlanValues(model="smollm2-135m", gpu="l4", requests=10, rate=10.0), hosted)
    assert check_load(setup, 10.0, 256, hosted).concurrency == hosted.max_concurrency
    with pytest.raises(PolicyError, match="requests"):
        check_load(setup, 10.0, 257, hosted)


def test_a_figures_subtitle_says_how_in_short():
    """The subtitle names the calibration by its file's name only (a full path runs off a narrow plot)."""
    calibrated = text.Answer(**{**ANSWER.__dict__, "how": "calibrated", "source": "/a/long/path/calibration-tiny.json",
                                "model": "tiny"})
    assert text.short_how(calibrated) == "predicted: calibrated fit calibration-tiny.json, tiny on this machine"
    assert text.short_how(ANSWER, "zh") == "预测：roofline 下界，llama-3.1-8b 在 H100 SXM 上（tp 2，pp 1）"


def test_a_long_subtitle_breaks_after_a_comma_outside_brackets():
    """Plotly does not wrap a title: a subtitle wider than a half-width figure holds (46 Latin characters, a CJK one
    counting two) goes onto lines broken after its commas, never inside brackets; a short one stays whole."""
    calibrated = ("predicted: calibrated fit calibration-smollm2-135m-instruct.json, smollm2-135m-instruct on this "
                  "machine")
    assert figures.subtitle_lines(calibrated) == \
        "predicted: calibrated fit calibration-smollm2-135m-instruct.json,<br>smollm2-135m-instruct on this machine"
    # 21 + 35 + 6 columns: the first comma's part and the next do not fit together; "（tp 2，" stays with what
    # follows it
    assert figures.subtitle_lines("预测：roofline 下界，llama-3.1-8b 在 H100 SXM 上（tp 2，pp 1）") == \
        "预测：roofline 下界，<br>llama-3.1-8b 在 H100 SXM 上（tp 2，pp 1）"
    assert figures.subtitle_lines("predicted: a, b (c, d)", width=12) == "predicted: a,<br>b (c, d)"
    fig = figures.throughput(CURVE, figures.Marks(**{**MARKS.__dict__, "how": calibrated}))
    assert fig["layout"]["title"]["text"].endswith("json,<br>smollm2-135m-instruct on this machine</sub>")
    # a line more of subtitle, 16 px more above the plot than a one-line one
    assert fig["layout"]["margin"]["t"] == figures.throughput(CURVE, MARKS)["layout"]["margin"]["t"] + 16


def test_a_knee_bound_answer_draws_one_rule():
    """When the highest rate under the SLO is the knee itself, one rule, the knee's."""
    fig = figures.throughput(CURVE, figures.Marks(**{**MARKS.__dict__, "max_rate": 3.0}))
    assert _rule_xs(fig) == [3.0]


def test_one_token_answers_have_no_tpot_and_say_so():
    """Requests of one output token have no TPOT: the answer shows a dash, not "nan"."""
    md = text.answer_markdown(text.Answer(**{**ANSWER.__dict__, "asked_tpot_p99_s": float("nan")}))
    assert "TPOT p99 – ms" in md and "nan" not in md


def test_a_kept_calibration_is_shown_by_its_place_in_the_repository():
    """results/simulator's files by that path, whatever the checkout's folder; another path as given."""
    assert shown_source(str(CALIBRATIONS / "calibration-tiny.json")) == "results/simulator/calibration-tiny.json"
    assert shown_source("/data/cal.json") == "/data/cal.json"
