"""The bundled model: small, offline, loaded like a hub model, and writing words rather than noise."""

from __future__ import annotations

import json
import math
import re
from itertools import groupby

import pytest

from kvviz.cli import main
from kvviz.engine.loading import BUNDLED, load_model
from kvviz.engine.loop import run_to_end
from kvviz.engine.request import GenerationRequest

FOLDER = BUNDLED["tiny"]


def test_shape_and_size():
    """Qwen2 family, grouped-query attention, a context of at least 1024, at most 25 MB of safetensors."""
    config = json.loads((FOLDER / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"]
    assert config["num_key_value_heads"] < config["num_attention_heads"]
    assert config["max_position_embeddings"] >= 1024
    assert (FOLDER / "model.safetensors").stat().st_size <= 25 * 10**6


def test_loads_offline_through_the_hub_code_path(monkeypatch):
    """With the hub switched off, `tiny` loads from its folder with AutoTokenizer/AutoModelForCausalLM."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    lm = load_model("tiny")
    assert type(lm.model).__name__ == "Qwen2ForCausalLM" and not lm.random_weights
    assert lm.tokenizer.chat_template and lm.tokenizer.eos_token == "<|im_end|>"  # noqa: S105
    assert lm.arch.attention_kind == "GQA"


def _whole_words(tokenizer) -> set[str]:
    """Words the tokenizer learnt as single tokens with a leading space: the corpus's common words."""
    return {t[1:].lower() for t in tokenizer.get_vocab() if t.startswith("Ġ") and t[1:].isalpha() and len(t) > 3}


@pytest.mark.parametrize("prompt", ["The kernel", "The package manager", "What is a package?"])
def test_english_continuations_are_words(prompt):
    """Greedy English output is mostly words the corpus uses, with punctuation, and no token stuck on repeat."""
    lm = load_model("tiny")
    tokens, fin = run_to_end(lm, GenerationRequest(prompt, max_new_tokens=60, chat_template="?" in prompt))
    words = re.findall(r"[A-Za-z]+", fin.text)
    assert len(words) >= 5, fin.text
    known = _whole_words(lm.tokenizer)
    share = sum(w.lower() in known for w in words if len(w) > 2) / max(1, sum(len(w) > 2 for w in words))
    assert share > 0.7, f"{share:.0%} known words in {fin.text!r}"
    assert re.search(r"[.,:;]", fin.text), "no punctuation"
    ids = [t.token_id for t in tokens]
    longest_run = max(len(list(run)) for _, run in groupby(ids))
    assert longest_run < 5, "a single token repeated over and over"


def test_chinese_prompt_answers_in_chinese():
    """A Chinese question gets Chinese text back, streamed whole (no replacement characters)."""
    lm = load_model("tiny")
    tokens, fin = run_to_end(lm, GenerationRequest("什么是内核？", max_new_tokens=60))
    assert len(re.findall(r"[\u4e00-\u9fff]", fin.text)) >= 10, fin.text
    assert "\ufffd" not in fin.text and "".join(t.text for t in tokens) == fin.text
    assert fin.text == lm.tokenizer.decode([t.token_id for t in tokens], skip_special_tokens=True,
                                           clean_up_tokenization_spaces=False), "the stream is not the decoding"


def test_metrics_recorded_beside_the_model():
    """Validation loss and perplexity are recorded, and perplexity is exp(loss)."""
    m = json.loads((FOLDER / "metrics.json").read_text())
    assert m["val_perplexity"] == pytest.approx(math.exp(m["val_loss"]))
    assert m["val_loss"] < 5.0, "the bundled model should beat a unigram-level guess by far"
    assert (FOLDER / "loss.png").stat().st_size > 10_000 and (FOLDER / "samples.md").is_file()


def test_cli_generates_with_the_default_model(capsys):
    """`python -m kvviz generate` with no --model runs the bundled model while SmolLM2 is not converted here (the
    tests' model cache is empty)."""
    assert main(["generate", "--prompt", "The kernel", "--max-new-tokens", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "tiny" and out["random_weights"] is False and out["lesson"]["new_tokens"] >= 1
