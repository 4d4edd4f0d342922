"""A generation request, and the one place its values are checked.

GenerationRequest cannot exist with a bad value: its constructor checks every field and raises
ValueError with one line naming the first bad one, in the same words whoever built it. Values from
outside (the page, the web API, the command line) come in through GenerationRequest.from_untrusted,
which also applies the host's limits (kvviz.engine.hosting) and reads a cleared field as its default.
The prompt's length in tokens is known only once it is tokenized, so the host's prompt limit travels
with the request and the engine applies it. BatchRequest is B prompts decoded together (kvviz.engine.batch),
checked by the same rules for the fields they share. The request also names how it decodes, one of MODES: with the
KV cache (cached), without it (uncached), or with the cache preallocated and the decode step compiled
(static). Nothing here knows models, gradio or the worker.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvviz.base.errors import InputError
from kvviz.base.inputs import flag, number, shown, whole_number
from kvviz.engine.hosting import ENGINE_MAX_NEW_TOKENS, HostPolicy
from kvviz.i18n import normalize, t

MAX_NEW_TOKENS = ENGINE_MAX_NEW_TOKENS
MAX_PROMPT_CHARS = 200_000
MAX_TOP_K = 1_000_000  # more than any vocabulary: the filter is then off
MAX_SEED = 2**64 - 1  # the largest seed torch.Generator accepts
MIN_STATIC_TOKENS = 8  # the shortest static cache a request may pin (its compile's warm-up writes four positions)
MAX_STATIC_TOKENS = 32_768  # the longest static cache a request may ask for (it is allocated whole, up front)
MAX_BATCH = 1024  # prompts in one batch; memory binds long before this on any real model

# The ways a request decodes, and how each is named where people read it.
MODES = ("cached", "uncached", "static")
MODE_LABELS = {"cached": "cached", "uncached": "uncached", "static": "cached, static + compiled"}


def mode_label(mode: str, lang: str = "en") -> str:
    """The name a mode goes by where people read it: MODE_LABELS in English, its translation in Chinese (the
    catalogue's compare.mode.*); an unknown mode as it is."""
    if mode not in MODE_LABELS:
        return str(mode)
    return MODE_LABELS[mode] if normalize(lang) == "en" else t(f"compare.mode.{mode}", lang)

# How each field is named in a message, whoever sent the value.
LABELS = {"max_new_tokens": "max_new_tokens", "temperature": "temperature (0 = greedy)", "top_k": "top_k (0 = off)",
          "top_p": "top_p", "seed": "seed", "max_prompt_tokens": "max_prompt_tokens", "use_cache": "use_cache",
          "chat_template": "chat_template", "ignore_eos": "ignore_eos", "static": "static",
          "static_tokens": "static_tokens"}


@dataclass(frozen=True)
class GenerationRequest:
    """What to generate. temperature 0 means greedy; top_k 0 and top_p 1 switch those filters off.

    use_cache and static choose the mode (see `mode`): static runs the cached loop on a cache preallocated for
    the whole run with a compiled decode step (kvviz.engine.compiled); static_tokens pins that cache's length
    (None: the run's length rounded up to a bucket, so requests of about the same length share one compiled
    step) and a run that needs more is refused.
    """

    prompt: str
    max_new_tokens: int = 64
    use_cache: bool = True
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    chat_template: bool = True
    ignore_eos: bool = False  # run to max_new_tokens whatever the model emits (benchmarks do this)
    max_prompt_tokens: int | None = None  # a host's limit, checked once the prompt is tokenized
    static: bool = False  # preallocated cache and compiled decode step; needs use_cache
    static_tokens: int | None = None  # the static cache's length; None: chosen from the run's length

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InputError("request.prompt_empty")
        prompt_text(self.prompt)
        _whole(self.max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS)
        number(self.temperature, LABELS["temperature"], 0, 100)
        _whole(self.top_k, "top_k", 0, MAX_TOP_K)
        number(self.top_p, LABELS["top_p"], 0, 1, low_open=True)
        if self.seed is not None:
            _whole(self.seed, "seed", 0, MAX_SEED)
        if self.max_prompt_tokens is not None:
            _whole(self.max_prompt_tokens, "max_prompt_tokens", 1, MAX_PROMPT_CHARS)
        _flags(self, "use_cache", "chat_template", "ignore_eos", "static")
        if self.static and not self.use_cache:
            raise InputError("request.static_needs_cache")
        if self.static_tokens is not None:
            if not self.static:
                raise InputError("request.static_tokens_need_static")
            _whole(self.static_tokens, "static_tokens", MIN_STATIC_TOKENS, MAX_STATIC_TOKENS)

    @property
    def mode(self) -> str:
        """One of MODES: "static" (cached, static + compiled), "cached" or "uncached"."""
        return "static" if self.static else "cached" if self.use_cache else "uncached"

    def with_mode(self, mode: str, static_tokens: int | None = None) -> GenerationRequest:
        """The same request decoded in `mode` (one of MODES); static_tokens only for "static"."""
        if mode not in MODES:
            raise InputError("request.unknown_mode", mode=mode, modes=", ".join(MODES))
        return replace(self, use_cache=mode != "uncached", static=mode == "static",
                       static_tokens=static_tokens if mode == "static" else None)

    @classmethod
    def from_untrusted(cls, prompt: object, max_new_tokens: object, *, temperature: object = None,
                       top_k: object = None, top_p: object = None, seed: object = None, chat_template: object = True,
                       use_cache: object = True, static: object = False,
                       policy: HostPolicy | None = None) -> GenerationRequest:
        """The request for values as a caller sent them (JSON numbers may be integral floats), within the host's
        limits. None means the field's default (greedy, no top-k, no top-p, no seed); so do "" and -1 for the seed.
        ValueError (PolicyError for a host's limit) names the first bad value."""
        policy = policy or HostPolicy()
        n = whole_number(max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS)
        policy.check_request(n)
        return cls(
            prompt=prompt_text(prompt), max_new_tokens=n,
            use_cache=use_cache, static=static, chat_template=chat_template,
            temperature=0.0 if temperature is None else number(temperature, LABELS["temperature"], 0, 100),
            top_k=0 if top_k is None else whole_number(top_k, LABELS["top_k"], 0, MAX_TOP_K),
            top_p=1.0 if top_p is None else number(top_p, LABELS["top_p"], 0, 1, low_open=True),
            seed=None if seed is None or seed == "" or seed == -1 else whole_number(seed, "seed", 0, MAX_SEED),
            max_prompt_tokens=policy.prompt_token_limit)


def prompt_text(value: object, row: int | None = None) -> str:
    """value as a prompt's text (at most MAX_PROMPT_CHARS characters), or InputError naming it: the prompt, or the
    `row`th prompt of a batch (from 1). Its own words, not kvviz.base.inputs.text's: a prompt is named in Chinese."""
    if not isinstance(value, str):
        raise (InputError("request.prompt_not_text", value=shown(value)) if row is None else
               InputError("batch.prompt_not_text", i=row, value=shown(value)))
    if len(value) > MAX_PROMPT_CHARS:
        raise (InputError("request.prompt_too_long", n=len(value), limit=MAX_PROMPT_CHARS) if row is None else
               InputError("batch.prompt_too_long", i=row, n=len(value), limit=MAX_PROMPT_CHARS))
    return value


def _whole(value: object, name: str, low: int, high: int) -> int:
    """A request holds ints, not integral floats: from_untrusted converts what a caller sent."""
    return whole_number(value, LABELS[name], low, high, integral_floats=False)


def _flags(request: object, *names: str) -> None:
    for name in names:
        flag(getattr(request, name), LABELS[name])


@dataclass(frozen=True)
class BatchRequest:
    """B prompts to decode together, greedily. Checked when built: ValueError with one line naming the bad value."""

    prompts: tuple[str, ...]
    max_new_tokens: int = 64
    use_cache: bool = True
    chat_template: bool = False
    ignore_eos: bool = False  # every row runs to max_new_tokens whatever it emits (benchmarks do this)
    max_prompt_tokens: int | None = None  # a host's limit on each row, checked once the rows are tokenized

    def __post_init__(self) -> None:
        if isinstance(self.prompts, list):
            object.__setattr__(self, "prompts", tuple(self.prompts))
        if not isinstance(self.prompts, tuple):
            raise InputError("batch.not_tuple")
        if not 1 <= len(self.prompts) <= MAX_BATCH:
            raise InputError("batch.error.size", most=MAX_BATCH, n=len(self.prompts))
        for i, prompt in enumerate(self.prompts):
            if not prompt_text(prompt, row=i + 1).strip():
                raise InputError("batch.prompt_empty", i=i + 1)
        _whole(self.max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS)
        if self.max_prompt_tokens is not None:
            _whole(self.max_prompt_tokens, "max_prompt_tokens", 1, MAX_PROMPT_CHARS)
        _flags(self, "use_cache", "chat_template", "ignore_eos")

    @property
    def mode(self) -> str:
        """"cached" or "uncached": a batch has no static mode."""
        return "cached" if self.use_cache else "uncached"

    @property
    def batch_size(self) -> int:
        return len(self.prompts)
