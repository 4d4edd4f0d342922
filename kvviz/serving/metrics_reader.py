"""The server's own view during a run: its Prometheus /metrics, polled a few times a second and kept as a
series, beside kvviz's prediction of the KV-cache usage from its memory model.

Text is parsed with prometheus_client's parser; each series below is the sum over label sets (engines, data-
parallel ranks) of the first name the server exposes, vLLM's or SGLang's; KV usage is their mean. The server's
KV capacity comes from vllm:cache_config_info (num_gpu_blocks × block_size) or SGLang's max_total_num_tokens.
The prediction: every request in flight holds its current length (prompt + output so far) in whole blocks of
each of vLLM's KV-cache groups (kvviz.serving.kv_groups: a sliding or chunked group frees the blocks before its
window), over the pool's blocks (what a block allocator without prefix sharing holds). Knows Prometheus text
and metric names; what the run sends is loadgen's.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kvviz.base.errors import InputError, first_line
from kvviz.calc.arch import Architecture
from kvviz.calc.dtypes import DType, kv_dtype
from kvviz.serving.endpoint import Endpoint, EndpointError
from kvviz.serving.kv_groups import NotModelled, held_blocks, kv_groups
from kvviz.serving.sse import transport_message

# Each field of a Sample: the sample names that feed it, vLLM's first, then SGLang's.
SERIES: dict[str, tuple[str, ...]] = {
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "generation_tokens": ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "sglang:cached_tokens_total"),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total",),
    "queue_time_sum": ("vllm:request_queue_time_seconds_sum", "sglang:queue_time_seconds_sum"),
    "queue_time_count": ("vllm:request_queue_time_seconds_count", "sglang:queue_time_seconds_count"),
    "prefill_time_sum": ("vllm:request_prefill_time_seconds_sum",),
    "prefill_time_count": ("vllm:request_prefill_time_seconds_count",),
    "decode_time_sum": ("vllm:request_decode_time_seconds_sum",),
    "decode_time_count": ("vllm:request_decode_time_seconds_count",),
    "ttft_time_sum": ("vllm:time_to_first_token_seconds_sum", "sglang:time_to_first_token_seconds_sum"),
    "ttft_time_count": ("vllm:time_to_first_token_seconds_count", "sglang:time_to_first_token_seconds_count"),
}
MEAN = {"kv_usage"}  # fractions: averaged over engines, not summed
READ = frozenset(n for names in SERIES.values() for n in names) | {"vllm:cache_config_info",
                                                                   "sglang:max_total_num_tokens"}
POLL_INTERVAL_S = 0.25


@dataclass(frozen=True)
class Sample:
    """The server's series at one moment (t_s: seconds since polling began, when the scrape was sent; scrape_s:
    how long the server took to answer it, so how fuzzy that moment is); None where the server has none.
    predicted_kv_usage: kvviz's prediction for the requests the client had in flight when the answer came."""

    t_s: float
    kv_usage: float | None = None
    running: float | None = None
    waiting: float | None = None
    preemptions: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    prefix_cache_hits: float | None = None
    prefix_cache_queries: float | None = None
    queue_time_sum: float | None = None
    queue_time_count: float | None = None
    prefill_time_sum: float | None = None
    prefill_time_count: float | None = None
    decode_time_sum: float | None = None
    decode_time_count: float | None = None
    ttft_time_sum: float | None = None
    ttft_time_count: float | None = None
    in_flight: int = 0
    predicted_kv_usage: float | None = None
    scrape_s: float | None = None


@dataclass(frozen=True)
class CacheConfig:
    """The server's KV cache as it reports it: blocks, tokens per block, capacity in tokens, element type."""

    num_blocks: int
    block_size: int
    cache_dtype: str

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size


def parse(text: str) -> list:
    """The samples of Prometheus text; ValueError in one line when it is not Prometheus text."""
    try:
        return [s for family in text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, TypeError, IndexError) as exc:
        raise InputError("metrics.not_prometheus", why=first_line(exc, 120)) from None


