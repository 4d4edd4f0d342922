"""The app in a real browser (Debian's Chromium driven by Playwright), as a person uses it.

Screenshots of every tab go to $KVVIZ_SCREENSHOTS when it is set (README's pictures are made that
way), otherwise to the test's temporary folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.ui.test_app_api import app_url  # noqa: F401 - the running app fixture

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def page(app_url) -> Page:  # noqa: F811
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.goto(app_url)
        expect(pg.locator("#calc-summary h3")).to_contain_text("KV cache", timeout=60_000)
        yield pg
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("KVVIZ_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _tab(page: Page, name: str) -> None:
    page.get_by_role("tab", name=name).click()


def _type(page: Page, selector: str, value: str) -> None:
    """Type a value into a field and press Enter, as a person sets a slider's number box or a dropdown."""
    box = page.locator(selector)
    box.fill(value)
    box.press("Enter")


def _settled(page: Page, selector: str) -> None:
    """Wait until the component has no event pending (Gradio's status tracker hidden), and still none half a
    second later: a plot whose inputs changed while its tab was hidden is redrawn when the tab shows."""
    tracker = page.locator(f"{selector} .wrap.default")
    for _ in range(2):
        expect(tracker).to_have_class(re.compile(r"\bhide\b"), timeout=20_000)
        page.wait_for_timeout(500)


def test_calculator_slider_and_preset(page: Page, shots: Path):
    """Moving the batch slider changes the total; picking a preset resets the sliders and the model."""
    summary = page.locator("#calc-summary")
    expect(summary).to_contain_text("8.000 GiB")  # llama-3-8b, batch 8 × 8192, bf16
    _type(page, "#calc-batch input[type=number]", "32")
    expect(summary).to_contain_text("32.000 GiB", timeout=20_000)
    preset = page.locator("#calc-preset input")
    preset.click()
    preset.fill("gemma-2-9b")
    page.get_by_role("option", name="gemma-2-9b").click()
    expect(summary).to_contain_text("gemma-2-9b", timeout=20_000)
    expect(summary).to_contain_text("ignores the sliding window")
    page.screenshot(path=str(shots / "calculator.png"), full_page=True)


def _pick_preset(page: Page, name: str) -> None:
    """Choose a preset in the calculator's dropdown, as a visitor types and picks it."""
    preset = page.locator("#calc-preset input")
    preset.click()
    preset.fill(name)
    page.get_by_role("option", name=name, exact=True).click()


def test_calculator_on_several_gpus(page: Page, shots: Path):
    """Llama-3-70B on tp=8: the summary says per GPU (1 of 8 KV heads) and in all, the memory bar is one GPU's;
    a tp the model cannot take is refused in the page; back at tp=1 the summary is one device's again."""
    summary = page.locator("#calc-summary")
    _pick_preset(page, "llama-3-70b")
    expect(summary).to_contain_text("llama-3-70b", timeout=20_000)
    _type(page, "#calc-batch input[type=number]", "8")
    _type(page, "#calc-tp input[type=number]", "8")
    expect(summary).to_contain_text("On 8 × H100 SXM", timeout=20_000)
    expect(summary).to_contain_text("1 of 8 KV heads: 40,960 bytes per token")
    expect(page.locator(".js-plotly-plot").first).to_contain_text("one H100 SXM of 8")
    page.screenshot(path=str(shots / "calculator-parallel.png"), full_page=True)
    _type(page, "#calc-tp input[type=number]", "3")
    expect(page.get_by_text("tp 3 does not divide").first).to_be_visible(timeout=20_000)
    _type(page, "#calc-tp input[type=number]", "1")
    expect(summary).to_contain_text("On H100 SXM", timeout=20_000)


def test_calculator_on_a_hybrid_model(page: Page, shots: Path):
    """Qwen3-Next: the summary names its 36 DeltaNet layers' state apart from the KV of its 12 full layers, and the
    memory bar stacks that state as its own part."""
    summary = page.locator("#calc-summary")
    _pick_preset(page, "qwen3-next-80b-a3b")
    expect(summary).to_contain_text("36 keep a gated DeltaNet state", timeout=20_000)
    expect(summary).to_contain_text("plus the gated DeltaNet state of 36 layers")
    expect(page.locator(".js-plotly-plot").first).to_contain_text("linear-layer state")
    _type(page, "#calc-tp input[type=number]", "4")  # 159 GB of weights: four H100s
    expect(summary).to_contain_text("On 4 × H100 SXM", timeout=20_000)
    page.screenshot(path=str(shots / "calculator-hybrid.png"), full_page=True)
    _type(page, "#calc-tp input[type=number]", "1")
    expect(summary).to_contain_text("On H100 SXM", timeout=20_000)


