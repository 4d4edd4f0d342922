"""vLLM's own record of every engine step, read from its log: what the step held and how long its model ran.

Started with `--enable-logging-iteration-details` (ITERATION_FLAG; vLLM 0.32 and later), vLLM's API server logs
one line per engine step, as its stat logger receives the step's output (after vLLM's own process prefix):

    Engine 000: Iteration(41): 1 context requests, 256 context tokens, 3 generation requests, 3 generation tokens,
    iteration elapsed time: 21.37 ms, CPU KV cache usage: 0.4%

A context request is one whose prompt is still being computed (a prefill chunk; a preempted request's recompute);
a generation request decodes. The elapsed time is the engine core's clock around waiting for the step's result
(EngineCore.step, capture_iteration_details): with the model in a worker process (vLLM's multiprocess executor),
the forward pass, the sampling and the hand-over between the two. With the one worker in the engine core's process
(vLLM's uniprocess executor), the forward pass runs inside execute_model, before that clock starts, and the elapsed
time is the sampling's alone (0.4 ms a decode step on tiny, 0.5-1 ms on SmolLM2, whose steps take 40 ms and more);
so a server started with the flag keeps its worker process (kvviz.serving.vllm.worker_in_engine). Not in it:
the scheduler's own work, the update from the step's output, and whatever the engine waits for
between steps. The KV usage is a fraction of the pool's blocks, to 0.1%. Knows the line; starting vLLM is
kvviz.serving.vllm's, using the steps kvviz.sim's.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

ITERATION_FLAG = "--enable-logging-iteration-details"

ITERATION_LINE = re.compile(
    r"(?:Engine (?P<engine>\d+): )?Iteration\((?P<index>\d+)\): "
    r"(?P<ctx_reqs>\d+) context requests, (?P<ctx_tokens>\d+) context tokens, "
    r"(?P<gen_reqs>\d+) generation requests, (?P<gen_tokens>\d+) generation tokens, "
    r"iteration elapsed time: (?P<ms>[0-9.]+) ms(?P<dummy> \(dummy\))?, \w+ KV cache usage: (?P<kv>[0-9.]+)%")


@dataclass(frozen=True)
class EngineStep:
    """One engine step as vLLM logged it: its index (from 0 at the server's start, per data-parallel engine), the
    requests and tokens it computed in context (prefill) and in generation (decode), its model's elapsed time in
    seconds, the KV pool's use after it (a fraction of the blocks), and its engine."""

    index: int
    context_requests: int
    context_tokens: int
    generation_requests: int
    generation_tokens: int
    elapsed_s: float
    kv_usage: float
    engine: int = 0

    @property
    def tokens(self) -> int:
        return self.context_tokens + self.generation_tokens


def parse(text: str) -> list[EngineStep]:
    """Every real step logged in text, in order (a data-parallel engine's dummy steps, which compute nothing, left
    out)."""
    steps = []
    for m in ITERATION_LINE.finditer(text):
        if m["dummy"]:
            continue
        steps.append(EngineStep(int(m["index"]), int(m["ctx_reqs"]), int(m["ctx_tokens"]), int(m["gen_reqs"]),
                                int(m["gen_tokens"]), float(m["ms"]) / 1000.0, float(m["kv"]) / 100.0,
                                int(m["engine"] or 0)))
    return steps


# A decode step whose model took over this many times the load's median decode step: a stall (the step's process
# waited for a core), not what the step held. Steps with prompt tokens are left out: a prefill chunk is long by
# its work (SmolLM2's 384-token chunks took 7 times its decode steps). On 2 shared cores, tiny's decode steps of
# 7-15 ms had stalls of 56-155 ms.
STALL_FACTOR = 4.0


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summary(steps: list[EngineStep] | tuple[EngineStep, ...]) -> dict:
    """What a load's steps add up to: how many, the tokens they computed, their model's time (sum and median), the
    median decode step (one with no prompt tokens), and the share of the decode steps' time spent in stalls (decode
    steps over STALL_FACTOR times that median). None where there is no step to take it from."""
    decode = [s.elapsed_s for s in steps if s.context_tokens == 0]
    decode_median, decode_total = _median(decode), sum(decode)
    stalled = sum(t for t in decode if decode_median is not None and t > STALL_FACTOR * decode_median)
    return {"steps": len(steps), "context_tokens": sum(s.context_tokens for s in steps),
            "generation_tokens": sum(s.generation_tokens for s in steps),
            "elapsed_s": sum(s.elapsed_s for s in steps), "median_s": _median([s.elapsed_s for s in steps]),
            "decode_median_s": decode_median, "stall_share": stalled / decode_total if decode_total > 0 else None}


class LogCursor:
    """The steps a log gained since the cursor last read it: `steps()` after a load gives that load's steps.
    The log is vLLM's, written as it runs; a line still being written is left for the next read."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offset = self._size()

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def steps(self) -> list[EngineStep]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        whole = data[: data.rfind(b"\n") + 1]
        self.offset += len(whole)
        return parse(whole.decode("utf-8", errors="replace"))
