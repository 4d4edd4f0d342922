"""The config parser: every attention family, every way a config arrives, and every way it can be wrong."""

from __future__ import annotations

import json

import pytest

from kvviz.base import hub
from kvviz.calc.arch import FULL, SLIDING, ConfigError, architecture_from_dict, architecture_from_source
from kvviz.calc.presets import PRESET_DIR, load_preset, preset_names

# name: (attention kind, layers, heads, kv heads, head_dim, sliding layers, window)
EXPECTED = {
    "qwen2.5-0.5b": ("GQA", 24, 14, 2, 64, 0, None),
    "qwen2.5-7b": ("GQA", 28, 28, 4, 128, 0, None),
    "qwen2.5-72b": ("GQA", 80, 64, 8, 128, 0, None),
    "qwen3-0.6b": ("GQA", 28, 16, 8, 128, 0, None),
    "qwen3-8b": ("GQA", 36, 32, 8, 128, 0, None),
    "llama-2-7b": ("MHA", 32, 32, 32, 128, 0, None),
    "llama-3-8b": ("GQA", 32, 32, 8, 128, 0, None),
    "llama-3.1-8b": ("GQA", 32, 32, 8, 128, 0, None),
    "llama-3-70b": ("GQA", 80, 64, 8, 128, 0, None),
    "mistral-7b-v0.1": ("GQA", 32, 32, 8, 128, 32, 4096),
    "gemma-2-2b": ("GQA", 26, 8, 4, 256, 13, 4096),
    "gemma-2-9b": ("GQA", 42, 16, 8, 256, 21, 4096),
    "gemma-2-27b": ("GQA", 46, 32, 16, 128, 23, 4096),
    "deepseek-v2-lite": ("MLA", 27, 16, 16, 192, 0, None),
    "deepseek-v3": ("MLA", 61, 128, 128, 192, 0, None),
    "smollm2-135m": ("GQA", 30, 9, 3, 64, 0, None),
    "tinyllama-1.1b": ("GQA", 22, 32, 4, 64, 0, None),
    "gpt2": ("MHA", 12, 12, 12, 64, 0, None),
    # Issue 15's families, from their published configs (assets/presets/README.md names each source).
    "qwen3-30b-a3b": ("GQA", 48, 32, 4, 128, 0, None),
    "qwen3-next-80b-a3b": ("GQA", 48, 16, 2, 256, 0, None),  # 36 of its layers keep a DeltaNet state, no KV
    "llama-3.2-1b": ("GQA", 16, 32, 8, 64, 0, None),
    "llama-3.2-3b": ("GQA", 28, 24, 8, 128, 0, None),
    "llama-4-scout": ("GQA", 48, 40, 8, 128, 36, None),  # 36 chunked layers (chunk 8192), no sliding window
    "mistral-nemo-12b": ("GQA", 40, 32, 8, 128, 0, None),  # head_dim 128, not 5120 / 32
    "mixtral-8x7b": ("GQA", 32, 32, 8, 128, 0, None),
    "gemma-3-1b": ("MQA", 26, 4, 1, 256, 22, 512),
    "gemma-3-27b": ("GQA", 62, 32, 16, 128, 52, 1024),  # text_config nested; five sliding layers to one full
    "gpt-oss-20b": ("GQA", 24, 64, 8, 64, 12, 128),
    "gpt-oss-120b": ("GQA", 36, 64, 8, 64, 18, 128),
    "phi-3-mini-4k": ("MHA", 32, 32, 32, 96, 32, 2047),
    "falcon-7b": ("MQA", 32, 71, 1, 64, 0, None),  # multi_query: one KV head, not 71
    "falcon-40b-instruct": ("GQA", 60, 128, 8, 64, 0, None),
    "jamba-1.5-mini": ("GQA", 32, 32, 8, 128, 0, None),  # 4 attention layers, 28 Mamba
    "olmo-2-13b": ("MHA", 40, 40, 40, 128, 0, None),
}


