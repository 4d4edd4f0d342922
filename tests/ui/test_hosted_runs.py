"""app.py --hosted's device runs probed as a visitor would attack them, over HTTP (issue 26, its last part): the
Batch tab's batch and sweep, Cached vs uncached, the Lesson's script's endpoint. No run outlasts the time limit or hides
why it ended; every number is capped with one line that names the field; each tab's Stop reaches its own run
only, and another visitor's Stop none; no visitor names a path; a second visitor's short request is served
while the first runs a long job.

Every run is tiny's (it loads in a fraction of a second, so no limit falls on a load), made long by its size: eight
rows re-read whole at each of 256 tokens (uncached), a sweep to B = 16 of 900 tokens: tens of seconds on any CPU,
each forward pass short, so a stop is heard at once. tiny ends the lesson's script at its EOS within a few dozen
tokens, so the script's own checks (its prompt admitted before it runs, a stop or the limit reported as such) are
tested on the engine (tests/engine/test_lesson_script.py). The app's Stop buttons skip the queue and are not named in
the API, so they are pressed as the page presses them: by their event's index, with the visitor's session.
"""

from __future__ import annotations

import functools
import re
import time

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from tests.helpers import REPO, running_app

pytestmark = [pytest.mark.slow, pytest.mark.alone]

TIME_LIMIT_S = 8  # room for the checks of a Stop test on a busy machine; far below any of the long runs here
MARGIN_S = 4.0  # the handler's poll (0.25 s), a forward pass heard after the stop, round trips on a busy machine
PROMPT_LIMIT = 64
MAX_NEW = 4096  # the engine's most
LONG_PROMPT = "The kernel runs the package manager. " * 12  # well over 64 tokens in tiny's and the twin's tokenizers
TIME_LIMIT_LINE = f"stopped by the time limit: this demo allows {TIME_LIMIT_S} s per request"
ROWS = "\n".join(f"{i} " + "the kernel " * 25 for i in range(8))  # eight rows of 52 tokens: under the limit


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    args = ["--hosted", "--time-limit-s", str(TIME_LIMIT_S), "--max-prompt-tokens", str(PROMPT_LIMIT),
            "--max-new-tokens", str(MAX_NEW), "--max-concurrency", "16"]
    with running_app(*args, log=tmp_path_factory.mktemp("hosted-runs") / "app.log") as served:
        client = Client(served.url, verbose=False)
        for _ in range(3):  # a first load past the limit on a busy machine still ends, and the model is kept
            try:
                client.predict("tiny", "hi", 2, 0, 0, 1, 0, True, True, api_name="/generate")
                break
            except AppError:
                continue
        page_config(served.url)  # read once, before any Stop test's clock
        yield served.url


@functools.cache
def page_config(url: str) -> dict:
    return httpx.get(f"{url}config", timeout=30).json()


def click_event(url: str, elem_id: str) -> tuple[int, int]:
    """The page's button `elem_id` and the index of its click event, from the page's config."""
    config = page_config(url)
    button = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id)
    return button, next(d["id"] for d in config["dependencies"] if [button, "click"] in map(list, d["targets"]))


def press(url: str, elem_id: str, client: Client) -> None:
    """Press the page's button `elem_id` as `client`'s visitor (its session), as the page does: by the index of
    its click event on the route for events that skip the queue."""
    button, event = click_event(url, elem_id)
    posted = httpx.post(f"{url}gradio_api/run/predict", timeout=30, json={
        "fn_index": event, "data": [], "session_hash": client.session_hash, "trigger_id": button})
    assert posted.status_code == 200, posted.text


def batch(client: Client, model: str, prompts: str, size: int, new_tokens: int, use_cache: bool = True):
    """/batch's arguments: model, prompts, batch size, max new tokens, use_cache, ignore_eos, chat_template, lang."""
    return client.submit(model, prompts, size, new_tokens, use_cache, True, False, "en", api_name="/batch")


def wait_running(job, seconds: float = 1.5) -> None:
    """Give the job time to start on the device (it is the only one queued)."""
    time.sleep(seconds)
    assert not job.done(), f"the run ended early: {job.result() if job.done() else ''}"


def refusal_of(job, timeout: float) -> tuple[str, float]:
    """The one-line refusal a submitted job ended with, and how long after now it came."""
    started = time.monotonic()
    with pytest.raises(AppError) as info:
        job.result(timeout=timeout)
    return str(info.value), time.monotonic() - started


