"""A serving job followed while it runs: one load, a sweep, or the prefix-cache experiment, on a thread of
its own, with what it has shown so far readable from another thread (the app redraws from it once a second).

A Plan says what to run and where; LiveJob runs it (building its prompts, counted with the served model's
tokenizer when there is one, and polling the server's /metrics with kvviz's KV prediction beside it) and ends
with an Outcome (every run's RunResult) or the one line that says why it failed. stop() cancels it: the
requests in flight end at once and are recorded as cancelled. The prefix-cache experiment runs the same load
twice, once with prompts that share nothing and once with prompts that share their first `shared_prefix`
tokens, so the server's prefix cache and the TTFT it saves are measured, not told. A plan's time limit (a
hosted demo's) bounds the job as a whole, whatever its rate or levels: when it passes, the job is stopped as
Stop stops it and its outcome says so (timed_out); a job stopped before any run sent anything fails with the
time limit's line. A failure's line goes through kvviz.serving.redact (never a key). Knows jobs and threads;
loads are loadgen's, sweeps sweep's, the server's series metrics_reader's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from kvviz.base.errors import InputError, first_line
from kvviz.calc.arch import Architecture
from kvviz.i18n import said
from kvviz.serving.endpoint import Endpoint, EndpointError
from kvviz.serving.load import Load
from kvviz.serving.loadgen import Progress, RunResult, run
from kvviz.serving.metrics_reader import Watcher
from kvviz.serving.prompts import Prompt, load_tokenizer, synthetic
from kvviz.serving.redact import redact
from kvviz.serving.stats import Slo
from kvviz.serving.sweep import prompts_needed, sweep

ONE, SWEEP, PREFIX = "one load", "sweep", "prefix-cache experiment"
KINDS = (ONE, SWEEP, PREFIX)


@dataclass(frozen=True)
class Plan:
    """What to run: the kind, the endpoint, the load (a sweep's levels take its output tokens and duration;
    the experiment runs it twice), the prompts' length and shared prefix in tokens, a sweep's last level and
    requests per slot, the SLO, the served model's folder (its tokenizer counts the prompts) and architecture
    (kvviz's KV prediction), when known, and the wall time the whole job may take (None: no limit)."""

    kind: str
    endpoint: Endpoint
    load: Load
    prompt_tokens: int
    shared_prefix: int = 0
    max_concurrency: int = 16
    per_level: int = 4
    slo: Slo = field(default_factory=Slo)
    tokenizer_folder: Path | None = None
    arch: Architecture | None = None
    time_limit_s: float | None = None


@dataclass(frozen=True)
class Outcome:
    """A finished job: its plan and its runs (one load: one; a sweep: one per level; the experiment: without
    and with the shared prefix), whether Stop or the time limit ended it, and whether the time limit did."""

    plan: Plan
    runs: tuple[RunResult, ...]
    cancelled: bool
    timed_out: bool = False


class LiveJob:
    """One Plan run on a thread; progress, runs (finished so far), outcome or error, done."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.progress = Progress()
        self.runs: list[RunResult] = []
        self.outcome: Outcome | None = None
        self.error: str | None = None
        self.cancel = threading.Event()
        self.done = threading.Event()
        self.timed_out = False
        self._limit = None if plan.time_limit_s is None else threading.Timer(plan.time_limit_s, self._time_up)
        self._thread = threading.Thread(target=self._work, daemon=True, name=f"serving-{plan.kind}")
        if self._limit is not None:
            self._limit.daemon = True
            self._limit.start()
        self._thread.start()

    def stop(self) -> None:
        """End the job soon: requests in flight are cancelled; a sweep runs no further level."""
        self.cancel.set()

    def _time_up(self) -> None:
        if not self.done.is_set():
            self.timed_out = True
            self.cancel.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        return self.done.wait(timeout_s)

    def _watcher(self) -> Watcher:
        return Watcher(self.plan.endpoint, arch=self.plan.arch)

    def _work(self) -> None:
        try:
            tokenizer = load_tokenizer(self.plan.tokenizer_folder)
            steps = {ONE: self._one, SWEEP: self._sweep, PREFIX: self._prefix}
            steps[self.plan.kind](tokenizer)
            if self.timed_out and not self.runs:
                self.error = said("live.time_limit", s=self.plan.time_limit_s)
            else:
                self.outcome = Outcome(self.plan, tuple(self.runs), self.cancel.is_set(), self.timed_out)
        except (EndpointError, ValueError, OSError) as exc:
            self.error = self._shown(first_line(exc))
        except Exception as exc:
            self.error = self._shown(f"{type(exc).__name__}: {first_line(exc)}")
        finally:
            if self._limit is not None:
                self._limit.cancel()
            self.done.set()

    def _shown(self, line: str) -> str:
        """A failure's line as a person may see it: without any key kvviz knows of."""
        return redact(line, (self.plan.endpoint.api_key,) if self.plan.endpoint.api_key else ())

    def _one(self, tokenizer) -> None:
        p = self.plan
        prompts = synthetic(p.load.requests, p.prompt_tokens, tokenizer, seed=p.load.seed,
                            shared_prefix=p.shared_prefix)
        self._keep(run(p.endpoint, p.load, prompts, slo=p.slo, cancel=self.cancel, watcher=self._watcher(),
                       progress=self.progress))

    def _keep(self, result: RunResult) -> None:
        """A run's result kept, unless it was stopped before it sent anything."""
        if result.records or not result.cancelled:
            self.runs.append(result)

    def _sweep(self, tokenizer) -> None:
        p = self.plan
        prompts = synthetic(prompts_needed(p.max_concurrency, p.per_level), p.prompt_tokens, tokenizer,
                            seed=p.load.seed, shared_prefix=p.shared_prefix)
        sweep(p.endpoint, prompts, max_concurrency=p.max_concurrency, output_tokens=p.load.output_tokens,
              per_level=p.per_level, slo=p.slo, cancel=self.cancel, watcher=self._watcher,
              on_level=self.runs.append, progress=self.progress, duration_s=p.load.duration_s,
              timeout_s=p.load.timeout_s)

    def _prefix(self, tokenizer) -> None:
        """The same load without and with a shared prefix (fresh prompt texts each time, so the second run's
        hits come from the prefix alone)."""
        p = self.plan
        if p.shared_prefix < 1:
            raise InputError("live.prefix_needs_shared")
        for seed, shared in ((p.load.seed + 101, 0), (p.load.seed + 202, p.shared_prefix)):
            prompts: list[Prompt] = synthetic(p.load.requests, p.prompt_tokens, tokenizer, seed=seed,
                                              shared_prefix=shared)
            result = run(p.endpoint, replace(p.load, seed=seed), prompts, slo=p.slo, cancel=self.cancel,
                         watcher=self._watcher(), progress=self.progress)
            self._keep(result)
            if result.cancelled:
                return