def test_generation_streams_tokens_and_plots(page: Page, shots: Path):
    """Generate on the bundled model: text appears, the latency plot draws, the metrics fill in."""
    _tab(page, "Live generation")
    page.locator("#gen-prompt textarea").fill("What is a package?")
    page.click("#generate-btn")
    expect(page.locator("#gen-metrics")).to_contain_text("finished by", timeout=90_000)
    assert page.locator("#gen-text textarea").input_value().strip()
    expect(page.locator("#latency-plot .js-plotly-plot")).to_be_visible()
    page.screenshot(path=str(shots / "generation.png"), full_page=True)
    _tab(page, "Request lifecycle")
    expect(page.locator("#lifecycle-plot .js-plotly-plot")).to_be_visible(timeout=20_000)
    page.screenshot(path=str(shots / "lifecycle.png"), full_page=True)
    _tab(page, "History")
    expect(page.get_by_text("Download CSV")).to_be_visible()
    expect(page.locator("#overlay-plot .js-plotly-plot")).to_be_visible(timeout=20_000)  # the run, overlaid
    _settled(page, "#overlay-plot")
    expect(page.locator("#overlay-plot")).to_contain_text("Per-token latency of the chosen runs")
    page.screenshot(path=str(shots / "history.png"), full_page=True)


def test_compare(page: Page, shots: Path):
    """The comparison reports the speedup and whether the tokens agree; with static + compiled ticked, the third
    mode's text appears beside the other two, its gain explained (or called within noise), and every mode's bandwidth
    is drawn against the device's limit."""
    _tab(page, "Cached vs uncached")
    static_text = page.locator("#compare-static-text")
    expect(static_text).to_be_hidden()
    page.locator("#compare-static input").check()
    page.click("#compare-btn")
    verdict = page.locator("#compare-verdict")
    expect(verdict).to_contain_text("faster with the cache", timeout=240_000)
    expect(verdict).to_contain_text("identical")
    # the fast path's gain is explained, or called within the run's noise (kvviz.base.noise) on a busy machine
    expect(verdict).to_contain_text(re.compile(r"Why the fast path is faster|Within noise"))
    expect(static_text).to_be_visible()
    cached = page.get_by_label("with the KV cache").input_value()
    assert static_text.locator("textarea").input_value() == cached, "static decoding (fp32) must give the cached text"
    expect(page.get_by_text("Decode bandwidth: achieved against the device's limit")).to_be_visible()
    page.screenshot(path=str(shots / "compare.png"), full_page=True)


def test_a_batch_its_life_cycle_and_history(page: Page, shots: Path):
    """Three prompts decoded together: one row per sequence in the tab and in the history, the batch's shared
    phases drawn once on the life-cycle tab; then a sweep to B=2 explained with its numbers."""
    _tab(page, "Batch")
    _type(page, "#batch-model input", "tiny")
    page.locator("#batch-prompts textarea").fill("The kernel\nWhat is a package in the Debian system?\nA")
    _type(page, "#batch-size input[type=number]", "3")
    _type(page, "#batch-max-new input[type=number]", "8")
    page.click("#batch-run")
    expect(page.locator("#batch-summary")).to_contain_text("3 sequences decoded together", timeout=120_000)
    expect(page.locator("#batch-rows")).to_contain_text("What is a package in the Debian system?")
    _type(page, "#sweep-max-batch input[type=number]", "2")
    _type(page, "#sweep-new-tokens input[type=number]", "4")
    page.click("#sweep-run")
    expect(page.locator("#sweep-text")).to_contain_text("From B=1 to B=2", timeout=180_000)
    expect(page.locator("#sweep-step .js-plotly-plot")).to_be_visible()
    page.screenshot(path=str(shots / "batch.png"), full_page=True)
    _tab(page, "Request lifecycle")
    expect(page.locator("#lifecycle-plot")).to_contain_text("batch of 3 (shared)", timeout=20_000)
    page.screenshot(path=str(shots / "batch-lifecycle.png"), full_page=True)
    _tab(page, "History")
    for row in range(3):
        expect(page.get_by_role("gridcell", name=f"batch 1 row {row}", exact=True)).to_be_visible()


def _loaded_then_long(page: Page, prefix: str, go: str, done: str, done_text: str, long_tokens: str) -> None:
    """A short run on the 135M twin first, so that the model is loaded (Stop does not cut a model's load short: the
    worker is restarted after 10 s instead, and on a busy machine the load alone can outlast that); then a long
    run on it is started. `done` may still show an earlier test's result, so the short run's end is its text (the
    Markdown's own, not gradio's progress overlay, which is added beside the old text while the run is pending)
    holding `done_text` and differing from what it was; its running state is not awaited: with the model already
    loaded, two tokens can end before the page ever shows it."""
    _type(page, f"#{prefix}-model input", "random:smollm2-135m")
    _type(page, f"#{prefix}-max-new input[type=number]", "2")
    shown = f"{done} [data-testid=markdown]"
    earlier = page.locator(shown).inner_text() if page.locator(shown).count() else ""
    page.click(go)
    page.wait_for_function("([shown, earlier, text]) => { const el = document.querySelector(shown);"
                           " return !!el && el.innerText !== earlier && el.innerText.includes(text); }",
                           arg=[shown, earlier, done_text], timeout=180_000)
    _type(page, f"#{prefix}-max-new input[type=number]", long_tokens)
    page.click(go)