# (b) every number capped, with one line naming the field; prompts held to the host's limit before anything runs


def test_a_batchs_rows_are_held_to_the_prompt_limit(app):
    """Rows longer than the host's prompt limit are refused with both numbers (once only the model's context
    bounded them: 150-token rows ran under a 64-token limit)."""
    client = Client(app, verbose=False)
    message, _ = refusal_of(batch(client, "tiny", LONG_PROMPT, 2, 4), 60)
    found = re.fullmatch(r"the longest prompt has ([\d,]+) tokens; this demo allows 64", message)
    assert found and int(found.group(1).replace(",", "")) > PROMPT_LIMIT, message


NUMBERS = [  # (endpoint, the call's values, the field the refusal names), sent as JSON with NaN and Infinity
    ("batch", '["tiny", "a", NaN, 4, true, false, true, "en"]', "batch size must be a whole number"),
    ("batch", '["tiny", "a", 17, 4, true, false, true, "en"]', "batch size must be between 1 and 16"),
    ("batch", '["tiny", "a", -2, 4, true, false, true, "en"]', "batch size must be between 1 and 16"),
    ("batch", '["tiny", "a", 2, 1e308, true, false, true, "en"]', "max new tokens must be between"),
    ("batch", '["tiny", "a", 2, 4097, true, false, true, "en"]', "max_new_tokens is 4,097; this demo allows up to"),
    ("batch", '["tiny", "a", "2", 4, true, false, true, "en"]', "batch size must be a whole number"),
    ("batch_sweep", '["tiny", NaN, 16, 4, "en"]', "prompt tokens must be a whole number"),
    ("batch_sweep", '["tiny", 65, 16, 4, "en"]', "prompt tokens is 65; this demo allows up to 64"),
    ("batch_sweep", '["tiny", 32, Infinity, 4, "en"]', "new tokens must be a whole number"),
    ("batch_sweep", '["tiny", 32, 4097, 4, "en"]', "max_new_tokens is 4,097; this demo allows up to"),
    ("batch_sweep", '["tiny", 32, 16, -Infinity, "en"]', "largest B must be a whole number"),
    ("batch_sweep", '["tiny", 32, 16, 1e9, "en"]', "largest B must be between 1 and 16"),
    ("batch_sweep", '["tiny", 32, 16, "x", "en"]', "largest B must be a whole number"),
    ("lesson_script", '["tiny", "a", NaN, "en"]', "max_new_tokens must be a whole number"),
    ("lesson_script", '["tiny", "a", 4097, "en"]', "max_new_tokens must be between 1 and 4,096"),
    ("lesson_script", '["tiny", "a", -1, "en"]', "max_new_tokens must be between 1 and"),
    ("compare", '["tiny", "a", Infinity, false, "en"]', "max_new_tokens must be a whole number"),
    ("compare", '["tiny", "a", 1e400, true, "en"]', "max_new_tokens must be a whole number"),
    ("compare", '["tiny", "a", 4, "yes", "en"]', "static must be true or false"),
]


@pytest.mark.parametrize(("endpoint", "values", "said"), NUMBERS)
def test_every_number_is_capped_in_one_line_naming_the_field(app, endpoint, values, said):
    """NaN, infinities, negative, huge, over the host's limit and text where a number goes, sent as raw JSON (a
    client library would refuse to send NaN): one line that names the field, and nothing runs."""
    posted = httpx.post(f"{app}gradio_api/call/{endpoint}", content=f'{{"data": {values}}}',
                        headers={"Content-Type": "application/json"}, timeout=30)
    assert posted.status_code == 200, posted.text
    with httpx.stream("GET", f"{app}gradio_api/call/{endpoint}/{posted.json()['event_id']}", timeout=60) as answer:
        events = "".join(answer.iter_text())
    assert "event: error" in events and said in events, events[-500:]
    assert "Traceback" not in events and events.count("\\n") == 0, events[-500:]


# (d) no path, local file or hub id of the visitor's choosing


@pytest.mark.parametrize("model", ["assets/tiny", str(REPO / "assets" / "tiny"), "~", "/etc/passwd",
                                   "Qwen/Qwen2.5-0.5B-Instruct", "random:qwen2.5-7b"])
