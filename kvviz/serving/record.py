"""What one streamed request measured, as plain data: when it was sent, when the server accepted it, when
each chunk of output arrived, the usage the server reported, or the error that ended it.

Times are seconds. sent_s counts from the run's start; every other time counts from the request's own send
(t0, metrics.md's "request received" as a client can see it). The derived figures follow vLLM's benchmark:
a chunk of output is one arrival, ITL is the gap between consecutive arrivals, and TPOT spreads the decode
time over the tokens the server says it produced: TPOT = (E2E - TTFT) / (new_tokens - 1). When a server
packs several tokens into a chunk, ITL is a gap between chunks and TPOT stays per token. This module only
holds and derives; it knows no HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True)
class RequestRecord:
    """One request. new_tokens: the server's usage.completion_tokens, or the arrivals counted where the
    server sent no usage (usage_reported says which); prompt_tokens: the server's count, else the client's.
    due_s: in an open loop, when the schedule wanted it sent (seconds since the run's start; None in a closed
    loop); waited_s: how long after due_s it got a slot, when the concurrency cap held it back (0: it was not);
    joined_chunks: output chunks that came in one read with a later chunk of their stream, and so carry its time
    (the server sent them together, or the client read them late)."""

    index: int
    sent_s: float
    prompt_tokens: int | None
    new_tokens: int
    accepted_s: float | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    arrivals_s: tuple[float, ...] = ()
    usage_reported: bool = False
    error: str | None = None
    due_s: float | None = None
    waited_s: float = 0.0
    joined_chunks: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None and self.ttft_s is not None

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (new_tokens - 1): defined for more than one token (vLLM's, GenAI-Perf's definition), and
        only where the client saw the decode: None when every output chunk reached it at one instant (one chunk, or
        one read), as when vLLM merges a request's outputs because its API server lags behind the engine. That is
        a decode the client could not time, not one that took no time (vLLM's benchmark would say 0 ms)."""
        if not self.ok or self.new_tokens < 2 or self.e2e_s is None or self.e2e_s <= self.ttft_s:
            return None
        return (self.e2e_s - self.ttft_s) / (self.new_tokens - 1)

    @property
    def itl_s(self) -> list[float]:
        """Gaps between consecutive output chunks (each chunk one arrival, as vLLM's benchmark counts)."""
        return [b - a for a, b in pairwise(self.arrivals_s)]

    @property
    def tokens_per_s(self) -> float | None:
        """The lesson's tokens_per_s: new_tokens / E2E for this request alone."""
        return self.new_tokens / self.e2e_s if self.ok and self.e2e_s else None

    def row(self) -> dict:
        """A flat row for a table: the lesson's keys (prompt_tokens, new_tokens, ttft_s, tpot_s, tokens_per_s)
        and the rest beside them; arrivals as a count and the ITL's median."""
        itl = sorted(self.itl_s)
        return {"index": self.index, "sent_s": self.sent_s, "prompt_tokens": self.prompt_tokens,
                "new_tokens": self.new_tokens, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
                "tokens_per_s": self.tokens_per_s, "accepted_s": self.accepted_s, "e2e_s": self.e2e_s,
                "chunks": len(self.arrivals_s), "itl_median_s": itl[len(itl) // 2] if itl else None,
                "usage_reported": self.usage_reported, "error": self.error, "due_s": self.due_s,
                "waited_s": self.waited_s, "joined_chunks": self.joined_chunks}
