"""The Serving tab with no vLLM environment, as a newcomer meets it (a real app, a real browser, real HTTP): the
tab says so and offers to set vLLM up, in the page's language, with no red "Error" anywhere; a set-up that cannot
begin says why in the status line; a hosted demo hides the offer and refuses the set-up over its API. (The build
itself is tests/serving/test_setup.py's, on small local packages: nothing here downloads vLLM.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from playwright.sync_api import Page, expect, sync_playwright

from tests.helpers import running_app
from tests.ui.test_browser import ARGS, CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.slow]
BUTTON = "Set up vLLM (about 3.5 GB, a few minutes)"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("KVVIZ_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """An app whose vLLM environment is an empty folder: (its URL, that folder)."""
    root = tmp_path_factory.mktemp("no-vllm")
    venv = root / "venv"
    venv.mkdir()
    with running_app("--model", "tiny", log=root / "app.log", env={"KVVIZ_VLLM_VENV": str(venv)}) as app:
        yield app.url, venv


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    root = tmp_path_factory.mktemp("hosted-no-vllm")
    (root / "venv").mkdir()
    with running_app("--hosted", log=root / "app.log", env={"KVVIZ_VLLM_VENV": str(root / "venv")}) as app:
        yield app.url


def serving_page(browser, url: str, locale: str = "en-US") -> Page:
    page = browser.new_page(viewport={"width": 1500, "height": 1100}, locale=locale)
    page.goto(url)
    page.get_by_role("tab", name="Serving" if locale.startswith("en") else "服务").click()
    return page


def no_error_badge(page: Page) -> None:
    assert page.get_by_text("Error", exact=True).filter(visible=True).count() == 0, "a red Error badge is shown"


def test_an_empty_environment_is_offered_for_set_up_without_an_error(browser, bare, shots):
    """The status says there is no vLLM environment there and offers the set-up (its size said); Start and Stop
    vLLM are not offered yet; the empty plots have a hint above them, and none shows a red "Error"."""
    url, venv = bare
    page = serving_page(browser, url)
    status = page.locator("#serve-engine-status")
    expect(status).to_contain_text("No vLLM environment", timeout=30_000)
    expect(status).to_contain_text(str(venv))
    expect(page.locator("#serve-setup-vllm")).to_have_text(BUTTON)
    expect(page.locator("#serve-setup-vllm")).to_be_visible()
    for hidden in ("#serve-start-vllm", "#serve-setup-stop", "#serve-stop-vllm"):
        expect(page.locator(hidden)).to_be_hidden()
    expect(page.locator("#serve-status")).to_contain_text("The plots below fill in while a load runs")
    no_error_badge(page)
    page.screenshot(path=str(shots / "serving-setup-offer.png"), full_page=True)
    page.close()


def test_the_offer_in_chinese(browser, bare):
    url, _ = bare
    page = serving_page(browser, url, "zh-CN")
    expect(page.locator("#serve-engine-status")).to_contain_text("没有 vLLM 环境", timeout=30_000)
    expect(page.locator("#serve-setup-vllm")).to_have_text("安装 vLLM（约 3.5 GB，需几分钟）")
    expect(page.locator("#serve-status")).to_contain_text("下面的图会在负载运行时逐步画出")
    no_error_badge(page)
    page.close()


def test_a_set_up_that_cannot_begin_says_why_in_the_status_line(browser, bare):
    """The folder holds a file of someone else's by the time the button is pressed: the set-up refuses to clear it,
    saying so in one line where the status stands (no toast-only failure, no Error badge), and the file stays."""
    url, venv = bare
    (venv / "notes.txt").write_text("mine")
    try:
        page = serving_page(browser, url)
        page.locator("#serve-setup-vllm").click()
        status = page.locator("#serve-engine-status")
        expect(status).to_contain_text("The set-up failed", timeout=30_000)
        expect(status).to_contain_text("holds other files")
        expect(page.locator("#serve-setup-vllm")).to_be_visible()
        no_error_badge(page)
        assert (venv / "notes.txt").read_text() == "mine"
        page.close()
    finally:
        (venv / "notes.txt").unlink()


def test_a_hosted_demo_hides_the_offer_and_refuses_the_set_up_over_http(browser, hosted):
    """Hosted: the page says the host has no vLLM and offers no set-up; the API refuses it in one line."""
    page = serving_page(browser, hosted)
    expect(page.locator("#serve-engine-status")).to_contain_text("This demo's host has no vLLM environment",
                                                                 timeout=30_000)
    expect(page.locator("#serve-setup-vllm")).to_be_hidden()
    no_error_badge(page)
    page.close()
    for api in ("/setup_vllm", "/stop_vllm_setup"):
        with pytest.raises(AppError) as info:
            Client(hosted, verbose=False).predict(lang="en", api_name=api)
        message = str(info.value)
        assert "this hosted demo does not set up vLLM" in message and "\n" not in message.strip(), message
