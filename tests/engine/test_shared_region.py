"""The decoder layers' shared region on a CPU (kvviz.engine.regions): dynamo traces one layer and stamps that
trace out for the others, the compiled step's logits are the eager model's, layers of another kind get a trace of
their own, and a layer that cannot be traced in the region compiles the general way.

The counts of traces come from torch's own timers (one entry each time dynamo traces a region or stamps one out),
not from kvviz."""

from __future__ import annotations

import gc
import logging

import pytest
import torch
from torch._dynamo.utils import compilation_time_metrics

from kvviz.engine import regions
from kvviz.engine.compiled import StaticDecoder
from kvviz.engine.loading import load_model, unload_all

pytestmark = pytest.mark.slow


class _Attention(torch.nn.Module):
    def __init__(self, index: int, window: int | None):
        super().__init__()
        self.layer_idx, self.sliding_window, self.scaling = index, window, 0.125
        self.proj = torch.nn.Linear(4, 4)


class _Layer(torch.nn.Module):
    def __init__(self, index: int, window: int | None):
        super().__init__()
        self.attention_type = "sliding" if window else "full"
        self.attn = _Attention(index, window)


def test_layers_are_of_one_kind_unless_a_plain_attribute_differs_their_index_aside():
    """Four layers numbered 0-3: all one kind when only the index differs; two kinds when every other layer
    slides (its window and its attention type differ), numbered in the order met."""
    same = [_Layer(i, None) for i in range(4)]
    assert regions.region_keys(same) == [0, 0, 0, 0]
    alternating = [_Layer(i, 8 if i % 2 else None) for i in range(4)]
    assert regions.region_keys(alternating) == [0, 1, 0, 1]
    windows = [_Layer(i, w) for i, w in enumerate([4, 4, 8, 4])]  # the same kind of layer, another window
    assert regions.region_keys(windows) == [0, 0, 1, 0]


@pytest.fixture(autouse=True)
def _fresh_models():
    """Each test loads tiny anew and forgets it after, with its decoders and packed copies (they live as long as
    the model; a later test's first static run must compile, and its count of packed copies start clean)."""
    unload_all()
    yield
    unload_all()
    gc.collect()  # the model's packed copies go with it now, not in a later test's count


def _greedy_against_eager(lm, decoder: StaticDecoder, steps: int = 8) -> None:
    """`steps` greedy tokens from the decoder's compiled step, each step's logits against the eager model's on the
    same tokens (the whole sequence read again, no cache)."""
    prompt = torch.tensor([[1, 5, 9, 13]])
    with torch.inference_mode():
        token = decoder.prefill(lm.model, prompt).argmax(-1).view(1, 1)
        seq, got = torch.cat([prompt, token], dim=1), []
        for _ in range(steps):
            got.append(decoder.decode(lm.model, token).float().clone())
            token = got[-1].argmax(-1).view(1, 1)
            seq = torch.cat([seq, token], dim=1)
        want = lm.model(seq[:, :-1]).logits[0, prompt.shape[1]:].float()
    torch.testing.assert_close(torch.cat(got), want, rtol=1e-4, atol=1e-4)


def _traces(lm, length: int) -> tuple[StaticDecoder, dict[str, int]]:
    compilation_time_metrics.clear()
    with torch.inference_mode():
        decoder = StaticDecoder(lm.model, length)
    return decoder, {k: len(v) for k, v in compilation_time_metrics.items() if k.startswith("invoke_subgraph")}


def test_the_bundled_tiny_traces_one_of_its_four_layers_and_stamps_out_three():
    """assets/tiny: 4 decoder layers of one kind. Dynamo traces the region once and stamps it out 3 times; each
    compiled step's logits are the eager model's."""
    lm = load_model("tiny")
    decoder, traces = _traces(lm, 64)
    assert decoder.shared_region
    assert traces.get("invoke_subgraph_trace") == 1 and traces.get("invoke_subgraph_reuse_stamp_out") == 3, traces
    _greedy_against_eager(lm, decoder)


def test_a_layer_the_region_cannot_trace_compiles_the_general_way(monkeypatch, caplog):
    """When a layer asks the region's cache for something it does not offer (here: its update fails), the step
    compiles with every layer traced on its own, says so in the log, and its steps' logits are the eager model's."""

    def refuses(self, *args, **kwargs):
        raise AttributeError("'_RegionCache' object has no attribute 'get_seq_length'")

    monkeypatch.setattr(regions._RegionCache, "update", refuses)
    lm = load_model("tiny")
    with caplog.at_level(logging.INFO, logger="kvviz.engine.compiled"):
        decoder, traces = _traces(lm, 128)
    assert not decoder.shared_region
    assert "the decoder layers' shared region did not compile" in caplog.text
    # the shared region's one trace, which failed at the first layer, then one trace for each of the 4 layers
    assert traces.get("invoke_subgraph_trace") == 1 + 4 and "invoke_subgraph_reuse_stamp_out" not in traces, traces
    _greedy_against_eager(lm, decoder)
