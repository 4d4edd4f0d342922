"""Running the engine for a user interface without letting the interface slow the model down.

BackgroundRun consumes kvviz's generation loop in its own thread and drops every event into a queue;
the interface drains the queue at its own pace (every tenth of a second, say) and redraws. The model
never waits for a browser. RunRecord turns the events into what the tabs show: the text so far, the
per-token rows, the life-cycle timestamps and the summary. Nothing here imports gradio.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from dataclasses import asdict, dataclass, field

import pandas as pd

from kvviz.engine import (
    DeviceAcquired,
    Event,
    Finished,
    GenerationRequest,
    PrefillDone,
    PromptTokenized,
    RequestReceived,
    TokenEvent,
    Waiting,
    generate,
    validate_request,
)
from kvviz.loading import LoadedModel
from kvviz.metrics import RunSummary

_RUN_IDS = itertools.count(1)


class BackgroundRun:
    """One generation running in a worker thread; events are collected with drain()."""

    def __init__(self, lm: LoadedModel, req: GenerationRequest) -> None:
        validate_request(req)  # bad input fails here, in the caller's thread, before anything runs
        self.cancel = threading.Event()
        self._events: queue.Queue[Event | None] = queue.Queue()
        self._thread = threading.Thread(target=self._work, args=(lm, req), daemon=True, name="kvviz-generate")
        self._thread.start()
        self.done = False

    def _work(self, lm: LoadedModel, req: GenerationRequest) -> None:
        try:
            for event in generate(lm, req, self.cancel):
                self._events.put(event)
        except Exception as exc:  # a fault inside the loop must reach the page, not vanish with the thread
            self._events.put(Finished(0.0, "failed", "", None, f"{type(exc).__name__}: {exc}"))
        finally:
            self._events.put(None)

    def drain(self, period_s: float) -> list[Event]:
        """The events of the next period_s seconds (fewer if the run ends first).

        Waiting out the whole period is the point: the interface then redraws a few times a second
        however fast tokens come, and its work never crowds the model's thread.
        """
        out: list[Event] = []
        deadline = time.monotonic() + period_s
        while not self.done:
            try:
                item = self._events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                self.done = True
            else:
                out.append(item)
        return out

    def stop(self) -> None:
        """Ask the loop to stop at its next token (it frees the device lock when it does)."""
        self.cancel.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)


@dataclass
class RunRecord:
    """What one run has shown so far."""

    model: str
    mode: str
    prompt: str
    run_id: int = field(default_factory=lambda: next(_RUN_IDS))
    text: str = ""
    rows: list[dict] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # life-cycle moment -> seconds since t0
    summary: RunSummary | None = None
    finish: Finished | None = None
    random_weights: bool = False

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
               "finish": self.finish.reason if self.finish else "running", "prompt": self.prompt[:60]}
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
