"""The running app, over HTTP, as gradio_client sees it."""

from __future__ import annotations

import json
import time

import pytest
from gradio_client import Client

from tests.helpers import running_app


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """app.py started on a free loopback port, as a user would start it."""
    with running_app(log=tmp_path_factory.mktemp("api") / "app.log") as app:
        yield app.url


def test_kv_memory_api(app_url):
    """/kv_memory answers the lesson's example with 32 GiB and all its figures."""
    client = Client(app_url, verbose=False)
    out = client.predict("llama-2-7b", "", 16, 4096, 32, 32, 128, "bf16", "h100-sxm", 0.9, 16, api_name="/kv_memory")
    summary, formula, *plots, details = out
    assert details["kv_cache_bytes"] == 34_359_738_368
    assert "32.000 GiB" in summary and "= 16 × 4096 × 32 × 2 × 32 × 128 × 2" in formula
    assert len(plots) == 5


def test_kv_memory_api_bad_input_keeps_serving(app_url):
    """A bad request gets a clear error and the next request is answered."""
    client = Client(app_url, verbose=False)
    with pytest.raises(Exception, match="kv_heads must divide"):
        client.predict("llama-3-8b", "", 1, 100, 32, 3, 128, "bf16", "h100-sxm", 0.9, 16, api_name="/kv_memory")
    out = client.predict("llama-3-8b", "", 1, 8192, 32, 8, 128, "bf16", "h100-sxm", 0.9, 16, api_name="/kv_memory")
    assert out[-1]["kv_cache_bytes"] == 2**30


def _generate(client, model="tiny", prompt="What is a package?", max_new=24, use_cache=True):
    return client.submit(model, prompt, max_new, 0, 0, 1, 0, True, use_cache, api_name="/generate")


def test_generate_streams_then_summarises(app_url):
    """/generate streams partial text, then ends with the run's summary and the lesson's keys."""
    client = Client(app_url, verbose=False)
    job = _generate(client, max_new=40)
    for _ in job:
        pass
    outputs = job.outputs()
    text, metrics, latency, kv, details = outputs[-1]
    assert latency and kv, "the final update carries both live plots"
    assert details["lesson"]["new_tokens"] >= 1 and set(details["lesson"]) == {
        "prompt_tokens", "new_tokens", "ttft_s", "tpot_s", "tokens_per_s"}
    assert text == details["text"] and "TTFT" in metrics
    assert all(o[-1] is None for o in outputs[:-1]), "the summary comes once, at the end"
    streamed = [o[0] for o in outputs]
    assert all(text.startswith(partial) for partial in streamed), "streamed text must only grow"


def test_compare_api(app_url):
    """/compare runs both modes and reports the speedup and agreement."""
    client = Client(app_url, verbose=False)
    verdict, cached, uncached, *plots = client.predict("tiny", "The kernel", 12, api_name="/compare")
    assert "faster with the cache" in verdict and "identical" in verdict
    assert cached == uncached and len(plots) == 3


def test_stop_frees_the_device(app_url):
    """/stop ends a long run within a token or so, and the next request is served."""
    client = Client(app_url, verbose=False)
    job = _generate(client, model="random:smollm2-135m", max_new=1000)
    deadline = time.monotonic() + 60
    while len(job.outputs()) < 2 and time.monotonic() < deadline:  # wait until tokens flow
        time.sleep(0.2)
    client.predict(api_name="/stop")  # the same client is the same session, as one browser tab is
    for _ in job:
        pass
    details = job.outputs()[-1][-1]
    assert details["summary"]["finish_reason"] == "cancelled"
    assert details["summary"]["new_tokens"] < 1000
    follow = _generate(client, max_new=4)
    for _ in follow:
        pass
    assert follow.outputs()[-1][-1]["lesson"]["new_tokens"] >= 1


@pytest.mark.parametrize("args,message", [
    (("tiny", "", 8), "empty"),
    (("no/such-model", "hi", 8), "cannot reach|HF_HUB_OFFLINE|not in the local cache"),
    (("tiny", "hi", 0), "max_new_tokens|minimum value 1"),
])
def test_generation_bad_input_keeps_serving(app_url, args, message):
    """Bad generation input comes back as a clear error; the app answers the next call."""
    client = Client(app_url, verbose=False)
    model, prompt, max_new = args
    with pytest.raises(Exception, match=message):
        client.predict(model, prompt, max_new, 0, 0, 1, 0, True, True, api_name="/generate")
    assert client.predict("gpt2", "", 1, 10, 12, 12, 64, "bf16", "h100-sxm", 0.9, 16,
                          api_name="/kv_memory")[-1]["kv_cache_bytes"] == 10 * 12 * 2 * 12 * 64 * 2


def test_calculator_is_not_stuck_behind_a_generation(app_url):
    """While a long generation holds the device, /kv_memory still answers (its queue is separate)."""
    client = Client(app_url, verbose=False)
    job = _generate(client, model="random:smollm2-135m", max_new=300)
    deadline = time.monotonic() + 60
    while len(job.outputs()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    report = Client(app_url, verbose=False).predict("gpt2", "", 1, 10, 12, 12, 64, "bf16", "h100-sxm", 0.9, 16,
                                                   api_name="/kv_memory")[-1]
    assert report["kv_cache_bytes"] == 10 * 12 * 2 * 12 * 64 * 2
    assert not job.done(), "the calculator answered only after the generation ended"
    client.predict(api_name="/stop")
    for _ in job:
        pass


def test_no_token_is_dropped_from_the_plots(app_url):
    """Plot updates are throttled, but the final latency plot has a point for every token generated."""
    client = Client(app_url, verbose=False)
    job = _generate(client, max_new=60)
    for _ in job:
        pass
    latency, details = job.outputs()[-1][2], job.outputs()[-1][-1]
    figure = json.loads(latency["plot"])
    points = sum(len(trace["x"]) for trace in figure["data"])
    assert points == details["summary"]["new_tokens"]
