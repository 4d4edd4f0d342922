"""What a running generation has shown so far, for the app's tabs.

RunRecord turns the engine's events (streamed from the device worker, kvviz.ui.worker) into what the
tabs show: the text so far, the per-token rows, the life-cycle timestamps and the summary. Throttle
paces the redraws. Nothing here imports gradio.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import pandas as pd

from kvviz.engine.events import (
    DeviceAcquired,
    Event,
    Finished,
    PrefillDone,
    PromptTokenized,
    RequestReceived,
    TokenEvent,
    Waiting,
)
from kvviz.engine.metrics import RunSummary


@dataclass
class RunRecord:
    """What one run has shown so far."""

    model: str
    mode: str
    prompt: str
    run_id: int | None = None  # the session's number for it, given when it finishes with a result (SessionStore)
    text: str = ""
    rows: list[dict] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # life-cycle moment -> seconds since t0
    summary: RunSummary | None = None
    finish: Finished | None = None
    random_weights: bool = False
    cpu_threads: int | None = None
    load_s: float | None = None  # getting the model ready before the request's clock started (worker's Loaded)

    def add(self, event: Event) -> None:
        if isinstance(event, TokenEvent):
            self.rows.append(asdict(event))
            self.text += event.text
        elif isinstance(event, RequestReceived):
            self.phases["received"] = event.t_s
        elif isinstance(event, Waiting):
            self.phases["waiting"] = event.t_s
        elif isinstance(event, DeviceAcquired):
            self.phases["device acquired"] = event.t_s
        elif isinstance(event, PromptTokenized):
            self.phases["tokenized"] = event.t_s
            self.phases["prompt_tokens"] = event.prompt_tokens
        elif isinstance(event, PrefillDone):
            self.phases["prefill done"] = event.t_s
        elif isinstance(event, Finished):
            self.finish = event
            self.summary = event.summary
            self.phases["finished"] = event.t_s
            self.text = event.text or self.text

    @property
    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=list(TokenEvent.__dataclass_fields__))
        frame.insert(0, "mode", self.mode)
        frame.insert(0, "run", self.run_id)
        return frame

    def history_row(self) -> dict:
        """One line of the history table: the lesson's keys and the rest of the summary."""
        s = self.summary
        row = {"run": self.run_id, "model": self.model, "mode": self.mode,
               "finish": self.finish.reason if self.finish else "running", "prompt": self.prompt[:60],
               "load_s": None if self.load_s is None else round(self.load_s, 6)}
        if s is not None:
            row |= {k: round(v, 6) if isinstance(v, float) else v for k, v in s.as_dict().items()
                    if k not in ("model", "mode", "itl_s", "finish_reason", "bandwidth_source")}
        return row


class Throttle:
    """True at most once every `interval_s`; plots redraw on it while text updates on every drain."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._last = 0.0

    def due(self) -> bool:
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            self._last = now
            return True
        return False
