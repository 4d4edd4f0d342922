"""The model folders kvviz serves with vLLM: a model kvviz knows by name, a local folder, or a random twin.

Named models are kvviz.engine.loading's: the bundled tiny and the packaged SmolLM2-135M-Instruct (fetched
from the package registry and converted on first use). A twin's folder holds the preset's config.json
(optionally cut to its first N layers, same attention) and kvviz's byte-level twin tokenizer as large as the
model's vocabulary (kvviz.engine.loading.twin_tokenizer), which is all vLLM's --load-format dummy needs to
build random weights. Specs read as the rest of kvviz reads them: "tiny", "smollm2-135m-instruct",
"random:<preset>", "random:<preset>@<layers>", or a folder path. A folder is served with its own weights (vLLM's
default loader reads *.safetensors, *.bin or *.pt); asked for dummy weights (dummy_weights, the CLI's
--dummy-weights), any of them is served with random ones, and a folder with a config but no tokenizer then
gets a twin folder (its config and the twin tokenizer). A folder with no weights, not asked for dummy ones, is
refused before vLLM starts, with the line that says they can be asked for. Knows folders and presets, not
servers.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.inputs import clip
from kvviz.calc.arch import architecture_from_source, load_config_dict
from kvviz.calc.presets import PRESET_DIR, preset_names
from kvviz.serving.vllm import REPO

TWINS = REPO / "results-tmp" / "twins"  # git-ignored; a twin folder is rebuilt in a second
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")  # what vLLM's default loader ("auto") takes from a folder
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")  # fast, sentencepiece, BPE vocabularies


@dataclass(frozen=True)
class ModelFolder:
    """A folder vLLM can serve: where, the name to serve it under, and whether its weights are random."""

    path: Path
    name: str
    dummy: bool


def twin_folder(preset: str, layers: int | None = None, root: Path = TWINS) -> Path:
    """root/<preset>[-<layers>l]/ with the preset's config (first `layers` layers; a multimodal config's text
    part) and a twin tokenizer."""
    if preset not in preset_names():
        raise InputError("config.unknown_preset", preset=repr(preset))
    raw, _ = load_config_dict(PRESET_DIR / f"{preset}.json")
    raw = json.loads(json.dumps(raw))  # a deep copy: a multimodal config's layers are in its text_config
    text = raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw
    if layers is not None:
        _keep_layers(text, layers, preset)
    return write_twin(Path(root) / (preset if layers is None else f"{preset}-{layers}l"), raw)


def write_twin(folder: Path, raw: dict) -> Path:
    """`folder` with the config `raw` and a byte-level twin tokenizer as large as its vocabulary."""
    from kvviz.engine.loading import twin_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    # Each file arrives whole (written beside, then renamed): another kvviz, or a vLLM reading the folder, may be at
    # the same twin at once; tokenizer.json, whose presence says the tokenizer is there, arrives last.
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}-") as scratch:
        (Path(scratch) / "config.json").write_text(json.dumps(raw, indent=2), encoding="utf-8")
        os.replace(Path(scratch) / "config.json", folder / "config.json")
        if not (folder / "tokenizer.json").is_file():
            # the vocabulary as transformers' config class reads it (Gemma 3's text_config leaves it to the default)
            twin_tokenizer(int(architecture_from_source(folder).vocab_size)).save_pretrained(scratch)
            for made in sorted(Path(scratch).iterdir(), key=lambda f: f.name == "tokenizer.json"):
                os.replace(made, folder / made.name)
    return folder


def _keep_layers(text: dict, layers: int, preset: str) -> None:
    """Cut the (text) config `text` to its first `layers` layers, with their per-layer lists."""
    key = next(k for k in ("num_hidden_layers", "n_layer", "num_layers") if k in text)
    if not 1 <= layers <= text[key]:
        raise InputError("load.twin_layers", preset=preset, n=text[key], layers=layers)
    text[key] = layers
    for listed in ("layer_types", "no_rope_layers"):
        if isinstance(text.get(listed), list):
            text[listed] = text[listed][:layers]


def has_weights(folder: Path) -> bool:
    """Whether vLLM's default loader finds weights in `folder` (a *.safetensors, *.bin or *.pt file)."""
    return any(any(Path(folder).glob(pattern)) for pattern in WEIGHT_PATTERNS)


def has_tokenizer(folder: Path) -> bool:
    return any((Path(folder) / name).is_file() for name in TOKENIZER_FILES)


def dummy_folder(path: Path, root: Path = TWINS) -> Path:
    """The folder to serve `path` from with dummy weights: itself when it has a tokenizer, else a twin folder
    (its config.json, the twin tokenizer) under root, named for the folder and a hash of where it is."""
    if has_tokenizer(path):
        return path
    raw, _ = load_config_dict(path)
    if raw.get("vocab_size") is None:
        raise InputError("models.no_vocab", folder=clip(str(path)))
    where = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return write_twin(Path(root) / f"folder-{path.name}-{where}", raw)


def model_folder(spec: str, root: Path = TWINS, dummy_weights: bool = False) -> ModelFolder:
    """The folder for a model spec: a model kvviz knows by name (tiny; smollm2-135m-instruct, fetched and
    converted on first use), random:<preset>[@<layers>], or a local folder (ValueError if none, or if it has no
    weights and dummy_weights is not asked for). dummy_weights: serve it with random weights."""
    from kvviz.engine.loading import LoadError, named_folder

    spec = str(spec).strip()
    try:
        named = named_folder(spec)
    except LoadError as exc:
        raise exc.recast(InputError) from None
    if named is not None:
        return ModelFolder(Path(named), spec, dummy=dummy_weights)
    if spec.startswith("random:"):
        preset, _, layers = spec[len("random:"):].partition("@")
        if layers and not layers.isdigit():
            raise InputError("models.layers_not_whole", spec=spec)
        path = twin_folder(preset, int(layers) if layers else None, root)
        return ModelFolder(path, f"random-{preset}" + (f"-{layers}l" if layers else ""), dummy=True)
    path = Path(spec).expanduser()
    try:
        folder = (path / "config.json").is_file()
    except OSError:  # a name longer than a file name may be, or one the system cannot look up
        folder = False
    if not folder:
        raise InputError("models.unknown_spec", spec=clip(spec))
    path = path.resolve()
    if dummy_weights:
        return ModelFolder(dummy_folder(path, root), path.name, dummy=True)
    if not has_weights(path):
        raise InputError("models.no_weights", spec=clip(spec, 200))
    return ModelFolder(path, path.name, dummy=False)
