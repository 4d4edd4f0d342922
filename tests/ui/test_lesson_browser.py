"""The Lesson tab in a real browser: each "Show me" opens its view set for the lesson's number and scrolls to it, and
the answers read whole in both languages."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.ui.test_app_api import app_url  # noqa: F401 - the running app fixture
from tests.ui.test_browser import ARGS, CHROMIUM, _pick_preset, _type, shots  # noqa: F401 - shots: a fixture

pytestmark = pytest.mark.browser
VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def open_page(browser, url: str, locale: str = "en-US") -> Page:
    page = browser.new_page(viewport=VIEWPORT, locale=locale)
    page.goto(url)
    expect(page.locator("#calc-summary h3")).to_contain_text("KV cache" if locale.startswith("en") else "KV Cache",
                                                             timeout=60_000)
    return page


def in_view(page: Page, selector: str) -> bool:
    """Whether the element's top edge is inside the window (a visitor sees it without scrolling)."""
    box = page.locator(selector).bounding_box()
    return box is not None and -2 <= box["y"] < VIEWPORT["height"] - 40  # scrollIntoView may stop a subpixel past


def show_me(page: Page, question: int, lesson_tab: str = "Lesson") -> None:
    """Press question `question`'s button as a visitor reaches it, reading down: the Lesson tab scrolled until the
    button is at the top of the window."""
    page.get_by_role("tab", name=lesson_tab).click()
    button = page.locator(f"#lesson-open-{question}")
    button.evaluate("el => el.scrollIntoView({block: 'start'})")
    button.click()


def test_q3_sets_every_control_its_32_gib_depends_on(browser, app_url, shots):  # noqa: F811
    """After fp8, 16 layers and tp 2 on Llama-3-8B, question 3's button shows the lesson's own figure:
    16 × 4096 × 32 layers × 2 × 32 KV heads × 128 × 2 bytes (bf16) = 34,359,738,368 B = 32 GiB, on one GPU."""
    page = open_page(browser, app_url)
    summary = page.locator("#calc-summary")
    dtype = page.locator("#calc-kv-dtype input")
    dtype.click()
    page.get_by_role("option", name="fp8", exact=True).click()
    expect(summary).to_contain_text("in fp8", timeout=20_000)
    _type(page, "#calc-tp input[type=number]", "2")
    expect(summary).to_contain_text("On 2 × H100 SXM", timeout=20_000)
    _pick_preset(page, "llama-2-7b")  # the lesson's preset already chosen: choosing it again moves no slider
    expect(summary).to_contain_text("llama-2-7b", timeout=20_000)
    _type(page, "#calc-layers input[type=number]", "16")
    expect(summary).to_contain_text("layers=16", timeout=20_000)
    show_me(page, 3)
    expect(summary).to_contain_text("KV cache: 32.000 GiB", timeout=30_000)
    expect(summary).to_contain_text("batch 16 × seq_len 4,096 in bf16; 524,288 bytes per token")
    expect(summary).to_contain_text("On H100 SXM")  # one GPU again
    expect(summary).not_to_contain_text("modified")
    assert in_view(page, "#calc-summary"), "Show me left the calculator's answer out of view"
    page.screenshot(path=str(shots / "lesson-q3.png"))
    page.close()


@pytest.mark.parametrize("locale,tab,ending", [
    ("en-US", "Lesson", "random:llama-2-7b) to see its own numbers."),
    ("zh-CN", "课程", "random:llama-2-7b），即可看到它自己的数字。"),
])
def test_q3_answer_is_whole(browser, app_url, locale, tab, ending):  # noqa: F811
    """Question 3's answer, with no model of known shape, ends with its last sentence in either language (a
    `<preset>` in it was once taken for an HTML tag, and the answer ended "…(tiny, random:")."""
    page = open_page(browser, app_url, locale)
    page.get_by_role("tab", name=tab).click(timeout=60_000)  # the Chinese page names its tabs once it has loaded
    page.locator("#lesson-model input").fill("Qwen/Qwen2.5-0.5B-Instruct")  # a hub id: no shape known offline
    page.locator("#lesson-model input").press("Enter")
    page.locator("#lesson-refresh").click()
    answer = page.locator("#lesson-answer-3")
    expect(answer).to_contain_text("32 GiB", timeout=20_000)
    assert answer.inner_text().strip().endswith(ending), answer.inner_text()
    page.close()


@pytest.mark.parametrize("question,target,tab", [
    (5, "#batch-sweep", "Batch"), (6, "#gen-prompt", "Live generation"), (1, "#gen-prompt", "Live generation"),
    (2, "#compare-btn", "Cached vs uncached"), (4, "#calc-summary", "KV-cache calculator"),
])
def test_show_me_scrolls_to_the_answer(browser, app_url, question, target, tab, shots):  # noqa: F811
    """Pressed far down the Lesson tab, each button opens its tab with the place that answers the question in view
    (a newly opened tab keeps the page's scroll position, which left the visitor mid-page), and no red "Error"
    badge around it (question 5 opens kvviz's own batch sweep, which needs no server)."""
    page = open_page(browser, app_url)
    show_me(page, question)
    expect(page.get_by_role("tab", name=tab, exact=True)).to_have_attribute("aria-selected", "true", timeout=10_000)
    page.wait_for_function(f"() => {{ const r = document.querySelector('{target}')?.getBoundingClientRect(); "
                           f"return r && r.top >= -2 && r.top < {VIEWPORT['height'] - 40}; }}", timeout=10_000)
    assert in_view(page, target)
    assert page.get_by_text("Error", exact=True).filter(visible=True).count() == 0
    if question == 5:
        page.screenshot(path=str(shots / "lesson-q5.png"))
    page.close()


@pytest.mark.parametrize("locale,button,question", [("en-US", "Start the lesson →", "In your own words"),
                                                    ("zh-CN", "开始课程 →", "用自己的话")])
def test_start_here_opens_the_lesson(browser, app_url, locale, button, question):  # noqa: F811
    """A first visit shows where to start above the tabs; its button opens the Lesson on its first question."""
    page = open_page(browser, app_url, locale)
    expect(page.locator("#start-here")).to_contain_text("Lesson" if locale == "en-US" else "课程")
    page.get_by_role("button", name=button).click()
    expect(page.locator("#lesson-open-1")).to_be_visible()
    expect(page.get_by_text(question).first).to_be_visible()
    page.close()


def test_plan_it_opens_the_plan_tab(browser, app_url):  # noqa: F811
    """Question 5's "Plan it" opens the Plan tab with its Predict button in view; with nothing measured in this
    session it leaves the tab's values as they were (500-token prompts typed there stay)."""
    page = open_page(browser, app_url)
    page.get_by_role("tab", name="Plan").click()
    _type(page, "#plan-prompt-tokens input", "500")
    page.get_by_role("tab", name="Lesson").click()
    page.locator("#lesson-plan-5").click()
    expect(page.get_by_role("tab", name="Plan")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#plan-predict")).to_be_in_viewport()
    expect(page.locator("#plan-prompt-tokens input")).to_have_value("500")
    page.close()
