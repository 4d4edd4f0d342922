"""Part 6's script (kvviz.bench.gpu) on a lent GPU: a part that fails is recorded and the others still run, and a
family whose real model cannot be had there is listed as not measured while the others are measured."""

from __future__ import annotations

import json

import pytest

from kvviz.bench import gpu
from kvviz.bench.cli import main as bench_main
from kvviz.bench.memory_truth import Family


def test_a_failed_part_is_recorded_and_the_others_still_run(tmp_path, monkeypatch):
    ran = []

    def part(name):
        def run(*args):
            ran.append(name)
            if name == "payoff":
                raise RuntimeError("no kernel image is available for execution on the device")
        return run

    for name in ("overhead", "payoff", "memory", "hardware_and_fast", "leaks"):
        monkeypatch.setattr(gpu, f"_{name}", part(name))
    with pytest.raises(SystemExit) as exc:
        bench_main(["gpu", "--quick", "--out", str(tmp_path)])
    assert "payoff" in str(exc.value) and "overhead" not in str(exc.value)
    assert ran == ["overhead", "payoff", "memory", "hardware_and_fast", "leaks"]
    saved = json.loads((tmp_path / "gpu-quick" / "gpu-run.json").read_text())["results"]
    assert list(saved["failed"]) == ["payoff"]
    assert saved["failed"]["payoff"].endswith("RuntimeError: no kernel image is available for execution on the device")
    assert set(saved["seconds"]) == {"overhead", "payoff", "memory", "hardware and fast", "leaks", "total"}


def test_a_family_whose_model_cannot_be_had_is_listed_not_measured(tmp_path, monkeypatch):
    """The GPU machine reaches no package registry: SmolLM2's packaged weights may be missing there."""
    measured = Family("multi-head (12 q = 12 kv heads)", "gpt2", 1, (5,))
    missing = Family("real weights", "smollm2-135m", None, (5,), model=str(tmp_path / "no-such-model"))
    monkeypatch.setattr(gpu, "QUICK", (missing, measured))
    gpu._memory(tmp_path, gpu.QUICK_PLAN, True, [])
    saved = json.loads((tmp_path / "memory.json").read_text())["results"]
    assert list(saved["not_measured"]) == ["smollm2-135m: real weights"]
    assert "gpt2: multi-head (12 q = 12 kv heads)" in saved and saved["all_exact"] is True
    assert saved["gpt2: multi-head (12 q = 12 kv heads)"]["steps_checked"] == 3
