"""What a generation tells its consumer, in order: typed, frozen events.

A request is received, may wait for the device, gets it, is tokenized; in the static mode its compiled decode
step is made ready (compiled, or reused from an earlier request of the same shape); the prefill ends with the first
token; each decode step adds a token; a finish ends it all (EOS, max_new_tokens, context full, cancelled
or failed). Every t_s is seconds since the request was received (t0), read after the device synced.
A batch (kvviz.engine.batch) shares the queue's events and PrefillDone, and adds its own below: the rows
tokenized, one BatchStep per forward pass, a BatchTokenEvent (a TokenEvent with its row) per row's token, a
RowFinished per row and a BatchFinished. The loops build these (through kvviz.engine.meter); the CLI, the app
and the benchmarks read them. This module is plain data: it knows no model, tokenizer or torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.engine.metrics import BatchSummary, RunSummary


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
    text: str = ""  # what was generated (up to the failure, when it failed)
    summary: RunSummary | None = None  # None when it failed, or was cancelled while it waited for the device
    error: str | None = None
    bad_input: bool = False  # failed because of what was asked (too long a prompt), not a fault


Event = RequestReceived | Waiting | DeviceAcquired | PromptTokenized | Compiled | PrefillDone | TokenEvent | Finished


# ---- a batch's own events (kvviz.engine.batch); the queue's and PrefillDone are the single run's ----------------


@dataclass(frozen=True)
class BatchTokenized:
    """Every row tokenized and left-padded to the longest: padded_len = max(prompt_tokens)."""

    t_s: float
    prompt_tokens: tuple[int, ...]  # real tokens of each row's prompt
    padded_len: int
    padding_tokens: int  # B × padded_len - sum(prompt_tokens)
    chat_template: bool


@dataclass(frozen=True)
class BatchStep:
    """One forward pass over the whole batch (step 0 is the prefill).

    seq_len: positions per row in the cache after the pass (padded_len + step), padding included; in uncached
    mode the positions the pass read. kv_bytes: the cache tensors' bytes (B × seq_len positions), measured;
    kv_bytes_predicted: transformers_cache_bytes for batch B at seq_len. padding_tokens: positions held with
    mask 0 (left padding, and what finished rows were fed since); padding_bytes: their share of kv_bytes.
    dt_s: the forward pass alone, synced before and after. Both byte figures are 0 without a cache.
    """

    step: int
    phase: str  # "prefill" or "decode"
    t_s: float
    dt_s: float
    active_rows: int  # rows that took a token from this pass
    seq_len: int
    kv_bytes: int
    kv_bytes_predicted: int
    padding_tokens: int
    padding_bytes: int
    cuda_allocated_bytes: int | None  # the CUDA allocator's growth since the batch began; None off CUDA


@dataclass(frozen=True)
class BatchTokenEvent(TokenEvent):
    """A TokenEvent of one row. index counts the row's own tokens; dt_s is since the row's previous token (since
    t0 for the first). seq_len is the row's length in the cache, padding included (its real tokens are its
    prompt tokens + index); kv_bytes and kv_bytes_predicted are the row's share, the batch's figure / B."""

    row: int


@dataclass(frozen=True)
class RowFinished:
    """A row has ended: eos, max_new_tokens, context_full or cancelled. text is its whole output."""

    row: int
    t_s: float
    reason: str
    new_tokens: int
    text: str


@dataclass(frozen=True)
class BatchFinished:
    """The end of a batch: completed (every row ended on its own), cancelled, or failed (with error)."""

    t_s: float
    reason: str
    summary: BatchSummary | None
    error: str | None = None
    bad_input: bool = False  # failed because of what was asked (too long a prompt), not a fault


BatchEvent = (RequestReceived | Waiting | DeviceAcquired | BatchTokenized | PrefillDone | BatchStep
              | BatchTokenEvent | RowFinished | BatchFinished)