def sample_from(samples: list, t_s: float) -> Sample:
    """One Sample from parsed samples: per field, the first of its names present, summed over label sets."""
    by_name: dict[str, list[float]] = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(float(s.value))
    values = {}
    for key, names in SERIES.items():
        found = next((by_name[n] for n in names if n in by_name), None)
        if found:
            values[key] = sum(found) / len(found) if key in MEAN else sum(found)
    return Sample(t_s=t_s, **values)


def cache_config(samples: list) -> CacheConfig | None:
    """vLLM's cache_config_info labels (num_gpu_blocks, block_size, cache_dtype), or SGLang's token count."""
    for s in samples:
        if s.name == "vllm:cache_config_info" and s.labels.get("num_gpu_blocks", "None") != "None":
            return CacheConfig(int(s.labels["num_gpu_blocks"]), int(s.labels.get("block_size", 1)),
                               s.labels.get("cache_dtype", "auto"))
        if s.name == "sglang:max_total_num_tokens":
            return CacheConfig(int(s.value), 1, "auto")
    return None


def read_lines(text: str) -> str:
    """Only the sample lines of the series kvviz reads (READ). vLLM's /metrics is about 50 KB, mostly histogram
    buckets; parsing all of it took 8 ms of CPU, on the load's event loop, four times a second (chunks arriving
    meanwhile wait, and a closed loop's next requests with them); these lines parse in a tenth of that."""
    return "".join(line + "\n" for line in text.splitlines() if line.split("{", 1)[0].split(" ", 1)[0] in READ)


async def fetch(client: httpx.AsyncClient, ep: Endpoint) -> list:
    """The server's metrics now, parsed (the series kvviz reads; all of the text when it has none of them, so
    that what is not Prometheus text still says so); EndpointError in one line when they cannot be had or
    read."""
    try:
        resp = await client.get(ep.metrics_url, headers=ep.headers(), timeout=5.0)
    except httpx.HTTPError as exc:
        raise EndpointError("serving.failed", why=transport_message(exc, ep.metrics_url)) from None
    if resp.status_code != 200:
        raise EndpointError("http.status", url=ep.metrics_url, status=resp.status_code)
    try:
        return parse(read_lines(resp.text)) or parse(resp.text)
    except ValueError as exc:
        raise EndpointError("metrics.read_failed", url=ep.metrics_url, why=first_line(exc)) from None


@dataclass(frozen=True)
class KvModel:
    """What the prediction needs: the served model's architecture, the cache's element type, the server's
    block pool (blocks, tokens per block), and whether vLLM's hybrid KV-cache manager is on (None: as
    kvviz.serving.kv_groups.hybrid_manager reads this process's environment)."""

    arch: Architecture
    dtype: DType
    block_size: int
    num_blocks: int
    hybrid: bool | None = None

    def usage(self, lengths: list[int]) -> float | None:
        """Predicted fraction of the server's KV cache held by sequences of these lengths, None where vLLM's
        grouping of the model's layers is not modelled: in each of vLLM's KV-cache groups (kvviz.serving.
        kv_groups) a sequence holds its tokens' blocks less those wholly before its window, over the pool's
        blocks less one (vLLM keeps a null block out of the pool and out of its kv_cache_usage_perc). Every
        group draws its blocks from that one pool, so blocks, not bytes, are what fills it."""
        grouped = kv_groups(self.arch, self.hybrid)
        if isinstance(grouped, NotModelled):
            return None
        held = sum(held_blocks(g, n, self.block_size) for n in lengths if n > 0 for g in grouped.groups)
        return held / (self.num_blocks - 1)


