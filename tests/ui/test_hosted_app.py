"""app.py --hosted, end to end over HTTP: what a shared demo refuses, what it runs, its queue and its time limit."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from gradio_client.utils import QueueError
from hypothesis import strategies as st

from kvviz.calc.presets import preset_names
from tests.helpers import REPO, running_app
from tests.ui.test_fuzz import CALC_CHECK, CALC_CHECK_BYTES, SPECIAL, bad_models, drive

pytestmark = [pytest.mark.slow, pytest.mark.alone]

TIME_LIMIT_S = 8  # room for a twin's first load (a few seconds), far below a 1,000-token uncached run
LIMITS = ["--hosted", "--max-new-tokens", "1000", "--max-prompt-tokens", "32", "--max-twin-params", "200M",
          "--queue-size", "1", "--time-limit-s", str(TIME_LIMIT_S)]
TWIN = "random:smollm2-135m"  # 135 M parameters: under the 200 M limit


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    log = tmp_path_factory.mktemp("hosted") / "app.log"
    with running_app(*LIMITS, log=log) as served:
        yield served.url, log


def generate(client: Client, model: str = "tiny", prompt: str = "What is a package?", max_new: int = 4,
             use_cache: bool = True, **kw):
    return client.predict(model, prompt, max_new, 0, 0, 1, 0, True, use_cache, api_name="/generate", **kw)


def test_page_shows_the_limits_and_offers_only_the_allowlist(app):
    """The page has the one-line note of every limit, and every model picker lists only what is offered."""
    url, _ = app
    config = httpx.get(f"{url}config", timeout=30).json()
    texts = [c["props"].get("value") for c in config["components"] if c.get("type") == "markdown"]
    note = next(t for t in texts if t and t.startswith("Hosted demo limits"))
    for part in ("1,000 new tokens", "32 prompt tokens", "under 200 M", f"{TIME_LIMIT_S} s per request",
                 "1 request waiting"):
        assert part in note, f"{part!r} missing from the page's note {note!r}"
    dropdowns = {c["props"].get("elem_id"): c["props"] for c in config["components"] if c.get("type") == "dropdown"
                 and "model" in str(c["props"].get("label"))}
    plan = dropdowns.pop("plan-model")  # an architecture to simulate, never loaded: the calculator's presets
    assert {value for _, value in plan["choices"]} <= set(preset_names()) and plan["allow_custom_value"] is False
    assert sorted(dropdowns) == ["batch-model", "compare-model", "gen-model", "lesson-model", "serve-local-model"]
    for props in dropdowns.values():
        # no smollm2-135m-instruct: the app fetches nothing (running_app's KVVIZ_FETCH=0) and none is converted
        assert [value for _, value in props["choices"]] == ["tiny", "random:gpt2", TWIN]
        assert props["allow_custom_value"] is False


@pytest.mark.parametrize("model", ["/usr", str(REPO / "assets" / "tiny"), "assets/tiny", "./assets/tiny", "~",
                                   "kvviz", "C:\\models"])
def test_local_paths_are_refused(app, model):
    """A folder on the server, by any spelling, is refused before any loading, by both model endpoints."""
    client = Client(app[0], verbose=False)
    for call in (lambda: generate(client, model), lambda: client.predict(model, "hi", 4, api_name="/compare")):
        with pytest.raises(AppError, match="this hosted demo loads no local folders or files; choose one of tiny"):
            call()


def test_calculator_reads_no_server_files(app):
    """The calculator's config box refuses a path on the server and still answers for presets."""
    client = Client(app[0], verbose=False)
    with pytest.raises(AppError, match="reads no local files"):
        client.predict("gpt2", "/etc/passwd", *CALC_CHECK[2:], api_name="/kv_memory")
    assert client.predict(*CALC_CHECK, api_name="/kv_memory")[-1]["kv_cache_bytes"] == CALC_CHECK_BYTES


def test_offered_models_run_and_others_are_refused(app):
    """tiny and a twin under the size limit generate; a larger twin and a hub id not named are refused."""
    client = Client(app[0], verbose=False)
    for model in ("tiny", TWIN, f"  {TWIN.upper()} "):
        details = generate(client, model)[-1]
        assert details["lesson"]["new_tokens"] >= 1 and "stopped_by" not in details
    assert "faster with the cache" in client.predict("tiny", "The kernel", 4, api_name="/compare")[0]
    too_big = "random:qwen2.5-0.5b has 494 M parameters; this demo allows twins under 200 M"
    with pytest.raises(AppError, match=re.escape(too_big)):
        generate(client, "random:qwen2.5-0.5b")
    with pytest.raises(AppError, match=re.escape("does not offer 'Qwen/Qwen2.5-0.5B-Instruct'")):
        generate(client, "Qwen/Qwen2.5-0.5B-Instruct")


