"""The app's one vLLM server (kvviz.serving.local) without vLLM: what it says when there is no environment
or no such model, and that it is stopped until started. Starting it for real is the Serving tab's browser test
(tests/ui/test_serving_browser.py), which starts vLLM through the page."""

from __future__ import annotations

import pytest

from kvviz.serving.endpoint import EndpointError
from kvviz.serving.local import STOPPED, LocalEngine
from kvviz.serving.vllm import VllmError


def test_without_vllms_environment_start_says_how_to_build_it(tmp_path):
    engine = LocalEngine(venv=tmp_path / "nowhere")
    with pytest.raises(VllmError, match=r"no vLLM environment at .*nowhere: build it with `python -m kvviz"):
        engine.start("tiny")
    assert engine.status().state == STOPPED


def test_a_stopped_engine_has_no_endpoint_and_says_so(tmp_path):
    engine = LocalEngine(venv=tmp_path)
    with pytest.raises(EndpointError, match="vLLM is not running"):
        engine.endpoint()
    engine.stop()  # stopping what does not run is harmless
    assert engine.status().line().startswith("vLLM is not running")


def test_a_model_that_is_none_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")  # an environment that is there, never run
    engine = LocalEngine(venv=tmp_path)
    with pytest.raises(ValueError, match="neither tiny, random:<preset> nor a model folder"):
        engine.start("/no/such/model")
    with pytest.raises(ValueError, match="unknown preset"):
        engine.start("random:nope")
    assert engine.status().state == STOPPED
