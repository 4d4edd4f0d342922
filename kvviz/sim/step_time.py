"""How long one engine step takes, from what it holds: a step-time model, its calibration file, and its fit.

A step holds decode sequences (requests computing one token past their prompt), prefill tokens (every other token
computed: prompt chunks, and a preempted request's recompute) and attention pairs (each token a scheduled request
computes attends over the tokens before it and itself: a decode at context n, n pairs, the KV tokens it reads; a
chunk of k tokens after s computed, k*s + k(k+1)/2, prefill's attention growing with the square of the prompt).
The one model here is linear in five terms, t = a + b*prefill_tokens + c*decode_seqs + d*attention_pairs +
e*prompt_cross seconds, its coefficients given (a file or the command line) or fitted by least squares from rows of
(step contents, measured seconds), with the residuals stated. prompt_cross counts the pairs of prompt tokens of two
different requests in one step (a step's prompt tokens squared, less each request's chunk squared): 0 for a prompt
alone, so e is what a wave of prompts costs beyond each of its prompts computed alone. On vLLM's CPU build that is
not nothing (SmolLM2 on a 2-core Xeon: +57 and +113 ms over a fit of lone prompts on a loop of six 384-token
prompts); without e a calibration's waves raised b, and priced the small prompts of an open loop high
(docs/simulator.md, "A wave's prompts together"). The rows of `fit` (one request a step) give e = 0. Format 3
(2026-12-06) added e; a format-2 file is read with e = 0, the model it was fitted as.
Until format 2 (2026-12-03) d was per KV token read, a chunk's context counted
once however many tokens it computed; refitted on five measured sets, attention pairs brought the held-out TPOT
MAPE from 21.3% to 16.8% on their mean, and E2E from 19.5% to 17.3% (docs/simulator.md, "Attention pairs"). Knows
no scheduler and no engine.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from kvviz.base.errors import InputError

NAMES = ("a", "b", "c", "d", "e")  # intercept, per prefill token, per decode sequence, per attention pair, per
# pair of prompt tokens of two requests in one step (StepContents.prompt_cross)
FORMAT = "kvviz.sim.step_time/3"
FOUR_TERMS = "kvviz.sim.step_time/2"  # a, b, c, d: read with e = 0
OLD_FORMATS = ("kvviz.sim.step_time/1",)  # d per KV token read: refused, with what to do


@dataclass(frozen=True)
class StepContents:
    """What one step computes. spans: each scheduled request's (tokens before the step, tokens it computes), for a
    model that needs more than the sums (the roofline: windows and attention pairs are per request); the linear
    model reads only the sums."""

    prefill_tokens: int
    decode_seqs: int
    attention_pairs: float  # whole pairs, or their mean over KV groups of different windows
    spans: tuple[tuple[int, int], ...] = field(default=(), repr=False)  # a message shows the sums, not 1,024 pairs
    prompt_cross: int = 0  # pairs of prefill tokens of two requests: P² less each request's chunk squared

    def features(self) -> tuple[float, float, float, float, float]:
        return (1.0, float(self.prefill_tokens), float(self.decode_seqs), float(self.attention_pairs),
                float(self.prompt_cross))


class StepTimeModel(Protocol):
    def seconds(self, step: StepContents) -> float:
        """The step's duration in seconds."""


@dataclass(frozen=True)
class LinearStepTime:
    """t = a + b*prefill_tokens + c*decode_seqs + d*attention_pairs + e*prompt_cross, in seconds."""

    a: float
    b: float
    c: float
    d: float
    e: float = 0.0

    def seconds(self, step: StepContents) -> float:
        return sum(k * x for k, x in zip(self.coefficients(), step.features(), strict=True))

    def coefficients(self) -> tuple[float, float, float, float, float]:
        return (self.a, self.b, self.c, self.d, self.e)


@dataclass(frozen=True)
class FitSummary:
    """A least-squares fit's inputs and how well it holds: rows, residuals (measured - fitted) in seconds, over the
    rows it kept; set_aside: rows left out as too far from the fit to be its kind of time (kvviz.sim.calibrate)."""

    rows: int
    residual_rms_s: float
    residual_max_s: float
    r_squared: float | None
    set_aside: int = 0


