"""A sensitivity test of the term docs/simulator.md points at, not a fit: each check of this folder planned again
with its own calibration and SLO, its step time given a fixed cost F of a step that computes prompt tokens, paid
once however many prompts the step holds, and b lowered by F / 128 so that a step of one 128-token prompt (the
check's) costs what it did: only steps of two prompts or more change (F cheaper for each prompt past the first).
F = 0 (the check as made), 0.5 and 1 ms on tiny (vLLM's per-step log: a second prompt about 1 ms cheaper than the
first), 0, 5 and 10 ms on SmolLM2. python shared.py, from this folder with PYTHONPATH set to the repository root."""

import json
from dataclasses import dataclass, replace
from pathlib import Path

from kvviz.serving.models import model_folder
from kvviz.sim.plan import Shape, SloLimits, calibrated_engine, plan


@dataclass(frozen=True)
class Shared:
    inner: object
    fixed_s: float
    per_token_s: float

    def seconds(self, step) -> float:
        extra = self.fixed_s - self.per_token_s * step.prefill_tokens if step.prefill_tokens else 0.0
        return self.inner.seconds(step) + extra


for check in sorted(Path(".").glob("plan-check-*/check.json")):
    c = json.loads(check.read_text(encoding="utf-8"))
    engine = calibrated_engine(check.parent / "cal.json", model_folder(c["model"]).path,
                               config={"max_model_len": 1024})
    slo, s = SloLimits(**c["slo"]), c["shape"]
    shape = Shape(s["prompt_tokens"], s["output_tokens"], requests=s["requests"])
    measured = c["measured"]["max_rate"]
    line = f"{check.parent.name}: measured {measured:.3g} /s;"
    for fixed in ((0.0, 5e-4, 1e-3) if c["model"] == "tiny" else (0.0, 5e-3, 1e-2)):
        model = Shared(engine.model, fixed, fixed / shape.prompt_tokens)
        rate = plan(replace(engine, model=model), slo, shape).max_rate
        line += f" F {1e3 * fixed:g} ms: {rate:.4g} /s ({rate / measured:.3f});"
    print(line, flush=True)