def test_request_limits_are_refused_with_the_numbers(app):
    """Too many new tokens or too long a prompt: refused, saying how many were asked and how many are allowed."""
    client = Client(app[0], verbose=False)
    with pytest.raises(AppError, match="max_new_tokens is 1,001; this demo allows up to 1,000"):
        generate(client, max_new=1001)
    with pytest.raises(AppError, match="max_new_tokens is 4,000; this demo allows up to 1,000"):
        client.predict("tiny", "hi", 4000, api_name="/compare")
    long_prompt = "The cache keeps keys and values. " * 20
    for call in (lambda: generate(client, prompt=long_prompt),
                 lambda: client.predict("tiny", long_prompt, 4, api_name="/compare")):
        with pytest.raises(AppError, match=r"the prompt has ([\d,]+) tokens; this demo allows 32") as info:
            call()
        asked = int(re.search(r"has ([\d,]+) tokens", str(info.value)).group(1).replace(",", ""))
        assert asked > 32


def test_hosted_serving_sends_nothing_to_a_visitors_address(app):
    """With no --allowed-endpoints, the Serving tab loads only the local vLLM: a URL of the visitor's choosing
    (the cloud metadata address, loopback) is refused before any request, and so are a load above the limits, a
    twin above the size limit, and stopping the host's vLLM."""
    client = Client(app[0], verbose=False)
    for url in ("http://169.254.169.254/latest", "http://127.0.0.1:22"):
        with pytest.raises(AppError, match="loads only its own endpoints"):
            client.predict(target="an OpenAI-compatible endpoint", url=url, model="x", api_name="/serve")
    with pytest.raises(AppError, match="output tokens is 1,001; this demo allows up to 1,000"):
        client.predict(target="an OpenAI-compatible endpoint", url="http://10.0.0.1:8000", model="x",
                       output_tokens=1001, api_name="/serve")
    with pytest.raises(AppError, match="this demo allows twins under 200 M"):
        client.predict(model="random:qwen2.5-0.5b", kv_space_gib=1, api_name="/start_vllm")
    with pytest.raises(AppError, match="keeps its vLLM serving for every visitor"):
        client.predict(api_name="/stop_vllm")


def test_hosted_plan_limits_the_simulation_and_the_check(app):
    """The Plan tab hosted: at most 500 simulated requests a load, calculator presets only (no folder of the host's),
    and no run on the local vLLM before a prediction; the Scheduler tab refuses a preset it lacks and more requests
    than the host allows. Each refusal is the handler's one line: nothing reaches the log as a traceback."""
    client = Client(app[0], verbose=False)
    with pytest.raises(AppError, match="requests per point must be between 1 and 500"):
        client.predict(requests=501, api_name="/plan")
    with pytest.raises(AppError, match="/etc"):
        client.predict(model="/etc", api_name="/plan")
    with pytest.raises(AppError, match="press Predict first"):
        client.predict(api_name="/plan_check")
    with pytest.raises(AppError, match="preset"):  # refused by the handler in one line, not by gradio's choices
        client.predict(preset="/etc", api_name="/schedule")
    with pytest.raises(AppError, match="requests"):
        client.predict(requests=10_000, api_name="/schedule")
    log = app[1]
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def test_time_limit_stops_a_long_generation_and_frees_the_device(app):
    """A run past the time limit is stopped, reported as stopped by the time limit, and the next one runs."""
    client = Client(app[0], verbose=False)
    generate(client, TWIN)  # load the twin first, so the limit falls on the generation itself
    started = time.monotonic()
    _, metrics, *_, details = generate(client, TWIN, max_new=1000, use_cache=False)
    took = time.monotonic() - started
    assert details["stopped_by"] == "time_limit" and details["summary"]["finish_reason"] == "cancelled"
    assert 1 <= details["summary"]["new_tokens"] < 1000
    assert f"Stopped by the time limit: this demo allows {TIME_LIMIT_S} s per request." in metrics
    assert TIME_LIMIT_S <= took < TIME_LIMIT_S + 10, f"the run took {took:.1f} s against a {TIME_LIMIT_S} s limit"
    with pytest.raises(AppError, match=f"stopped by the time limit: this demo allows {TIME_LIMIT_S} s per request"):
        client.predict(TWIN, "hi", 1000, api_name="/compare")  # four runs, two of them uncached: far too long
    started = time.monotonic()
    assert generate(client)[-1]["lesson"]["new_tokens"] >= 1, "the device must be free after a stopped run"
    assert time.monotonic() - started < TIME_LIMIT_S


