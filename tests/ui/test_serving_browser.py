"""The Serving tab in a real browser on a real vLLM, as a newcomer uses it: start vLLM on tiny from the page,
run a load and a sweep, see the figures and the history, stop vLLM. Needs vLLM's environment (`python -m
kvviz.serving setup`; CI builds it first). Screenshots go to $KVVIZ_SCREENSHOTS when set (README's pictures).

What is checked comes from outside the code under test: tiny's KV capacity in 1 GiB worked out by hand
(4 layers × 2 × 2 KV heads × 32 dims × 2 bytes of bf16 = 1,024 bytes a token: 1,048,576 tokens), the load's
request and token counts as sent, and vLLM's own processes (none left after Stop). Then tp 2 from the page: each rank
keeps one of tiny's two KV heads (4 layers × 2 × 1 × 32 × 2 bytes = 512 bytes a token: 2,097,152 tokens in its GiB).
On a CPU without bf16 instructions kvviz asks vLLM for fp32 (kvviz.serving.vllm.cpu_fp32): 4 bytes an element, so
half those tokens (524,288; 1,048,576 a rank at tp 2), and the weights counted at 4 bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from kvviz.serving.vllm import cpu_fp32
from tests.helpers import running_app
from tests.serving.procs import TAG_VAR, new_tag, tagged
from tests.ui.test_browser import ARGS, CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.vllm, pytest.mark.slow]
START_S = 300_000  # ms: vLLM starts in about 35-65 s on 2 cores; more on a busy machine


TAG = new_tag()  # in the app's environment, so in every vLLM it starts: another test's vLLM beside it is not its


def vllm_servers() -> list[int]:
    """The vLLM API servers this module's app started, still alive."""
    return [p.pid for p in tagged(TAG) if "vllm.entrypoints.openai.api_server" in p.cmdline]


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("KVVIZ_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    with running_app("--model", "tiny", log=tmp_path_factory.mktemp("serving") / "app.log",
                     env={TAG_VAR: TAG}) as app, \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1500, "height": 1100})
        pg.goto(app.url)
        pg.get_by_role("tab", name="Serving").click()
        yield pg
        browser.close()
    assert vllm_servers() == [], "vLLM is still running after the app stopped"


def _set(page: Page, slider: str, value: str) -> None:
    """Type into a slider's number box and press Enter, as a person sets it exactly."""
    box = page.locator(f"#{slider} input[type=number]")
    box.fill(value)
    box.press("Enter")


def _vllm_serving_tiny(page: Page) -> None:
    """vLLM serving tiny on one rank, started from the Serving tab where the tests before did not leave it running
    (a test run alone, `-k`): the tests that need it start it themselves, and in the module's order find it up."""
    page.get_by_role("tab", name="Serving").click()
    status = page.locator("#serve-engine-status")
    if "vLLM serves tiny" in status.inner_text():
        return
    page.locator("#serve-tp input").fill("1")
    page.locator("#serve-tp input").press("Tab")
    page.locator("#serve-local-model input").fill("tiny")
    page.locator("#serve-local-model input").press("Enter")
    page.locator("#serve-start-vllm").click()
    expect(status).to_contain_text("vLLM serves tiny", timeout=START_S)


def test_a_model_too_big_for_the_machine_is_refused_on_the_page_at_once(page: Page, shots: Path):
    """The engineer who asks for a twin of DeepSeek-V3 on 2 tensor-parallel ranks: 671 B parameters (its technical
    report), 1,342,052,808,704 counted from its config, at 2 bytes: 1,342.053 GB of weights, and 1 GiB of KV space
    on each of the 2 ranks, 2.147 GB: 1,344.200 GB in all. The page says in one line that this cannot fit the
    machine's memory, with those figures, and no vLLM process is started. Then the engineer sets tiny on one rank
    again; the next test starts it from this same page (one vLLM start fewer in CI than starting it here too)."""
    tp = page.locator("#serve-tp input")
    tp.fill("2")
    tp.press("Tab")
    model = page.locator("#serve-local-model input")
    model.fill("random:deepseek-v3")
    model.press("Enter")
    page.locator("#serve-start-vllm").click()
    need, weights, bits = ("2,686.253", "2,684.106", 32) if cpu_fp32() else ("1,344.200", "1,342.053", 16)
    refusal = page.get_by_text(f"random-deepseek-v3 cannot start on this machine: it needs {need} GB of memory "
                               f"({weights} GB of weights in {bits} bits for 1 engine(s), 2.147 GB of KV space for 2 "
                               "worker(s))")
    expect(refusal.first).to_be_visible(timeout=30_000)
    page.screenshot(path=str(shots / "serving-too-big.png"), full_page=False)
    assert vllm_servers() == []
    tp.fill("1")
    tp.press("Tab")
    model.fill("tiny")
    model.press("Enter")
    expect(page.locator("#serve-engine-status")).to_contain_text("vLLM is not running")


