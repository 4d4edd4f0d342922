"""Parallel layouts without a vLLM: the command line the launcher builds, the per-rank facts read from vLLM's own
log lines (copied from real starts on this machine: tensor parallel 2 and data parallel 2 on tiny, vLLM 0.32's
CPU build), the status line that shows them, a layout refused before any start, and kvviz's per-rank prediction
against figures worked out by hand from the configs (tiny, and the twins in results/parallel/twins/) and vLLM
0.32's rules as its source states them (vllm/v1/core/kv_cache_utils.py: get_kv_cache_configs,
_get_kv_cache_groups_uniform_page_size, get_max_concurrency_for_kv_cache_config)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvviz.base.errors import InputError
from kvviz.calc.arch import architecture_from_source
from kvviz.calc.dtypes import kv_dtype
from kvviz.i18n.errors import translate
from kvviz.serving.local import READY, EngineStatus
from kvviz.serving.parallel_capacity import Layout, ParallelRow, parse_layout, predict
from kvviz.serving.vllm import TINY, ServerSpec, check_layout, command, ranks_text, startup_facts
from tests.helpers import REPO

TWINS = REPO / "results" / "parallel" / "twins"

# Lines of a real start: tiny, --tensor-parallel-size 2, VLLM_CPU_KVCACHE_SPACE=1 (results-tmp/probe-211.log)
TP2_LOG = """\
(EngineCore pid=29600) INFO 12-01 21:09:39 [utils.py:347] Using LBHNC KV cache layout.
(Worker_TP1 pid=29689) INFO 12-01 21:10:36 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB for KV cache on node 0.
(Worker_TP0 pid=29686) INFO 12-01 21:10:37 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB for KV cache on node 0.
(EngineCore pid=29600) INFO 12-01 21:10:37 [kv_cache_utils.py:2327] CPU KV cache size: 2,097,152 tokens, Maximum \
concurrency for 1,024 tokens per request: 2048.00x
"""


def test_the_command_line_carries_every_parallel_size():
    """vLLM 0.32's flags: --tensor-parallel-size, --pipeline-parallel-size, --data-parallel-size, and the
    multiprocessing executor for a layout of several workers an engine (the CPU build has no other)."""
    spec = ServerSpec(TINY, "tiny", tensor_parallel=2, pipeline_parallel=2, data_parallel=2)
    cmd = command(spec, "python")
    for flag, value in (("--tensor-parallel-size", "2"), ("--pipeline-parallel-size", "2"),
                        ("--data-parallel-size", "2"), ("--distributed-executor-backend", "mp")):
        assert cmd[cmd.index(flag) + 1] == value
    assert spec.workers == 8
    one = command(ServerSpec(TINY, "tiny"), "python")
    assert not any(a.endswith("-parallel-size") or a == "--distributed-executor-backend" for a in one)
    assert "--distributed-executor-backend" not in command(ServerSpec(TINY, "tiny", data_parallel=2), "python")


def test_each_ranks_capacity_is_read_from_the_log():
    """Two workers, TP0 and TP1, each with 1.0 GiB; the one engine logged 2,097,152 tokens, which each holds
    its half of (one of tiny's two KV heads)."""
    facts = startup_facts(TP2_LOG)
    assert facts.kv_capacity_tokens == 2_097_152
    assert [(r.rank, r.kv_space_gib, r.kv_capacity_tokens) for r in facts.ranks()] == [
        ("TP0", 1.0, 2_097_152), ("TP1", 1.0, 2_097_152)]
    assert ranks_text(facts) == "TP0 2,097,152 · TP1 2,097,152"


# Lines of a real start: tiny, --data-parallel-size 2 (results-tmp/probe-112.log): each engine's worker is named
# "Worker", as if alone
DP2_LOG = """\
(Worker pid=1968) INFO 12-01 21:14:58 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB for KV cache on node 0.
(EngineCore_DP0 pid=830) INFO 12-01 21:14:58 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, Maximum \
concurrency for 1,024 tokens per request: 1024.00x
(Worker pid=1938) INFO 12-01 21:14:59 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB for KV cache on node 0.
(EngineCore_DP1 pid=831) INFO 12-01 21:14:59 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, Maximum \
concurrency for 1,024 tokens per request: 1024.00x
"""


# Lines of a real start of tiny with its one worker in the engine core's process (VLLM_ENABLE_V1_MULTIPROCESSING=0,
# kvviz.serving.vllm.worker_in_engine; fp32): the worker's KV line comes from the engine core
IN_ENGINE_LOG = """\
(EngineCore pid=5603) INFO 12-05 10:15:20 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB for KV cache on node 0.
(EngineCore pid=5603) INFO 12-05 10:15:20 [kv_cache_utils.py:2327] CPU KV cache size: 524,288 tokens, Maximum \
concurrency for 1,024 tokens per request: 512.00x
"""


def test_a_worker_in_the_engine_cores_process_is_rank_0():
    """One rank, 0 (as a worker process of its own, "Worker", would be), with its 1.0 GiB and the 524,288 tokens
    the engine logged; not a rank named after the engine core's process."""
    facts = startup_facts(IN_ENGINE_LOG)
    assert [(r.rank, r.kv_space_gib, r.kv_capacity_tokens) for r in facts.ranks()] == [("0", 1.0, 524_288)]


def test_data_parallel_ranks_take_their_own_engines_capacity():
    """With data parallelism each rank has an engine core of its own, which logs its own size: two ranks, DP0
    and DP1, each with its engine's 1,048,576 tokens (a replica of tiny at tp1); one engine's figure changed to
    see that each is read from its own line."""
    facts = startup_facts(DP2_LOG)
    assert [(r.rank, r.kv_space_gib, r.kv_capacity_tokens) for r in facts.ranks()] == [
        ("DP0", 1.0, 1_048_576), ("DP1", 1.0, 1_048_576)]
    other = startup_facts(DP2_LOG.replace("(EngineCore_DP1 pid=831) INFO 12-01 21:14:59 [kv_cache_utils.py:2327] "
                                          "CPU KV cache size: 1,048,576", "(EngineCore_DP1 pid=831) INFO 12-01 "
                                          "21:14:59 [kv_cache_utils.py:2327] CPU KV cache size: 524,288"))
    assert ranks_text(other) == "DP0 1,048,576 · DP1 524,288"
    tp_in_each = startup_facts("\n".join(f"(Worker_TP{r} pid={100 + 10 * e + r}) INFO x [cpu_worker.py:260] "
                                         f"Explicitly set (1.0/23.54) GiB for KV cache on node 0." for e in (0, 1)
                                         for r in (0, 1)) + "\n" + "".join(
        line for line in DP2_LOG.splitlines(keepends=True) if "EngineCore" in line))
    assert ranks_text(tp_in_each) == "DP0_TP0 1,048,576 · DP0_TP1 1,048,576 · DP1_TP0 1,048,576 · DP1_TP1 1,048,576"


def test_a_cuda_workers_kv_memory_is_read_too():
    """The CUDA build's workers log "Available KV cache memory: N GiB" (vllm/v1/worker/gpu_worker.py)."""
    log = ("(Worker_TP0 pid=5) INFO 12-01 10:00:00 [gpu_worker.py:759] Available KV cache memory: 61.25 GiB\n"
           "(Worker_TP1 pid=6) INFO 12-01 10:00:00 [gpu_worker.py:759] Available KV cache memory: 61.5 GiB\n"
           "(EngineCore pid=4) INFO 12-01 10:00:01 [kv_cache_utils.py:2327] GPU KV cache size: 2,006,784 tokens, "
           "Maximum concurrency for 1,024 tokens per request: 1959.75x\n")
    assert [(r.rank, r.kv_space_gib, r.kv_capacity_tokens) for r in startup_facts(log).ranks()] == [
        ("TP0", 61.25, 2_006_784), ("TP1", 61.5, 2_006_784)]


def test_the_status_line_shows_the_ranks_in_both_languages():
    facts = startup_facts(TP2_LOG)
    status = EngineStatus(READY, "tiny", TINY, "http://127.0.0.1:8011", 86.0, facts.kv_capacity_tokens, 1,
                          layout="tp2 pp1 dp1", ranks=ranks_text(facts), workers=2, dtype="bfloat16")
    assert status.line() == ("vLLM serves tiny at http://127.0.0.1:8011 (ready in 86 s; in bfloat16) on 2 ranks "
                             "(tp2 pp1 dp1), 1 GiB of KV cache each; KV cache tokens per rank as vLLM logged them: "
                             "TP0 2,097,152 · TP1 2,097,152")
    assert translate(status.line(), "zh") == (
        "vLLM 正在 http://127.0.0.1:8011 提供 tiny（86 秒就绪；数据类型 bfloat16），共 2 个 rank（tp2 pp1 dp1），每个 "
        "1 GiB KV Cache；vLLM 日志中每个 rank 的 KV Cache token 数：TP0 2,097,152 · TP1 2,097,152")
    single = EngineStatus(READY, "tiny", TINY, "http://127.0.0.1:8011", 35.0, 524_288, 1, dtype="float32")
    assert single.line().endswith("(ready in 35 s; KV cache 524,288 tokens in 1 GiB; in float32)")
    assert "ranks" not in single.line()


def test_a_layout_the_model_cannot_take_is_refused_before_any_start():
    """tp 3 on tiny (8 query heads): the calculator's check, in one line, before vLLM would spend a minute
    failing; a bad venv is not even looked at."""
    with pytest.raises(InputError, match=r"^tp 3 does not divide the model's 8 query heads .*tp = 1, 2, 4 or 8$"):
        check_layout(ServerSpec(TINY, "tiny", tensor_parallel=3))
    with pytest.raises(InputError, match="pp 5 is more than the model's 4 layers"):
        check_layout(ServerSpec(TINY, "tiny", pipeline_parallel=5))
    proc = subprocess.run([sys.executable, "-m", "kvviz.serving", "start", "tiny", "--tensor-parallel-size", "3",
                           "--venv", "/nonexistent", "--lang", "en"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "error: tp 3 does not divide the model's 8 query heads (each GPU holds whole heads); this model takes "
        "tp = 1, 2, 4 or 8"]


def test_layouts_are_parsed_or_refused_in_one_line():
    assert parse_layout("tp2") == Layout(2, 1, 1) and parse_layout("PP2") == Layout(1, 2, 1)
    assert parse_layout("tp2pp2dp2") == Layout(2, 2, 2) and parse_layout("dp2").label == "tp1 pp1 dp2"
    for bad in ("2", "tp", "tp0", "tp2x", "ep2"):
        with pytest.raises(InputError, match=r"^layout .*: write the sizes as tp2, pp2, dp2"):
            parse_layout(bad)


def figures(folder, layout: Layout, max_model_len: int = 1024):
    arch = architecture_from_source(folder)
    p = predict(arch, kv_dtype("bf16"), layout, 1, 128, max_model_len)
    return (p.kv_heads_per_rank, p.stage_layers, p.bytes_per_token_per_rank, p.calc_token_slots, p.modelled_blocks,
            p.modelled_logged_tokens)


# Worked by hand; 1 GiB = 1,073,741,824 bytes of KV space on each worker, blocks of 128 tokens, bf16 (2 bytes),
# max_model_len 1,024 (8 blocks a request in a full-attention group). A token and layer is 2 (K, V) × KV heads
# × head_dim × 2 bytes.
BY_HAND = [
    # tiny: 4 layers, 2 KV heads of 32. tp2: one head a rank, 4 × 2 × 1 × 32 × 2 = 512 B a token: 1 GiB / (128 ×
    # 512) = 16,384 blocks, 2,097,152 tokens (the measured figure).
    (TINY, Layout(2, 1, 1), (1, (4,), 512, 2_097_152, 16_384, 2_097_152)),
    # pp2: 2 layers a stage, both heads: 2 × 2 × 2 × 32 × 2 = 512 B; the same 2,097,152.
    (TINY, Layout(1, 2, 1), (2, (2, 2), 512, 2_097_152, 16_384, 2_097_152)),
    # dp2: each replica is tp1: 1,024 B, 8,192 blocks, 1,048,576 tokens an engine (and a rank).
    (TINY, Layout(1, 1, 2), (2, (4,), 1024, 1_048_576, 8_192, 1_048_576)),
    # tiny-kv1 (one KV head): tp2 cannot split it, so both ranks keep it whole: 4 × 2 × 1 × 32 × 2 = 512 B.
    (TWINS / "tiny-kv1", Layout(2, 1, 1), (1, (4,), 512, 2_097_152, 16_384, 2_097_152)),
    # tiny-5l (5 layers): pp2 splits them 3 + 2 (vLLM's get_pp_indices gives the extra layer to the first stage);
    # stage 0: 3 × 256 = 768 B, 1 GiB / (128 × 768) = 10,922 blocks (stage 1 fits 16,384, but every worker keeps
    # the smallest count): 10,922 × 128 = 1,398,016 tokens.
    (TWINS / "tiny-5l", Layout(1, 2, 1), (2, (3, 2), 768, 1_398_016, 10_922, 1_398_016)),
    # llama-sliding (6 layers: 5 sliding of window 256, then 1 full; 2 KV heads of 32, 256 B a token and layer).
    # vLLM groups it 1 layer a group (the smaller bucket's size): 6 groups, a block is one layer's page, 128 ×
    # 256 = 32,768 B: 32,768 blocks. A request: full 1,024 / 128 = 8 blocks, each sliding group ⌈min(255 + 2,048,
    # 1,024) / 128⌉ + 1 = 9: 8 + 5 × 9 = 53; logged int(32,768 / 53 × 1,024) = 633,102. The calculator's slots
    # (every layer every token, 6 × 256 = 1,536 B): 1 GiB / (128 × 1,536) = 5,461 blocks, 699,008 tokens.
    (TWINS / "llama-sliding", Layout(1, 1, 1), (2, (6,), 1536, 699_008, 32_768, 633_102)),
    # tp2: half the page (128 B a token and layer): 65,536 blocks, int(65,536 / 53 × 1,024) = 1,266,204.
    (TWINS / "llama-sliding", Layout(2, 1, 1), (1, (6,), 768, 1_398_016, 65_536, 1_266_204)),
    # pp2: stage 0 holds sliding layers 0-2, stage 1 sliding 3-4 and the full 5; each group still has one layer
    # on the stage that holds it, so a block is still one page: 32,768 blocks, 633,102 tokens, not twice the tp1
    # figure (a request still takes its 53 blocks from the one pool every group draws on), while the calculator,
    # counting 3 layers a stage, says 1,398,016.
    (TWINS / "llama-sliding", Layout(1, 2, 1), (2, (3, 3), 768, 1_398_016, 32_768, 633_102)),
]


@pytest.mark.parametrize(("folder", "layout", "expected"), BY_HAND, ids=lambda x: getattr(x, "label", None))
def test_the_per_rank_prediction_by_hand(folder, layout, expected):
    assert figures(folder, layout) == expected


def test_the_cli_prints_the_prediction_without_starting_vllm(vllm_auto_dtype):
    proc = subprocess.run([sys.executable, "-m", "kvviz.serving", "parallel-capacity", "--predict-only", "--layouts",
                           "tp2", "pp2", "--json"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["layout"], r["predicted"]["kv_heads_per_rank"], r["predicted"]["modelled_logged_tokens"])
            for r in rows] == [
        ("tp2 pp1 dp1", 1, 2_097_152), ("tp1 pp2 dp1", 2, 2_097_152)]
    proc = subprocess.run([sys.executable, "-m", "kvviz.serving", "parallel-capacity", "--predict-only", "--layouts",
                           "tp2", "tp3", "--lang", "zh"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""  # every layout checked before the first start
    assert proc.stderr.strip() == ("错误：tp 3 不能整除模型的 8 个查询头（每块 GPU 持有完整的注意力头）；"
                                   "这个模型可用 tp = 1, 2, 4 或 8")


def test_a_data_parallel_row_agrees_with_its_engines_summed_blocks():
    """tiny at dp 2: each engine logs 1,048,576 tokens (8,192 blocks of 128 at 1,024 B a token), and vLLM's API
    server reports the blocks of both engines in /metrics (16,384, as measured); a row read back from its JSON
    is judged the same, and a lone engine's 8,192 there would not agree."""
    predicted = predict(architecture_from_source(TINY), kv_dtype("bf16"), Layout(dp=2), 1, 128, 1024)
    row = ParallelRow("tiny", "GQA 8/2", "bf16", "bf16", 1024, 1, predicted, 16_384, (1_048_576, 1_048_576),
                      (("DP0", 1.0), ("DP1", 1.0)), 313.0)
    assert row.agree is True
    assert ParallelRow.from_record(json.loads(json.dumps(row.record()))) == row
    assert ParallelRow("tiny", "GQA 8/2", "bf16", "bf16", 1024, 1, predicted, 8_192, (1_048_576, 1_048_576),
                       (("DP0", 1.0), ("DP1", 1.0))).agree is False