def test_every_reference_model_is_a_preset():
    """assets/presets holds exactly the architectures of the reference table."""
    assert sorted(preset_names()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_parses_as_published(name):
    """Each preset config.json parses to the dimensions in the reference table."""
    a = load_preset(name)
    got = (a.attention_kind, a.num_layers, a.num_heads, a.num_kv_heads, a.head_dim, a.n_sliding, a.sliding_window)
    assert got == EXPECTED[name]


def test_qwen2_ignores_unused_sliding_window():
    """Qwen2.5 ships sliding_window=32768 with use_sliding_window=false: no layer may slide."""
    raw = json.loads((PRESET_DIR / "qwen2.5-0.5b.json").read_text())
    assert raw["sliding_window"] == 32768 and raw["use_sliding_window"] is False
    assert load_preset("qwen2.5-0.5b").layer_types == (FULL,) * 24


def test_qwen2_with_sliding_window_on_slides_above_max_window_layers():
    """With use_sliding_window on, transformers slides the layers from max_window_layers up."""
    raw = json.loads((PRESET_DIR / "qwen2.5-0.5b.json").read_text())
    raw |= {"use_sliding_window": True, "sliding_window": 1024, "max_window_layers": 20}
    a = architecture_from_dict(raw)
    assert a.layer_types == (FULL,) * 20 + (SLIDING,) * 4
    assert a.sliding_window == 1024


def test_gemma2_layer_pattern_comes_from_transformers():
    """Gemma-2's config has no layer_types; transformers' config class makes even layers sliding."""
    a = load_preset("gemma-2-2b")
    assert a.layer_types[:4] == (SLIDING, FULL, SLIDING, FULL)


def test_explicit_layer_types_are_honoured(write_config):
    """A config that lists layer_types gets exactly those layers."""
    raw = json.loads((PRESET_DIR / "llama-3-8b.json").read_text())
    raw |= {"model_type": "qwen3", "head_dim": 128, "sliding_window": 512, "use_sliding_window": True,
            "layer_types": ["sliding_attention", "full_attention"] * 16}
    a = architecture_from_source(write_config(raw))
    assert a.n_sliding == 16 and a.sliding_window == 512


def test_mla_fields():
    """DeepSeek-V2-Lite: no q compression, latent 512 + 64 rope; keys 128 + 64 wide, values 128."""
    m = load_preset("deepseek-v2-lite").mla
    assert (m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim, m.q_lora_rank) == \
        (512, 64, 128, 128, None)
    assert m.latent_dim == 576 and m.qk_head_dim == 192
    assert load_preset("deepseek-v3").mla.q_lora_rank == 1536


def test_folder_and_file_and_dict_agree(write_config):
    """A model folder, its config.json, and the dict itself parse to the same architecture."""
    raw = json.loads((PRESET_DIR / "gemma-2-9b.json").read_text())
    folder = write_config(raw)
    a = architecture_from_source(folder, name="x")
    b = architecture_from_source(folder / "config.json", name="x")
    c = architecture_from_dict(raw, name="x", source=a.source)
    assert a == c and b.layer_types == a.layer_types and b.num_kv_heads == a.num_kv_heads


def test_unknown_model_type_is_refused_by_name():
    """A model_type transformers has no config class for is one clear error that says what to give instead."""
    with pytest.raises(ConfigError, match=r"unknown model_type 'mystery'.*KV dimensions"):
        architecture_from_dict({"model_type": "mystery", "num_hidden_layers": 4, "num_attention_heads": 8,
                                "num_key_value_heads": 2, "hidden_size": 512, "intermediate_size": 1024,
                                "vocab_size": 1000})


@pytest.mark.parametrize("model_type,message", [("bert", None), ("distilbert", "encoder-only"),
                                                ("t5", "encoder-decoder")])
def test_models_without_a_decoder_cache_are_refused(model_type, message):
    """An encoder-only or encoder-decoder family is refused with a sentence that says so; BERT, which
    transformers can run as a causal decoder (BertLMHeadModel), parses."""
    if message is None:
        assert architecture_from_dict({"model_type": model_type}).num_layers == 12
    else:
        with pytest.raises(ConfigError, match=message):
            architecture_from_dict({"model_type": model_type})


def test_missing_sizes_take_the_config_class_defaults_and_say_so():
    """A config that leaves size keys out gets transformers' defaults, as transformers would build it, and the
    architecture's notes name each defaulted key with its value (LlamaConfig: 32 layers, 32 heads, 4096 wide)."""
    a = architecture_from_dict({"model_type": "llama", "vocab_size": 100, "intermediate_size": 128})
    assert (a.num_layers, a.num_heads, a.num_kv_heads, a.hidden_size, a.head_dim) == (32, 32, 32, 4096, 128)
    assert any("num_hidden_layers=32" in n and "hidden_size=4096" in n and "LlamaConfig" in n for n in a.notes)
    assert not any("vocab_size" in n for n in a.notes), "a key the config gives is not a default"


BASE = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 128, "vocab_size": 100}