def test_full_queue_tells_the_visitor(app):
    """With room for one waiting request, a third concurrent one is told the queue is full, while Stop and the
    calculator still answer on the route the page uses for them (they bypass the queue), and the waiting
    request then runs."""
    url, _ = app
    clients = [Client(url, verbose=False) for _ in range(4)]
    running = clients[0].submit(TWIN, "hi", 1000, 0, 0, 1, 0, True, True, api_name="/generate")
    deadline = time.monotonic() + 60
    while len(running.outputs()) < 2 and time.monotonic() < deadline:  # tokens flow: it holds the device
        time.sleep(0.1)
    waiting = clients[1].submit("tiny", "hi", 4, 0, 0, 1, 0, True, True, api_name="/generate")
    while waiting.status().code.name != "IN_QUEUE" and time.monotonic() < deadline:  # its place is taken
        time.sleep(0.05)
    assert waiting.status().code.name == "IN_QUEUE" and not running.done()
    refused = [c.submit("tiny", "hi", 4, 0, 0, 1, 0, True, True, api_name="/generate") for c in clients[2:]]
    for job in refused:
        with pytest.raises(QueueError, match=re.escape("Queue is full! Please try again.")):
            job.result()
    posted = httpx.post(f"{url}gradio_api/call/generate", json={"data": ["tiny", "hi", 4, 0, 0, 1, 0, True, True]})
    assert posted.status_code == 503 and "Queue is full. Max size is 1" in posted.text
    # The page sends events that skip the queue straight to /run/<name>; gradio_client always queues them.
    calc = httpx.post(f"{url}gradio_api/run/kv_memory", json={"data": list(CALC_CHECK)}, timeout=30)
    assert calc.status_code == 200 and calc.json()["data"][-1]["kv_cache_bytes"] == CALC_CHECK_BYTES
    stop = httpx.post(f"{url}gradio_api/run/stop", json={"data": [], "session_hash": clients[0].session_hash})
    assert stop.status_code == 200, stop.text
    assert running.result()[-1]["summary"]["finish_reason"] == "cancelled"
    assert waiting.result()[-1]["lesson"]["new_tokens"] >= 1


def test_hosted_fuzz(app):
    """Random and malformed calls against the hosted app: valid results or clear messages, never a traceback."""
    url, log = app
    models = st.one_of(bad_models, st.sampled_from(["random:qwen2.5-0.5b", "random:tinyllama-1.1b", "assets/tiny",
                                                    str(REPO / "assets" / "tiny"), "Qwen/Qwen2.5-0.5B-Instruct",
                                                    "kvviz", "random:gpt2"]))
    special = SPECIAL | {("generate", 0): models, ("compare", 0): models}
    calls, refused = drive(url, {"kv_memory": 30, "generate": 50, "compare": 20, "dims_of_source": 20}, special)
    assert sum(calls.values()) == 120 and refused["generate"] and refused["compare"]
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


@pytest.mark.browser
def test_hosted_page_in_a_browser(app):
    """In Chromium: the note shows, the calculator answers though its events skip the queue, an example fills
    the prompt through its checked handler, the max-new-tokens slider stops at the host's limit, and the note
    turns Chinese with the page."""
    from playwright.sync_api import expect, sync_playwright

    from tests.ui.test_browser import ARGS, CHROMIUM

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(app[0])
        expect(page.locator("#calc-summary h3")).to_contain_text("KV cache", timeout=60_000)
        expect(page.locator("#hosted-note")).to_contain_text("Hosted demo limits")
        page.get_by_role("tab", name="Live generation").click()
        page.get_by_text("What is the capital of France?").first.click()
        expect(page.locator("#gen-prompt textarea")).to_have_value("What is the capital of France?", timeout=10_000)
        assert page.locator("#gen-max-new input[type=range]").get_attribute("max") == "1000"
        page.locator("#lang-switch").get_by_text("中文").click()  # the note follows the page's language
        expect(page.locator("#hosted-note")).to_contain_text("托管演示的限制：模型 tiny", timeout=20_000)
        expect(page.locator("#hosted-note")).to_contain_text("最多 1,000 个新 token")
        browser.close()
