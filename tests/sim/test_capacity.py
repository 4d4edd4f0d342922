"""The simulated KV capacity from kvviz's memory model, against what vLLM's CPU build logged on this machine."""

from __future__ import annotations

import shutil

import pytest

from kvviz.base.errors import InputError
from kvviz.sim.capacity import kv_blocks
from tests.helpers import REPO


def test_tiny_in_one_gib_is_the_pool_vllm_logged():
    """vLLM 0.32's CPU build logged "CPU KV cache size: 1,048,576 tokens" for tiny in 1 GiB
    (/work/shared/reference/serving.md: 4 layers × 2 × 2 KV heads × 32 × 2 bytes = 1,024 bytes a token), in blocks
    of 128 tokens: 1,048,576 / 128 = 8,192 blocks; half the space, half the blocks."""
    assert kv_blocks(REPO / "assets" / "tiny", 1, 128, 1024) == 8192
    assert kv_blocks(REPO / "assets" / "tiny", 0.5, 128, 1024) == 4096


def test_a_model_with_sliding_window_layers_is_refused(tmp_path):
    """Gemma 2 alternates sliding-window and full layers: two kinds of KV group, which the simulator does not
    keep; it says so rather than simulate one pool."""
    shutil.copy(REPO / "assets" / "presets" / "gemma-2-2b.json", tmp_path / "config.json")
    with pytest.raises(InputError) as caught:
        kv_blocks(tmp_path, 1, 128, 1024)
    assert caught.value.key == "sim.local_layers" and "sliding" in str(caught.value)


def test_not_a_model_folder(tmp_path):
    with pytest.raises(InputError, match="is not a model folder"):
        kv_blocks(tmp_path, 1, 128, 1024)


def test_a_space_too_small_for_one_block_is_refused():
    """One block of tiny is 128 × 1,024 bytes = 128 KiB; 64 KiB (1/16,384 GiB) holds none."""
    with pytest.raises(InputError) as caught:
        kv_blocks(REPO / "assets" / "tiny", 1 / 16384, 128, 1024)
    assert caught.value.key == "sim.no_blocks"
