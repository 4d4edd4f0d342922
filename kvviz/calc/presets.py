"""The reference architectures shipped as config.json files under assets/presets/.

Presets are plain Hugging Face configs, read by the same parser as a user's file, so a preset can
never know more than a real config would. This module only finds and names them.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from kvviz.base.inputs import shown
from kvviz.calc.arch import Architecture, ConfigError, architecture_from_source

PRESET_DIR = Path(__file__).resolve().parents[2] / "assets" / "presets"

# The public checkpoint each preset's config comes from.
HUB_IDS: dict[str, str] = {
    "qwen2.5-0.5b": "Qwen/Qwen2.5-0.5B-Instruct",
    "qwen2.5-7b": "Qwen/Qwen2.5-7B-Instruct",
    "qwen2.5-72b": "Qwen/Qwen2.5-72B-Instruct",
    "qwen3-0.6b": "Qwen/Qwen3-0.6B",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3-next-80b-a3b": "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "llama-2-7b": "meta-llama/Llama-2-7b-hf",
    "llama-3-8b": "meta-llama/Meta-Llama-3-8B",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama-3-70b": "meta-llama/Meta-Llama-3-70B",
    "llama-3.2-1b": "meta-llama/Llama-3.2-1B",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B",
    "llama-4-scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "mistral-7b-v0.1": "mistralai/Mistral-7B-v0.1",
    "mistral-nemo-12b": "mistralai/Mistral-Nemo-Base-2407",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "gemma-2-2b": "google/gemma-2-2b",
    "gemma-2-9b": "google/gemma-2-9b",
    "gemma-2-27b": "google/gemma-2-27b",
    "gemma-3-1b": "google/gemma-3-1b-it",
    "gemma-3-27b": "google/gemma-3-27b-it",
    "deepseek-v2-lite": "deepseek-ai/DeepSeek-V2-Lite",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "smollm2-135m": "HuggingFaceTB/SmolLM2-135M",
    "tinyllama-1.1b": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "gpt2": "openai-community/gpt2",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "phi-3-mini-4k": "microsoft/Phi-3-mini-4k-instruct",
    "falcon-7b": "tiiuae/falcon-7b",
    "falcon-40b-instruct": "tiiuae/falcon-40b-instruct",
    "jamba-1.5-mini": "ai21labs/AI21-Jamba-1.5-Mini",
    "olmo-2-13b": "allenai/OLMo-2-1124-13B",
}


def preset_names() -> list[str]:
    """Names of the shipped presets, in the order of the reference table."""
    shipped = {p.stem for p in PRESET_DIR.glob("*.json")}
    return [name for name in HUB_IDS if name in shipped] + sorted(shipped - set(HUB_IDS))


@cache
def load_preset(name: str) -> Architecture:
    """The Architecture of preset `name`; ConfigError listing the presets if there is none."""
    key = str(name).strip().lower()
    path = PRESET_DIR / f"{key}.json"
    if key not in preset_names():
        raise ConfigError("config.unknown_preset", preset=shown(name))
    return architecture_from_source(path, name=key)
