"""The Scheduler tab in a real browser: the preemption preset played, paused, stepped and slid to a known step,
whose batch is read from the page. The expected batches are worked by hand (the preset's numbers: four requests
of 64 prompt and 96 output tokens, 16 blocks of 32 tokens, a 512-token budget; tests/sim/test_details.py works the
same run out step by step). Screenshots go to $KVVIZ_SCREENSHOTS when set (README's pictures)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.ui.test_app_api import app_url  # noqa: F401 - the running app fixture
from tests.ui.test_browser import ARGS, CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.slow]
STEP_0 = "step 0 (0.00 s): running r0 r1 r2 r3 · waiting none · budget 256/512 · KV 8/16 blocks"


@pytest.fixture(scope="module")
def page(app_url) -> Page:  # noqa: F811
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.goto(app_url)
        pg.get_by_role("tab", name="Scheduler").click()
        yield pg
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("KVVIZ_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _step(page: Page) -> int:
    return int(page.locator(".sched-player").get_attribute("data-step"))


def test_play_pause_and_step_the_preemption(page: Page, shots: Path):
    """Step 0 admits all four (64 tokens and 2 blocks each); Play moves on by itself, Pause holds, Step adds
    one; at step 65 the first needs a fifth block, none is free, and the last admitted, r3, is preempted: three run
    with 5 blocks each (15 of 16), 3 tokens of the budget, and the 16th block is r3's first, free but cached."""
    line = page.locator("#sched-line")
    expect(line).to_contain_text("step 0 (0.00 s): running r0", timeout=60_000)  # the first preset, drawn
    page.get_by_label("the cache full: a request preempted").check()
    expect(line).to_have_text(STEP_0, timeout=90_000)  # one answer from a server that may be busy
    page.locator("#sched-play").click()
    expect(line).not_to_contain_text("step 0 ", timeout=5_000)
    page.locator("#sched-play").click()  # pause
    held = _step(page)
    page.wait_for_timeout(600)
    assert _step(page) == held > 0, "the player moved on while paused"
    page.locator("#sched-next").click()
    assert _step(page) == held + 1
    page.locator("#sched-slider").fill("65")
    # (the time is the calibrated step model's, not worked by hand)
    expect(line).to_have_text(re.compile(r"^step 65 \(\d+\.\d\d s\): running r0 r1 r2 · waiting r3 · "
                                         r"budget 3/512 · KV 15/16 blocks · preempted r3$"))
    titles = page.locator(".sched-kv title").all_text_contents()
    assert sum(bool(re.search(r": r[0-2]$", s)) for s in titles) == 15
    assert sum(s.endswith("free, still cached") for s in titles) == 1
    page.screenshot(path=str(shots / "scheduler-preempt.png"), full_page=True)
    page.locator("#sched-prev").click()
    expect(line).to_have_text(re.compile(r"^step 64 .*running r0 r1 r2 r3 · waiting none · budget 4/512 · "
                                         r"KV 16/16 blocks$"))


def test_the_player_speaks_chinese(page: Page, shots: Path):
    """The switch re-sends the run in Chinese: the step line and the buttons."""
    page.get_by_label("中文").check()
    line = page.locator("#sched-line")
    expect(line).to_have_text("第 0 步（0.00 秒）：运行 r0 r1 r2 r3 · 等待 无 · 预算 256/512 · KV 8/16 块",
                              timeout=90_000)
    expect(page.locator("#sched-play")).to_contain_text("播放")
    page.locator("#sched-slider").fill("65")
    expect(line).to_contain_text("被抢占 r3")
    page.screenshot(path=str(shots / "zh-scheduler.png"), full_page=True)
    page.get_by_label("English").check()


def test_simulate_right_after_a_pick_shows_the_count_it_ran(page: Page):
    """A teacher picks the chunked-prompt preset and presses Simulate before the pick's own run is back: Simulate
    sends the slider's old count (the preemption preset's 4), and its run lands after the pick's run of 5. The page
    then shows that last run of 4, and its slider must say 4, not the pick's 5 (the page once showed 5 beside a run
    of 12). The order is made sure of by holding the pick's call until Simulate's is sent, and Simulate's a moment
    longer."""
    line = page.locator("#sched-line")
    page.get_by_label("the cache full: a request preempted").check()
    expect(line).to_have_text(STEP_0, timeout=90_000)
    held, sent = [], []

    def in_order(route):
        data = (route.request.post_data_json or {}).get("data") or []
        sent.append(data)
        if data == ["chunk", "en"]:  # the pick: held until Simulate's call is out
            held.append(route)
            return
        if data == ["chunk", 4, "en"]:  # Simulate's: the pick goes now, and its run comes back meanwhile
            while held:
                held.pop().continue_()
            time.sleep(1.5)
        route.continue_()  # any other call of the page (its other events) goes as it came

    page.route("**/queue/join*", in_order)
    try:
        page.evaluate("""() => { document.querySelector('#sched-preset input[value="chunk"]').click();
                                 setTimeout(() => document.querySelector('#sched-simulate').click(), 300); }""")
        setup = page.locator("#sched-explanation")
        expect(setup).to_contain_text("4 requests of 640 prompt", timeout=90_000)
    finally:
        page.unroute("**/queue/join*")
    assert [d for d in sent if d[:1] == ["chunk"]] == [["chunk", "en"], ["chunk", 4, "en"]], sent
    page.wait_for_timeout(1_000)
    expect(setup).to_contain_text("4 requests of 640 prompt")
    assert int(page.locator("#sched-requests input[type=number]").input_value()) == 4


def test_the_window_preset_after_the_preemption(page: Page, shots: Path):
    """A teacher shows the preemption, then the same load on a model with a window of 64 tokens. At step k (k >= 1)
    each request decodes at position 63 + k: its slots reach 64 + k tokens, cdiv(64 + k, 32) blocks, of which the
    window (its last 63 tokens and the new one) frees floor(k / 32). Step 64: 4 - 2 = 2 each, 8 in all; step 65:
    5 - 2 = 3 each, 12 of the 16, 4 free; nobody preempted, and the run ends at step 95."""
    line = page.locator("#sched-line")
    page.get_by_label("the cache full: a request preempted").check()  # where the teacher was, at whatever step
    expect(page.locator("#sched-slider")).to_have_attribute("max", "126", timeout=90_000)
    page.get_by_label("a sliding window freeing blocks behind it").check()
    expect(page.locator("#sched-slider")).to_have_attribute("max", "95", timeout=90_000)
    expect(line).to_have_text(STEP_0)  # the new run, from its first step: 2 blocks each, as without the window
    page.locator("#sched-slider").fill("64")
    expect(line).to_have_text(re.compile(r"^step 64 \(\d+\.\d\d s\): running r0 r1 r2 r3 · waiting none · "
                                         r"budget 4/512 · KV 8/16 blocks$"))
    page.locator("#sched-next").click()
    expect(line).to_have_text(re.compile(r"^step 65 .*running r0 r1 r2 r3 · waiting none · budget 4/512 · "
                                         r"KV 12/16 blocks$"))
    expect(page.locator("#sched-held")).to_contain_text("blocks held: r0 3, r1 3, r2 3, r3 3 · free 4")
    page.screenshot(path=str(shots / "scheduler-window.png"), full_page=True)
