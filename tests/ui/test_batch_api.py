"""The batch tab's endpoints in both languages: /batch and /batch_sweep called over HTTP as a client would, with
lang last; English by default, Chinese when asked, refusals too."""

from __future__ import annotations

import pytest
from gradio_client import Client

from tests.helpers import running_app


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with running_app(log=tmp_path_factory.mktemp("batch-api") / "app.log") as app:
        yield Client(app.url, verbose=False)


def test_a_batch_answers_in_the_language_asked(client):
    """The same batch in English (no lang) and in Chinese: the headline and the table's columns follow lang."""
    english = client.predict("tiny", "The kernel\nA", 2, 3, api_name="/batch")
    assert english[0].startswith("### 2 sequences decoded together:")
    assert english[1]["headers"][:3] == ["row", "prompt_tokens", "padding"]
    chinese = client.predict("tiny", "The kernel\nA", 2, 3, lang="zh", api_name="/batch")
    assert chinese[0].startswith("### 2 条序列一起解码：合计 ") and "sequences" not in chinese[0]
    assert chinese[1]["headers"][:3] == ["行", "提示词 token 数", "填充"]


def test_a_refusal_in_chinese(client):
    """No prompt at all: the tab's own refusal, in the language asked."""
    with pytest.raises(Exception, match="没有提示词：请每行写一个"):
        client.predict("tiny", "\n\n", 2, 3, lang="zh", api_name="/batch")
    with pytest.raises(Exception, match="no prompts: write one per line"):
        client.predict("tiny", "\n\n", 2, 3, api_name="/batch")


def test_the_sweep_answers_in_chinese(client):
    """B = 1, 2 on tiny: the explanation in Chinese, from its first sentence (which of its two headlines depends on
    whether the two batches' decode steps overlap, noise on a shared machine) to the device the memory budget was
    sized for (this CPU, a keyed text that a pandas string column would have turned into English)."""
    text, *plots = client.predict("tiny", 8, 2, 2, lang="zh", api_name="/batch_sweep")
    assert text.startswith(("从 B=1 到 B=2，解码步从 ", "从 B=1 到 B=2，tokens/s 从 ")) and len(plots) == 4
    assert "（本机 CPU（" in text and "this CPU" not in text
