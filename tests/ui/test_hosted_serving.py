"""app.py --hosted's Serving tab probed as a visitor would attack it, over HTTP (issue 26, items 1-4): no load
outlasts the time limit, whatever its rate or levels; no key kvviz knows of reaches the visitor, in any encoding;
a key that cannot be an HTTP header value is refused naming the field, without echoing it.

The targets are real servers on loopback, each one of the operator's allowed endpoints: kvviz's timed server
with a first token a minute away (a server that holds every request), and a small server written here that
answers a sweep's first level and then freezes, or answers every request with a 401 that echoes the key it was
sent, raw, base64 and URL-encoded, and the Authorization header itself.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from kvviz.serving.timed_server import timed_server
from tests.helpers import running_app

pytestmark = [pytest.mark.slow, pytest.mark.alone]

TIME_LIMIT_S = 6  # room for the sweep's first level on a busy machine
MARGIN_S = 2.5  # the page's redraw period (1 s), the client's round trips; far below what an unbounded run takes
OPERATOR_KEY = "sk-operator/SECRET+key=42"  # its URL-encoded and base64 forms differ from it
VISITOR_KEY = "sk-visitor/PRIVATE+key=7"
SWEEP_ANSWERS = 9  # the first level's warm-up (1 request) and its 8 measured requests; then the server freezes
REMOTE = "an OpenAI-compatible endpoint"


def forms(key: str) -> list[str]:
    """The key as typed, URL-encoded, base64 (alone and as a Basic credential's user:key)."""
    return [key, quote(key, safe=""), base64.b64encode(key.encode()).decode(),
            base64.b64encode(f"user:{key}".encode()).decode()]


class _Handler(BaseHTTPRequestHandler):
    """/sweep/...: streams SWEEP_ANSWERS short completions, then holds every request until the test ends;
    /echo/...: a 401 whose message echoes the request's key in every form and its Authorization header;
    /stream-echo/...: lists its model, then answers each completion with that 401 (a failure of every request)."""

    answered = 0
    lock = threading.Lock()
    release = threading.Event()

    def log_message(self, *args) -> None:
        pass

    def _json(self, status: int, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _echo(self) -> None:
        auth = self.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ")
        said = "; ".join(f"form {i}: {form}" for i, form in enumerate(forms(key)))
        self._json(401, {"error": {"message": f"invalid key: {said}; Authorization: {auth}"}})

    def do_GET(self) -> None:
        if self.path.startswith("/echo"):  # /stream-echo/v1/models lists its model, as /sweep's
            return self._echo()
        if self.path.endswith("/v1/models"):
            return self._json(200, {"data": [{"id": "m"}]})
        self._json(404, {"error": {"message": "no such path"}})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith(("/echo", "/stream-echo")):
            return self._echo()
        with self.lock:
            type(self).answered += 1
            frozen = self.answered > SWEEP_ANSWERS
        if frozen:
            self.release.wait(120)  # frozen: the request is read and never answered
            return
        chunks = [{"choices": [{"index": 0, "text": " tok"}]}] * 2 + \
            [{"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}]
        body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def probe_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        _Handler.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    """(app URL, the held server's URL, the sweep's server URL, the echoing server's URLs: its /v1/models, its
    completions)."""
    with timed_server(ttft_s=60.0, itl_s=0.01, tokens=4) as held, probe_server() as probe:
        sweep_url, echo_urls = f"{probe}/sweep", (f"{probe}/echo", f"{probe}/stream-echo")
        endpoints = ",".join([held.base_url, sweep_url, *echo_urls])
        with running_app("--hosted", "--time-limit-s", str(TIME_LIMIT_S), "--allowed-endpoints", endpoints,
                         log=tmp_path_factory.mktemp("hosted-serving") / "app.log",
                         env={"KVVIZ_API_KEY": OPERATOR_KEY}) as app:
            yield app.url, held.base_url, sweep_url, echo_urls


def serve(url: str, target: str, **values) -> tuple:
    return Client(url, verbose=False).predict(target=REMOTE, url=target, api_name="/serve", **values)


@pytest.mark.parametrize("rate", [1e-320, 0.01, 1.99])
def test_a_rate_too_low_for_the_duration_is_refused_naming_the_floor(hosted, rate):
    """12 requests in 6 s need 2 requests/s: any lower rate (1e-320 held the slot for ever) is refused in one
    line that names the floor, before anything is sent."""
    app, held, *_ = hosted
    with pytest.raises(AppError) as info:
        serve(app, held, model="timed", arrivals="open loop: Poisson arrivals at a rate", rate=rate, requests=12,
              concurrency=12, duration=TIME_LIMIT_S)
    message = str(info.value)
    assert f"this demo needs at least 2 requests/s, so that 12 requests fit in {TIME_LIMIT_S} s" in message, message
    assert "\n" not in message.strip()


def test_a_load_at_the_floor_on_a_server_that_holds_every_request_ends_at_the_limit(hosted):
    """Evenly spaced at the floor (the last request sent just before the duration ends), each request held by the
    server: the run ends at the time limit, not at the duration plus the request timeout, and says why."""
    app, held, *_ = hosted
    started = time.monotonic()
    *_, explanation, details = serve(app, held, model="timed", arrivals="open loop: evenly spaced at a rate",
                                                rate=2.0, requests=12, concurrency=12, output_tokens=4,
                                                duration=TIME_LIMIT_S)
    took = time.monotonic() - started
    assert took < TIME_LIMIT_S + MARGIN_S, f"the load took {took:.1f} s against a {TIME_LIMIT_S} s limit"
    assert details["stopped_by"] == "time_limit" and details["cancelled"]
    assert f"Stopped by the time limit: this demo allows {TIME_LIMIT_S} s per request" in explanation
    assert len(details["runs"][0]["requests"]) >= 1, "the requests sent are reported (as cancelled)"


def test_a_sweep_whose_server_freezes_ends_at_the_limit_and_reports_what_ran(hosted):
    """The server answers the first level and freezes in the second: the sweep ends at the time limit as a whole
    (not after each level's default 300 s timeout) and reports the level that ran."""
    app, _, sweep_url, _ = hosted
    job = Client(app, verbose=False).submit(target=REMOTE, url=sweep_url, model="m", kind="sweep", max_concurrency=4,
                                            per_level=1, output_tokens=2, duration=TIME_LIMIT_S, api_name="/serve")
    started = time.monotonic()
    *_, explanation, details = job.result(timeout=TIME_LIMIT_S + MARGIN_S + 30)
    took = time.monotonic() - started
    assert took < TIME_LIMIT_S + MARGIN_S, f"the sweep took {took:.1f} s against a {TIME_LIMIT_S} s limit"
    assert details["stopped_by"] == "time_limit"
    assert [run["load"]["concurrency"] for run in details["runs"]] == [1], "the level that ran, and only it"
    assert all(r["error"] is None for r in details["runs"][0]["requests"])
    assert "Stopped by the time limit" in explanation


@pytest.mark.parametrize("where", [0, 1], ids=["check", "stream"])
@pytest.mark.parametrize("visitor_key", ["", VISITOR_KEY], ids=["operator", "visitor"])
def test_an_echoing_server_never_shows_a_key(hosted, visitor_key, where):
    """The operator's key (sent when the field is empty) and the visitor's, echoed by the server when kvviz checks
    it (/v1/models) or by every completion: the page and the API show the status and a short reason with no form
    of either key, and no command-line advice."""
    app, _, _, echo_urls = hosted
    with pytest.raises(AppError) as info:
        serve(app, echo_urls[where], model="m", api_key=visitor_key, requests=2, concurrency=2)
    message = str(info.value)
    assert "HTTP 401" in message and "refused the API key" in message, message
    for key in (OPERATOR_KEY, VISITOR_KEY):
        for form in forms(key):
            assert form not in message, f"a form of a key reached the visitor: {message!r}"
    assert "Bearer sk-" not in message and "--api-key" not in message, message
    assert len(message) < 300


@pytest.mark.parametrize(("key", "what"), [("sk-abc\r\nX-Injected: 1", "a control character"),
                                           ("sk-abc\x00def", "a control character"),
                                           ("sk-ключ-42", "a character outside ASCII")])
def test_a_key_that_cannot_be_a_header_is_refused_naming_the_field(hosted, key, what):
    """CR/LF, NUL or non-ASCII in the key field: one line that names the API key and what is wrong, not the key."""
    app, held, *_ = hosted
    with pytest.raises(AppError) as info:
        serve(app, held, model="timed", api_key=key, requests=1)
    message = str(info.value)
    assert re.search(r"the API key must be printable ASCII text.*" + what, message), message
    assert "X-Injected" not in message and "ключ" not in message and "abc" not in message, message
    assert "\n" not in message.strip()


def test_each_tab_stops_its_own_run(hosted):
    """One visitor (one client, one session): a generation finishes, then a serving load runs on the server that
    holds every request. The Live generation tab's Stop (/stop) leaves the load running; the Serving tab's Stop
    (/stop_serving) ends it at once, long before the time limit would (once one shared handle per session let
    the finished generation's slot swallow the serving Stop)."""
    app, held, *_ = hosted
    client = Client(app, verbose=False)
    text, *_ = client.predict(model="tiny", prompt="The kernel", max_new_tokens=4, api_name="/generate")
    assert text
    job = client.submit(target=REMOTE, url=held, model="timed", requests=4, concurrency=2, output_tokens=4,
                        duration=TIME_LIMIT_S, api_name="/serve")
    started = time.monotonic()
    time.sleep(1.5)
    client.predict(api_name="/stop")  # the generation tab's Stop: not this run's
    time.sleep(1.0)
    assert not job.done(), "the generation tab's Stop ended the serving load"
    client.predict(api_name="/stop_serving")
    *_, details = job.result(timeout=TIME_LIMIT_S + MARGIN_S)
    took = time.monotonic() - started
    assert details["cancelled"] and details.get("stopped_by") != "time_limit", details.get("stopped_by")
    assert took < TIME_LIMIT_S - 1, f"the load ran {took:.1f} s: Stop did not end it"
