"""The live generation's metrics place while the model loads: the worker's phase and how far, not a bare
"running…" (Gradio draws no bar once the handler has yielded); once the model is ready, the run's own metrics."""

from __future__ import annotations

from kvviz.ui.common import Told
from kvviz.ui.generation.live import RunRecord
from kvviz.ui.generation.tab import live_update


def _told() -> Told:
    told = Told(lambda *a, **k: None)
    told(0.4, desc="converting SmolLM2-135M-Instruct")
    return told


def test_the_load_phase_stands_where_the_metrics_will():
    record = RunRecord(model="smollm2-135m-instruct", mode="cached", prompt="hi")
    metrics = live_update(record, "en", _told())()[1]
    assert metrics == "⏳ converting SmolLM2-135M-Instruct (40%)"


def test_in_chinese_too():
    record = RunRecord(model="smollm2-135m-instruct", mode="cached", prompt="hi")
    assert live_update(record, "zh", _told())()[1] == "⏳ converting SmolLM2-135M-Instruct（40%）"


def test_once_loaded_the_run_speaks_for_itself():
    record = RunRecord(model="smollm2-135m-instruct", mode="cached", prompt="hi")
    record.load_s = 12.0  # the worker's Loaded came
    assert live_update(record, "en", _told())()[1] == "running…"  # metrics_markdown before the first token


def test_nothing_told_yet_reads_running():
    record = RunRecord(model="tiny", mode="cached", prompt="hi")
    assert live_update(record, "en", Told(lambda *a, **k: None))()[1] == "running…"
