"""The timed server itself (kvviz.serving.timed_server), read with httpx, a client independent of kvviz's: its
schedule (first token after ttft, then one every itl, as many as asked), its stream's shape (the usage chunk, [DONE],
a chat stream's role chunk), its refusals, and its record of its own lateness."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from kvviz.serving.timed_server import throughput, timed_server

pytestmark = pytest.mark.alone  # times what the machine does: run with nothing beside it (README)


@pytest.fixture(scope="module")
def server():
    with timed_server(ttft_s=0.2, itl_s=0.05, tokens=4) as srv:
        yield srv


def stream(server, path: str, body: dict) -> tuple[list[float], list[dict]]:
    """The arrival times (from the send) and data of every SSE event of one streamed request."""
    times, events = [], []
    with httpx.Client(timeout=10) as client:
        start = time.perf_counter()
        with client.stream("POST", server.base_url + path, json=body) as resp:
            assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    times.append(time.perf_counter() - start)
                    events.append(line[6:])
    return times, events


def test_a_completion_streams_on_the_schedule_with_usage_and_done(server):
    """max_tokens 3: tokens at 0.2, 0.25, 0.3 s, then the usage chunk (3 completion tokens; the prompt's 4 words)
    and [DONE] with the last one."""
    times, events = stream(server, "/v1/completions", {"model": "timed", "prompt": "a b c d", "stream": True,
                                                      "max_tokens": 3})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert [len(c["choices"]) for c in chunks] == [1, 1, 1, 0]
    assert chunks[-1]["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    assert times[:3] == pytest.approx([0.2, 0.25, 0.3], abs=0.02)
    assert chunks[2]["choices"][0]["finish_reason"] == "length"


def test_a_chat_stream_opens_with_the_role_and_takes_the_default_length(server):
    """No max_tokens: the server's 4 tokens; the role announcement comes with the first."""
    times, events = stream(server, "/v1/chat/completions", {"model": "timed", "stream": True,
                                                           "messages": [{"role": "user", "content": "hi"}]})
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"]["content"] for c in chunks[1:5]] == [" tok"] * 4
    assert chunks[-1]["usage"]["completion_tokens"] == 4
    assert times[1] == pytest.approx(0.2, abs=0.02) and times[4] == pytest.approx(0.35, abs=0.02)


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"model": "other", "stream": True, "prompt": "x"}, 404, "does not exist"),
    ({"model": "timed", "prompt": "x"}, 400, "only streams"),
])
def test_what_it_refuses(server, body, status, message):
    resp = httpx.post(server.base_url + "/v1/completions", json=body, timeout=10)
    assert resp.status_code == status and message in resp.json()["error"]["message"]


def test_it_lists_its_model_and_reports_its_lateness(server):
    """/v1/models lists it; after a reset, 2 requests of 2 tokens are 4 sends, each late by well under a 50 ms gap."""
    assert [m["id"] for m in httpx.get(server.base_url + "/v1/models").json()["data"]] == ["timed"]
    server.lateness(reset=True)
    for _ in range(2):
        stream(server, "/v1/completions", {"model": "timed", "prompt": "x", "stream": True, "max_tokens": 2})
    late = server.lateness()
    assert (late.sends, late.requests) == (4, 2) and 0 <= late.p50_s <= late.max_s < 0.02
    assert late.read_wait_max_s is not None and late.read_wait_max_s < 0.02


def test_throughput_of_the_construction():
    """C requests in flight of n tokens: C × n / (ttft + (n - 1) × itl); 8 × 32 / 1.075 = 238.1 tokens/s."""
    assert throughput(8, 0.3, 0.025, 32) == pytest.approx(238.14, abs=0.01)
