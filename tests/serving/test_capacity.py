"""vLLM's KV capacity beside kvviz's (kvviz.serving.capacity): rows worked out by hand from the models' configs
and vLLM 0.32's rules (kvviz.serving.kv_groups, arithmetic in each docstring), the lines the CLI prints for them,
the attention labels `python -m kvviz presets` prints, and one real vLLM per twin that must log the figures.

The vLLM test runs, as a user would (about 4 minutes on 2 shared cores: three starts):
    python -m kvviz.serving capacity --models random:gemma-3-1b@6 random:gemma-2-2b@4 random:gpt-oss-20b@2 \\
        --max-model-len 4096 --json
On this machine (vLLM 0.32.0's CPU build, VLLM_CPU_KVCACHE_SPACE=1) vLLM logged "CPU KV cache size: 244,922
tokens" (8,192 blocks), "64,527 tokens" (1,024 blocks) and "335,544 tokens" (4,096 blocks): the figures below.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict

import pytest

from kvviz.calc.presets import load_preset, preset_names
from kvviz.serving.capacity import attention_shape, capacity_row
from kvviz.serving.cli import capacity_line, groups_line
from kvviz.serving.models import model_folder
from kvviz.serving.vllm import TINY
from tests.helpers import REPO

pytestmark = pytest.mark.usefixtures("vllm_auto_dtype")  # the figures by hand are in bf16, vLLM's own choice


def row_for(spec: str, tmp_path, max_model_len: int, blocks: int, logged: int | None):
    return capacity_row(spec, model_folder(spec, root=tmp_path).path, 1, "bfloat16", 128, max_model_len,
                        vllm_num_blocks=blocks, vllm_logged=logged)


def test_capacity_of_tiny_by_hand():
    """tiny: 4 layers × 2 (K, V) × 2 KV heads × 32 dims × 2 bytes (bf16) = 1,024 bytes a token: 1 GiB holds
    8,192 blocks of 128 tokens, 1,048,576 tokens, all of them logged at max_model_len 1,024."""
    row = capacity_row("tiny", TINY, 1, "bfloat16", 128, 1024, vllm_num_blocks=8192, vllm_logged=1_048_576)
    assert (row.bytes_per_token, row.kvviz_token_slots, row.attention) == (1024, 1_048_576, "GQA 8/2")
    assert (row.modelled_num_blocks, row.kvviz_logged_tokens, row.blocks_per_request) == (8192, 1_048_576, 8)
    assert row.agree is True and row.not_modelled is None


def test_vllms_groups_for_full_and_sliding_layers_by_hand(tmp_path):
    """Gemma 2's first 4 layers (2 sliding of window 4,096, 2 full; 4 KV heads of 256 in bf16 = 4,096 bytes a
    token and layer), 1 GiB, blocks of 128, max_model_len 8,192. vLLM makes a group of each kind: a block holds
    128 tokens of 2 layers (1 MiB), so 1,024 blocks, 131,072 group-tokens. A request holds 8,192 / 128 = 64
    full blocks and ⌈min(4,095 + 2,048, 8,192) / 128⌉ + 1 = 49 sliding ones: 1,024 / 113 × 8,192 = 74,235
    tokens logged (vLLM's own figure), where every layer keeping every token would give 65,536."""
    row = row_for("random:gemma-2-2b@4", tmp_path, 8192, 1024, 74_235)
    assert (row.modelled_pool_tokens, row.kvviz_logged_tokens, row.kvviz_token_slots) == (131_072, 74_235, 65_536)
    assert row.agree and row.layer_groups == "2 sliding (window 4096) + 2 full"


# (twin, vLLM's blocks, the size vLLM logged) at max_model_len 4,096 in 1 GiB, measured by the command in the
# module's docstring; each worked out by hand in the next test's docstring.
MEASURED = [("random:gemma-3-1b@6", 8192, 244_922), ("random:gemma-2-2b@4", 1024, 64_527),
            ("random:gpt-oss-20b@2", 4096, 335_544)]


@pytest.mark.parametrize(("spec", "blocks", "logged"), MEASURED)
def test_the_twins_figures_by_hand(spec, blocks, logged, tmp_path):
    """At max_model_len 4,096, 1 GiB, blocks of 128 (a request holds 32 blocks in a full group):
    - gemma-3-1b@6: 1 KV head × 256 × 2 × 2 B = 1,024 B a token and layer; 5 sliding + 1 full in groups of 1:
      1 GiB / (128 × 1,024 B) = 8,192 blocks; a sliding group ⌈min(511 + 2,048, 4,096) / 128⌉ + 1 = 21;
      32 + 5 × 21 = 137; int(8,192 / 137 × 4,096) = 244,922.
    - gemma-2-2b@4: 4 KV heads × 256 × 2 × 2 B = 4,096 B; 2 sliding + 2 full in groups of 2: 1 GiB / (2 × 128
      × 4,096 B) = 1,024 blocks; sliding ⌈min(4,095 + 2,048, 4,096) / 128⌉ + 1 = 33; 32 + 33 = 65;
      int(1,024 / 65 × 4,096) = 64,527.
    - gpt-oss-20b@2: 8 KV heads × 64 × 2 × 2 B = 2,048 B; 1 sliding + 1 full in groups of 1: 1 GiB / (128 ×
      2,048 B) = 4,096 blocks; sliding ⌈min(127 + 2,048, 4,096) / 128⌉ + 1 = 18; 32 + 18 = 50;
      int(4,096 / 50 × 4,096) = 335,544."""
    row = row_for(spec, tmp_path, 4096, blocks, logged)
    assert (row.modelled_num_blocks, row.kvviz_logged_tokens) == (blocks, logged)
    assert row.agree is True


def test_a_modelled_row_prints_its_groups(tmp_path):
    """Gemma 3 1B at full depth (22 sliding + 4 full): 6 sliding groups, two of them a layer short, and a full
    one, 4 layers a group; 2,048 blocks; 32 + 6 × 21 = 158 blocks a request (tests/serving/test_kv_groups.py)."""
    row = row_for("random:gemma-3-1b", tmp_path, 4096, 2048, 53_092)
    assert groups_line(row) == (
        "      vLLM's KV-cache groups (modelled): 6 sliding (window 512) with 2 padding layer(s) + 1 full, 4 layer(s) "
        "a group; blocks: vLLM 2,048 modelled 2,048; a request of 4,096 tokens holds 158 blocks")
    assert groups_line(row, "zh") == (
        "      vLLM 的 KV Cache 分组（模型计算）：6 组滑动窗口（窗口 512），含 2 个填充层 + 1 组全注意力，每组 4 层；"
        "块数：vLLM 2,048，模型计算 2,048；一个 4,096 token 的请求占 158 块")
    assert capacity_line(row).endswith("logged: vLLM     53,092 modelled     53,092  kvviz slots     40,320  agree")


def test_an_unmodelled_family_says_so_in_words(tmp_path):
    """Qwen3-Next's gated DeltaNet layers keep a state vLLM pages apart: the row has no modelled figure, agree is
    None, and the line (and the JSON the CLI prints) says why, never a 0 or a bare DIFFER."""
    row = row_for("random:qwen3-next-80b-a3b@4", tmp_path, 1024, 100, None)
    assert row.agree is None and row.modelled_num_blocks is None and row.kvviz_logged_tokens is None
    why = ("its gated DeltaNet layers keep a fixed-size state, whose page vLLM pads to the attention page or matches "
           "by larger attention blocks; that grouping is not modelled")
    assert row.not_modelled == why and asdict(row)["not_modelled"] == why
    line = capacity_line(row)
    assert line.endswith(f"logged: vLLM          ?  kvviz slots    524,288  not modelled: {why}")
    assert " 0 " not in line and "DIFFER" not in line and groups_line(row) is None
    assert capacity_line(row, "zh").endswith(
        "日志：vLLM          ?  kvviz 槽位    524,288  未建模：其 gated DeltaNet 层保存固定大小的状态，vLLM 会把它的页"
        "填充到注意力层的页大小，或用更大的注意力块去对齐；这种分组未建模")


def test_the_capacity_labels_are_the_presets_labels(capsys):
    """Every preset's attention label in the capacity output opens with the kind `python -m kvviz presets`
    prints for it; gemma-3-1b's single KV head is MQA in both (issue 23 saw "GQA 4/1" beside "MQA")."""
    from kvviz.cli import main

    assert main(["presets", "--json"]) == 0
    listed = {r["name"]: r["attention"] for r in json.loads(capsys.readouterr().out)}
    assert set(listed) == set(preset_names())
    shown = {name: attention_shape(load_preset(name)) for name in listed}
    assert {name: label.split(" ")[0].rstrip(",") for name, label in shown.items()} == listed
    assert shown["gemma-3-1b"] == "MQA 4/1, explicit head_dim 256" and listed["gemma-3-1b"] == "MQA"
    assert shown["gpt2"] == "MHA" and shown["qwen3-0.6b"] == "GQA 16/8, explicit head_dim 128"


@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_logs_the_capacity_kvviz_predicts_for_grouped_twins():
    """Three starts of a real vLLM (CPU build, 1 GiB, max_model_len 4,096), one per twin: the blocks in its
    /metrics and the size its log prints are kvviz's prediction and the figures worked out by hand above; the
    CLI's JSON carries agree and no not_modelled."""
    models = [spec for spec, _, _ in MEASURED]
    proc = subprocess.run([sys.executable, "-m", "kvviz.serving", "capacity", "--models", *models,
                           "--max-model-len", "4096", "--json"], cwd=REPO, capture_output=True, text=True,
                          timeout=1200, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout)
    got = [(r["model"], r["vllm_num_blocks"], r["vllm_logged_tokens"]) for r in rows]
    assert got == MEASURED, "vLLM's own figures moved: a new vLLM, or another max_num_batched_tokens?"
    for r in rows:
        assert (r["modelled_num_blocks"], r["kvviz_logged_tokens"]) == (r["vllm_num_blocks"], r["vllm_logged_tokens"])
        assert r["agree"] is True and r["not_modelled"] is None and r["vllm_dtype"] == "bf16"
