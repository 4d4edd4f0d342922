"""Tensor and pipeline parallel 2 on a real vLLM (its CPU build: two worker processes over gloo), one start per
layout for the module: it starts, answers a completion, logs for each rank the capacity worked out by hand from
tiny's config (which kvviz predicts), and stops with no process left.

On this machine a tp 2 start took 86-115 s and a pp 2 start about 50 s (2 shared cores).
"""

from __future__ import annotations

import os

import httpx
import pytest

from kvviz.calc.arch import architecture_from_source
from kvviz.calc.dtypes import kv_dtype
from kvviz.serving.parallel_capacity import Layout, complete, predict
from kvviz.serving.vllm import TINY, ServerSpec, free_port, ranks_text, start, stop, wait_ready
from tests.serving.procs import TAG_VAR, left_after, new_tag, tagged

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# tiny's config: 4 layers, 2 KV heads of head_dim 32; vLLM's CPU build runs its fp32 checkpoint in bf16 (2 bytes);
# 1 GiB of KV space a worker (VLLM_CPU_KVCACHE_SPACE=1), blocks of 128 tokens.
LAYERS, KV_HEADS, HEAD_DIM, BF16, GIB, BLOCK = 4, 2, 32, 2, 1 << 30, 128
# tp 2: each rank keeps KV_HEADS / 2 = 1 head of every layer; pp 2: each stage keeps LAYERS / 2 = 2 layers of
# both heads. Either way a token leaves 2 (K, V) × 2 × 1 × 32 × 2 = 512 bytes (for tp 2: 4 layers × 1 head) on
# a rank, so 1 GiB holds 1 GiB / (128 × 512) = 16,384 blocks, 2,097,152 tokens on each rank.
PER_RANK = {"tp2": 2 * LAYERS * (KV_HEADS // 2) * HEAD_DIM * BF16,
            "pp2": 2 * (LAYERS // 2) * KV_HEADS * HEAD_DIM * BF16}
LAYOUTS = {"tp2": Layout(tp=2), "pp2": Layout(pp=2)}
RANKS = {"tp2": ["TP0", "TP1"], "pp2": ["PP0", "PP1"]}


def by_hand(layout: str) -> tuple[int, int]:
    """(blocks, tokens) on each rank of `layout`, from the constants above."""
    blocks = GIB // (BLOCK * PER_RANK[layout])
    return blocks, blocks * BLOCK


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def parallel(request, tmp_path_factory):
    """vLLM serving tiny laid out as the param says, every process it starts tagged (tests/serving/procs.py) so
    that the last test can see them all gone. Module scope with a param: pytest runs one layout's tests, stops
    its server, then starts the next; never two at once."""
    name, layout = request.param, LAYOUTS[request.param]
    tag = new_tag()
    spec = ServerSpec(TINY, "tiny", port=free_port(), max_model_len=1024, kv_space_gib=1,
                      tensor_parallel=layout.tp, pipeline_parallel=layout.pp)
    os.environ[TAG_VAR] = tag  # the server's environment is this process's at the start
    try:
        server = start(spec, log_path=tmp_path_factory.mktemp(f"vllm-{name}") / "vllm.log")
    finally:
        del os.environ[TAG_VAR]
    try:
        wait_ready(server)
        yield name, layout, server, tag
    finally:
        stop(server)


def test_it_answers_a_completion(parallel):
    _, _, server, _ = parallel
    assert complete(server.spec.base_url, "tiny", "The KV cache", tokens=8)


def test_each_rank_logs_the_capacity_worked_out_by_hand(parallel):
    """Each of the two workers logs 1 GiB of KV space; the engine logs the tokens each holds its share of, vLLM's
    /metrics the blocks: both as worked out above, and as kvviz predicts."""
    name, layout, server, _ = parallel
    blocks, tokens = by_hand(name)
    assert (blocks, tokens) == (16_384, 2_097_152)
    ranks = server.facts.ranks()
    assert [(r.rank, r.kv_space_gib, r.kv_capacity_tokens) for r in ranks] == [
        (rank, 1.0, tokens) for rank in RANKS[name]], server.log()[-3000:]
    assert ranks_text(server.facts) == f"{RANKS[name][0]} {tokens:,} · {RANKS[name][1]} {tokens:,}"
    info = next(line for line in httpx.get(server.spec.base_url + "/metrics").text.splitlines()
                if line.startswith("vllm:cache_config_info"))
    assert f'num_gpu_blocks="{blocks}"' in info and f'block_size="{BLOCK}"' in info
    predicted = predict(architecture_from_source(TINY), kv_dtype("bf16"), layout, 1, BLOCK, 1024)
    assert (predicted.modelled_blocks, predicted.modelled_logged_tokens, predicted.calc_token_slots) == (
        blocks, tokens, tokens)


def test_stop_leaves_no_process(parallel):
    """The API server, its engine core and the two workers (at least four processes, all tagged) run; after
    stop none of them, nor anything else the start began, is left (each pid seen is gone, not a zombie)."""
    _, _, server, tag = parallel
    running = [p for p in tagged(tag) if p.pid != os.getpid()]
    assert len(running) >= 4, running
    assert any("vllm.entrypoints.openai.api_server" in p.cmdline for p in running), running
    stop(server)
    assert left_after(tag, 15.0) == []
    assert [p for p in running if not gone(p, tag)] == []


def gone(proc, tag: str) -> bool:
    """Whether a process seen running has ended: no /proc entry, a zombie, or its pid now another process's
    (one without the tag)."""
    entry = f"/proc/{proc.pid}"
    try:
        with open(f"{entry}/stat") as stat, open(f"{entry}/environ", "rb") as environ:
            state = stat.read().rsplit(")", 1)[1].split()[0]
            mark = f"{TAG_VAR}={tag}".encode() in environ.read().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z" or not mark
