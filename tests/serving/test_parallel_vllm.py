"""Tensor and pipeline parallel 2 on a real vLLM (its CPU build: two worker processes over gloo), one start per
layout for the module: it starts, answers a completion, logs for each rank the capacity worked out by hand from
tiny's config (which kvviz predicts), and stops with no process left.

On this machine (2 shared cores) a tp 2 start took 86 s to 4.5 min and a pp 2 start 50 s to 4 min, by the load.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from kvviz.calc.arch import architecture_from_source
from kvviz.calc.dtypes import kv_dtype
from kvviz.serving.parallel_capacity import Layout, complete, predict
from kvviz.serving.vllm import (
    TINY,
    ServerSpec,
    cpu_fp32,
    free_port,
    probe_args,
    ranks_text,
    start,
    stop,
    wait_ready,
)
from tests.serving.procs import TAG_VAR, left_after, new_tag

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# tiny's config: 4 layers, 2 KV heads of head_dim 32; vLLM's CPU build runs its fp32 checkpoint in bf16 (2 bytes),
# or in fp32 (4 bytes) where kvviz asks for it (a CPU without bf16 instructions: kvviz.serving.vllm.cpu_fp32);
# 1 GiB of KV space a worker (VLLM_CPU_KVCACHE_SPACE=1), blocks of 128 tokens.
LAYERS, KV_HEADS, HEAD_DIM, GIB, BLOCK = 4, 2, 32, 1 << 30, 128
ELEMENT, DTYPE = (4, "fp32") if cpu_fp32() else (2, "bf16")
# tp 2: each rank keeps KV_HEADS / 2 = 1 head of every layer; pp 2: each stage keeps LAYERS / 2 = 2 layers of
# both heads. Either way a token leaves 2 (K, V) × 2 × 1 × 32 × 2 = 512 bytes in bf16 (for tp 2: 4 layers × 1 head)
# on a rank, so 1 GiB holds 1 GiB / (128 × 512) = 16,384 blocks, 2,097,152 tokens on each rank; in fp32 1,024
# bytes, 8,192 blocks, 1,048,576 tokens.
PER_RANK = {"tp2": 2 * LAYERS * (KV_HEADS // 2) * HEAD_DIM * ELEMENT,
            "pp2": 2 * (LAYERS // 2) * KV_HEADS * HEAD_DIM * ELEMENT}
LAYOUTS = {"tp2": Layout(tp=2), "pp2": Layout(pp=2)}
RANKS = {"tp2": ["TP0", "TP1"], "pp2": ["PP0", "PP1"]}


def by_hand(layout: str) -> tuple[int, int]:
    """(blocks, tokens) on each rank of `layout`, from the constants above."""
    blocks = GIB // (BLOCK * PER_RANK[layout])
    return blocks, blocks * BLOCK


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def parallel(request, tmp_path_factory):
    """vLLM serving tiny laid out as the param says, started as kvviz's parallel capacity probe starts it
    (probe_args: tp 2 without vLLM's compile on the CPU build, pp 2 with it), every process it starts tagged
    (tests/serving/procs.py) so that the last test can see them all gone. Module scope with a param: pytest runs
    one layout's tests, stops its server, then starts the next; never two at once."""
    name, layout = request.param, LAYOUTS[request.param]
    tag = new_tag()
    spec = ServerSpec(TINY, "tiny", port=free_port(), max_model_len=1024, kv_space_gib=1,
                      tensor_parallel=layout.tp, pipeline_parallel=layout.pp, extra_args=probe_args(layout.pp))
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
    assert (blocks, tokens) == ((8_192, 1_048_576) if ELEMENT == 4 else (16_384, 2_097_152))
    ranks = server.facts.ranks()
    assert [(r.rank, r.kv_space_gib, r.kv_capacity_tokens) for r in ranks] == [
        (rank, 1.0, tokens) for rank in RANKS[name]], server.log()[-3000:]
    assert ranks_text(server.facts) == f"{RANKS[name][0]} {tokens:,} · {RANKS[name][1]} {tokens:,}"
    info = next(line for line in httpx.get(server.spec.base_url + "/metrics").text.splitlines()
                if line.startswith("vllm:cache_config_info"))
    assert f'num_gpu_blocks="{blocks}"' in info and f'block_size="{BLOCK}"' in info
    predicted = predict(architecture_from_source(TINY), kv_dtype(DTYPE), layout, 1, BLOCK, 1024)
    assert (predicted.modelled_blocks, predicted.modelled_logged_tokens, predicted.calc_token_slots) == (
        blocks, tokens, tokens)


def test_stop_leaves_no_process(parallel):
    """The guardian, the API server, its engine core and the two workers (at least five processes: the guardian's
    descendants and vLLM's process group) run; after stop none of them is left (each pid seen is gone, a zombie,
    or another process started since). vLLM retitles its engine core and workers (setproctitle), which overwrites
    the environment /proc shows, so they are found by parent and group, not by the test's tag."""
    _, _, server, tag = parallel
    running = family(server.process.pid, server.pid)
    assert len(running) >= 5, running
    assert any("vllm.entrypoints.openai.api_server" in cmd for _, _, cmd in running), running
    stop(server)
    assert left_after(tag, 15.0) == []
    assert [p for p in running if not gone(p)] == []


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state, ppid, pgrp, ...), None once it has ended."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def family(root: int, group: int | None) -> list[tuple[int, str, str]]:
    """(pid, start time, command line) of `root`, every process descended from it, and every process in
    process group `group`."""
    stats = {int(e.name): st for e in Path("/proc").iterdir() if e.name.isdigit() and (st := _stat(int(e.name)))}
    members, grew = {root} | {pid for pid, st in stats.items() if int(st[2]) == group}, True
    while grew:
        found = {pid for pid, st in stats.items() if int(st[1]) in members} - members
        members, grew = members | found, bool(found)
    out = []
    for pid in sorted(members & stats.keys()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out.append((pid, stats[pid][19], cmd))  # field 22 of stat: the start time, in clock ticks since boot
    return out


def gone(proc: tuple[int, str, str]) -> bool:
    """Whether a process seen running has ended: no /proc entry, a zombie, or its pid now another process's."""
    pid, started, _ = proc
    st = _stat(pid)
    return st is None or st[0] == "Z" or st[19] != started
