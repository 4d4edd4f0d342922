"""The load generator's own cost, measured in every run, and the rule that says when the client, not the server,
limited what a run measured.

The client's timestamps are the kernel's (stamped.py), so its own delays do not enter TTFT or E2E; they still
slow a load (a closed loop sends its next request only when it has read the last one's end, an open loop sends
late while it is busy, and a client that takes a core starves a server on the same machine), and chunks that
wait together for a busy client are read in one go, all with the newest one's time. Measured:
- CPU: the CPU time of the thread that runs the load's event loop over the run's duration (busy: 1.0 is a
  whole core), and per output token;
- read waits: for every read, how long its bytes waited in the kernel for the client (read time minus the
  kernel's stamp), the client's lag as each chunk saw it (None where the kernel gives no stamps);
- joined chunks: the share of output chunks that came in one read with a later chunk of their stream and so
  carry its time (a gap of 0 between them): the server sent them together, or the client read them late, which
  the kernel's stamps cannot tell apart, so it is reported, not judged;
- the time from each request's send to its response headers.
The rule: the client limited the run when its loop was busy for more than BUSY_LIMIT of the run (BUSY: it is
saturated, it queues work however fast the server; a sweep stops there), when its reads waited, at p90, more
than WAIT_SHARE of the median request's duration (E2E p50) and more than WAIT_FLOOR_S (LATE_READS: a closed loop
then loses about that share of its throughput; the floor keeps a busy machine's scheduling jitter from
condemning a run of very short requests). Only arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvviz.serving.record import RequestRecord
from kvviz.serving.stats import Distribution, RunStats

BUSY_LIMIT = 0.75
WAIT_SHARE = 0.025
WAIT_FLOOR_S = 0.002
BUSY, LATE_READS = "busy", "late_reads"  # why the client limited a run


@dataclass(frozen=True)
class ClientOverhead:
    """What the client itself cost during a run: its loop's CPU time (s) and share of the run (busy), CPU per
    output token (µs), how long its reads waited for it (s; None without kernel stamps), the share of output
    chunks that came in one read with a later one, the time from a request's send to its response headers (s),
    and why the client limited the run (BUSY, LATE_READS; empty when it did not)."""

    cpu_s: float
    busy: float
    cpu_us_per_token: float | None
    read_wait: Distribution | None
    headers: Distribution
    limits: tuple[str, ...]
    joined_chunks: float = 0.0

    @property
    def limited(self) -> bool:
        return bool(self.limits)

    @property
    def saturated(self) -> bool:
        """Whether the client's own loop was the bottleneck (BUSY): more requests in flight would measure it."""
        return BUSY in self.limits

    def flat(self) -> dict:
        """One flat row: client_cpu_s, client_busy, client_cpu_us_per_token, client_read_wait_p50_s...,
        client_headers_p50_s..., client_limited, client_limits."""
        row = {"client_cpu_s": self.cpu_s, "client_busy": self.busy, "client_cpu_us_per_token": self.cpu_us_per_token,
               "client_joined_chunks": self.joined_chunks}
        for name, d in (("read_wait", self.read_wait), ("headers", self.headers)):
            row |= {f"client_{name}_{k}_s": getattr(d, k) if d else None for k in ("mean", "p50", "p90", "p99")}
        return row | {"client_limited": self.limited, "client_limits": ",".join(self.limits)}


def client_overhead(stats: RunStats, records: Sequence[RequestRecord], cpu_s: float,
                    waits_s: Sequence[float] | None) -> ClientOverhead:
    """The overhead of a run from its figures and records (times to headers, joined chunks), the CPU time of
    its loop's thread and its reads' waits (None: not stamped), with the verdict of the rule above."""
    busy = cpu_s / stats.duration_s if stats.duration_s > 0 else 0.0
    wait = Distribution.of(list(waits_s)) if waits_s else None
    chunks = sum(len(r.arrivals_s) for r in records)
    joined = sum(r.joined_chunks for r in records) / chunks if chunks else 0.0
    limits = []
    if busy > BUSY_LIMIT:
        limits.append(BUSY)
    if wait is not None and stats.e2e.p50 and wait.p90 > max(WAIT_SHARE * stats.e2e.p50, WAIT_FLOOR_S):
        limits.append(LATE_READS)
    return ClientOverhead(cpu_s=cpu_s, busy=busy,
                          cpu_us_per_token=1e6 * cpu_s / stats.output_tokens if stats.output_tokens else None,
                          read_wait=wait, headers=Distribution.of([r.accepted_s for r in records
                                                                   if r.accepted_s is not None]),
                          limits=tuple(limits), joined_chunks=joined)
