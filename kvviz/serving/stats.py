"""A run's figures from its requests' records, as vLLM's benchmark (`vllm bench serve`) defines them.

duration: from the run's first send to its last request's end. Output throughput: the output tokens of the
completed requests / duration; request throughput: completed requests / duration. TTFT, TPOT, ITL and E2E
per metrics.md (record.py), each as mean and p50/p90/p99 over the completed requests (ITL over every gap of
every request, pooled, as vLLM does). Goodput: completed requests that meet the SLO (TTFT <= a and TPOT <= b)
per second of the run. Failed requests count in `failed` and in nothing else.
An open loop also says the rate asked, the rate sent ((sent - 1) / (last send - first send)), the rate
completed (requests_per_s), the most its concurrency cap can carry (Little's law: cap / mean E2E requests per
second), and whether the cap bounded it: it held arrivals back (each found every slot busy) and the rate asked
is more than the cap can carry, so a longer run would queue without end. Only arithmetic.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kvviz.engine.metrics import percentile
from kvviz.serving.record import RequestRecord


@dataclass(frozen=True)
class Slo:
    """A service-level objective on each request: TTFT and TPOT at most these many seconds."""

    ttft_s: float = 1.0
    tpot_s: float = 0.05

    def met(self, record: RequestRecord) -> bool:
        tpot = record.tpot_s
        return record.ok and record.ttft_s <= self.ttft_s and (tpot is None or tpot <= self.tpot_s)


@dataclass(frozen=True)
class Distribution:
    """Mean and percentiles of one latency, in seconds; None where there were no values."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None

    @classmethod
    def of(cls, values: list[float]) -> Distribution:
        mean = sum(values) / len(values) if values else None
        return cls(mean, percentile(values, 50), percentile(values, 90), percentile(values, 99))


@dataclass(frozen=True)
class RunStats:
    """The figures of one run."""

    requests: int
    completed: int
    failed: int
    duration_s: float
    prompt_tokens: int
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    total_tokens_per_s: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    slo: Slo
    goodput_requests_per_s: float
    first_error: str | None
    rate_asked_per_s: float | None = None
    rate_sent_per_s: float | None = None
    cap_rate_per_s: float | None = None
    held_by_cap: int = 0
    held_mean_s: float | None = None
    cap_bound: bool = False

    def flat(self) -> dict:
        """One flat row: distributions as ttft_p50_s, tpot_mean_s... and the SLO as slo_ttft_s, slo_tpot_s."""
        row = {}
        for key, value in asdict(self).items():
            if isinstance(value, dict) and key == "slo":
                row |= {f"slo_{k}": v for k, v in value.items()}
            elif isinstance(value, dict):
                row |= {f"{key}_{k}_s": v for k, v in value.items()}
            else:
                row[key] = value
        return row


def rate_of(times: list[float]) -> float | None:
    """Events per second of a series of times: (n - 1) / (last - first); None for fewer than two."""
    if len(times) < 2 or max(times) <= min(times):
        return None
    return (len(times) - 1) / (max(times) - min(times))


def cap_rate(concurrency: int, e2e_mean_s: float | None) -> float | None:
    """Little's law: the most requests per second `concurrency` slots carry when a request lasts e2e_mean_s."""
    return concurrency / e2e_mean_s if e2e_mean_s else None


def run_stats(records: list[RequestRecord], duration_s: float, slo: Slo | None = None,
              rate: float | None = None, concurrency: int | None = None) -> RunStats:
    """The run's figures; duration_s is the run's wall time (first send to last end); rate and concurrency: the
    open loop's asked rate and cap (rate None for a closed loop)."""
    slo = slo or Slo()
    held = [r.waited_s for r in records if r.waited_s > 0]
    sent = rate_of([r.sent_s for r in records]) if rate else None
    done = [r for r in records if r.ok]
    out = sum(r.new_tokens for r in done)
    prompt = sum(r.prompt_tokens or 0 for r in done)
    per_s = (lambda x: x / duration_s) if duration_s > 0 else (lambda x: 0.0)
    e2e = Distribution.of([r.e2e_s for r in done])
    carried = cap_rate(concurrency, e2e.mean) if rate and concurrency else None
    return RunStats(
        requests=len(records), completed=len(done), failed=len(records) - len(done), duration_s=duration_s,
        prompt_tokens=prompt, output_tokens=out, output_tokens_per_s=per_s(out), requests_per_s=per_s(len(done)),
        total_tokens_per_s=per_s(out + prompt),
        ttft=Distribution.of([r.ttft_s for r in done]),
        tpot=Distribution.of([r.tpot_s for r in done if r.tpot_s is not None]),
        itl=Distribution.of([gap for r in done for gap in r.itl_s]),
        e2e=e2e,
        slo=slo, goodput_requests_per_s=per_s(sum(slo.met(r) for r in done)),
        first_error=next((r.error for r in records if r.error), None),
        rate_asked_per_s=rate, rate_sent_per_s=sent, cap_rate_per_s=carried, held_by_cap=len(held),
        held_mean_s=sum(held) / len(held) if held else None,
        cap_bound=bool(held) and carried is not None and rate > carried,
    )
