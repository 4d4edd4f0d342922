"""What a load is: how requests arrive (closed loop, Poisson, constant rate), how many at once, how many in
all, how long, and how many tokens each asks for; checked when built. Sending it is loadgen's; this module
imports nothing but kvviz's value checks, so a command line can build one before any HTTP library loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.base.errors import InputError
from kvviz.base.inputs import choice, number, whole_number

CLOSED, POISSON, CONSTANT = "closed", "poisson", "constant"
MAX_CONCURRENCY = 1_024
MAX_REQUESTS = 100_000
MAX_DURATION_S = 24 * 3600.0
MAX_OUTPUT_TOKENS = 100_000
MAX_RATE = 10_000.0


@dataclass(frozen=True)
class Load:
    """How much to send and how. rate is for the open loop (requests per second); concurrency bounds the
    requests in flight in both loops. Checked when built: ValueError names the first bad value."""

    arrivals: str = CLOSED
    concurrency: int = 1
    requests: int = 32
    output_tokens: int = 128
    rate: float | None = None
    duration_s: float = 600.0
    timeout_s: float = 300.0
    ignore_eos: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        choice(self.arrivals, "arrivals", (CLOSED, POISSON, CONSTANT))
        whole_number(self.concurrency, "concurrency", 1, MAX_CONCURRENCY)
        whole_number(self.requests, "requests", 1, MAX_REQUESTS)
        whole_number(self.output_tokens, "output tokens", 1, MAX_OUTPUT_TOKENS)
        number(self.duration_s, "duration (s)", 0, MAX_DURATION_S, low_open=True)
        number(self.timeout_s, "request timeout (s)", 0, MAX_DURATION_S, low_open=True)
        if self.arrivals != CLOSED:
            if self.rate is None:
                raise InputError("load.arrivals_need_rate", arrivals=self.arrivals)
            number(self.rate, "request rate (requests/s)", 0, MAX_RATE, low_open=True)
