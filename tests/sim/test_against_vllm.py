"""The simulated scheduler against vLLM's own: vLLM 0.32's V1 Scheduler class, run in vLLM's environment with no
model and no server (tests/sim/vllm_scheduler_driver.py fakes each step's output), on random small cases that
fill the KV cache, chunk prompts, share prefixes and preempt. Each step's tokens and preemptions, and the time of
every request's every token (steps of 1 s), must be the same."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from kvviz.serving.vllm import vllm_python
from kvviz.sim.scheduler import KvGroupSpec, SchedulerConfig, admission_blocks
from kvviz.sim.simulate import simulate
from kvviz.sim.step_time import LinearStepTime
from kvviz.sim.workload import RequestSpec, Workload
from tests.helpers import REPO
from tests.sim.test_details import FOUR_AS_CASE

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ONE_SECOND = LinearStepTime(1.0, 0.0, 0.0, 0.0)
MAX_MODEL_LEN = 64


def _case(draw: random.Random) -> dict:
    """Up to 12 requests of at most 64 tokens arriving over 30 steps, blocks of 1 to 16, a cache between one
    request's worth and a little more, a token budget from max_num_seqs up (vLLM refuses less)."""
    block = draw.choice([1, 2, 4, 8, 16])
    requests = []
    for _ in range(draw.randint(1, 12)):
        prompt = draw.randint(1, 50)
        requests.append([draw.randint(0, 30), prompt, draw.randint(1, MAX_MODEL_LEN - prompt),
                         draw.choice([0, 0, min(prompt, draw.randint(1, 24))])])
    need = max(-(-(p + o - 1) // block) for _, p, o, _ in requests)
    seqs, chunked = draw.randint(1, 8), draw.random() < 0.75
    budget = draw.randint(max(seqs, 8), 100) if chunked else draw.randint(MAX_MODEL_LEN, 120)
    return {"block_size": block, "num_blocks": need + draw.randint(0, 3 * need), "max_num_seqs": seqs,
            "max_num_batched_tokens": budget, "max_model_len": MAX_MODEL_LEN, "chunked_prefill": chunked,
            "prefix_caching": draw.random() < 0.6, "requests": requests}


def _groups(draw: random.Random) -> list:
    """KV-cache groups as a model's layers make them: sliding layers alone (one group), beside full ones (in either
    order, or two sliding groups alike, as a larger model splits them), or two windows (the hit found by turns)."""
    w, other = draw.randint(2, 24), draw.randint(2, 24)
    return draw.choice([[["sliding", w]], [["full", None], ["sliding", w]], [["sliding", w], ["full", None]],
                        [["full", None], ["sliding", w], ["sliding", w]],
                        [["full", None], ["sliding", w], ["sliding", other]]])


def _hybrid_case(draw: random.Random) -> dict:
    """A case as _case, its KV cache in groups of sliding and full layers; prompts sharing longer prefixes (so that
    a sliding group's hit falls short of the full one's), the pool from what every request needs to be admitted."""
    case = _case(draw)
    case["groups"] = _groups(draw)
    for request in case["requests"]:
        request[3] = draw.choice([0, request[1], min(request[1], draw.randint(8, 40))])
    config = SchedulerConfig(num_blocks=1, block_size=case["block_size"],
                             max_num_batched_tokens=case["max_num_batched_tokens"], max_model_len=MAX_MODEL_LEN,
                             groups=tuple(KvGroupSpec(*g) for g in case["groups"]))
    need = max(admission_blocks(config, p + o - 1) for _, p, o, _ in case["requests"])
    case["num_blocks"] = need + draw.randint(0, 2 * need)
    return case


def _simulated(case: dict) -> dict:
    config = SchedulerConfig(num_blocks=case["num_blocks"], block_size=case["block_size"],
                             max_num_seqs=case["max_num_seqs"], max_num_batched_tokens=case["max_num_batched_tokens"],
                             max_model_len=case["max_model_len"], chunked_prefill=case["chunked_prefill"],
                             prefix_caching=case["prefix_caching"],
                             groups=tuple(KvGroupSpec(*g) for g in case.get("groups") or [["full", None]]))
    specs = [RequestSpec(p, o, float(at), prefix) for at, p, o, prefix in case["requests"]]
    order = sorted(range(len(specs)), key=lambda i: specs[i].arrival_s)  # the simulator sends in arrival order
    result = simulate(Workload(tuple(specs[i] for i in order), closed=False), config, ONE_SECOND)
    samples = [None] * len(specs)
    for record, i in zip(result.records, order, strict=True):
        samples[i] = [round(record.sent_s + t, 9) for t in record.arrivals_s]
    return {"tokens": [s.tokens_scheduled for s in result.trace], "preemptions": [s.preemptions for s in result.trace],
            "samples": samples}


def test_the_simulator_schedules_as_vllms_own_scheduler():
    draw = random.Random(27)
    cases = [_case(draw) for _ in range(60)] + [FOUR_AS_CASE] + [_hybrid_case(draw) for _ in range(80)]
    proc = subprocess.run([str(vllm_python()), str(REPO / "tests" / "sim" / "vllm_scheduler_driver.py"),
                           str(REPO / "assets" / "tiny")], input=json.dumps({"cases": cases}), capture_output=True,
                          text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    preempting = 0
    for n, (case, theirs) in enumerate(zip(cases, json.loads(proc.stdout), strict=True)):
        ours = _simulated(case)
        where = f"case {n}: {case}"
        assert ours["tokens"] == [sum(t for _, t in step) for step in theirs["steps"]], where
        assert ours["preemptions"] == theirs["preemptions"], where
        assert ours["samples"] == theirs["samples"], where
        preempting += any(theirs["preemptions"])
    assert preempting >= 5, "the cases must make vLLM preempt"
    four = json.loads(proc.stdout)[60]  # tests/sim/test_details.py's run, worked by hand there
    assert [i for i, n in enumerate(four["preemptions"]) if n] == [65], "vLLM preempts elsewhere than at step 65"
    assert four["steps"][65] == [[0, 1], [1, 1], [2, 1]] and four["steps"][96] == [[3, 97]]
