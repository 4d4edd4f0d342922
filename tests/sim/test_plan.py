"""Capacity under an SLO (kvviz/sim/plan.py, `python -m kvviz.sim plan`): the search's answer holds and 1.2 times
it does not, on the simulator; a knee and a tensor-parallel size worked out by hand; the search's bounds; every
output says how it was obtained; bad input gets one line."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvviz.calc.hardware import ACCELERATORS
from kvviz.calc.presets import load_preset
from kvviz.sim import cli, step_time
from kvviz.sim.plan import (
    CALIBRATED,
    Engine,
    Search,
    Shape,
    SloLimits,
    calibrated_engine,
    gpu_engine,
    knee,
    plan,
    simulated,
    smallest_tp,
)
from kvviz.sim.scheduler import SchedulerConfig
from kvviz.sim.step_time import LinearStepTime

# A CPU-like step: 2 ms, 20 µs a prefill token, 0.3 ms a decode sequence, 0.1 µs an attention pair (a decode's KV
# token read).
STEP = LinearStepTime(2e-3, 2e-5, 3e-4, 1e-7)


def cpu_engine(model=STEP, seqs: int = 64, blocks: int = 4000) -> Engine:
    config = SchedulerConfig(num_blocks=blocks, block_size=16, max_num_seqs=seqs, max_model_len=4096)
    return Engine(config, model, CALIBRATED, "test", "cpu")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=st.integers(16, 600), output=st.integers(8, 96), tpot_ms=st.floats(4.0, 12.0),
       quantile=st.sampled_from([50.0, 90.0, 99.0]), seed=st.integers(0, 1000), poisson=st.booleans())
def test_the_rate_found_holds_and_a_fifth_more_does_not(prompt, output, tpot_ms, quantile, seed, poisson):
    """Whatever the lengths and the TPOT limit, the rate the search returns holds the SLO on the simulator, and
    1.2 × it does not (the search's resolution is 2%, and it stopped below a rate that failed)."""
    engine, shape = cpu_engine(), Shape(prompt, output, poisson=poisson, seed=seed, requests=120)
    slo = SloLimits(ttft_s=2.0, tpot_s=tpot_ms / 1000, ttft_percentile=quantile, tpot_percentile=quantile)
    found = plan(engine, slo, shape, Search(resolution=0.02, max_points=60, max_wall_s=120))
    assert found.stopped is None, found.stopped
    assume(found.max_rate > 0)
    knee_rate = found.knee.requests_per_s
    assert simulated(engine, slo, shape, found.max_rate, 60, knee_rate).held
    assert not simulated(engine, slo, shape, 1.2 * found.max_rate, 60, knee_rate).held
    if found.next_rate is not None:  # bounded by the SLO, not the knee: the bracket closed within the resolution
        assert found.next_rate / found.max_rate - 1 <= 0.02


def test_the_knee_of_a_constant_step_is_worked_out_by_hand():
    """Every step 10 ms, 4 sequences at most, 8-token prompts, 10 output tokens, 12 requests: three waves of 4, each
    a prefill step (the first token) and 9 decode steps, 100 ms a wave: 12 requests in 0.3 s, 40 requests/s and
    400 output tokens/s."""
    engine = cpu_engine(LinearStepTime(0.01, 0, 0, 0), seqs=4)
    found = knee(engine, Shape(8, 10, requests=12), 60)
    assert found.requests_per_s == pytest.approx(40.0)
    assert found.output_tokens_per_s == pytest.approx(400.0)


def test_the_band_of_a_constant_step_is_worked_out_by_hand():
    """Every step 10 ms, 4 sequences at most, 8 + 10 tokens, 12 requests, TPOT p90 <= 10.5 ms: each request
    running gets a token every step, so its TPOT is the step, 10 ms at any rate, and the knee (40 requests/s, worked
    out above) holds. With every step 10% slower the TPOT is 11 ms at every rate: none holds. 10% faster, 9 ms
    steps: three waves of 4 in 0.27 s, a knee of 400/9 requests/s, held."""
    engine = cpu_engine(LinearStepTime(0.01, 0, 0, 0), seqs=4)
    found = plan(engine, SloLimits(ttft_s=1.0, tpot_s=0.0105), Shape(8, 10, requests=12), band=0.1)
    assert found.max_rate == pytest.approx(40.0)
    assert found.band.fraction == 0.1
    assert found.band.slower_max_rate == 0
    assert found.band.faster_max_rate == pytest.approx(400 / 9)


def test_the_calibrated_plan_gives_its_band_by_default(capsys, tmp_path):
    """On a calibration the plan says the highest rate with every step 10% slower and faster unless told
    otherwise; --band 0 leaves it out, --band 20 widens it (the slower rate no higher, the faster no lower); the
    roofline plan gives none unless asked."""
    path = tmp_path / "cal.json"
    step_time.save(step_time.Calibration(STEP, "tiny", "cpu"), path)
    argv = ("plan", "--model", "tiny", "--calibration", str(path), "--num-blocks", "4000", "--prompt-tokens", "128",
            "--output-tokens", "32", "--requests", "60", "--tpot", "0.01", "--json")
    bands = {}
    for extra in ((), ("--band", "0"), ("--band", "20")):
        code, out, err = run_cli(capsys, *argv, *extra)
        assert code == 0, err
        bands[extra] = json.loads(out)["band"]
    assert bands[()]["fraction"] == pytest.approx(0.1) and bands[("--band", "0")] is None
    assert bands[("--band", "20")]["slower_max_rate"] <= bands[()]["slower_max_rate"]
    assert bands[("--band", "20")]["faster_max_rate"] >= bands[()]["faster_max_rate"]
    code, out, err = run_cli(capsys, *argv[:-1])
    assert code == 0, err
    assert "with every step 10% slower:" in out
    code, out, err = run_cli(capsys, *argv[:-1], "--lang", "zh")
    assert "每一步慢 10% 时" in out
    code, out, err = run_cli(capsys, *GPU, "--json")
    assert code == 0, err
    assert json.loads(out)["band"] is None


def test_an_slo_below_one_requests_own_latency_holds_at_no_rate():
    """TTFT must be at most 1 ms while a step takes at least 2 ms: no rate holds, and the answer says 0."""
    found = plan(cpu_engine(), SloLimits(ttft_s=1e-3), Shape(64, 16, requests=40), Search(max_points=40))
    assert found.max_rate == 0 and found.replicas is None
    assert all(not p.held for p in found.points)


def test_the_search_stops_at_its_bounds_and_says_so():
    """Three points at most: the search stops there, keeps three points and says why."""
    slo = SloLimits(ttft_s=2.0, tpot_s=0.004)
    found = plan(cpu_engine(), slo, Shape(256, 64, requests=80), Search(max_points=3))
    assert len(found.points) == 3 and found.stopped is not None and found.stopped.key == "sim.plan_stopped_points"


def test_replicas_gpus_and_cost_follow_from_the_rate():
    """Target 50 requests/s: ⌈50 / max⌉ replicas; at $2 an hour a replica (1 GPU) at max requests/s of 32 output
    tokens costs 2 / (max × 32 × 3600) × 10^6 per million output tokens."""
    found = plan(cpu_engine(), SloLimits(ttft_s=2.0, tpot_s=0.006), Shape(128, 32, requests=80),
                 target_rate=50, price_per_gpu_hour=2.0)
    assert found.max_rate > 0
    assert found.replicas == math.ceil(50 / found.max_rate) and found.gpus == found.replicas
    assert found.cost.at_max == pytest.approx(2 / (found.max_rate * 32 * 3600) * 1e6)
    assert found.cost.at_target == pytest.approx(found.replicas * 2 / (50 * 32 * 3600) * 1e6)


def test_the_smallest_tensor_parallel_size_that_fits_is_the_calculators():
    """Llama-3-70B in bf16 is 141 GB: on 80 GB H100s (90% usable, 1 GiB kept back: 70.9 GB a GPU) tp 2 leaves
    70.5 GB of weights a GPU and no room for an 8,192-token sequence's 1.3 GB of KV; tp 4 (35 GB) fits.
    Llama-3.1-8B (16 GB) fits one GPU."""
    h100 = ACCELERATORS["h100-sxm"]
    assert smallest_tp(load_preset("llama-3-70b"), h100, 1, 8192) == 4
    assert smallest_tp(load_preset("llama-3.1-8b"), h100, 1, 8192) == 1


def test_a_gpu_replica_takes_vllms_gpu_defaults():
    """On an H100 (80 GB, not an A100) vLLM's OpenAI server schedules 8,192 tokens and 1,024 sequences a step, in
    blocks of 16."""
    engine = gpu_engine(load_preset("llama-3.1-8b"), ACCELERATORS["h100-sxm"], max_model_len=8192)
    c = engine.config
    assert (c.max_num_batched_tokens, c.max_num_seqs, c.block_size, engine.tp) == (8192, 1024, 16, 1)


def test_a_gpu_replica_of_a_sliding_window_model_keeps_vllms_groups_and_their_blocks():
    """Gemma 2 2B on an H100 (bf16; 26 layers alternating a 4,096-token window and full attention, layer 0
    sliding; 4 KV heads of 256): vLLM's two groups of 13 layers, sliding first, each drawing on one pool whose block
    is a page of 16 tokens for 13 layers, 4 × 256 × 2 (K, V) × 2 bytes = 4,096 bytes a token and layer: 851,968
    bytes, twice the blocks of the model counted as one group of 26 full layers. Over two stages of 13 layers
    (0-12: 7 sliding, 6 full; 13-25: 6 sliding, 7 full) each stage's block is its largest group's 7 layers, and
    the pool the fewer blocks of the two. With tp 2, 2 KV heads a GPU: half the bytes a block. The budgets are the
    calculator's (kvviz.calc.parallel.deploy)."""
    from kvviz.calc.parallel import Parallelism, deploy
    from kvviz.sim.plan import roofline_step_time
    from kvviz.sim.scheduler import FULL, SLIDING, KvGroupSpec

    arch, h100 = load_preset("gemma-2-2b"), ACCELERATORS["h100-sxm"]

    def budget(tp: int, pp: int) -> int:  # the fewest bytes any stage's GPU leaves for KV
        model = roofline_step_time(arch, h100, tp, pp)
        return min(s.capacity.kv_budget_bytes for s in deploy(arch, model.count, Parallelism(tp, pp), h100, model.kv,
                                                                model.weights, 1, 8192, block_size=16).stages)

    for tp, pp, layers in ((1, 1, 13), (1, 2, 7), (2, 1, 13)):
        engine = gpu_engine(arch, h100, tp=tp, pp=pp, max_model_len=8192)
        assert engine.config.groups == (KvGroupSpec(SLIDING, 4096), KvGroupSpec(FULL))
        assert engine.config.num_blocks == budget(tp, pp) // (layers * 16 * (4 // tp) * 256 * 2 * 2), (tp, pp)
    as_one_group = budget(1, 1) // (26 * 16 * 4096)
    blocks = gpu_engine(arch, h100, tp=1, max_model_len=8192).config.num_blocks
    assert blocks in (2 * as_one_group, 2 * as_one_group + 1)  # the floors of the two divisions


def test_a_gpu_replica_of_a_model_the_scheduler_does_not_group_counts_every_layer_as_full():
    """Llama 4 Scout's chunked local layers are no group the scheduler keeps: one full-attention group, its blocks
    the calculator's token slots over 16, as before groups were modelled."""
    from kvviz.sim.scheduler import FULL_ATTENTION

    engine = gpu_engine(load_preset("llama-4-scout"), ACCELERATORS["h100-sxm"], tp=8, max_model_len=8192)
    assert engine.config.groups == FULL_ATTENTION and engine.config.num_blocks > 0


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


GPU = ("plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--max-model-len", "4096", "--prompt-tokens", "512",
       "--output-tokens", "64", "--requests", "60", "--tpot", "0.02", "--max-points", "12")


def test_the_gpu_plan_says_it_is_a_roofline_lower_bound(capsys):
    """Every output made with the roofline says so: the first line of the text, and `how` in the JSON."""
    code, out, err = run_cli(capsys, *GPU, "--target-rate", "100", "--price", "2.5")
    assert code == 0, err
    assert "roofline lower bound" in out.splitlines()[0]
    assert "replica(s)" in out and "per million output tokens" in out
    code, out, err = run_cli(capsys, *GPU, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["how"] == "roofline lower bound" and data["max_rate_per_s"] > 0 and data["tp"] == 1
    # The search's progress went to stderr, a line per rate as it was judged, in the order the JSON lists them.
    progress = err.strip().splitlines()
    assert len(progress) == len(data["points"])
    for line, point in zip(progress, data["points"], strict=True):
        assert line.strip().startswith(f"{point['rate']:.4g} requests/s: {'held' if point['held'] else 'not held'}")


def test_a_calibrated_plan_says_where_its_step_time_came_from(capsys, tmp_path):
    """With a calibration file the plan names the file and 'calibrated fit', in English and in Chinese."""
    path = tmp_path / "cal.json"
    step_time.save(step_time.Calibration(STEP, "tiny", "cpu"), path)
    argv = ("plan", "--model", "tiny", "--calibration", str(path), "--num-blocks", "4000", "--prompt-tokens", "128",
            "--output-tokens", "32", "--requests", "60", "--tpot", "0.01", "--target-rate", "30")
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "calibrated fit" in out and str(path) in out and "machine(s)" in out
    code, out, err = run_cli(capsys, *argv, "--lang", "zh")
    assert code == 0, err
    assert "校准拟合" in out and "台机器" in out


def test_a_calibrations_overhead_and_handoff_are_in_the_slo_judged(tmp_path):
    """Steps of 0.5 s, one request of 8 + 2 tokens a rate (so no queueing): its TTFT is one step, 0.5 s, within a
    0.6 s limit (TPOT 0.5 s within 1 s); the calibration's request overhead of 0.25 s makes the client's TTFT
    0.75 s, not held at any rate.
    The knee's closed loop of 2 (three rounds: 6 requests), handed over 0.2 s apart: A has step 1 [0, 0.5] alone,
    B (there at 0.2) joins step 2 beside A's last token; C, sent as A ends at 1.0, misses step 3 (B's last) and
    is prefilled in step 4 [1.5, 2]; D, sent at 1.5, joins step 5 beside C's last token; E and F repeat it in
    steps 7-9: the last token at 4.5 s, 6 / 4.5 requests/s (each next request reaches the engine the overhead,
    0.25 s, after one ends: inside the step that begins then, as at once). Handed over at once, A and B share every
    step and each pair takes two steps; the engine is idle when they end, and the next pair reaches it 0.25 s later:
    pairs in [0, 1], [1.25, 2.25], [2.5, 3.5], 6 / 3.5 s. Without the overhead, 6 / 3.0 s.
    """
    import json

    path = tmp_path / "cal.json"
    step_time.save(step_time.Calibration(LinearStepTime(0.5, 0, 0, 0), "tiny", "cpu"), path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data | {"request_overhead_s": 0.25, "handoff_s": 0.2}))
    engine = calibrated_engine(path, None, num_blocks=100, config={"block_size": 16, "max_num_seqs": 2})
    assert (engine.overhead_s, engine.handoff_s) == (0.25, 0.2)
    slo, one = SloLimits(ttft_s=0.6, tpot_s=1.0), Shape(8, 2, requests=1)
    assert not simulated(engine, slo, one, 0.1, 60).held
    assert simulated(replace(engine, overhead_s=0.0), slo, one, 0.1, 60).held
    shape = Shape(8, 2, requests=6)
    assert knee(engine, shape, 60).requests_per_s == pytest.approx(6 / 4.5)
    assert knee(replace(engine, handoff_s=0.0), shape, 60).requests_per_s == pytest.approx(6 / 3.5)
    assert knee(replace(engine, handoff_s=0.0, overhead_s=0.0), shape, 60).requests_per_s == pytest.approx(6 / 3.0)


def test_a_plan_on_another_machines_calibration_says_so(capsys, tmp_path):
    """A calibration naming another device than this machine's (the CPU's model from /proc/cpuinfo and its CPUs)
    is planned on, and the text says whose answer it is; one naming this machine says nothing of it."""
    names = {line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")}
    here = f"{names.pop()}, {len(os.sched_getaffinity(0))} CPUs"
    argv = ("plan", "--model", "tiny", "--num-blocks", "4000", "--prompt-tokens", "128", "--output-tokens", "32",
            "--requests", "30", "--tpot", "0.01")
    for device, noted in (("Some Other CPU, 64 CPUs", True), (here, False)):
        path = tmp_path / "cal.json"
        step_time.save(step_time.Calibration(STEP, "tiny", device), path)
        code, out, err = run_cli(capsys, *argv, "--calibration", str(path))
        assert code == 0, err
        note = f"measured on Some Other CPU, 64 CPUs, not on this machine ({here})"
        assert (note in out) is noted, out


@pytest.mark.parametrize("extra, words", [
    (("--target-rate", "0"), "target rate"),
    (("--ttft-percentile", "0"), "TTFT percentile"),
    (("--tpot-percentile", "100.5"), "TPOT percentile"),
    (("--price", "-1"), "price per GPU-hour"),
    (("--prompt-tokens", "4000", "--output-tokens", "200"), "past max_model_len 4,096"),
    (("--max-model-len", "200000"), "past the model's context"),
    (("--gpu", "cpu"), "GPU"),
    (("--band", "60"), "band (%)"),
    (("--band", "-1"), "band (%)"),
])
def test_bad_input_gets_one_line(capsys, extra, words):
    """Each refusal is one line on stderr, exit status 2, naming what was wrong."""
    argv = list(GPU)
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err, err


def _trace(tmp_path, text: str):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_a_workload_file_is_sent_at_its_own_arrival_times_scaled_to_each_rate(tmp_path):
    """Three requests arriving at 0, 1 and 3 s: the file's rate is 2 arrivals over 3 s, 2/3 a second. At 2
    requests/s every time is stretched by (2/3) / 2 = 1/3: 0, 1/3 and 1 s, lengths kept, a 4-token shared prefix
    on each. Means by hand: prompt (10 + 20 + 30) / 3 = 20, output (4 + 5 + 9) / 3 = 6."""
    shape = Shape.from_file(_trace(tmp_path, "prompt_tokens,output_tokens,arrival_s\n"
                                             "20,5,1\n10,4,0\n30,9,3\n"), prefix_tokens=4)
    assert shape.timed and shape.requests == 3
    assert (shape.prompt_tokens, shape.output_tokens, shape.mean_output_tokens) == (20, 6, 6.0)
    load = shape.at(2.0)
    assert [r.arrival_s for r in load.requests] == pytest.approx([0.0, 1 / 3, 1.0])
    assert [(r.prompt_tokens, r.output_tokens, r.prefix_tokens) for r in load.requests] == [
        (10, 4, 4), (20, 5, 4), (30, 9, 4)]
    assert load.rate == 2.0 and not load.closed
    # Without times the rate is evenly spaced (--constant): 0, 0.5 and 1 s at 2 requests/s.
    untimed = Shape.from_file(_trace(tmp_path, "prompt_tokens,output_tokens\n10,4\n20,5\n30,9\n"), poisson=False)
    assert not untimed.timed
    assert [r.arrival_s for r in untimed.at(2.0).requests] == pytest.approx([0.0, 0.5, 1.0])


def test_the_knee_of_a_workload_file_runs_its_rows_in_turn(tmp_path):
    """The knee test above with its 12 requests drawn from a 4-row file (8-token prompts, 10 output tokens): the
    rows in turn, three waves of 4 at 10 ms a step, 100 ms a wave: 40 requests/s, 400 output tokens/s."""
    engine = cpu_engine(LinearStepTime(0.01, 0, 0, 0), seqs=4)
    shape = Shape.from_file(_trace(tmp_path, "prompt_tokens,output_tokens\n" + "8,10\n" * 4))
    found = knee(engine, shape, 60)
    assert found.requests_per_s == pytest.approx(40.0) and found.output_tokens_per_s == pytest.approx(400.0)


def test_a_workload_files_cost_counts_its_mean_output(tmp_path):
    """Outputs of 20 and 44 tokens: 32 on average, so the cost is the hand formula of the fixed-length test with
    32 output tokens a request."""
    rows = "prompt_tokens,output_tokens\n" + "128,20\n128,44\n" * 40
    found = plan(cpu_engine(), SloLimits(ttft_s=2.0, tpot_s=0.006), Shape.from_file(_trace(tmp_path, rows)),
                 target_rate=50, price_per_gpu_hour=2.0)
    assert found.max_rate > 0
    assert found.cost.at_max == pytest.approx(2 / (found.max_rate * 32 * 3600) * 1e6)


def test_plan_with_a_workload_file_names_it_and_refuses_a_bad_row(capsys, tmp_path):
    """The CLI: the workload line names the file, its rows and its scaled arrivals; the JSON records the file
    (not its rows); a row with a negative count is refused in one line naming its line number."""
    path = _trace(tmp_path, "prompt_tokens,output_tokens,arrival_s\n" +
                  "".join(f"{256 + i},{32 + i % 3},{i * 0.5}\n" for i in range(60)))
    argv = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--max-model-len", "4096", "--workload",
            str(path), "--tpot", "0.02", "--max-points", "12"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert f"the 60 requests of {path}" in out and "arrival times scaled" in out
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    workload = json.loads(out)["workload"]
    assert workload["source"] == str(path) and workload["requests"] == 60 and workload["timed"]
    assert "trace" not in workload and workload["mean_output_tokens"] == pytest.approx(33.0)
    code, out, err = run_cli(capsys, *argv, "--lang", "zh")
    assert code == 0 and "按该速率缩放" in out, err
    bad = _trace(tmp_path, "prompt_tokens,output_tokens,arrival_s\n256,32,0\n256,-3,1\n")
    argv[argv.index(str(path))] = str(bad)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "line 3: output_tokens must be a whole number" in err, err


def test_the_gpu_plan_of_a_sliding_window_model_names_its_groups(capsys):
    """The text says a sliding-window model's groups (Gemma 2: one of each, window 4,096), in English and in
    Chinese; the JSON's engine holds them; a full-attention model's plan (GPU above) has no such line."""
    argv = ("plan", "--model", "gemma-2-2b", "--gpu", "l4", "--max-model-len", "8192", "--prompt-tokens", "512",
            "--output-tokens", "16", "--requests", "20", "--max-points", "3")
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "KV-cache groups: 1 sliding (window 4,096), 1 full attention;" in out
    code, out, err = run_cli(capsys, *argv, "--lang", "zh")
    assert "KV Cache 分组：1 个滑动窗口组（窗口 4,096），1 个全注意力组" in out
    code, out, err = run_cli(capsys, *argv, "--json")
    assert json.loads(out)["engine"]["groups"] == [{"kind": "sliding", "window": 4096},
                                                   {"kind": "full", "window": None}]
    code, out, err = run_cli(capsys, *GPU[:-2], "--max-points", "3")
    assert code == 0, err
    assert "KV-cache groups" not in out


def test_the_real_checks_command_line_names_its_requests_and_refuses_a_bad_count(monkeypatch, capsys, tmp_path):
    """`python -m kvviz.sim.plan_check DIR 6 2 MODEL calibrate --requests 120` asks for 120 requests a rate (the
    prediction's and the real search's) and keeps the other defaults; a count of 0 or a word is refused in one line
    before any vLLM starts."""
    from kvviz.sim import plan_check

    asked = []
    monkeypatch.setattr(plan_check, "check_on_vllm", lambda **kwargs: asked.append(kwargs) or {"ok": True})
    assert plan_check.main([str(tmp_path), "6", "2", "smollm2-135m-instruct", "calibrate", "--requests", "120"]) == {
        "ok": True}
    assert asked == [{"out": tmp_path, "ttft_steps": 6.0, "tpot_steps": 2.0, "model": "smollm2-135m-instruct",
                      "fit": "calibrate", "prompt_tokens": 128, "output_tokens": 16, "requests": 120, "points": 6,
                      "again": False}]
    for bad in ("0", "many"):
        with pytest.raises(SystemExit) as caught:
            plan_check.main([str(tmp_path), "--points", bad])
        assert caught.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"python -m kvviz.sim.plan_check: error: argument --points: a whole number from 1, not '{bad}'")
    assert len(asked) == 1


def test_calibrating_again_is_asked_with_calibrate_and_refused_with_steps(monkeypatch, capsys, tmp_path):
    """`--again`: the check calibrates again after its search (check_on_vllm's again); with `steps`, which makes
    no calibration to make again, refused in one line before any vLLM starts."""
    from kvviz.sim import plan_check

    asked = []
    monkeypatch.setattr(plan_check, "check_on_vllm", lambda **kwargs: asked.append(kwargs) or {"ok": True})
    plan_check.main([str(tmp_path), "6", "2", "tiny", "calibrate", "--again"])
    assert asked[-1]["again"] is True and asked[-1]["fit"] == "calibrate"
    with pytest.raises(SystemExit) as caught:
        plan_check.main([str(tmp_path), "6", "2", "tiny", "steps", "--again"])
    assert caught.value.code == 2 and len(asked) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m kvviz.sim.plan_check: error: --again: with calibrate only (a calibration made again after the "
        "search)")


def test_the_prediction_made_again_after_the_search_brackets_the_measured_rate_or_not():
    """bracket, by hand: predicted 100/s before the search and 130/s after it, measured 120/s: 130 / 120 = 1.083, and
    120 lies between the two (the machine moved by as much as the miss); after 110/s it does not (110 / 120 =
    0.917); the two the other way round bracket alike; nothing measured held: no ratio, nothing bracketed."""
    from kvviz.sim.plan_check import bracket

    assert bracket(100.0, 130.0, 120.0) == {"max_rate": 130.0, "ratio_to_measured": pytest.approx(13 / 12),
                                            "measured_between": True}
    assert bracket(100.0, 110.0, 120.0) == {"max_rate": 110.0, "ratio_to_measured": pytest.approx(11 / 12),
                                            "measured_between": False}
    assert bracket(130.0, 100.0, 120.0)["measured_between"] is True
    assert bracket(100.0, 130.0, 0.0) == {"max_rate": 130.0, "ratio_to_measured": None, "measured_between": False}


def test_too_few_real_rates_are_refused_in_one_line_before_vllm_starts(monkeypatch, capsys, tmp_path):
    """`--points 2`: a search brackets and bisects, so it needs 3 rates at least (plan.Search); refused in one line
    before any vLLM starts (it was a traceback after the start and the calibration, half a minute on tiny)."""
    from kvviz.sim import calibrate, plan_check

    monkeypatch.setattr(calibrate, "serving", lambda *a, **k: pytest.fail("vLLM started"))
    with pytest.raises(SystemExit) as caught:
        plan_check.main([str(tmp_path), "6", "2", "tiny", "calibrate", "--points", "2"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m kvviz.sim.plan_check: error: max points must be between 3 and 10,000, got 2")


def test_each_real_rate_says_it_has_started_before_its_minutes_of_requests(monkeypatch, capsys):
    """plan_check's search on vLLM: a rate's line goes to stderr before its requests are sent (120 at 0.5/s arrive
    over 240 s), then its verdict; the load it runs is the rate's (the requests sent by the load generator here
    stand in for vLLM and none completes, so the rate is not held)."""
    from types import SimpleNamespace

    from kvviz.sim import plan_check

    sent = []

    def run(ep, load, prompts, slo=None):
        sent.append((load.rate, load.requests, capsys.readouterr().err))  # what was said before any request
        return SimpleNamespace(records=[], stats=SimpleNamespace(output_tokens_per_s=0.0))

    monkeypatch.setattr(plan_check, "run", run)
    point = plan_check.measured(None, SloLimits(), Shape(128, 16, requests=120), [], 0.5, 600.0)
    (rate, requests, said), = sent
    assert (rate, requests) == (0.5, 120)
    assert said == "  0.5 requests/s: sending 120 requests to vLLM (arrivals over about 240 s)\n"
    assert not point.held and capsys.readouterr().err.startswith("  0.5 requests/s: not held")


def test_each_real_rate_sends_prompts_of_its_own_and_is_followed_by_a_probe(monkeypatch):
    """plan_check's search on vLLM: every rate gets the prompts the factory makes for it then (one rate's prompts
    sent again at the next would find their blocks in vLLM's prefix cache, their prompt steps skipped where the
    simulator computes them), and after(rate) runs once each rate is judged, in the order the rates ran. Here a rate
    holds up to 1/s: from 0.8 by 1.25, 0.8 and 1.0 hold and 1.25 does not."""
    from kvviz.sim import plan_check
    from kvviz.sim.plan import Point

    made, sent, events = [], [], []

    def factory():
        made.append([object()])
        return made[-1]

    def measured(ep, slo, shape, prompts, rate, wall_s):
        sent.append(prompts)
        events.append(("rate", rate))
        return Point(rate, rate <= 1.0 + 1e-9, 0.1, 0.01, 10.0, shape.requests, shape.requests)

    monkeypatch.setattr(plan_check, "measured", measured)
    low, high, searcher = plan_check.real_max_rate(
        None, SloLimits(), Shape(128, 16, requests=4), factory, 0.8, Search(resolution=0.3, max_points=6),
        1.25, after=lambda rate: events.append(("after", rate)))
    assert (low, high) == (pytest.approx(1.0), pytest.approx(1.25))
    assert [p.rate for p in searcher.points] == pytest.approx([0.8, 1.0, 1.25])
    assert sent == made and len({id(p) for p in sent}) == 3
    assert [kind for kind, _ in events] == ["rate", "after"] * 3
    assert [rate for kind, rate in events if kind == "after"] == pytest.approx([0.8, 1.0, 1.25])


def test_one_request_alone_is_worked_out_by_hand():
    """lone: a = 10 ms, b = 1 ms a prompt token, c = 2 ms a decode, d = 10 µs an attention pair, overhead 5 ms; 4
    prompt tokens, 3 output tokens. TTFT: 5 + 10 + 4 + 0.01 × 10 pairs (4 × 5 / 2) = 19.1 ms. Its two decode steps
    at contexts 5 and 6: 12.05 and 12.06 ms, their mean 12.055 ms."""
    from kvviz.sim.plan_check import lone

    engine = replace(cpu_engine(LinearStepTime(0.01, 0.001, 0.002, 1e-5)), overhead_s=0.005)
    ttft, tpot = lone(engine, Shape(4, 3, requests=1))
    assert ttft == pytest.approx(0.0191)
    assert tpot == pytest.approx(0.012055)


def test_the_plan_on_the_steps_as_probed_is_worked_out_by_hand():
    """as_probed on the constant step of the band's case above (10 ms steps, TPOT p90 <= 10.5 ms, the knee 40/s
    held): probes that measured the lone step at 0.8, 0.9 and 1.2 times its prediction scale every step by their
    median, 0.9: 9 ms steps, the knee 400/9 held, 10/9 of a measured 40/s. At 1.1 (one probe) no rate holds."""
    from kvviz.sim.plan_check import Probe, as_probed

    engine = cpu_engine(LinearStepTime(0.01, 0, 0, 0), seqs=4)
    slo, shape = SloLimits(ttft_s=1.0, tpot_s=0.0105), Shape(8, 10, requests=12)
    probes = [Probe(rate, 0.05, 0.01 * ratio, 0.05, 0.01) for rate, ratio in ((None, 0.8), (1.0, 1.2), (2.0, 0.9))]
    found = as_probed(engine, slo, shape, probes, 40.0)
    assert found["step_ratio_median"] == pytest.approx(0.9)
    assert (found["step_ratio_min"], found["step_ratio_max"]) == (pytest.approx(0.8), pytest.approx(1.2))
    assert found["max_rate"] == pytest.approx(400 / 9)
    assert found["ratio_to_measured"] == pytest.approx(10 / 9)
    assert as_probed(engine, slo, shape, [Probe(None, 0.05, 0.011, 0.05, 0.01)], 40.0)["max_rate"] == 0


def test_a_probe_is_a_closed_loop_of_one_at_the_checks_lengths(monkeypatch, capsys):
    """probe: its prompts sent one at a time with the check's output length; its figures the run's TTFT and TPOT
    medians beside the prediction, step_ratio the TPOT over its prediction (60 / 50 ms), said in one line."""
    from types import SimpleNamespace

    from kvviz.sim import plan_check

    sent = []

    def run(ep, load, prompts, slo=None):
        sent.append((load.concurrency, load.requests, load.output_tokens, prompts))
        return SimpleNamespace(stats=SimpleNamespace(ttft=SimpleNamespace(p50=0.5), tpot=SimpleNamespace(p50=0.06)))

    monkeypatch.setattr(plan_check, "run", run)
    prompts = ["p1", "p2", "p3", "p4"]
    found = plan_check.probe(None, prompts, Shape(128, 16, requests=60), (0.4, 0.05), 0.5)
    assert sent == [(1, 4, 16, prompts)]
    assert (found.after_rate, found.ttft_s, found.tpot_s) == (0.5, 0.5, 0.06)
    assert found.step_ratio == pytest.approx(1.2)
    assert capsys.readouterr().err == (
        "  probe: 4 requests one at a time; one alone took TTFT 500.0 ms, TPOT 60.00 ms (1.20 × the calibration's "
        "step)\n")
