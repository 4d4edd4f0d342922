"""kvviz.bench.vllm_worker: the quick run on a real vLLM, which must compute in the process each start asked for
(vLLM's own log says which: its worker process, "Worker", or the engine core, "EngineCore"), and the environment
each start is given, undone after it."""

from __future__ import annotations

import os

import pytest

from kvviz.bench.vllm_ab import environ
from kvviz.bench.vllm_worker import QUICK, worker_bench


def test_a_starts_environment_is_undone_after_it(monkeypatch):
    """A variable that was set comes back to its value, one that was not goes away again, also after a failure."""
    monkeypatch.setenv("KVVIZ_TEST_A", "before")
    monkeypatch.delenv("KVVIZ_TEST_B", raising=False)
    with pytest.raises(RuntimeError), environ({"KVVIZ_TEST_A": "during", "KVVIZ_TEST_B": "during"}):
        assert (os.environ["KVVIZ_TEST_A"], os.environ["KVVIZ_TEST_B"]) == ("during", "during")
        raise RuntimeError
    assert os.environ["KVVIZ_TEST_A"] == "before" and "KVVIZ_TEST_B" not in os.environ


@pytest.mark.vllm
@pytest.mark.slow
def test_the_quick_run_computes_where_each_start_asked():
    """tiny with VLLM_ENABLE_V1_MULTIPROCESSING=1 then 0: vLLM's log has the KV line from its worker process, then
    from its engine core; every request completes; the summary has both ways' figures and a ratio."""
    frame, summary = worker_bench(QUICK)
    assert list(frame.worker) == ["worker process", "engine core"]
    assert list(frame.computed_in) == ["Worker", "EngineCore"]
    assert list(frame.completed) == [QUICK.loads[0].requests] * 2
    assert [s["worker"] for s in summary["starts"]] == ["worker process", "engine core"]
    ratio = summary["loads"][QUICK.loads[0].label]["output_tokens_per_s"]["engine_core_over_worker_process"]
    assert ratio["median"] > 0
