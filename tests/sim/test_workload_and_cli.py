"""Workloads (arrivals, CSV files), bad input refused in one line each, a run bounded and saying so, and the
command line end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import pairwise

import pytest

from kvviz.base.errors import InputError
from kvviz.sim.cli import main
from kvviz.sim.scheduler import KvGroupSpec, SchedulerConfig
from kvviz.sim.simulate import Limits, simulate
from kvviz.sim.step_time import LinearStepTime
from kvviz.sim.workload import arrivals, closed_loop, from_csv, open_loop
from tests.helpers import REPO

ONE_SECOND = LinearStepTime(1.0, 0.0, 0.0, 0.0)
CONFIG = SchedulerConfig(num_blocks=64, block_size=4, max_model_len=64)


def test_constant_arrivals_are_evenly_spaced():
    assert arrivals(4, 2.0, poisson=False) == [0.0, 0.5, 1.0, 1.5]


def test_poisson_arrivals_have_the_rate_and_repeat_with_the_seed():
    """20,000 exponential gaps of mean 1/rate: their mean is within 3% of 0.1 s (its standard error is 0.7%)."""
    times = arrivals(20_000, 10.0, poisson=True, seed=7)
    gaps = [b - a for a, b in pairwise(times)]
    assert sum(gaps) / len(gaps) == pytest.approx(0.1, rel=0.03)
    assert times == arrivals(20_000, 10.0, poisson=True, seed=7) != arrivals(20_000, 10.0, poisson=True, seed=8)


def test_a_csv_workload_is_read_in_arrival_order(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("prompt_tokens,output_tokens,arrival_s\n10,3,0.5\n20,4,0\n")
    workload = from_csv(path)
    assert [(r.prompt_tokens, r.output_tokens, r.arrival_s) for r in workload.requests] == [(20, 4, 0.0),
                                                                                        (10, 3, 0.5)]
    closed = from_csv(path, concurrency=2)
    assert closed.closed and [r.arrival_s for r in closed.requests] == [None, None]


@pytest.mark.parametrize(("content", "message"), [
    ("prompt_tokens,output_tokens\n1,2\n", "{path} lacks the column(s) arrival_s in its header"),
    ("prompt_tokens,output_tokens,arrival_s\n10,3,0\n10,x,1\n",
     "{path}, line 3: output_tokens must be a whole number from 1, got 'x'"),
    ("prompt_tokens,output_tokens,arrival_s\n0,3,0\n", "{path}, line 2: prompt_tokens must be a whole number from 1, "
                                                       "got '0'"),
    ("prompt_tokens,output_tokens,arrival_s\n5,3,-1\n", "{path}, line 2: arrival_s must be seconds, a number from 0, "
                                                        "got '-1'"),
    ("prompt_tokens,output_tokens,arrival_s\n5,3,inf\n", "{path}, line 2: arrival_s must be seconds, a number from "
                                                         "0, got 'inf'"),
    ("prompt_tokens,output_tokens,arrival_s\n", "{path} has no rows"),
])
def test_a_bad_workload_file_is_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "w.csv"
    path.write_text(content)
    with pytest.raises(InputError) as caught:
        from_csv(path)
    assert str(caught.value) == message.format(path=path)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: open_loop(10, 0.0, 10, 10), "rate must be in (0, 1e+09], got 0.0"),
    (lambda: closed_loop(10, 0, 10, 10), "concurrency must be between 1 and 1,000,000, got 0"),
    (lambda: closed_loop(10, 1, 10, 10, prefix_tokens=11), "prefix_tokens must be between 0 and 10, got 11"),
])
def test_bad_workload_values_are_refused(build, message):
    with pytest.raises(InputError) as caught:
        build()
    assert str(caught.value) == message


def test_a_request_past_the_context_or_the_cache_is_refused():
    """max_model_len 64: 60 + 10 tokens is past it. 64 blocks of 4 hold 256 tokens; with max_model_len 1000, a
    request of 300 + 10 needs ceil(309 / 4) = 78 blocks."""
    with pytest.raises(InputError) as caught:
        simulate(closed_loop(2, 1, 60, 10), CONFIG, ONE_SECOND)
    assert str(caught.value) == "request 0: 70 tokens of prompt and output are past max_model_len 64"
    big = SchedulerConfig(num_blocks=64, block_size=4, max_model_len=1000)
    with pytest.raises(InputError) as caught:
        simulate(closed_loop(2, 1, 300, 10), big, ONE_SECOND)
    assert str(caught.value) == "request 0 needs 78 KV blocks, more than the whole cache holds (64)"


def test_a_budget_below_the_context_without_chunked_prefill_is_refused():
    config = SchedulerConfig(num_blocks=64, block_size=4, max_model_len=64, max_num_batched_tokens=32,
                             chunked_prefill=False)
    with pytest.raises(InputError, match=r"max_num_batched_tokens \(32\) must be at least max_model_len \(64\)"):
        simulate(closed_loop(2, 1, 10, 10), config, ONE_SECOND)


def test_a_zero_step_time_is_refused():
    with pytest.raises(InputError, match="a step must take a positive time"):
        simulate(closed_loop(2, 1, 10, 10), CONFIG, LinearStepTime(0.0, 0.0, 0.0, 0.0))


def test_a_run_stopped_at_its_step_limit_says_so_and_counts_the_unfinished_as_failed():
    """Two requests one after the other of prompt 4, output 10: 10 steps each. Stopped after 5 steps: none ended,
    the first has 5 tokens."""
    result = simulate(closed_loop(2, 1, 4, 10), CONFIG, ONE_SECOND, Limits(max_steps=5))
    assert result.stopped == "stopped at the limit of 5 steps"
    assert result.stopped.key == "sim.stopped_steps"
    assert (result.stats.completed, result.stats.failed) == (0, 1)
    assert result.records[0].new_tokens == 5 and result.records[0].error.key == "sim.unfinished"


def test_a_run_stopped_by_its_wall_time_says_so():
    result = simulate(closed_loop(50, 1, 4, 50), CONFIG, ONE_SECOND, Limits(max_wall_s=1e-9))
    assert result.stopped.key == "sim.stopped_wall" and result.stats.completed < 50


def test_a_run_bounded_in_requests_sends_only_that_many():
    result = simulate(closed_loop(10, 2, 4, 2), CONFIG, ONE_SECOND, Limits(max_requests=4))
    assert result.stopped == "simulated the first 4 of 10 requests (the limit on requests)"
    assert result.stats.requests == result.stats.completed == 4


def test_statistics_come_from_the_serving_code():
    """Closed loop of 1, prompt 4, output 3, 1 s steps: each request takes 3 s; TTFT 1 s, TPOT (3 - 1) / 2 = 1 s;
    4 requests in 12 s: 1 output token per second, 1/3 request per second."""
    result = simulate(closed_loop(4, 1, 4, 3), CONFIG, ONE_SECOND)
    s = result.stats
    assert (s.duration_s, s.ttft.p50, s.tpot.p50, s.e2e.p99, s.itl.mean) == (12.0, 1.0, 1.0, 3.0, 1.0)
    assert s.output_tokens_per_s == 1.0 and s.requests_per_s == pytest.approx(1 / 3)


def _predict(*extra: str, model: tuple[str, str] = ("--coefficients", "1,0,0,0")) -> list[str]:
    return ["predict", "--num-blocks", "64", "--block-size", "4", "--max-model-len", "64", "--prompt-tokens", "4",
            "--output-tokens", "3", *model, *extra]


def test_the_cli_prints_the_statistics(capsys):
    assert main(_predict("--concurrency", "1", "--requests", "4", "--lang", "en")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("predicted by the simulated vLLM V1 scheduler: 4/4 requests in 12.000 s simulated, "
                             "12 steps")
    assert out[1].startswith("output 1.0 tok/s  0.33 req/s")
    assert out[2] == "TTFT mean 1000.0 ms  p50 1000.0 ms  p90 1000.0 ms  p99 1000.0 ms"


def test_the_cli_json_and_trace(capsys, tmp_path):
    trace = tmp_path / "trace.csv"
    assert main(_predict("--rate", "0.5", "--constant", "--requests", "3", "--json", "--trace", str(trace))) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stats"]["completed"] == 3 and data["stats"]["rate_asked_per_s"] == 0.5
    assert data["stats"]["ttft_p50_s"] == 1.0 and data["stopped"] is None
    assert trace.read_text().splitlines()[0].startswith("index,start_s,duration_s,running,waiting,kv_blocks_used")


def test_the_cli_fit_writes_a_calibration_that_predict_reads(capsys, tmp_path):
    """Rows timed exactly by t = 1 + 0.5 p + 0.25 s + 0.125 k: the fit gives those back, predict uses them."""
    rows = tmp_path / "rows.csv"
    lines = ["prefill_tokens,decode_seqs,attention_pairs,seconds"]
    for p, s, k in ((0, 1, 4), (4, 0, 4), (8, 2, 30), (2, 5, 7), (1, 1, 1), (9, 3, 2)):
        lines.append(f"{p},{s},{k},{1 + 0.5 * p + 0.25 * s + 0.125 * k}")
    rows.write_text("\n".join(lines) + "\n")
    cal = tmp_path / "cal.json"
    assert main(["fit", str(rows), "--out", str(cal), "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)["coefficients"]
    assert [fitted[k] for k in "abcd"] == pytest.approx([1, 0.5, 0.25, 0.125])
    assert main(_predict("--concurrency", "1", "--requests", "1", "--json", model=("--calibration", str(cal)))) == 0
    # one request: a prefill of 4 tokens, 1 + 2 + 3 + 4 = 10 attention pairs (t = 1 + 2 + 1.25 = 4.25 s), two
    # decodes reading 5 and 6 tokens (1 + 0.25 + 0.625 = 1.875 s and 1 + 0.25 + 0.75 = 2 s): E2E 8.125 s
    assert json.loads(capsys.readouterr().out)["stats"]["e2e_p50_s"] == pytest.approx(8.125)


def test_the_cli_refuses_bad_input_in_one_line_in_either_language(capsys):
    assert main(_predict("--rate", "0", "--lang", "en")) == 2
    assert capsys.readouterr().err == "error: rate must be in (0, 1e+09], got 0.0\n"
    assert main(["predict", "--num-blocks", "64", "--concurrency", "1", "--coefficients", "1,2", "--lang", "zh"]) == 2
    assert capsys.readouterr().err == ("错误：--coefficients 须为四个或五个数 a,b,c,d[,e]（单位秒，不得为负），"
                                       "收到 '1,2'\n")


def test_python_dash_m_runs():
    proc = subprocess.run([sys.executable, "-m", "kvviz.sim", *_predict("--concurrency", "2", "--lang", "en")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "100/100 requests" in proc.stdout


def test_the_cli_needs_one_loop_and_no_rate_beside_a_file(capsys, tmp_path):
    assert main(_predict("--lang", "en")) == 2
    assert capsys.readouterr().err == ("error: give --concurrency (a closed loop), --rate (an open loop) or "
                                       "--workload FILE.csv\n")
    path = tmp_path / "w.csv"
    path.write_text("prompt_tokens,output_tokens,arrival_s\n4,3,0\n4,3,10\n")
    assert main(_predict("--workload", str(path), "--rate", "2", "--lang", "en")) == 2
    assert capsys.readouterr().err.startswith("error: --workload sends at the file's arrival_s times")
    assert main(_predict("--workload", str(path), "--json")) == 0
    assert json.loads(capsys.readouterr().out)["stats"]["duration_s"] == 13.0  # the second arrives at 10, ends at 13


def test_the_cli_takes_the_capacity_from_a_model_folder(capsys, vllm_auto_dtype):
    """tiny in 1/64 GiB: 8,192 / 64 = 128 blocks."""
    args = ["predict", "--model", str(REPO / "assets" / "tiny"), "--kv-space-gib", str(1 / 64), "--concurrency", "2",
            "--requests", "2", "--coefficients", "0.01,0,0,0", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["kv_blocks"] == 128


def test_a_calibration_of_another_model_is_refused_and_zh_results_read_in_chinese(capsys, tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("prefill_tokens,decode_seqs,attention_pairs,seconds\n0,1,4,1\n4,0,4,2\n8,2,30,3\n2,5,7,4\n"
                    "9,3,2,5\n")
    cal = tmp_path / "cal.json"
    assert main(["fit", str(rows), "--out", str(cal), "--model", "SmolLM2-135M-Instruct", "--lang", "en"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"calibration written to {cal}"
    args = ["predict", "--model", str(REPO / "assets" / "tiny"), "--kv-space-gib", "0.1", "--concurrency", "1",
            "--calibration", str(cal)]
    assert main([*args, "--lang", "en"]) == 2
    assert capsys.readouterr().err == f"error: {cal} was calibrated for model SmolLM2-135M-Instruct, not tiny\n"
    assert main([*_predict("--concurrency", "1", "--requests", "2"), "--lang", "zh"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("模拟的 vLLM V1 调度器预测：2 个请求完成 2 个")
    assert out[2].startswith("TTFT 均值 1000.0 ms")


def test_the_cli_simulates_a_sliding_window_models_groups(capsys, vllm_auto_dtype):
    """assets/tiny-sliding: five sliding layers (window 256) before a full one, six groups of one layer. One
    request of 600 + 2 tokens in blocks of 128, steps of 1 s: the prefill holds cdiv(600, 128) = 5 blocks in each
    group, 30; before the decode at 600 each sliding group frees floor((600 - 255) / 128) = 2 blocks and every group
    takes a 5th for the 601st slot: 5 × 3 + 5 = 20. Printed: the groups; in JSON, the pool's 32,768 blocks for
    1 GiB (a block: one layer's page, 128 × 2 KV heads × 32 × 2 × 2 bytes = 32 KiB)."""
    args = ["predict", "--model", str(REPO / "assets" / "tiny-sliding"), "--max-model-len", "1024", "--concurrency",
            "1", "--requests", "1", "--prompt-tokens", "600", "--output-tokens", "2", "--coefficients", "1,0,0,0"]
    assert main([*args, "--trace", "/dev/null"]) == 0
    out = capsys.readouterr().out
    assert "KV-cache groups: 5 sliding (window 256), 1 full attention" in out
    assert "KV blocks in use at most 30 of 32,768" in out
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kv_blocks"] == 32768 and data["kv_groups"] == [{"kind": "sliding", "window": 256}] * 5 + [
        {"kind": "full", "window": None}]
    trace = simulate(closed_loop(1, 1, 600, 2), SchedulerConfig(num_blocks=32768, block_size=128, max_model_len=1024,
                     groups=tuple(KvGroupSpec(d["kind"], d["window"]) for d in data["kv_groups"])),
                     LinearStepTime(1.0, 0.0, 0.0, 0.0)).trace
    assert [s.kv_blocks_used for s in trace] == [30, 20]
