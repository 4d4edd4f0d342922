"""The running app, over HTTP, as gradio_client sees it."""

from __future__ import annotations

import json
import re
import signal
import time

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from kvviz.bench.leaks import worker_pids
from tests.helpers import running_app

# The CLI's names (python -m kvviz memory / generate / compare), which the endpoints' parameters share.
PARAMETERS = {
    "/kv_memory": ["preset", "config", "batch", "seq_len", "layers", "kv_heads", "head_dim", "kv_dtype", "gpu",
                   "mem_util", "block_size", "tp", "pp", "dp", "lang"],
    "/generate": ["model", "prompt", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "chat_template",
                  "use_cache", "static", "lang"],
    "/compare": ["model", "prompt", "max_new_tokens", "static", "lang"],
    "/stop": [],
    # python -m kvviz.serving start MODEL --kv-space-gib --tensor-parallel-size --pipeline-parallel-size ...
    "/start_vllm": ["model", "kv_space_gib", "tensor_parallel", "pipeline_parallel", "data_parallel", "lang"],
    "/stop_vllm": ["lang"],
    "/setup_vllm": ["lang"],  # python -m kvviz.serving setup
    "/stop_vllm_setup": ["lang"],
    "/serve": ["target", "url", "model", "api", "api_key", "tokenizer", "kind", "arrivals", "concurrency", "rate",
               "prompt_tokens", "shared_prefix_tokens", "output_tokens", "requests", "duration", "max_concurrency",
               "per_level", "slo_ttft", "slo_tpot", "lang"],  # python -m kvviz.serving run / sweep
    "/stop_serving": [],
    "/serve_on_engine": ["model", "lang"],  # the last load again on kvviz's engine
    "/batch": ["model", "prompts", "batch_size", "max_new_tokens", "use_cache", "ignore_eos", "chat_template", "lang"],
    "/batch_sweep": ["model", "prompt_tokens", "new_tokens", "max_batch", "lang"],  # python -m kvviz batch
    "/lesson_script": ["model", "prompt", "max_new_tokens", "lang"],  # the lesson's script beside kvviz's run
    "/schedule": ["preset", "requests", "lang"],  # the Scheduler tab: a preset simulated, played in the page
    "/schedule_on_vllm": ["preset", "requests", "lang"],  # the same load on the local vLLM beside the simulator
    # python -m kvviz.sim plan --model --gpu --tp --pp --calibration --kv-space-gib --prompt-tokens ... --price
    "/plan": ["device", "model", "gpu", "tp", "pp", "calibration", "kv_space_gib", "loop", "rate", "concurrency",
              "prompt_tokens", "output_tokens", "prefix_tokens", "requests", "ttft", "ttft_percentile", "tpot",
              "tpot_percentile", "price", "target_rate", "lang"],
    "/plan_check": ["check_requests", "lang"],  # the last prediction's loads on the local vLLM
}


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """app.py started on a free loopback port, as a user would start it."""
    with running_app(log=tmp_path_factory.mktemp("api") / "app.log") as app:
        yield app.url


def test_every_endpoint_names_its_parameters_as_the_cli_does(app_url):
    """Each public endpoint's parameters carry the CLI's names, and every one has a default."""
    api = Client(app_url, verbose=False).view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert set(api) == set(PARAMETERS)
    for endpoint, names in PARAMETERS.items():
        parameters = api[endpoint]["parameters"]
        assert [p["parameter_name"] for p in parameters] == names, endpoint
        assert all(p["parameter_has_default"] for p in parameters), \
            f"{endpoint}: no default for {[p['parameter_name'] for p in parameters if not p['parameter_has_default']]}"


def test_kv_memory_with_no_arguments_answers_for_the_page_defaults(app_url):
    """A new user's first call, with no arguments, gets the page's opening answer: Llama-3-8B, batch 8 × 8192, bf16."""
    summary, formula, *plots, details = Client(app_url, verbose=False).predict(api_name="/kv_memory")
    # batch × seq_len × layers × 2 (K and V) × kv_heads × head_dim × 2 bytes (bf16)
    assert details["kv_cache_bytes"] == 8 * 8192 * 32 * 2 * 8 * 128 * 2 == 8 * 2**30
    assert "8.000 GiB" in summary and "= 8 × 8192 × 32 × 2 × 8 × 128 × 2" in formula
    assert len(plots) == 5


