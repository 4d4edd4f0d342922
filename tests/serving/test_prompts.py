"""Synthetic prompts counted with the model's tokenizer as the server counts them, or estimated and said so;
a shared prefix exactly as long as asked; prompt files and their one-line errors."""

from __future__ import annotations

import pytest

from kvviz.serving.prompts import from_file, load_tokenizer, synthetic
from kvviz.serving.vllm import TINY


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(TINY)


@pytest.mark.parametrize("tokens", [1, 16, 300])
def test_synthetic_prompts_have_the_length_the_tokenizer_counts(tokenizer, tokens):
    prompts = synthetic(20, tokens, tokenizer, seed=1)
    assert all(p.counted and len(tokenizer(p.text).input_ids) == tokens for p in prompts)
    if tokens > 4:
        assert len({p.text for p in prompts}) == 20, "every request gets its own prompt"


def test_without_a_tokenizer_lengths_are_estimates():
    prompts = synthetic(2, 10)
    assert not prompts[0].counted and len(prompts[0].text.split()) == 10


def test_a_shared_prefix_is_exactly_that_many_tokens(tokenizer):
    prompts = synthetic(10, 600, tokenizer, seed=2, shared_prefix=512)
    ids = [tokenizer(p.text).input_ids for p in prompts]
    assert all(len(i) == 600 for i in ids)
    assert all(i[:512] == ids[0][:512] for i in ids), "the first 512 tokens are shared"
    assert len({tuple(i[512:]) for i in ids}) == 10, "the rest differs"


def test_prompt_files(tmp_path, tokenizer):
    (tmp_path / "p.jsonl").write_text('{"prompt": "hello there"}\n\n{"text": "bye"}\n')
    (tmp_path / "p.txt").write_text("one\ntwo three\n")
    assert [p.text for p in from_file(tmp_path / "p.jsonl", tokenizer)] == ["hello there", "bye"]
    assert [p.tokens for p in from_file(tmp_path / "p.txt")] == [1, 2]


@pytest.mark.parametrize(("content", "message"), [("", "holds no prompts"), ("not json\n", "line 1 .* not JSON"),
                                                  ('{"q": 1}\n', 'no "prompt" or "text"')])
def test_bad_prompt_files_are_one_line(tmp_path, content, message):
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        from_file(path)
