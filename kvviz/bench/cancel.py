"""Ending a run early: how soon the device is free for the next visitor after Stop, a client that cancels
its call, or a closed browser tab, on a running app.

A long generation (a random twin, so it never meets its end of sequence) streams for a moment; the next
visitor's short request waits in the queue behind it; then the long run is ended one of three ways. What
is measured is the time from that action to the next request's first streamed output, beside the same
request's first output on an idle device (its own run, which any wait adds to) and the long model's
time per output token (a stop takes effect before the next token). The next request's text must equal
the one it gets alone: the ended run's worker really stopped and left nothing behind.

Imports gradio_client, and Playwright with a Chromium for the closed tab when they are installed (not
part of kvviz's core).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass

import pandas as pd

from kvviz.base.errors import first_line

WAYS = ("stop", "cancel", "tab")  # the /stop endpoint, gradio_client's job.cancel(), closing the page
LONG_PROMPT = "What is a package?"
NEXT_PROMPT = "The kernel"
NEXT_NEW_TOKENS = 8
STREAM_BEFORE_S = 1.0  # how long the long run streams before it is ended
POLL_S = 0.005
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


@dataclass(frozen=True)
class Calibration:
    """What the long model and the next request take when each runs alone."""

    long_model: str
    long_tpot_s: float  # median time per output token of the long model, from its own summary
    next_model: str
    next_text: str  # the next request's greedy text, alone
    next_alone_s: float  # from submitting the next request on an idle device to its first streamed output


@dataclass(frozen=True)
class Release:
    """One run ended early, and the request that waited behind it."""

    way: str
    long_model: str
    long_tpot_s: float
    max_new_tokens: int
    streamed_s: float  # how long the long run had streamed when it was ended
    next_first_output_s: float  # from the action to the waiting request's first streamed output
    next_alone_s: float
    next_text_ok: bool  # the waiting request's text equals the one it gets alone
    long_finish: str | None = None  # the ended run's finish reason, where its client still hears it (stop)
    long_new_tokens: int | None = None

    @property
    def freed_s(self) -> float:
        """The wait the action added to the next request: its first output less its own run's."""
        return self.next_first_output_s - self.next_alone_s

    @property
    def long_left_s(self) -> float:
        """What the long run still had to go when it was ended: the wait had the device not been freed."""
        return self.max_new_tokens * self.long_tpot_s - self.streamed_s


def _generate(client, model: str, prompt: str, max_new: int):
    return client.submit(model, prompt, max_new, 0, 0, 1, 0, True, True, api_name="/generate")


def _follow(job) -> tuple:
    for _ in job:
        pass
    return job.outputs()[-1]


def first_output_after(job, t0: float, timeout_s: float) -> float:
    """Seconds from t0 until `job` has streamed its first output."""
    deadline = time.perf_counter() + timeout_s
    while not job.outputs():
        if job.done() and not job.outputs():
            job.result()  # raises the app's error
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no output within {timeout_s:g} s")
        time.sleep(POLL_S)
    return time.perf_counter() - t0


def wait_until_queued(job, timeout_s: float = 30) -> None:
    """Wait until `job` waits in the app's queue (or has started), so the action is all that holds it."""
    from gradio_client.utils import Status

    deadline = time.perf_counter() + timeout_s
    while job.status().code in (Status.STARTING, Status.JOINING_QUEUE) and time.perf_counter() < deadline:
        time.sleep(POLL_S)


def calibrate(url: str, long_model: str, next_model: str = "tiny", tpot_tokens: int = 48) -> Calibration:
    """Load both models, then time each alone: the long model's TPOT, the next request's text and latency."""
    import statistics

    from gradio_client import Client

    client = Client(url, verbose=False)
    text = _follow(_generate(client, next_model, NEXT_PROMPT, NEXT_NEW_TOKENS))[-1]["text"]  # loads it
    tpots = [_follow(_generate(client, long_model, LONG_PROMPT, tpot_tokens))[-1]["summary"]["tpot_s"]
             for _ in range(2)]  # the first also loads it
    alone = []
    for _ in range(3):
        t0 = time.perf_counter()
        job = _generate(client, next_model, NEXT_PROMPT, NEXT_NEW_TOKENS)
        alone.append(first_output_after(job, t0, 60))
        _follow(job)
    return Calibration(long_model, statistics.median(tpots), next_model, text, statistics.median(alone))