def test_start_vllm_from_the_page_and_see_its_capacity(page: Page):
    page.locator("#serve-start-vllm").click()
    status = page.locator("#serve-engine-status")
    expect(status).to_contain_text("vLLM serves tiny", timeout=START_S)
    expect(status).to_contain_text(f"KV cache {'524,288' if cpu_fp32() else '1,048,576'} tokens in 1 GiB")


def test_one_load_draws_live_and_ends_with_its_figures(page: Page, shots: Path):
    """4 in flight, 8 requests of 16 tokens: 8 of 8 complete, the server's view and kvviz's KV prediction shown."""
    _vllm_serving_tiny(page)
    _set(page, "serve-concurrency", "4")
    _set(page, "serve-requests", "8")
    _set(page, "serve-output-tokens", "16")
    page.locator("#serve-start").click()
    expect(page.locator("#serve-status")).to_contain_text("one load finished: 1 run(s), 8 request(s)", timeout=120_000)
    explanation = page.locator("#serve-explanation")
    expect(explanation).to_contain_text("8 of 8")
    expect(explanation).to_contain_text("kvviz predicted")
    for plot in ("#serve-throughput", "#serve-requests", "#serve-kv", "#serve-timeline", "#serve-lifecycle"):
        expect(page.locator(f"{plot} .js-plotly-plot")).to_be_visible()
    page.screenshot(path=str(shots / "serving-load.png"), full_page=True)


def test_the_same_load_on_kvvizs_engine_beside_vllm(page: Page, shots: Path):
    """The last load (4 in flight, 8 requests of 16 tokens) again on kvviz's own engine: both engines' figures."""
    page.get_by_text("the same load on kvviz's own engine, one request at a time").click()
    page.locator("#serve-engine-btn").click()
    text = page.locator("#serve-side-text")
    expect(text).to_contain_text("The same load, 4 in flight, 8 requests of 16 tokens", timeout=180_000)
    expect(text).to_contain_text("kvviz's engine (one request at a time)")
    expect(page.locator("#serve-side-plot .js-plotly-plot")).to_be_visible()
    page.locator("#serve-side-plot").screenshot(path=str(shots / "serving-engine.png"))


def test_a_sweep_draws_the_curves_and_explains_them(page: Page, shots: Path):
    page.get_by_label("sweep", exact=True).check()
    _set(page, "serve-max-concurrency", "4")
    _set(page, "serve-per-level", "2")
    page.locator("#serve-start").click()
    expect(page.locator("#serve-status")).to_contain_text("sweep finished: 3 run(s)", timeout=300_000)
    explanation = page.locator("#serve-explanation")
    expect(explanation).to_contain_text("Q5")
    expect(explanation).to_contain_text("Q6")
    for plot in ("#serve-sweep-throughput", "#serve-sweep-latency", "#serve-tradeoff"):
        expect(page.locator(f"{plot} .js-plotly-plot")).to_be_visible()
    page.screenshot(path=str(shots / "serving-sweep.png"), full_page=True)


def test_the_runs_are_in_the_history(page: Page):
    page.get_by_role("tab", name="History").click()
    for label in ("one load c=4", "kvviz engine c=4", "sweep c=1", "sweep c=2", "sweep c=4"):
        expect(page.get_by_role("gridcell", name=label, exact=True)).to_be_visible()
    page.get_by_role("tab", name="Serving").click()


