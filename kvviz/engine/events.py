"""What a generation tells its consumer, in order: typed, frozen events.

A request is received, may wait for the device, gets it, is tokenized; in the static mode its compiled decode
step is made ready (compiled, or reused from an earlier request of the same shape); the prefill ends with the first
token; each decode step adds a token; a finish ends it all (EOS, max_new_tokens, context full, cancelled
or failed). Every t_s is seconds since the request was received (t0), read after the device synced.
The engine (kvviz.engine.loop) builds these; the CLI, the app and the benchmarks read them. This module
is plain data: it knows no model, tokenizer or torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.engine.metrics import RunSummary


@dataclass(frozen=True)
class RequestReceived:
    t_s: float
    request_id: int
    mode: str


@dataclass(frozen=True)
class Waiting:
    """The device is busy with another request: this one queues."""

    t_s: float


@dataclass(frozen=True)
class DeviceAcquired:
    t_s: float
    queue_s: float


@dataclass(frozen=True)
class PromptTokenized:
    t_s: float
    prompt_tokens: int
    chat_template: bool


@dataclass(frozen=True)
class Compiled:
    """The static mode's decode step is ready, its cache allocated for cache_tokens tokens: compiled now
    (compile_s seconds, `graphs` new compiled graphs) or reused from an earlier request of the same shape
    (compile_s 0, graphs 0). The compile is left out of every later t_s, so TTFT and E2E compare with the other
    modes; t_s is when the run's own work resumed."""

    t_s: float
    compile_s: float
    reused: bool
    cache_tokens: int
    graphs: int
    how: str  # how torch.compile was asked, e.g. "reduce-overhead (CUDA graphs)"


@dataclass(frozen=True)
class PrefillDone:
    """The whole prompt has been read in one forward pass and the first token sampled."""

    t_s: float
    prefill_s: float
    prompt_tokens: int


@dataclass(frozen=True)
class TokenEvent:
    """One output token. seq_len is how many tokens the model had processed when it produced this one
    (the cache length in cached mode); kv bytes are the cache as it then stood."""

    index: int
    token_id: int
    text: str
    phase: str  # "prefill" for the first token, "decode" after
    dt_s: float  # since the previous token (since t0 for the first)
    t_s: float
    seq_len: int
    kv_bytes: int  # in the static mode the whole preallocated cache, the same at every step
    kv_bytes_predicted: int
    cuda_allocated_bytes: int | None


@dataclass(frozen=True)
class Finished:
    """The end of a request. reason: eos, max_new_tokens, context_full, cancelled or failed."""

    t_s: float
    reason: str
    text: str
    summary: RunSummary | None
    error: str | None = None
    bad_input: bool = False  # failed because of what was asked (too long a prompt), not a fault


Event = RequestReceived | Waiting | DeviceAcquired | PromptTokenized | Compiled | PrefillDone | TokenEvent | Finished
