"""Ending a run early frees the device: Stop, a client that cancels, a closed tab, a stop the model cannot hear.

Through the running app, a long generation on a random twin (known time per token, no end of sequence)
is ended while the next visitor's short request waits behind it; that request must start within a few
tokens' time plus the app's polling, far sooner than the long run would have ended, and get exactly the
text it gets alone. The measuring is kvviz.bench.cancel's, which the benchmark reports for the README.
"""

from __future__ import annotations

import re
import threading
import time

import httpx
import pytest
from gradio_client import Client

from kvviz.bench import cancel
from kvviz.engine.events import Finished
from kvviz.engine.request import GenerationRequest
from kvviz.ui.worker import Generate, events
from tests.helpers import running_app

pytestmark = [pytest.mark.slow, pytest.mark.alone]
LONG_MODEL = "random:smollm2-135m"  # tens of ms per token here: a 1,000-token run lasts about a minute
TOKENS = 3  # a stop is seen before the next token: one token in flight, one more to see the flag, one of noise
# Besides those tokens and the waiting request's own run (next_alone_s, measured alone), what may
# separate the action from the waiting request's first output:
#   - the app drains the worker every 0.2 s (TEXT_INTERVAL_S): the ended run's generator sees the end
#     (Stop) or is closed by Gradio (cancel, closed tab) only after its current drain, up to 0.2 s;
#   - the waiting request's first drain can end up to 0.2 s later than it did alone;
#   - the worker's 0.05 s event batches, Gradio's queue, the HTTP round trips of /stop or /cancel and
#     of the waiting request's stream, on two cores shared with the browser and the model: tenths of a second.
# 1.5 s leaves room for a loaded machine and is still under a tenth of what the long run had left.
ALLOWANCE_S = 1.5


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with running_app(log=tmp_path_factory.mktemp("cancel") / "app.log") as served:
        yield served.url


@pytest.fixture(scope="module")
def calibration(app) -> cancel.Calibration:
    return cancel.calibrate(app, LONG_MODEL)


def assert_freed(r: cancel.Release) -> None:
    bound = r.next_alone_s + TOKENS * r.long_tpot_s + ALLOWANCE_S
    assert r.long_left_s > 10 * bound, (
        f"the long run had only {r.long_left_s:.1f} s left: the bound {bound:.2f} s cannot tell a freed device "
        "from one held to the end")
    assert r.next_first_output_s <= bound, (
        f"the request waiting behind a run ended by {r.way} started {r.next_first_output_s:.2f} s after it "
        f"(alone: {r.next_alone_s:.2f} s, TPOT {r.long_tpot_s * 1e3:.0f} ms, bound {bound:.2f} s): the ended "
        "run kept the device")
    assert r.next_text_ok, f"after {r.way}, the next request's text differs from its text alone: the worker " \
                           "was not left clean"


@pytest.mark.parametrize("way", ["stop", "cancel"])
def test_ending_a_run_frees_the_device_within_a_few_tokens(app, calibration, way):
    """After /stop or the client's job.cancel(), the waiting request starts within a few tokens' time, with its text."""
    r = cancel.end_early(app, way, calibration)
    assert_freed(r)
    if way == "stop":
        assert r.long_finish == "cancelled" and r.long_new_tokens < r.max_new_tokens, \
            f"the stopped run ended by {r.long_finish} after {r.long_new_tokens} tokens: Stop did not reach it"


@pytest.mark.browser
def test_a_closed_tab_frees_the_device_within_a_few_tokens(app, calibration):
    """After the tab of a streaming generation closes, the waiting request starts within a few tokens' time."""
    with cancel.browser() as chromium:
        assert_freed(cancel.end_early(app, "tab", calibration, chromium=chromium))


