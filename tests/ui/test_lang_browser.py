"""The language switch with results on the page, in a real browser (issue 25): what the calculator, a generation, a
comparison and a batch showed in English is written again in Chinese from the kept result (nothing runs again:
the measured times stay the same), and back; the calculator's plots, redrawn while their tab was hidden, fit their
boxes when it shows. And a refusal's toast shows its text as written, angle brackets included."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.ui.test_app_api import app_url  # noqa: F401 - the running app fixture
from tests.ui.test_browser import _tab, _type, shots  # noqa: F401 - shots: a fixture
from tests.ui.test_lesson_browser import browser, open_page  # noqa: F401 - browser: a fixture

pytestmark = pytest.mark.browser
CHINESE = re.compile(r"[\u4e00-\u9fff]{2}")  # two Chinese characters in a row: a Chinese word
NO_CHINESE = re.compile(r"^[^\u4e00-\u9fff]*$")
TTFT = re.compile(r"\d[\d,]*\.\d\d ms")  # the first time in the metrics table: TTFT, as measured


def words(text: str) -> str:
    """The text with its white space made single (a redrawn Markdown block may lay out its lines apart otherwise)."""
    return " ".join(text.split())


def switch(page: Page, name: str) -> None:
    """Move the language switch, as a visitor clicks it."""
    page.locator("#lang-switch").get_by_text(name, exact=True).click()


def plots_overflowing(page: Page, scope: str) -> list[str]:
    """The plots under `scope` whose drawing is wider than the box around it (cut on the right): 'drawn/box px'."""
    return page.locator(f"{scope} .js-plotly-plot").evaluate_all("""plots => plots.filter(p => p.offsetParent)
        .map(p => [p.querySelector('svg.main-svg').getBoundingClientRect().width,
                   p.closest('.block').getBoundingClientRect().width])
        .filter(([drawn, box]) => drawn > box + 1).map(([drawn, box]) => `${drawn}/${box} px`)""")


def run_results_in_english(page: Page) -> dict[str, str]:
    """A generation, a comparison and a batch on the bundled tiny model, each short; what each says, in English."""
    _tab(page, "Live generation")
    _type(page, "#gen-model input", "tiny")
    _type(page, "#gen-max-new input[type=number]", "8")
    page.click("#generate-btn")
    expect(page.locator("#gen-metrics")).to_contain_text("finished by", timeout=120_000)
    _tab(page, "Cached vs uncached")
    _type(page, "#compare-model input", "tiny")
    _type(page, "#compare-max-new input[type=number]", "8")
    page.click("#compare-btn")
    expect(page.locator("#compare-verdict")).to_contain_text("faster with the cache", timeout=120_000)
    _tab(page, "Batch")
    _type(page, "#batch-model input", "tiny")
    _type(page, "#batch-size input[type=number]", "2")
    _type(page, "#batch-max-new input[type=number]", "8")
    page.click("#batch-run")
    expect(page.locator("#batch-summary")).to_contain_text("2 sequences decoded together", timeout=120_000)
    return {"ttft": TTFT.search(page.locator("#gen-metrics").inner_text()).group(),
            "verdict": page.locator("#compare-verdict").inner_text(),
            "batch": page.locator("#batch-summary").inner_text()}


RESULTS = ["#calc-summary", "#gen-metrics", "#compare-verdict", "#batch-summary", "#batch-steps", "#latency-plot",
           "#lifecycle-plot"]


def test_switching_language_rewrites_the_results_on_the_page(browser, app_url, shots):  # noqa: F811
    """Results shown in English read in Chinese after the switch, with the same measured numbers (a re-run would
    measure new ones), and in English again after switching back; the calculator's plots, redrawn in Chinese while
    another tab was in view, fit their boxes when the calculator is opened."""
    page = open_page(browser, app_url)
    english = run_results_in_english(page)
    switch(page, "中文")  # on the Batch tab: the other tabs' results are redrawn while hidden
    for tab, selector in [("批处理（Batch）", "#batch-summary"), ("实时生成", "#gen-metrics"),
                          ("有缓存 vs 无缓存", "#compare-verdict"), ("请求生命周期", "#lifecycle-plot"),
                          ("KV Cache 显存计算器", "#calc-summary")]:
        page.get_by_role("tab", name=tab).click()
        expect(page.locator(selector)).to_contain_text(CHINESE, timeout=20_000)
    expect(page.locator("#calc-summary")).to_contain_text("所有层合计每 token")
    page.wait_for_timeout(1000)  # the tab's relayout (app.RELAYOUT_JS) runs 60 and 400 ms after it shows
    assert plots_overflowing(page, "body") == [], "calculator plots drawn while hidden are cut on the right"
    page.screenshot(path=str(shots / "calculator-zh-after-switch.png"), full_page=True)
    page.get_by_role("tab", name="实时生成").click()
    assert TTFT.search(page.locator("#gen-metrics").inner_text()).group() == english["ttft"], "the run ran again"
    expect(page.locator("#gen-metrics")).to_contain_text("结束原因")
    expect(page.locator("#latency-plot")).to_contain_text("每 token 延迟")
    switch(page, "English")
    for selector in ("#gen-metrics", "#latency-plot"):
        expect(page.locator(selector)).to_have_text(NO_CHINESE, timeout=20_000)
    assert TTFT.search(page.locator("#gen-metrics").inner_text()).group() == english["ttft"]
    for tab, selector, key in [("Cached vs uncached", "#compare-verdict", "verdict"),
                               ("Batch", "#batch-summary", "batch")]:
        _tab(page, tab)
        expect(page.locator(selector)).to_have_text(NO_CHINESE, timeout=20_000)
        assert words(page.locator(selector).inner_text()) == words(english[key]), f"{selector}: not its first English"
    expect(page.locator("#batch-steps")).to_have_text(NO_CHINESE)
    page.close()


def test_a_toast_shows_angle_brackets_as_written(browser, app_url):  # noqa: F811
    """A refusal that names random:<preset> shows "<preset>" in its toast and in the metrics' failure line: Gradio
    renders a toast as HTML, where the bare word would be taken for a tag and vanish."""
    page = open_page(browser, app_url)
    _tab(page, "Live generation")
    _type(page, "#gen-model input", "random:<preset>")
    page.click("#generate-btn")
    expect(page.locator(".toast-body").last).to_contain_text("unknown preset '<preset>' for a random twin",
                                                             timeout=60_000)
    expect(page.locator("#gen-metrics")).to_contain_text("unknown preset '<preset>'")
    page.close()