class Watcher:
    """Polls an endpoint's /metrics during a run (loadgen.run_load calls poll); keeps the samples, the server's
    cache config and, if polling failed, the one line that says why (polling then stops; the load goes on).
    The prediction needs a KvModel: given, or built from `arch` and `dtype` once the server's cache config is
    read (the element type is the server's choice: vLLM runs a model in bf16 on CPUs, so the default)."""

    def __init__(self, ep: Endpoint, kv: KvModel | None = None, interval_s: float = POLL_INTERVAL_S,
                 arch: Architecture | None = None, dtype: DType | None = None) -> None:
        self.ep, self.kv, self.interval_s, self.arch, self.dtype = ep, kv, interval_s, arch, dtype
        self.samples: list[Sample] = []
        self.cache: CacheConfig | None = None
        self.error: str | None = None

    def _read_cache(self, parsed: list) -> None:
        self.cache = self.cache or cache_config(parsed)
        if self.kv is None and self.cache is not None and self.arch is not None:
            self.kv = KvModel(self.arch, self.dtype or kv_dtype("bf16"), self.cache.block_size,
                              self.cache.num_blocks)

    async def poll(self, client: httpx.AsyncClient, in_flight, stop: asyncio.Event,
                   first: asyncio.Event | None = None) -> None:
        """Sample every interval_s until `stop` is set, then once more (the counters then include the run's
        last requests). `first` is set once the first sample is kept (or polling failed): the load waits for
        it, so that the first sample comes before the first request."""
        start = time.perf_counter()
        while True:
            stopping = stop.is_set()
            sent = time.perf_counter()
            try:
                parsed = await fetch(client, self.ep)
            except EndpointError as exc:
                self.error = first_line(exc)
                if first is not None:
                    first.set()
                return
            self._read_cache(parsed)
            lengths = in_flight.lengths()
            sample = sample_from(parsed, sent - start)
            predicted = self.kv.usage(lengths) if self.kv else None
            self.samples.append(replace(sample, in_flight=len(lengths), predicted_kv_usage=predicted,
                                        scrape_s=time.perf_counter() - sent))
            if first is not None:
                first.set()
            if stopping:
                return
            try:
                await asyncio.wait_for(stop.wait(), self.interval_s)
            except asyncio.TimeoutError:
                pass


@dataclass(frozen=True)
class ServerView:
    """What the server's own series say about one run, from the first and last samples (counters and histogram
    sums grow; their differences belong to the run): per request, the mean time it queued, was prefilled and
    was decoded (vLLM's request_queue/prefill/decode_time histograms) and its TTFT as the server clocks it (from
    the request's arrival at its HTTP front end); the prefix cache's hit rate (hit tokens over queried tokens);
    tokens generated; preemptions; the peaks of the gauges. None where the server lacks it."""

    requests: int | None
    ttft_mean_s: float | None
    queue_mean_s: float | None
    prefill_mean_s: float | None
    decode_mean_s: float | None
    prefix_hit_rate: float | None
    generated_tokens: float | None
    preemptions: float | None
    max_running: float | None
    max_waiting: float | None
    max_kv_usage: float | None
    max_predicted_kv_usage: float | None


def _delta(first: Sample, last: Sample, name: str) -> float | None:
    a, b = getattr(first, name), getattr(last, name)
    return None if a is None or b is None else b - a


def _mean(first: Sample, last: Sample, phase: str) -> float | None:
    total, count = _delta(first, last, f"{phase}_time_sum"), _delta(first, last, f"{phase}_time_count")
    return total / count if total is not None and count else None


def _peak(samples: list[Sample], name: str) -> float | None:
    values = [getattr(s, name) for s in samples if getattr(s, name) is not None]
    return max(values) if values else None


def server_view(samples: list[Sample] | tuple[Sample, ...]) -> ServerView | None:
    """The run as the server saw it; None without two samples."""
    if len(samples) < 2:
        return None
    first, last = samples[0], samples[-1]
    count = _delta(first, last, "queue_time_count")
    hits, queries = _delta(first, last, "prefix_cache_hits"), _delta(first, last, "prefix_cache_queries")
    return ServerView(
        requests=int(count) if count is not None else None, ttft_mean_s=_mean(first, last, "ttft"),
        queue_mean_s=_mean(first, last, "queue"),
        prefill_mean_s=_mean(first, last, "prefill"), decode_mean_s=_mean(first, last, "decode"),
        prefix_hit_rate=hits / queries if hits is not None and queries else None,
        generated_tokens=_delta(first, last, "generation_tokens"), preemptions=_delta(first, last, "preemptions"),
        max_running=_peak(list(samples), "running"), max_waiting=_peak(list(samples), "waiting"),
        max_kv_usage=_peak(list(samples), "kv_usage"),
        max_predicted_kv_usage=_peak(list(samples), "predicted_kv_usage"))