def test_kv_memory_by_keyword(app_url):
    """Named arguments change only what they name: batch 4 × seq_len 2048 of the default Llama-3-8B in bf16."""
    details = Client(app_url, verbose=False).predict(batch=4, seq_len=2048, api_name="/kv_memory")[-1]
    assert details["kv_cache_bytes"] == 4 * 2048 * 32 * 2 * 8 * 128 * 2 == 2**30  # 1 GiB
    details = Client(app_url, verbose=False).predict(preset="gpt2", layers=12, kv_heads=12, head_dim=64,
                                                     seq_len=10, batch=1, api_name="/kv_memory")[-1]
    assert details["kv_cache_bytes"] == 1 * 10 * 12 * 2 * 12 * 64 * 2


def test_a_call_with_too_few_values_is_told_how_many(app_url):
    """Over raw HTTP, three values for an endpoint of fifteen (the calculator, lang last) get both counts."""
    call = f"{app_url}gradio_api/call/kv_memory"
    with httpx.Client(timeout=60) as http:
        event_id = http.post(call, json={"data": ["gpt2", "", 1]}).json()["event_id"]
        lines = [line for line in http.get(f"{call}/{event_id}").text.splitlines() if line]
    assert lines[-2] == "event: error"
    assert json.loads(lines[-1].split(":", 1)[1])["error"] == "this endpoint takes 15 values; 3 were sent"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT (Ctrl-C)"])
def test_stopping_the_app_leaves_nothing_behind(tmp_path, sig):
    """Stopped by a service manager's SIGTERM or a user's Ctrl-C after a run, the app exits with 0, its device
    worker ends with it, and nothing is reported leaked (the worker's semaphores are released)."""
    log = tmp_path / "app.log"
    with running_app(log=log) as app:
        # tiny loads real weights, behind a progress bar whose lock is a named semaphore in the worker
        Client(app.url, verbose=False).predict(model="tiny", prompt="The kernel", max_new_tokens=4,
                                               api_name="/generate")
        workers = worker_pids(app.pid)
        assert len(workers) == 1, f"the app should run one device worker after a run: {workers}"
        status = app.stop(sig)
    output = log.read_text()
    assert "leaked semaphore" not in output, output[-2000:]
    assert "Traceback" not in output, output[-2000:]
    assert status == 0, f"the app exited with {status}:\n{output[-2000:]}"
    assert not _running(workers[0]), "the device worker outlived the app"


def _running(pid: int) -> bool:
    """Whether process `pid` exists and has not ended (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except FileNotFoundError:
        return False


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


LLAMA_70B = dict(preset="llama-3-70b", layers=80, kv_heads=8, head_dim=128, batch=8, seq_len=8192)


def test_kv_memory_on_several_gpus(app_url):
    """tp=8, dp=2 by keyword: one GPU caches 1 of Llama-3-70B's 8 KV heads (80 × 2 × 1 × 128 × 2 = 40,960 bytes a
    token), the summary says per GPU and in all, and the memory plot shows one GPU's budget."""
    summary, formula, memory, *_, details = Client(app_url, verbose=False).predict(tp=8, dp=2, **LLAMA_70B,
                                                                                   api_name="/kv_memory")
    par = details["parallel"]
    assert (par["tp"], par["pp"], par["dp"], par["gpus"]) == (8, 1, 2, 16)
    assert par["per_gpu"]["kv_bytes_per_token"] == 80 * 2 * 1 * 128 * 2
    assert par["per_gpu"]["kv_cache_bytes"] == 8 * 8192 * 40_960  # 2.5 GiB of this batch on each GPU
    assert par["deployment"]["max_batch"] == 2 * par["per_gpu"]["max_batch"]
    assert "On 16 × H100 SXM" in summary and "per GPU: weights **17.64 GB**" in summary and "in all (2 replicas" \
        in summary
    assert "KV heads on one GPU: max(1, ⌊kv_heads / tp⌋)" in formula
    bars = json.loads(memory["plot"])["data"]
    assert bars[0]["y"] == ["one H100 SXM of 16"]
    assert [round(b["x"][0] * 2**30) for b in bars[:2]] == [par["per_gpu"]["weights_bytes"],
                                                             par["per_gpu"]["kv_cache_bytes"]]


