"""The page in Chinese and in English, in a real browser (Debian's Chromium driven by Playwright).

A browser whose language is Chinese gets the Chinese page; an English one the English page; the switch on
the page changes every label and the answers computed after it, and the choice outlives a reload. On the
Chinese page no English sentence is left: every tab is opened, the calculator answers, and a short generation
runs, and the page's text is searched for runs of English words. Screenshots of the Chinese interface go to
$KVVIZ_SCREENSHOTS when it is set (README.zh.md's pictures are made that way).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from kvviz.ui.common import EXAMPLE_PROMPTS
from tests.ui.test_app_api import app_url  # noqa: F401 - the running app fixture
from tests.ui.test_browser import ARGS, CHROMIUM, shots  # noqa: F401 - shots: where screenshots go

pytestmark = pytest.mark.browser
CJK = re.compile(r"[\u4e00-\u9fff]")
# Three or more English words in a row: a sentence or a label left untranslated (one or two words are names,
# units and terms kept on purpose: KV Cache, TTFT, tokens/s, batch, seq_len). On the English page this finds
# over 200 runs; on the Chinese one, none but those kept below.
ENGLISH_RUN = re.compile(r"\b[A-Za-z][a-z]+(?:[ ,'’-]+[A-Za-z][a-z]+){2,}\b")
# English on the Chinese page on purpose: the example prompts (they are the model's input, not the interface),
# the bilingual label of the switch, and a command line.
KEPT = [*EXAMPLE_PROMPTS, "Language / 语言", "kvviz memory --json"]
TABS_ZH = ["KV Cache 显存计算器", "实时生成", "有缓存 vs 无缓存", "批处理（Batch）", "请求生命周期", "服务（Serving）",
           "历史记录", "课程"]


@pytest.fixture(scope="module")
def browser() -> Browser:
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def open_page(browser: Browser, url: str, locale: str) -> Page:
    page = browser.new_context(locale=locale, viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)
    expect(page.locator("#calc-summary h3")).to_be_visible(timeout=60_000)
    return page


def english_runs(text: str) -> list[str]:
    """The runs of English words in `text`, the kept English taken out first."""
    for kept in KEPT:
        text = text.replace(kept, " ")
    return ENGLISH_RUN.findall(text)


def test_a_chinese_browser_gets_the_chinese_page(browser, app_url):  # noqa: F811
    """zh-CN: every tab's label is Chinese, the switch says 中文, and the calculator answers in Chinese."""
    page = open_page(browser, app_url, "zh-CN")
    for label in TABS_ZH:
        expect(page.get_by_role("tab", name=label)).to_be_visible()
    expect(page.locator("#lang-switch input[value=zh]")).to_be_checked()
    expect(page.locator("#calc-summary")).to_contain_text(CJK, timeout=20_000)
    page.context.close()


def test_an_english_browser_gets_english_and_the_switch_changes_it(browser, app_url):  # noqa: F811
    """en-US: English tabs and answers; the switch turns the labels (the tabs out of view too) and the next answer
    Chinese, and the choice is kept across a reload."""
    page = open_page(browser, app_url, "en-US")
    expect(page.get_by_role("tab", name="History")).to_be_visible()
    expect(page.locator("#calc-summary")).not_to_contain_text(CJK)
    page.locator("#lang-switch").get_by_text("中文").click()
    expect(page.get_by_role("tab", name="历史记录")).to_be_visible(timeout=20_000)
    expect(page.locator("#calc-summary")).to_contain_text(CJK, timeout=20_000)
    page.reload()
    expect(page.get_by_role("tab", name="课程")).to_be_visible(timeout=60_000)
    expect(page.locator("#lang-switch input[value=zh]")).to_be_checked()
    page.locator("#lang-switch").get_by_text("English").click()
    expect(page.get_by_role("tab", name="History")).to_be_visible(timeout=20_000)
    expect(page.locator("#calc-summary")).not_to_contain_text(CJK, timeout=20_000)
    page.context.close()


def test_no_english_is_left_on_the_chinese_page(browser, app_url, shots):  # noqa: F811
    """Every tab of the Chinese page holds no run of three English words outside the example prompts: with the
    calculator's answer, a short generation's metrics, a comparison with the static mode, the lesson's answers
    from those measurements and the lesson's script beside kvviz's measurement of the same run."""
    page = open_page(browser, app_url, "zh-CN")
    expect(page.locator("#calc-summary")).to_contain_text(CJK, timeout=20_000)
    page.screenshot(path=str(shots / "zh-calculator.png"), full_page=True)
    found = {}
    for label in TABS_ZH:
        page.get_by_role("tab", name=label).click()
        page.wait_for_timeout(500)
        if label == "实时生成":
            page.locator("#generate-btn").click()
            expect(page.locator("#gen-metrics")).to_contain_text(re.compile(r"运行 \d+："), timeout=120_000)  # the end
            page.screenshot(path=str(shots / "zh-generation.png"), full_page=True)
        if label == "有缓存 vs 无缓存":
            page.locator("#compare-static input").check()
            page.locator("#compare-btn").click()
            explained = re.compile("为什么快路径更快|在噪声范围内")  # the gain explained, or within the run's noise
            expect(page.locator("#compare-verdict")).to_contain_text(explained, timeout=240_000)
            page.screenshot(path=str(shots / "zh-compare.png"), full_page=True)
        if label == "课程":
            page.locator("#lesson-refresh").click()
            expect(page.locator("#lesson-answer-6")).to_contain_text("预填充", timeout=20_000)
            # A Chinese prompt, so that what the model writes back (shown in the script's dict) is not English
            # either: the page's default prompt is English, the language SmolLM2-135M-Instruct answers well.
            page.locator("#lesson-prompt textarea").fill("用三句话解释 LLM 推理中的 KV Cache。")
            page.locator("#lesson-run").click()
            expect(page.locator("#lesson-verdict")).to_contain_text(re.compile("相同的|不一致"), timeout=120_000)
            page.screenshot(path=str(shots / "zh-lesson.png"), full_page=True)
        runs = english_runs(page.locator("body").inner_text())
        if runs:
            found[label] = runs[:8]
    assert not found, f"English left on the Chinese page: {found}"
    page.context.close()


def test_the_lesson_buttons_open_their_views_set(browser, app_url):  # noqa: F811
    """Question 4's button opens the calculator at the lesson's example (32 layers × 32 KV heads × head_dim 128 in
    bf16, batch 16 × seq_len 4,096: 16·4096·32·2·32·128·2 B = 32 GiB, the lesson's own figure); question 5's
    opens the Batch tab's sweep (kvviz's own engine: no server to start); question 6's the live generation with
    a long prompt."""
    page = open_page(browser, app_url, "en-US")
    page.get_by_role("tab", name="Lesson").click()
    page.locator("#lesson-open-4").click()
    expect(page.locator("#calc-summary")).to_contain_text("KV cache: 32.000 GiB", timeout=30_000)
    expect(page.locator("#calc-summary")).to_contain_text("llama-2-7b")
    page.get_by_role("tab", name="Lesson").click()
    page.locator("#lesson-open-5").click()
    expect(page.get_by_role("tab", name="Batch")).to_have_attribute("aria-selected", "true", timeout=10_000)
    expect(page.locator("#sweep-run")).to_be_visible()
    page.get_by_role("tab", name="Lesson").click()
    page.locator("#lesson-open-6").click()
    expect(page.locator("#gen-prompt textarea")).to_have_value(re.compile(r"^During training we care"), timeout=10_000)
    page.context.close()
