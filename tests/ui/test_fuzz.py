"""The running app against random and malformed input, through the same HTTP a stranger would use.

Every endpoint (the public API of /kv_memory, /generate, /compare and /stop, and the page's private
handlers, which anyone can call over HTTP too) gets hypothesis-made calls: valid values with some
positions swapped for wrong types, NaN and infinities, huge and negative numbers, empty and
enormous strings, unknown presets and models. Each answer must be a valid result or a clear
message, and the app must still answer a valid calculator call after each one.

gradio_client cannot send NaN or infinity (its JSON encoder refuses them), so calls holding one,
and the private handlers gradio_client will not call, go over Gradio's plain HTTP API
(POST /gradio_api/call/<name>, then read the event stream), which accepts them.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.calc.presets import preset_names
from kvviz.serving.live import ONE
from kvviz.ui.common import EXAMPLE_PROMPTS
from kvviz.ui.serving.plan import ARRIVALS, REMOTE
from tests.helpers import running_app
from tests.serving.fake_server import MODEL, fake_server

pytestmark = pytest.mark.slow

# Examples per endpoint; together at least MIN_CALLS.
PLAN = {"kv_memory": 170, "generate": 140, "compare": 45, "stop": 20, "dims_of_preset": 30, "dims_of_source": 30,
        "load_example": 30, "overlay_runs": 25, "too_few_values": 20, "serve": 40, "stop_serving": 10,
        "start_vllm": 20, "stop_vllm": 5, "serve_on_engine": 10, "batch": 30, "batch_sweep": 10}
MIN_CALLS = 615  # hypothesis stops early where an endpoint has few distinct calls (stop_vllm, serve_on_engine)
MAX_MESSAGE = 400  # the app cuts its messages at 300 characters plus a note of the length
# Gradio's words for an exception a handler let through, and an OS error passed on raw.
GENERIC = ("upstream Gradio app has raised an exception", "verbose error reporting", "[Errno")
CALC_CHECK = ("gpt2", "", 1, 10, 12, 12, 64, "bf16", "h100-sxm", 0.9, 16, 1, 1, 1, "en")  # a valid call, answer known
CALC_CHECK_BYTES = 10 * 12 * 2 * 12 * 64 * 2
HUGE = "x" * 1_000_000

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)  # surrogates cannot travel as UTF-8
junk = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=False, allow_infinity=False),
    text, st.sampled_from(["", " ", "\x00", "NaN", "1e999", "-1", "../../etc/passwd", "/", ".", "n" * 300, HUGE,
                           "9" * 5000]),
    st.lists(st.integers(-5, 5), max_size=3), st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=2),
)
non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
bad = st.one_of(junk, non_finite)
# "n" * 300 is longer than a file name may be: looking it up raises instead of answering "no such file".
bad_models = st.sampled_from(["", "   ", "random:nope", "random:deepseek-v3", "/no/such/model", "org/uncached-model",
                              "../x", "random:", "n" * 300, "x" * 5000, HUGE])
bad_sources = st.sampled_from(["org/uncached-model", "/no/such/config.json", "/etc/passwd", "..", "n" * 300, "x" * 600,
                               HUGE])

LANG = st.sampled_from(["en", "zh"])  # every handler that answers in words takes the page's language last
VALID = {
    "kv_memory": [st.sampled_from(preset_names()), st.just(""), st.integers(1, 512), st.integers(1, 262_144),
                  st.integers(1, 128), st.sampled_from([1, 2, 4, 8]), st.integers(1, 512),
                  st.sampled_from(["bf16", "fp16", "fp32", "fp8", "int8", "int4"]),
                  st.sampled_from(["h100-sxm", "a100-80gb", "cpu"]), st.floats(0.05, 1.0), st.integers(1, 256),
                  st.sampled_from([1, 2, 4]), st.integers(1, 4), st.integers(1, 8), LANG],  # tp, pp, dp, lang
    "generate": [st.just("tiny"), st.sampled_from(EXAMPLE_PROMPTS), st.integers(1, 4), st.floats(0, 2),
                 st.integers(0, 200), st.floats(0.01, 1), st.integers(0, 2**32), st.booleans(), st.booleans(),
                 st.booleans(), LANG],  # chat_template, use_cache, static, lang
    "compare": [st.just("tiny"), st.sampled_from(EXAMPLE_PROMPTS), st.integers(1, 4), st.booleans(), LANG],  # static
    "stop": [],
    "dims_of_preset": [st.sampled_from(preset_names()), LANG],
    "dims_of_source": [st.sampled_from(preset_names()), st.just(""), LANG],
    "load_example": [st.integers(0, len(EXAMPLE_PROMPTS) - 1)],
    "overlay_runs": [st.lists(st.sampled_from(["1", "2", 3]), max_size=3), LANG],
    # "serve" is the Serving tab's load against the fake server the test starts (serving_values(url) below)
    "stop_serving": [],
    # never a model that exists: no fuzz call starts vLLM
    "start_vllm": [bad_models, st.integers(1, 4), st.integers(1, 2), st.integers(1, 2), st.integers(1, 2), LANG],
    "stop_vllm": [LANG],
    # no load ran on a local vLLM: refused
    "serve_on_engine": [st.sampled_from(["tiny", "random:gpt2"]), LANG],
    "batch": [st.just("tiny"), st.sampled_from(["The kernel\nA", "What is a package?"]), st.integers(1, 4),
              st.integers(1, 4), st.booleans(), st.booleans(), LANG],
    "batch_sweep": [st.just("tiny"), st.integers(1, 16), st.integers(2, 4), st.integers(1, 2),
                    LANG],
}
# Domain-specific wrong values, mixed in with the generic junk at these positions.
SPECIAL = {("kv_memory", 0): st.one_of(text, st.just(HUGE)), ("kv_memory", 1): bad_sources,
           ("generate", 0): bad_models, ("compare", 0): bad_models, ("dims_of_source", 1): bad_sources,
           ("generate", 1): st.sampled_from(["", "  ", HUGE, "y" * 150_000]),
           ("serve", 1): st.sampled_from(["", "localhost:1", "ftp://x/v1", "http://user:pw@127.0.0.1:1", "http://127.0.0.1:9",
                                          HUGE]),
           ("serve", 2): st.sampled_from(["", "not-served", HUGE]),
           ("batch", 0): bad_models, ("batch_sweep", 0): bad_models,
           ("batch", 1): st.sampled_from(["", "\n\n", HUGE, "y" * 150_000])}
PUBLIC = {"kv_memory", "generate", "compare", "stop"}


@st.composite
def call(draw, name: str, special: dict | None = None) -> list:
    """The values of one call: valid ones, a random set of positions swapped for wrong ones, maybe extras."""
    special = SPECIAL if special is None else special
    values = [draw(s) for s in VALID[name]]
    for i in draw(st.sets(st.integers(0, len(values) - 1), max_size=len(values))) if values else ():
        # Where a position has its own wrong values (unknown models, paths), they come up as often as the junk.
        values[i] = draw(special[(name, i)] if (name, i) in special and draw(st.booleans()) else bad)
    if name in ("stop", "stop_serving", "stop_vllm"):
        values = draw(st.lists(bad, max_size=3))  # it takes none; extra values are ignored
    return values


def too_few_values() -> st.SearchStrategy:
    """(endpoint, values) with fewer values than the endpoint takes."""
    return st.sampled_from(["kv_memory", "generate", "compare", "dims_of_source"]).flatmap(
        lambda endpoint: st.tuples(st.just(endpoint), call(endpoint).flatmap(
            lambda v: st.integers(0, len(v) - 1).map(lambda n, v=v: v[:n]))))


def has_non_finite(value) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return any(map(has_non_finite, value))
    if isinstance(value, dict):
        return any(map(has_non_finite, value.values()))
    return False


def assert_clear(message: object, name: str, values: list) -> None:
    shown = repr(values)[:200]
    assert isinstance(message, str) and message.strip() and message.strip() != "Error", \
        f"{name} answered {shown} with a bare error: no message reached the caller"
    assert not any(g in message for g in GENERIC), f"{name} raised an unhandled exception for {shown}: {message}"
    assert "Traceback" not in message and 'File "' not in message, f"{name} leaked a traceback: {message[:500]}"
    assert len(message) <= MAX_MESSAGE, f"{name} answered {shown} with a {len(message):,}-character message"


def assert_valid(name: str, out) -> None:
    """What a successful answer of each endpoint must hold."""
    if name == "kv_memory":
        # something is cached per sequence: per-token KV, or (a model cut to its Mamba layers alone) a fixed state
        state = out[-1]["state"]
        assert out[-1]["kv_cache_bytes"] > 0 or (state is not None and state["bytes"] > 0), out[-1]
    elif name == "generate":
        assert set(out[-1]["lesson"]) >= {"prompt_tokens", "new_tokens", "ttft_s"} and out[-1]["text"] == out[0]
    elif name == "compare":
        assert "faster with the cache" in out[0] or "有缓存快" in out[0]  # lang en or zh
    elif name in ("dims_of_preset", "dims_of_source"):
        assert all(isinstance(v, int) or v == {"__type__": "update"} for v in out)
    elif name == "load_example":
        assert out[0] in EXAMPLE_PROMPTS
    elif name == "overlay_runs":
        assert "plot" in out[0]
    elif name == "batch":
        assert "sequences decoded together" in out[0] or "条序列一起解码" in out[0]  # lang en or zh
    elif name == "batch_sweep":
        assert "From B=1" in out[0] or "B=1" in out[0]
    elif name == "serve":
        job = next(v for v in out if isinstance(v, dict) and "runs" in v)
        assert job["runs"][-1]["stats"]["completed"] >= 1 and "api_key" not in json.dumps(job).replace(
            '"api_key": false', "")


def raw_call(http: httpx.Client, url: str, name: str, values: list) -> tuple[str, object]:
    """("complete", outputs) or ("error", message) from Gradio's plain HTTP API."""
    base = f"{url}gradio_api/call/{name}"
    posted = http.post(base, content=json.dumps({"data": values}, allow_nan=True),
                       headers={"content-type": "application/json"}, timeout=60)
    posted.raise_for_status()
    with http.stream("GET", f"{base}/{posted.json()['event_id']}", timeout=120) as stream:
        lines = [line for line in stream.iter_lines() if line]
    event = [line for line in lines if line.startswith("event:")][-1].split(":", 1)[1].strip()
    data = json.loads([line for line in lines if line.startswith("data:")][-1].split(":", 1)[1])
    return ("error", data.get("error")) if event == "error" else (event, data)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    log = tmp_path_factory.mktemp("fuzz") / "app.log"
    with running_app(log=log) as served:
        yield served.url, log