def chromium_path() -> str | None:
    """A system Chromium for Playwright (KVVIZ_CHROMIUM, else on PATH); None lets Playwright use its own."""
    return os.environ.get("KVVIZ_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def browser() -> Iterator[object]:
    """A headless Chromium driven by Playwright, for the closed-tab case."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def start_in_page(chromium, url: str, model: str, max_new: int):
    """A new tab, once the app has drawn it, that starts a long generation: the page (its run may still load)."""
    from playwright.sync_api import expect

    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    expect(page.locator("#calc-summary h3")).to_contain_text("KV cache", timeout=60_000)  # the page is live
    page.get_by_role("tab", name="Live generation").click()
    page.locator("#gen-prompt textarea").fill(LONG_PROMPT)
    for selector, value in (("#gen-model input", model), ("#gen-max-new input[type=number]", str(max_new))):
        page.locator(selector).fill(value)
        page.locator(selector).press("Enter")
    expect(page.locator("#gen-prompt textarea")).to_have_value(LONG_PROMPT)
    page.click("#generate-btn")
    return page


def _streaming(page) -> None:
    """Wait until the page shows the run's tokens."""
    from playwright.sync_api import expect

    expect(page.locator("#gen-metrics")).to_contain_text("running", timeout=120_000)
    expect(page.locator("#gen-text textarea")).not_to_have_value("", timeout=30_000)


def end_early(url: str, way: str, cal: Calibration, max_new: int = 1000, chromium=None) -> Release:
    """Start a long generation, queue the next request behind it, end the long one `way`, and time it.

    way: "stop" (the /stop endpoint from the long run's own client session), "cancel" (its client's
    job.cancel(), as a client that goes away), or "tab" (the run started in a browser tab, which is then
    closed; needs `chromium` from browser()).
    """
    from gradio_client import Client

    if way not in WAYS:
        raise ValueError(f"way must be one of {', '.join(WAYS)}")
    owner, visitor = Client(url, verbose=False), Client(url, verbose=False)
    page = job = None
    if way == "tab":
        page = start_in_page(chromium, url, cal.long_model, max_new)
        _streaming(page)
    else:
        job = _generate(owner, cal.long_model, LONG_PROMPT, max_new)
        first_output_after(job, time.perf_counter(), 120)
    streaming_since = time.perf_counter()
    time.sleep(STREAM_BEFORE_S)
    waiting = _generate(visitor, cal.next_model, NEXT_PROMPT, NEXT_NEW_TOKENS)
    wait_until_queued(waiting)
    streamed = time.perf_counter() - streaming_since
    t0 = time.perf_counter()
    if way == "stop":
        owner.predict(api_name="/stop")  # the same client is the same session, as one browser tab is
    elif way == "cancel":
        job.cancel()
    else:
        page.close()
    first = first_output_after(waiting, t0, 600)
    text = _follow(waiting)[-1]["text"]
    finish = new_tokens = None
    if way == "stop":  # the stopped run's client still hears its end
        summary = _follow(job)[-1]["summary"]
        finish, new_tokens = summary["finish_reason"], summary["new_tokens"]
    return Release(way, cal.long_model, cal.long_tpot_s, max_new, streamed, first, cal.next_alone_s,
                   text == cal.next_text, finish, new_tokens)


def _open_browser(stack: ExitStack) -> tuple[object | None, str | None]:
    """A Chromium for the closed-tab case, kept open by `stack`: (browser, None), or (None, why there is none)."""
    try:
        return stack.enter_context(browser()), None
    except ImportError:
        return None, "playwright is not installed"
    except Exception as exc:  # playwright's own Error: no browser to launch
        return None, f"no Chromium to drive: {first_line(exc)}"


def release_times(url: str, long_models: list[str], repeats: int, max_new: int = 1000,
                  ways: tuple[str, ...] = WAYS) -> pd.DataFrame:
    """Every way of ending a run early, `repeats` times for each long model: one row per ended run. The
    closed tab is left out, with a note in frame.attrs["tab_skipped"], where no Chromium can be driven."""
    rows = []
    with ExitStack() as stack:
        chromium, why = _open_browser(stack) if "tab" in ways else (None, "not asked for")
        for model in long_models:
            cal = calibrate(url, model)
            for rep in range(repeats):
                for way in ways:
                    if way == "tab" and chromium is None:
                        continue
                    r = end_early(url, way, cal, max_new, chromium)
                    rows.append({**asdict(r), "repeat": rep, "freed_s": r.freed_s, "long_left_s": r.long_left_s})
    frame = pd.DataFrame(rows)
    frame.attrs["tab_skipped"] = why
    return frame


def summarize_release(frame: pd.DataFrame) -> dict:
    """Per long model and way: median and worst time to the next request's first output, beside the TPOT."""
    def ms(seconds: float) -> float:
        return round(float(seconds) * 1e3, 1)

    out: dict = {"tab_skipped": frame.attrs.get("tab_skipped")}
    for (model, way), group in frame.groupby(["long_model", "way"], sort=False):
        tpot = float(group["long_tpot_s"].iloc[0])
        out.setdefault(model, {"tpot_ms": ms(tpot), "next_alone_ms": ms(group["next_alone_s"].iloc[0])})
        out[model][way] = {
            "next_first_output_ms_median": ms(group["next_first_output_s"].median()),
            "next_first_output_ms_max": ms(group["next_first_output_s"].max()),
            "freed_ms_median": ms(group["freed_s"].median()),
            "freed_in_tpots_median": round(float(group["freed_s"].median()) / tpot, 1),
            "long_left_s_median": round(float(group["long_left_s"].median()), 1),
            "next_text_ok": bool(group["next_text_ok"].all()), "runs": len(group)}
    return out
