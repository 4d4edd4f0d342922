"""Walks through the page as its users take them, in a real browser (issue 25), after other clicks rather than on a
fresh page: an engineer sizing GPUs sets seq_len exactly and by dragging, then fp8 on tp × pp × dp; the Lesson's
"Show me" then puts the calculator (its seq_len slider included) at the lesson's example."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.ui.test_app_api import app_url  # noqa: F401 - the running app fixture
from tests.ui.test_browser import _pick_preset, _type, shots  # noqa: F401 - shots: a fixture
from tests.ui.test_lesson_browser import browser, open_page, show_me  # noqa: F401 - browser: a fixture

pytestmark = pytest.mark.browser


def slider_position(page: Page) -> float:
    return float(page.locator("#calc-seq-len-log input[type=number]").input_value())


def test_an_engineer_sets_seq_len_exactly_and_by_dragging_then_sizes_gpus(browser, app_url, shots):  # noqa: F811
    """seq_len 1000 typed in the box: the summary says 1,000 and the slider stands at log2(1000) = 9.97; the slider
    dragged to its ends (the keyboard's Home and End, as a visitor may): 1 and 262,144 in the box. Then
    Llama-3-70B, batch 32 × 32,768 in fp8 on tp 4 × pp 2 × dp 2: one GPU holds 40 of the 80 layers and 2 of the 8 KV
    heads, so 40 × 2 (K and V) × 2 × 128 × 1 byte = 20,480 bytes per token; 16 GPUs in all."""
    page = open_page(browser, app_url)
    summary = page.locator("#calc-summary")
    _type(page, "#calc-seq-len input", "1000")
    expect(summary).to_contain_text("batch 8 × seq_len 1,000 in bf16", timeout=20_000)
    assert slider_position(page) == pytest.approx(9.97)
    page.locator("#calc-seq-len-log input[type=range]").press("End")
    expect(page.locator("#calc-seq-len input")).to_have_value("262144", timeout=20_000)
    expect(summary).to_contain_text("seq_len 262,144", timeout=20_000)
    page.locator("#calc-seq-len-log input[type=range]").press("Home")
    expect(summary).to_contain_text("batch 8 × seq_len 1 in bf16", timeout=20_000)
    _pick_preset(page, "llama-3-70b")
    _type(page, "#calc-batch input[type=number]", "32")
    _type(page, "#calc-seq-len input", "32768")
    expect(summary).to_contain_text("seq_len 32,768", timeout=20_000)
    assert slider_position(page) == pytest.approx(15.0)
    dtype = page.locator("#calc-kv-dtype input")
    dtype.click()
    page.get_by_role("option", name="fp8", exact=True).click()
    for name, value in (("tp", "4"), ("pp", "2"), ("dp", "2")):
        _type(page, f"#calc-{name} input[type=number]", value)
    expect(summary).to_contain_text("On 16 × H100 SXM (tp 4 × pp 2 × dp 2", timeout=20_000)
    expect(summary).to_contain_text("40 layers × 2 of 8 KV heads: 20,480 bytes per token")
    page.screenshot(path=str(shots / "walk-engineer.png"), full_page=True)
    show_me(page, 3)
    expect(summary).to_contain_text("batch 16 × seq_len 4,096 in bf16; 524,288 bytes per token", timeout=20_000)
    assert slider_position(page) == pytest.approx(12.0)  # log2(4096): the slider follows the Lesson's value
    page.close()