def drive(url: str, plan: dict[str, int], special: dict | None = None) -> tuple[Counter, Counter]:
    """Run plan[name] hypothesis examples against each endpoint; (calls, refusals) per endpoint.

    Each call must end in a valid result or a clear message, and a valid calculator call must be
    answered right after it.
    """
    client, http = Client(url, verbose=False), httpx.Client()  # http keeps its connection: a check costs ~15 ms
    calls, refused, spent = Counter(), Counter(), Counter()

    def one(name: str, values: list) -> None:
        if name == "too_few_values":
            endpoint, values = values
            kind, data = raw_call(http, url, endpoint, values)
            assert kind == "error", f"{endpoint} accepted too few values"
            assert_clear(data, endpoint, values)
        elif name in PUBLIC and not has_non_finite(values):
            try:
                assert_valid(name, client.predict(*values, api_name=f"/{name}"))
            except AppError as exc:
                assert_clear(str(exc), name, values)
                refused[name] += 1
        else:
            kind, data = raw_call(http, url, name, values)
            if kind == "error":
                assert_clear(data, name, values)
                refused[name] += 1
            else:
                assert kind == "complete", f"{name}: the event stream ended with {kind}"
                assert_valid(name, data)
        calls[name] += 1
        kind, still = raw_call(http, url, "kv_memory", list(CALC_CHECK))
        assert kind == "complete" and still[-1]["kv_cache_bytes"] == CALC_CHECK_BYTES, \
            f"the calculator stopped answering after {name}{repr(values)[:200]}: {still}"

    def runner(name: str):
        def run(values) -> None:
            one(name, list(values))
        return run

    fuzz = settings(deadline=None, derandomize=True, database=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    for name, examples in plan.items():
        strategy = too_few_values() if name == "too_few_values" else call(name, special)
        began = time.monotonic()
        settings(fuzz, max_examples=examples)(given(strategy)(runner(name)))()
        spent[name] = round(time.monotonic() - began)
    print(f"\nfuzz seconds per endpoint: {dict(spent)}")  # where the test's time goes
    return calls, refused


def serving_values(url: str) -> list:
    """A valid Serving-tab load against the fake server at `url`: 1-4 requests of 1-4 tokens, any arrivals."""
    return [st.just(REMOTE), st.just(url), st.just(MODEL), st.sampled_from(["completions", "chat"]), st.just(""),
            st.just(""), st.just(ONE), st.sampled_from(list(ARRIVALS)), st.integers(1, 4), st.floats(5, 50),
            st.integers(1, 16), st.just(0), st.integers(1, 4), st.integers(1, 4), st.floats(5, 30), st.integers(1, 2),
            st.integers(1, 2), st.floats(0.1, 2), st.floats(0.01, 1), LANG]


def test_every_endpoint_answers_or_refuses_clearly(app, monkeypatch):
    """615+ random and malformed calls: each gets a valid result or a short, clear message; the app keeps serving.
    The Serving tab's loads go to a small OpenAI-compatible server on 127.0.0.1 (tests/serving/fake_server.py)."""
    url, log = app
    started = time.monotonic()
    with fake_server(ttft_s=0.01, itl_s=0.005, tokens=4) as (fake_url, _):
        monkeypatch.setitem(VALID, "serve", serving_values(fake_url))
        calls, refused = drive(url, PLAN)
    total = sum(calls.values())
    print(f"\nfuzz: {total} calls in {time.monotonic() - started:.0f} s; per endpoint {dict(calls)}; "
          f"refused {dict(refused)}")
    assert total >= MIN_CALLS, f"only {total} calls were made; the plan promises {MIN_CALLS}"
    assert set(calls) == set(PLAN), f"endpoints never called: {set(PLAN) - set(calls)}"
    assert refused["kv_memory"] and refused["generate"] and calls["generate"] > refused["generate"], \
        "the fuzz must see both valid results and refusals"
    assert refused["serve"] and calls["serve"] > refused["serve"], "the loads must both run and be refused"
    server_log = log.read_text()
    assert "Traceback" not in server_log, f"an exception escaped a handler:\n{server_log[-3000:]}"