def test_no_model_of_the_visitors_choosing(app, model):
    """The batch, the sweep and the lesson's script refuse a path or a model the demo does not offer before
    loading anything."""
    client = Client(app, verbose=False)
    for call in (lambda: client.predict(model, "hi", 1, 2, True, False, True, "en", api_name="/batch"),
                 lambda: client.predict(model, 8, 4, 1, "en", api_name="/batch_sweep"),
                 lambda: client.predict(model, "hi", 2, "en", api_name="/lesson_script")):
        with pytest.raises(AppError, match=r"this hosted demo loads no local folders|does not offer|allows twins"):
            call()


# (a) bounded as a whole, and saying why it ended


def test_a_long_batch_stops_at_the_limit_and_says_so(app):
    """Eight rows of 256 tokens, uncached: stopped at the limit, in one line that says it was the limit (once
    "BatchError: the batch was stopped", an exception's type and the stop's own words)."""
    message, took = refusal_of(batch(Client(app, verbose=False), "tiny", ROWS, 8, 256, use_cache=False), 120)
    assert message == TIME_LIMIT_LINE, message
    assert took < TIME_LIMIT_S + MARGIN_S, f"the batch took {took:.1f} s against a {TIME_LIMIT_S} s limit"


def test_a_sweep_is_bounded_as_a_whole_and_says_so(app):
    """B = 1 to 16, 900 tokens each at a 64-token prompt: the sweep ends at the limit as a whole, not per level,
    and says the limit ended it (once it answered "No batch ran." as though it had nothing to do, or showed the
    sizes measured as the whole sweep)."""
    job = Client(app, verbose=False).submit("tiny", PROMPT_LIMIT, 900, 16, "en", api_name="/batch_sweep")
    started = time.monotonic()
    try:
        explained, *_ = job.result(timeout=120)  # some sizes measured: shown under the limit's line
        message = explained.split("**")[1]
    except AppError as exc:  # none measured: the limit's line alone
        message = str(exc)
    took = time.monotonic() - started
    assert message == TIME_LIMIT_LINE, message
    assert took < TIME_LIMIT_S + MARGIN_S, f"the sweep took {took:.1f} s against a {TIME_LIMIT_S} s limit"


# (c) each tab's Stop reaches its own run only; another visitor's Stop none


def test_the_batch_tabs_stop_ends_its_run_and_no_other_stop_does(app):
    """While a visitor's batch runs: another visitor's batch Stop, and this visitor's Cached vs uncached, lesson
    and generation Stops, leave it running; its own Stop ends it at once, saying so in kvviz's words (once
    "BatchError: the batch was stopped")."""
    owner, other = Client(app, verbose=False), Client(app, verbose=False)
    job = batch(owner, "tiny", ROWS, 8, 256, use_cache=False)
    wait_running(job)
    press(app, "batch-stop", other)
    for elem_id in ("compare-stop", "lesson-stop", "stop-btn"):
        press(app, elem_id, owner)
    time.sleep(1.0)
    assert not job.done(), "another visitor's Stop or another tab's ended the batch"
    press(app, "sweep-stop", owner)  # the Batch tab's other button: the same tab's run
    message, took = refusal_of(job, 30)
    assert message == "the batch was stopped", message
    assert took < MARGIN_S, f"the batch ended {took:.1f} s after its Stop"


# (f) no visitor holds the device beyond the limit


def test_a_second_visitor_is_served_within_the_limit_while_the_first_runs_a_long_job(app):
    """The first visitor's batch is long (8 rows near the prompt limit re-read at each of 256 tokens: uncached,
    EOS ignored); a second visitor's short generation, sent a second later, is answered within the limit and the
    margin: the first holds the device no longer than its limit."""
    first, second = Client(app, verbose=False), Client(app, verbose=False)
    long_job = batch(first, "tiny", ROWS, 8, 256, use_cache=False)
    time.sleep(1.0)
    started = time.monotonic()
    text, *_ = second.predict("tiny", "hi", 2, 0, 0, 1, 0, True, True, api_name="/generate")
    took = time.monotonic() - started
    assert text, "the second visitor got no text"
    assert took < TIME_LIMIT_S + MARGIN_S, f"the second visitor waited {took:.1f} s (limit {TIME_LIMIT_S} s)"
    message, _ = refusal_of(long_job, 30)
    assert message == TIME_LIMIT_LINE, message