@pytest.mark.browser
def test_a_tab_closed_while_its_model_loads_leaves_the_server_answering(app, calibration):
    """A tab closed while its model loads leaves the server answering at once; the next request runs after."""
    # A load cannot be interrupted, and Gradio closes the generator of a closed tab on its event loop: a
    # clean-up that waited there for the job would stall every visitor until the load ended.
    from playwright.sync_api import expect

    http, visitor = httpx.Client(timeout=60), Client(app, verbose=False)
    with cancel.browser() as chromium:
        page = cancel.start_in_page(chromium, app, "random:qwen2.5-0.5b", 1000)  # seconds to build, first use
        # The generator runs (and yields, so Gradio can close it) while the worker builds the twin; that the
        # load was still going on when the tab closed is checked below, by how long the device stayed busy.
        # "running…", or the load's phase ("⏳ building ... (40%)") that stands in the metrics' place meanwhile
        expect(page.locator("#gen-metrics")).to_contain_text(re.compile("running|⏳"), timeout=60_000)
        waiting = visitor.submit(calibration.next_model, cancel.NEXT_PROMPT, cancel.NEXT_NEW_TOKENS, 0, 0, 1, 0,
                                 True, True, api_name="/generate")
        cancel.wait_until_queued(waiting)
        closed = time.perf_counter()
        page.close()
        slowest = 0.0
        while not waiting.outputs() and time.perf_counter() - closed < 120:
            t = time.perf_counter()
            http.get(f"{app}config").raise_for_status()
            slowest = max(slowest, time.perf_counter() - t)
            time.sleep(0.05)
        busy_s = time.perf_counter() - closed
    for _ in waiting:
        pass
    assert busy_s > 1.0, f"the device was free {busy_s:.2f} s after the close: the load was over, nothing was tested"
    assert slowest < 1.0, (f"a page request took {slowest:.2f} s while the closed tab's model loaded: the "
                           "generator's clean-up waits for the job on the server's event loop")
    assert waiting.outputs()[-1][-1]["text"] == calibration.next_text, "the next request did not get its own text"


def test_cancelling_a_comparison_frees_the_device(app, calibration):
    """After a comparison's client cancels it, the waiting request starts within a few tokens' time."""
    # A plain function runs to its end whatever Gradio does; /compare yields while it runs, so it can be closed.
    from gradio_client.utils import Status

    owner, visitor = Client(app, verbose=False), Client(app, verbose=False)
    max_new = 400  # the cached run alone lasts 20 s or more; then the uncached one, longer still
    job = owner.submit(LONG_MODEL, cancel.LONG_PROMPT, max_new, api_name="/compare")
    while job.status().code in (Status.STARTING, Status.JOINING_QUEUE, Status.IN_QUEUE):
        time.sleep(0.01)
    started = time.perf_counter()
    time.sleep(1.5)  # past the 4-token warm-ups, into the cached run
    waiting = visitor.submit(calibration.next_model, cancel.NEXT_PROMPT, cancel.NEXT_NEW_TOKENS, 0, 0, 1, 0, True,
                             True, api_name="/generate")
    cancel.wait_until_queued(waiting)
    t0 = time.perf_counter()
    job.cancel()
    first = cancel.first_output_after(waiting, t0, 600)
    for _ in waiting:
        pass
    # As for a generation, with the comparison's own drain period of 0.25 s in place of 0.2 s.
    bound = calibration.next_alone_s + TOKENS * calibration.long_tpot_s + ALLOWANCE_S + 0.1
    assert max_new * calibration.long_tpot_s - (t0 - started) > 5 * bound, "the comparison was nearly over"
    assert first <= bound, f"the request waiting behind a cancelled comparison started {first:.2f} s after it " \
                           f"(bound {bound:.2f} s): the comparison kept the device"
    assert waiting.outputs()[-1][-1]["text"] == calibration.next_text, "the next request did not get its own text"


def test_a_stop_the_job_cannot_hear_ends_its_worker_process(monkeypatch):
    """A job still loading KILL_GRACE_S after abandon() ends with its process; the next job gets a fresh worker."""
    import kvviz.ui.worker as worker_module

    monkeypatch.setattr(worker_module, "KILL_GRACE_S", 0.5)
    stuck = worker_module.DeviceWorker()  # still starting: the load has not even begun when it is stopped
    slot = worker_module.WorkerSlot(stuck)
    job = slot.start(LONG_MODEL, Generate(GenerationRequest("hi", max_new_tokens=2)))
    t = time.perf_counter()
    job.abandon()
    assert time.perf_counter() - t < 0.1, "abandon() waited for the job"
    ran: list = []
    follower = threading.Thread(target=lambda: ran.extend(events(slot.start(
        "tiny", Generate(GenerationRequest("The kernel", max_new_tokens=2))).wait(120))))
    follower.start()
    follower.join(180)
    assert not stuck.alive(), "the worker that could not hear its stop must be ended to free the device"
    assert ran and isinstance(ran[-1], Finished) and ran[-1].summary.new_tokens == 2, \
        f"the next job did not run on a fresh worker: {ran[-3:]}"
    assert slot.current() is not stuck
    slot.close()