@pytest.mark.parametrize("change,message", [
    ({"model_type": None}, "model_type"),
    ({"num_hidden_layers": -3}, "num_hidden_layers"),
    ({"num_hidden_layers": 2.5}, "num_hidden_layers"),
    ({"num_hidden_layers": "two"}, "num_hidden_layers"),
    ({"num_hidden_layers": True}, "num_hidden_layers"),
    ({"num_key_value_heads": 3}, "multiple"),
    ({"kv_lora_rank": 512}, "qk_rope_head_dim"),
    ({"layer_types": ["full_attention"]}, "layer_types"),
    ({"layer_types": ["chunked_attention", "full_attention"]}, "attention_chunk_size"),
    ({"layer_types": ["mystery_attention", "full_attention"]}, "mystery_attention"),
    ({"num_key_value_heads": 0}, "num_key_value_heads"),
    ({"text_config": {"num_hidden_layers": 2.5}}, "num_hidden_layers"),
    ({"layer_types": ["sliding_attention", "full_attention"]}, "sliding_window"),
])
def test_bad_configs_name_the_problem(change, message):
    """A broken config raises ConfigError whose message names the key at fault."""
    raw = {k: v for k, v in (BASE | change).items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        architecture_from_dict(raw)


def test_unreadable_sources(tmp_path):
    """Missing files, folders without config.json, invalid JSON and non-objects are clear errors."""
    with pytest.raises(ConfigError, match="no such file"):
        architecture_from_source(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match=r"no config\.json"):
        architecture_from_source(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="JSON"):
        architecture_from_source(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        architecture_from_source(bad)


def test_hub_id_offline_mode_fails_at_once(monkeypatch):
    """With HF_HUB_OFFLINE set, an uncached hub id is refused without touching the network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "hub_reachable", lambda *a, **k: pytest.fail("must not probe the network"))
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE"):
        architecture_from_source("someone/not-cached-model")


def test_hub_id_unreachable_fails_without_download_retries(monkeypatch):
    """When the hub does not answer, the config is never requested online (no retry storm)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "hub_reachable", lambda *a, **k: False)
    calls = []

    def fake_load(load, repo_id, what, _real=hub.from_hub):
        def spy(local_files_only):
            calls.append(local_files_only)
            if not local_files_only:
                pytest.fail("tried to download although the hub is unreachable")
            raise OSError("not cached")
        return _real(spy, repo_id, what)

    monkeypatch.setattr("kvviz.calc.arch.from_hub", fake_load)
    with pytest.raises(ConfigError, match="cannot reach the Hugging Face Hub"):
        architecture_from_source("someone/not-cached-model")
    assert calls == [True], "the local cache must be tried first, and only it"


def test_hub_probe_reports_closed_port(monkeypatch):
    """hub_reachable is False when nothing listens at the endpoint."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert hub.hub_reachable(timeout_s=1.0) is False
