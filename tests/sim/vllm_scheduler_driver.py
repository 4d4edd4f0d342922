"""Runs vLLM's own V1 Scheduler (no model, no server) on cases read as JSON from stdin and prints, per case, what
it scheduled at each step ([[request index, tokens], ...] by index), the preemptions of each step, and when each
request sampled its tokens.

Run by tests/sim/test_against_vllm.py with vLLM's Python (its own venv); imports only vLLM. A step's model output
is faked: a request whose computed tokens reach its length samples a token of its own, else nothing (a prefill
chunk).
Each case: block_size, num_blocks, max_num_seqs, max_num_batched_tokens, max_model_len, chunked_prefill,
prefix_caching, and requests of [arrival_step, prompt_tokens, output_tokens, prefix_tokens]; a request is added
before the schedule() of its arrival step. Optional: groups, the KV-cache groups as [kind, window] ("full" or
"sliding"), one full-attention group if absent; every group one layer, drawing on the one pool.
"""

from __future__ import annotations

import json
import sys

import torch
from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256_cbor
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, SlidingWindowSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager


def scheduler(case: dict, model_dir: str) -> Scheduler:
    model = ModelConfig(model=model_dir, max_model_len=case["max_model_len"], dtype="float32",
                        skip_tokenizer_init=True)
    sched = SchedulerConfig(max_num_seqs=case["max_num_seqs"], max_num_batched_tokens=case["max_num_batched_tokens"],
                            max_model_len=case["max_model_len"], enable_chunked_prefill=case["chunked_prefill"],
                            is_encoder_decoder=False)
    cache = CacheConfig(block_size=case["block_size"], cache_dtype="auto",
                        enable_prefix_caching=case["prefix_caching"])
    cache.num_gpu_blocks = case["num_blocks"] + 1  # block 0 is vLLM's null block, never handed out
    config = VllmConfig(scheduler_config=sched, model_config=model, cache_config=cache)
    shape = {"block_size": case["block_size"], "num_kv_heads": 1, "head_size": 1, "dtype": torch.float32}
    groups = [KVCacheGroupSpec([f"layer{g}"], FullAttentionSpec(**shape) if kind == "full" else
                               SlidingWindowSpec(sliding_window=window, **shape))
              for g, (kind, window) in enumerate(case.get("groups") or [["full", None]])]
    # The retention interval as the engine passes it from its CacheConfig (0 by default: a sliding group caches
    # only the blocks a later hit can reach); KVCacheConfig's own default (None: every block) is not the engine's.
    kv = KVCacheConfig(num_blocks=case["num_blocks"] + 1, kv_cache_tensors=[], kv_cache_groups=groups,
                       prefix_cache_retention_interval=cache.prefix_cache_retention_interval)
    return Scheduler(vllm_config=config, kv_cache_config=kv, log_stats=False,
                     structured_output_manager=StructuredOutputManager(config), block_size=case["block_size"])


def request(i: int, prompt: int, output: int, prefix: int, hasher) -> Request:
    """Prompt tokens: the shared prefix's tokens 1..prefix, then tokens unique to this request."""
    tokens = list(range(1, prefix + 1)) + [100_000 * (i + 1) + k for k in range(prompt - prefix)]
    params = SamplingParams(max_tokens=output, ignore_eos=True)
    return Request(str(i), tokens, params, None, arrival_time=0.0, block_hasher=hasher)


def _token(i: int, k: int) -> int:
    """The k-th output token of request i: its own (outputs of two requests differ, as real ones do, so that a
    block of output never hits another request's cache)."""
    return 100_000 * (i + 1) + 50_000 + k


def run(case: dict, model_dir: str, most_steps: int = 100_000) -> dict:
    """Steps until every request ended: each non-empty step's [index, tokens] pairs (by index) and preemptions,
    and each request's sampling times (a step k ends at k + 1, in steps of 1; idle steps count, scheduling
    nothing, as time passes until the next arrival)."""
    s = scheduler(case, model_dir)
    hasher = get_request_block_hasher(case["block_size"], sha256_cbor)
    pending = sorted(enumerate(case["requests"]), key=lambda item: item[1][0])
    steps, preemptions, samples = [], [], {i: [] for i in range(len(case["requests"]))}
    for step in range(most_steps):
        while pending and pending[0][1][0] <= step:
            i, (_, prompt, output, prefix) = pending.pop(0)
            s.add_request(request(i, prompt, output, prefix, hasher))
        if not pending and not s.has_requests():
            break
        out = s.schedule()
        ids = list(out.num_scheduled_tokens)
        sampled = [[_token(int(r), s.requests[r].num_output_tokens)]
                   if s.requests[r].num_computed_tokens >= s.requests[r].num_tokens else [] for r in ids]
        for r, tokens in zip(ids, sampled, strict=True):
            if tokens:
                samples[int(r)].append(step + 1)
        if ids:
            steps.append(sorted([int(r), out.num_scheduled_tokens[r]] for r in ids))
            preemptions.append(len(out.preempted_req_ids or ()))
        s.update_from_output(out, ModelRunnerOutput(req_ids=ids, req_id_to_index={r: k for k, r in enumerate(ids)},
                                                    sampled_token_ids=sampled))
    return {"steps": steps, "preemptions": preemptions, "samples": [samples[i] for i in sorted(samples)]}


if __name__ == "__main__":
    init_none_hash(sha256_cbor)
    cases = json.load(sys.stdin)
    print(json.dumps([run(case, sys.argv[1]) for case in cases["cases"]]))
