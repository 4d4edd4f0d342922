"""The lesson script's endpoint on the running app, over HTTP, as gradio_client sees it."""

from __future__ import annotations

import pytest
from gradio_client import Client

from tests.helpers import running_app


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """app.py started on a free loopback port, as a user would start it."""
    with running_app(log=tmp_path_factory.mktemp("lesson-api") / "app.log") as app:
        yield app.url


def test_lesson_script_answers_with_both_dicts(app_url):
    """/lesson_script on the bundled tiny: the script's dict and kvviz's agree on prompt_tokens and new_tokens."""
    verdict, script, kvviz = Client(app_url, verbose=False).predict(
        model="tiny", prompt="The kernel", max_new_tokens=12, lang="en", api_name="/lesson_script")
    assert script["prompt_tokens"] == kvviz["prompt_tokens"] == 2
    assert script["new_tokens"] == kvviz["new_tokens"] > 0
    assert {"ttft_s", "tpot_s", "tokens_per_s", "text"} <= set(script)
    assert verdict.startswith(f"**The same {kvviz['new_tokens']} tokens**")


def test_lesson_script_in_chinese_and_its_refusal(app_url):
    """lang=zh answers in Chinese; an empty prompt is refused in Chinese too."""
    client = Client(app_url, verbose=False)
    verdict, _, _ = client.predict(model="tiny", prompt="The kernel", max_new_tokens=4, lang="zh",
                                   api_name="/lesson_script")
    assert verdict.startswith("**脚本与 kvviz 的循环生成了相同的")
    with pytest.raises(Exception, match="prompt"):
        client.predict(model="tiny", prompt="", max_new_tokens=4, lang="zh", api_name="/lesson_script")