def test_stop_during_a_long_run(page: Page):
    """Stop ends a long generation early and says it was cancelled."""
    _tab(page, "Live generation")
    _loaded_then_long(page, "gen", "#generate-btn", "#gen-metrics", "finished by", "1000")
    expect(page.locator("#gen-metrics")).to_contain_text("running", timeout=60_000)  # this run's tokens flow
    page.click("#stop-btn")
    expect(page.locator("#gen-metrics")).to_contain_text("finished by cancelled", timeout=30_000)


def test_stop_a_comparison_and_a_batch(page: Page):
    """Compare and Batch have their own Stop: a long comparison (512 tokens on a 135M twin, uncached) is stopped
    and says so; a long batch on the same model too; the page keeps working."""
    _tab(page, "Cached vs uncached")
    page.locator("#compare-static input").uncheck()  # an earlier test ticked it: a compile is not cut short by Stop
    _loaded_then_long(page, "compare", "#compare-btn", "#compare-verdict", "faster", "512")
    page.wait_for_timeout(3000)
    page.click("#compare-stop")
    expect(page.locator(".toast-body").last).to_contain_text("the comparison was stopped", timeout=30_000)
    _tab(page, "Batch")
    _type(page, "#batch-model input", "random:smollm2-135m")
    _type(page, "#batch-max-new input[type=number]", "512")
    page.click("#batch-run")
    page.wait_for_timeout(3000)
    page.click("#batch-stop")
    expect(page.locator(".toast-body").last).to_contain_text("the batch was stopped", timeout=30_000)


def test_empty_prompt_shows_a_message(page: Page):
    """An empty prompt is refused with a message in the page, and the app keeps working."""
    _tab(page, "Live generation")
    _type(page, "#gen-model input", "tiny")
    page.locator("#gen-prompt textarea").fill("")
    page.click("#generate-btn")
    expect(page.get_by_text("the prompt is empty")).to_be_visible(timeout=20_000)


def test_calculator_bad_input_shows_a_message(page: Page):
    """A kv_heads that does not divide the query heads is refused in the page; the next value works."""
    _tab(page, "KV-cache calculator")
    _type(page, "#calc-kv-heads input[type=number]", "3")
    expect(page.get_by_text("kv_heads must divide")).to_be_visible(timeout=20_000)
    _type(page, "#calc-kv-heads input[type=number]", "4")
    expect(page.locator("#calc-summary")).to_contain_text("modified: kv_heads=4", timeout=20_000)


def test_unknown_model_shows_a_message(page: Page):
    """A model that cannot be found is refused with a message in the page; the tab stays usable."""
    _tab(page, "Live generation")
    _type(page, "#gen-model input", "no-such-org/no-such-model")
    page.locator("#gen-prompt textarea").fill("The kernel")
    page.click("#generate-btn")
    expect(page.get_by_text("not in the local cache").first).to_be_visible(timeout=30_000)
    _type(page, "#gen-model input", "tiny")


def test_plan_predicts_a_preset_on_an_h100(page: Page, shots: Path):
    """Llama-3.1-8B on one H100 with a TPOT p99 limit of 8 ms: the answer gives the knee and a highest rate under
    the SLO below it, the throughput figure marks that rate where the text says, and all four figures are drawn; then
    the same in Chinese."""
    _tab(page, "Plan")
    _type(page, "#plan-tpot input", "0.008")
    page.click("#plan-predict")
    expect(page.locator("#plan-status")).to_contain_text("predicted in", timeout=120_000)
    answer = page.locator("#plan-answer")
    expect(answer).to_contain_text("llama-3.1-8b on H100 SXM (tp 1, pp 1)")
    said = answer.inner_text()
    knee = float(re.search(r"saturates at ([\d,.]+) requests/s", said).group(1).replace(",", ""))
    held = float(re.search(r"highest rate under the SLO: ([\d,.]+) requests/s", said).group(1).replace(",", ""))
    assert 0 < held < knee, said
    for plot in ("#plan-throughput", "#plan-ttft-plot", "#plan-tpot-plot", "#plan-tradeoff"):
        expect(page.locator(f"{plot} .js-plotly-plot")).to_be_visible()
    rule = page.locator("#plan-throughput .annotation-text", has_text="highest under the SLO")
    expect(rule).to_contain_text(f"{held:,.3g}/s")
    page.screenshot(path=str(shots / "plan.png"), full_page=True)
    page.locator("#lang-switch").get_by_text("中文").click()
    expect(answer).to_contain_text("满足 SLO 的最高速率", timeout=20_000)
    page.wait_for_timeout(800)
    page.screenshot(path=str(shots / "zh-plan.png"), full_page=True)
    page.locator("#lang-switch").get_by_text("English").click()
    expect(answer).to_contain_text("highest rate under the SLO", timeout=20_000)