def test_kv_memory_bad_tp_keeps_serving(app_url):
    """A tp the model cannot be split by is refused in a sentence naming the tp it takes; the next call is answered."""
    client = Client(app_url, verbose=False)
    with pytest.raises(Exception, match=r"tp 3 does not divide the model's 64 query heads .* tp = 1, 2, 4, 8"):
        client.predict(tp=3, **LLAMA_70B, api_name="/kv_memory")
    with pytest.raises(Exception, match="pp 81 is more than the model's 80 layers"):
        client.predict(pp=81, **LLAMA_70B, api_name="/kv_memory")
    assert client.predict(pp=4, **LLAMA_70B, api_name="/kv_memory")[-1]["parallel"]["per_gpu"]["layers"] == 20


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


def test_generate_in_the_static_mode(app_url):
    """/generate with static: the cached loop's tokens (fp32, greedy), the mode named in the summary, and a cache
    that holds its whole preallocated length from the first token on (flat), as predicted at every step, where the
    growing cache of the plain loop adds one token's bytes a step."""
    client = Client(app_url, verbose=False)
    args = dict(model="tiny", prompt="The kernel", max_new_tokens=12, chat_template=False, api_name="/generate")
    cached = client.submit(**args).result()[-1]
    static = client.submit(**args, static=True).result()[-1]
    assert static["summary"]["mode"] == "static" and static["text"] == cached["text"]
    kv = client.submit(**args, static=True).result()[3]  # the KV plot of a second run (its step reused)
    measured, predicted = (json.loads(kv["plot"])["data"][i]["y"] for i in (0, 1))
    assert len(set(measured)) == 1 and measured == predicted, "a static cache is allocated whole, up front"
    refused = client.submit(**args, static=True, use_cache=False)
    with pytest.raises(AppError, match="static needs use_cache"):
        refused.result()


def test_compare_api(app_url):
    """/compare runs both modes and reports the speedup and agreement; static left out runs no third mode."""
    client = Client(app_url, verbose=False)
    verdict, cached, uncached, static, *plots = client.predict("tiny", "The kernel", 12, api_name="/compare")
    assert "faster with the cache" in verdict and "identical" in verdict
    assert cached == uncached and len(plots) == 4
    assert static["visible"] is False and "static + compiled" not in verdict


def test_compare_api_runs_the_static_mode(app_url):
    """/compare with static runs the third mode: its text is the cached one's (fp32), and the verdict names its
    compile (or its reuse), its pace against the plain loop and its bandwidth against the limit."""
    client = Client(app_url, verbose=False)
    verdict, cached, _, static, *_ = client.predict("tiny", "The kernel", 12, True, api_name="/compare")
    assert static["value"] == cached and static["visible"] is True, "static decoding must give the cached tokens"
    assert "cached, static + compiled" in verdict and "the plain cached loop per decode token" in verdict
    assert re.search(r"compiling its step took [\d.,]+ s|reused from an earlier request", verdict), verdict
    assert re.search(r"\| cached, static \+ compiled \|.*\| \d+% of [\d.,]+ GB/s \|", verdict), verdict


@pytest.mark.parametrize("lang,words", [("zh", "有缓存快"), ("zh-CN", "有缓存快"), ("en", "faster with the cache"),
                                        ("klingon", "faster with the cache"), (7, "faster with the cache")])
def test_lang_is_read_as_a_language(app_url, lang, words):
    """Any lang an API caller sends means a language: a Chinese tag Chinese, anything else English, never a refusal
    of a value outside the switch's two choices (/generate preprocesses its inputs, /compare does not)."""
    client = Client(app_url, verbose=False)
    verdict, *_ = client.predict("tiny", "The kernel", 2, False, lang, api_name="/compare")
    assert verdict.startswith("### ") and words in verdict
    job = client.submit(model="tiny", prompt="The kernel", max_new_tokens=2, lang=lang, api_name="/generate")
    metrics = job.result()[1]
    assert ("运行 " in metrics) == (words == "有缓存快"), metrics


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
