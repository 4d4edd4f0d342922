"""The benchmark harness runs end to end on a tiny model and records what it measured."""

from __future__ import annotations

import json

import pytest

from kvviz.bench import overhead as bench_overhead
from kvviz.bench import payoff as bench_payoff
from kvviz.bench.cli import main as bench_main
from kvviz.bench.memory_truth import QUICK, measure_family
from kvviz.engine.loading import load_model


def test_overhead_variants_produce_the_same_token_count(tiny_models):
    """kvviz's loop, model.generate and the plain loop each make exactly the asked number of tokens."""
    lm = load_model(str(tiny_models["llama"]))
    frame = bench_overhead.overhead(lm, "The KV cache", new_tokens=5, repeats=2)
    assert sorted(frame["variant"].unique()) == ["generate", "kvviz", "plain"]
    assert len(frame) == 6 and (frame["new_tokens"] == 5).all()
    summary = bench_overhead.summarize_overhead(frame)
    assert summary["kvviz_vs_generate"] > 0 and summary["repeats"] == 2


def test_overhead_cli_writes_results(tiny_models, tmp_path):
    """`python -m kvviz.bench overhead` writes a CSV of every run and a JSON with the machine and command."""
    assert bench_main(["overhead", "--models", f"{tiny_models['qwen2']}@fp32", "--new-tokens", "3",
                       "--repeats", "1", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "overhead.json").read_text())
    assert "torch" in saved["machine"] and saved["command"].startswith("python -m kvviz.bench overhead")
    assert (tmp_path / "overhead.csv").read_text().count("\n") == 4  # header + 3 variants


def test_payoff_runs_both_modes_over_the_same_positions(tiny_models):
    """payoff() gives every token of both modes at the same positions, the cached cache as predicted."""
    lm = load_model(str(tiny_models["qwen2"]))
    rows, prediction = bench_payoff.payoff(lm, "The KV cache", new_tokens=12)
    cached, uncached = (rows[rows["mode"] == m].reset_index(drop=True) for m in ("cached", "uncached"))
    assert len(cached) == len(uncached) == 12 and list(cached["seq_len"]) == list(uncached["seq_len"])
    assert (cached["kv_bytes"] == cached["kv_bytes_predicted"]).all() and (uncached["kv_bytes"] == 0).all()
    assert (prediction["uncached_flops"] >= prediction["cached_flops"]).all()


def _synthetic_payoff(n: int = 200, prompt: int = 30):
    """Rows as payoff() returns them, with known laws: cached steps 2 ms flat, uncached 1 ms + 0.05 ms per
    token of the sequence; the prediction has the uncached shape at a tenth of the scale."""
    import pandas as pd

    rows, pred = [], []
    for mode in ("cached", "uncached"):
        t = 0.0
        for i in range(n):
            pos = prompt + i
            dt = 2e-3 if mode == "cached" else 1e-3 + 5e-5 * pos
            t += dt
            rows.append({"mode": mode, "index": i, "phase": "prefill" if i == 0 else "decode", "seq_len": pos,
                         "dt_s": dt, "t_s": t})
    for i in range(n):
        pos = prompt + i
        pred.append({"index": i, "cached_lower_bound_s": 2e-4, "uncached_lower_bound_s": 1e-4 + 5e-6 * pos})
    return pd.DataFrame(rows), pd.DataFrame(pred)


def test_payoff_fit_recovers_known_laws():
    """fit_payoff finds the growth per step, the totals' shapes and the prediction's scale it was given."""
    fit = bench_payoff.fit_payoff(*_synthetic_payoff())
    assert fit["cached"]["step_growth_ms_per_100_tokens"] == pytest.approx(0, abs=1e-9)
    assert fit["uncached"]["step_growth_ms_per_100_tokens"] == pytest.approx(5.0)  # 0.05 ms x 100
    assert fit["cached"]["total_r2_linear"] == pytest.approx(1)
    assert fit["uncached"]["total_r2_quadratic"] == pytest.approx(1) and fit["uncached"]["total_r2_linear"] < 0.999
    for mode in ("cached", "uncached"):
        assert fit[mode]["roofline_scale"] == pytest.approx(10), mode
    assert fit["uncached"]["roofline_shape_error"] == pytest.approx(0, abs=1e-9)
    assert fit["uncached_over_cached_total"] > 1


def test_memory_truth_is_exact_on_a_shrunk_sliding_window_twin():
    """A one-layer Mistral twin (4,096-token window) holds exactly the predicted bytes after every step."""
    fam = next(f for f in QUICK if f.preset == "mistral-7b-v0.1")
    rows = measure_family(fam)
    assert len(rows) == len(fam.lengths) * 3 and rows["layers"].eq(1).all()
    assert (rows["measured_bytes"] == rows["predicted_bytes"]).all(), rows[["seq_len", "measured_bytes",
                                                                             "predicted_bytes"]]
    # one layer x 8 kv heads x 128 x (K and V) x 4 bytes = 8 KiB per token
    assert rows["measured_bytes"].iloc[0] == rows["seq_len"].iloc[0] * 8 * 1024


PARTS = ("overhead", "load", "payoff", "memory", "hardware", "calculator", "app", "concurrency", "leaks", "cancel",
         "batch", "fast", "loadgen")


@pytest.mark.slow
def test_every_part_runs_in_quick_mode_and_draws_its_figures(tmp_path):
    """`python -m kvviz.bench all --quick` runs parts 1-6 and writes each part's results and figure (HTML + PNG)."""
    assert bench_main(["all", "--quick", "--out", str(tmp_path)]) == 0
    for part in PARTS:
        saved = json.loads((tmp_path / f"{part}-quick.json").read_text())
        assert saved["command"].startswith(f"python -m kvviz.bench {part} --quick"), saved["command"]
        assert (tmp_path / f"{part}-quick.csv").stat().st_size > 0
    assert json.loads((tmp_path / "memory-quick.json").read_text())["results"]["all_exact"] is True
    hardware = json.loads((tmp_path / "hardware-quick.json").read_text())["results"]
    assert hardware["measured"]["bandwidth_gb_s"] > 0 and 0 < hardware["models"]["tiny"]["prefill_utilisation"]
    gpu = tmp_path / "gpu-quick"  # part 6's script, run on the CPU
    for part in ("overhead", "payoff", "memory", "hardware", "fast"):
        assert json.loads((gpu / f"{part}.json").read_text())["results"], part
    assert json.loads((gpu / "memory.json").read_text())["results"]["all_exact"] is True
    batch = json.loads((tmp_path / "batch-quick.json").read_text())["results"]
    assert batch, "the batch part's summary"
    loadgen = json.loads((tmp_path / "loadgen-quick.json").read_text())["results"]
    assert set(loadgen["levels"]) == {"1", "8", "32"} and loadgen["construction"]["tokens"] == 32
    for folder, parts in ((tmp_path, ("overhead", "payoff", "memory", "hardware", "calculator", "app", "concurrency",
                                      "batch", "fast", "loadgen")),
                          (gpu, ("overhead", "payoff", "memory", "hardware", "fast"))):
        for part in parts:
            assert (folder / "figures" / f"{part}.html").stat().st_size > 1000, (folder, part)
            assert (folder / "figures" / f"{part}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", (folder, part)
    seconds = json.loads((gpu / "gpu-run.json").read_text())["results"]["seconds"]
    assert seconds["total"] == pytest.approx(sum(v for k, v in seconds.items() if k != "total"))