def test_the_plan_tabs_check_runs_on_this_vllm(page: Page, shots: Path):
    """The Plan tab on this machine calibrated (tiny's calibration), 4 requests/s: its answer gives the band (the
    highest rate with every step 10% slower and faster); its check runs 2, 4 and 8 requests/s (half, the load,
    twice) on the vLLM started above, 8 requests each, and lists 3 loads × 5 figures with their errors; the
    measured points are drawn over the lines."""
    _vllm_serving_tiny(page)
    page.get_by_role("tab", name="Plan").click()
    page.get_by_text("this machine, calibrated (the local vLLM)").click()
    for box, value in (("plan-rate", "4"), ("plan-prompt-tokens", "64"), ("plan-output-tokens", "16"),
                       ("plan-requests", "50")):
        page.locator(f"#{box} input").fill(value)
        page.locator(f"#{box} input").press("Enter")
    page.locator("#plan-predict").click()
    expect(page.locator("#plan-status")).to_contain_text("predicted in", timeout=180_000)
    expect(page.locator("#plan-answer")).to_contain_text("with every step 10% slower:")  # a calibration's band
    page.locator("#plan-answer").screenshot(path=str(shots / "plan-calibrated-answer.png"))
    page.get_by_text("Run the same loads on the local vLLM").click()
    expect(page.locator("#plan-check")).to_be_visible()
    page.locator("#plan-check-requests input").fill("8")
    page.locator("#plan-check-requests input").press("Enter")
    page.locator("#plan-check").click()
    expect(page.locator("#plan-status")).to_contain_text("measured 3 load(s)", timeout=300_000)
    # the same answer as the status line, but drawn after its four figures: on two busy cores (a CI worker beside
    # this one, vLLM and the app) the browser took over 5 s to show it
    expect(page.locator("#plan-check-text")).to_contain_text("3 load(s), 8 requests each", timeout=60_000)
    table = page.locator("#plan-check-table")
    for metric in ("output tokens/s", "TTFT p50 (ms)", "TTFT p99 (ms)", "TPOT p50 (ms)", "TPOT p99 (ms)"):
        expect(table.get_by_role("gridcell", name=metric, exact=True)).to_have_count(3)  # one per load
    for load in ("2", "4", "8"):
        expect(table.get_by_role("gridcell", name=load, exact=True).first).to_be_visible()
    expect(page.locator("#plan-throughput .legendtext", has_text="measured (local vLLM)")).to_be_visible()
    # the language switched after it all: the answer again in Chinese, its band with it (a teacher showing the
    # page in Chinese after an English run)
    page.locator("#lang-switch").get_by_text("中文").click()
    expect(page.locator("#plan-answer")).to_contain_text("每一步慢 10% 时", timeout=30_000)
    page.locator("#plan-answer").screenshot(path=str(shots / "plan-calibrated-answer-zh.png"))
    page.locator("#lang-switch").get_by_text("English").click()
    expect(page.locator("#plan-answer")).to_contain_text("with every step 10% slower:", timeout=30_000)
    page.get_by_role("tab", name="Serving").click()


def test_stop_vllm_leaves_nothing_running(page: Page):
    assert vllm_servers(), "vLLM should be running before Stop"
    page.get_by_role("tab", name="Serving").click()  # where the test before left the page, even if it failed
    page.get_by_role("button", name="Stop vLLM").click()
    expect(page.locator("#serve-engine-status")).to_contain_text("vLLM is not running", timeout=60_000)
    assert vllm_servers() == []


def test_start_vllm_on_two_tensor_parallel_ranks_from_the_page(page: Page, shots: Path):
    """The newcomer whose model needs two devices: tp 2 from the page, two workers, each rank's capacity as vLLM
    logged it (worked by hand above), then Stop leaves nothing running."""
    page.get_by_role("tab", name="Serving").click()
    box = page.locator("#serve-tp input")
    box.fill("2")
    box.press("Tab")
    page.locator("#serve-start-vllm").click()
    status = page.locator("#serve-engine-status")
    expect(status).to_contain_text("on 2 ranks (tp2 pp1 dp1)", timeout=START_S)
    per_rank = "1,048,576" if cpu_fp32() else "2,097,152"  # 4 bytes of fp32: 1,024 bytes a token
    expect(status).to_contain_text(f"TP0 {per_rank} · TP1 {per_rank}")
    page.screenshot(path=str(shots / "serving-tp2.png"), full_page=False)
    page.get_by_role("button", name="Stop vLLM").click()
    expect(status).to_contain_text("vLLM is not running", timeout=60_000)
    assert vllm_servers() == []