@dataclass(frozen=True)
class Calibration:
    """A step-time model and where it came from: the model and device it was measured on, if known."""

    step: LinearStepTime
    model: str | None = None
    device: str | None = None
    fit: FitSummary | None = None


def parse_coefficients(text: str) -> LinearStepTime:
    """"a,b,c,d[,e]" in seconds (the command line's --coefficients): four or five finite numbers, none negative
    (e 0 when left out)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (4, 5) or not all(math.isfinite(v) and v >= 0 for v in values):
        raise InputError("sim.coefficients", value=text)
    return LinearStepTime(*values)


def fit(rows: list[tuple[StepContents, float]]) -> Calibration:
    """The coefficients a-d that minimise the squared error over the rows, and its residuals; e is 0 (rows of one
    request a step cannot tell it from d: the module's docstring). The rows must vary enough to tell the four
    apart (a rank-4 design)."""
    x = np.array([contents.features()[:4] for contents, _ in rows], dtype=float).reshape(-1, 4)
    y = np.array([seconds for _, seconds in rows], dtype=float)
    if len(rows) < 4 or np.linalg.matrix_rank(x) < 4:
        raise InputError("sim.fit_rows", rows=len(rows))
    solution, *_ = np.linalg.lstsq(x, y, rcond=None)
    residuals = y - x @ solution
    spread = float(np.sum((y - y.mean()) ** 2))
    summary = FitSummary(rows=len(rows), residual_rms_s=float(np.sqrt(np.mean(residuals ** 2))),
                         residual_max_s=float(np.max(np.abs(residuals))),
                         r_squared=1 - float(np.sum(residuals ** 2)) / spread if spread > 0 else None)
    return Calibration(LinearStepTime(*map(float, solution)), fit=summary)


def fit_record(calibration: Calibration, path: Path) -> dict:
    """What a fit says of itself (`fit --json`): the coefficients, the fit's rows and residuals, its file."""
    return {"coefficients": dict(zip(NAMES, calibration.step.coefficients(), strict=True)),
            "fit": asdict(calibration.fit) if calibration.fit else None, "path": str(path)}


def save(calibration: Calibration, path: Path) -> None:
    data = {"format": FORMAT, "kind": "linear", "units": "seconds",
            "coefficients": dict(zip(NAMES, calibration.step.coefficients(), strict=True)),
            "model": calibration.model, "device": calibration.device,
            "fit": asdict(calibration.fit) if calibration.fit else None}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def load(path: Path, model: str | None = None, device: str | None = None) -> Calibration:
    """The calibration in the file; refused when it names another model or device than the ones asked."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("sim.calibration_missing", path=str(path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError("sim.calibration_bad", path=str(path), why=type(exc).__name__) from None
    if isinstance(data, dict) and data.get("format") in OLD_FORMATS:
        raise InputError("sim.calibration_old", path=str(path), format=data["format"])
    if not isinstance(data, dict) or data.get("format") not in (FORMAT, FOUR_TERMS):
        raise InputError("sim.calibration_bad", path=str(path), why="format")
    coefficients = data.get("coefficients")
    names = NAMES if data["format"] == FORMAT else NAMES[:4]
    values = [coefficients.get(n) for n in names] if isinstance(coefficients, dict) else []
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                             for v in values):
        raise InputError("sim.calibration_bad", path=str(path), why="coefficients")
    for what, asked in (("model", model), ("device", device)):
        if asked is not None and data.get(what) not in (None, asked):
            raise InputError("sim.calibration_other", path=str(path), what=what, theirs=data.get(what), asked=asked)
    fitted = data.get("fit")
    keys = {"rows", "residual_rms_s", "residual_max_s", "r_squared"}
    summary = FitSummary(**fitted) if isinstance(fitted, dict) and set(fitted) in (keys, keys | {"set_aside"}) \
        else None
    return Calibration(LinearStepTime(*map(float, values)), data.get("model"), data.get("device"), summary)
