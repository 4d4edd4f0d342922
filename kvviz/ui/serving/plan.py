"""The Serving tab's values, as sent by the page or the API, turned into a serving Plan under the host's limits.

Every value is checked here, before anything is sent: numbers by kvviz.base.inputs, the load by Load itself,
the endpoint by the host's policy (hosted: only the local vLLM and the endpoints the operator listed, and loads
within the limits, an open loop's rate high enough for its requests to fit its duration), so that what reaches
kvviz.serving.live is a load this app may send, bounded as a whole by the host's time limit. The API key comes
from the password box or, when that is empty, KVVIZ_API_KEY / OPENAI_API_KEY; it lives only in the Endpoint,
never in a message or a result. Nothing here imports gradio.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.inputs import choice, number, text, whole_number
from kvviz.calc.arch import ConfigError, architecture_from_source
from kvviz.engine.hosting import HostPolicy
from kvviz.serving.endpoint import APIS, COMPLETIONS, EndpointError, endpoint
from kvviz.serving.live import KINDS, ONE, PREFIX, SWEEP, Plan
from kvviz.serving.load import CLOSED, CONSTANT, POISSON, Load
from kvviz.serving.local import READY, LocalEngine
from kvviz.serving.stats import Slo
from kvviz.serving.sweep import level_requests

LOCAL, REMOTE = "local vLLM (kvviz starts it)", "an OpenAI-compatible endpoint"
TARGETS = (LOCAL, REMOTE)
ARRIVALS = {"closed loop: fixed requests in flight": CLOSED, "open loop: Poisson arrivals at a rate": POISSON,
            "open loop: evenly spaced at a rate": CONSTANT}


@dataclass(frozen=True)
class PageValues:
    """What the tab sends, field by field, as sent (anything: the API can send any JSON)."""

    target: object = LOCAL
    url: object = ""
    model: object = ""
    api: object = COMPLETIONS
    api_key: object = ""
    tokenizer: object = ""
    kind: object = ONE
    arrivals: object = next(iter(ARRIVALS))
    concurrency: object = 8
    rate: object = 4.0
    prompt_tokens: object = 16
    shared_prefix: object = 0
    output_tokens: object = 128
    requests: object = 32
    duration_s: object = 120.0
    max_concurrency: object = 16
    per_level: object = 4
    slo_ttft_s: object = 1.0
    slo_tpot_s: object = 0.05


# A hosted run is stopped as a whole at the host's time limit (kvviz.serving.live); a request's own timeout comes
# this much later, so that the run's limit, not a request's, is what ends a run that reaches it. Equal, the two
# raced: a sweep whose server froze in its second level once ended with that level's warm-up "timed out" (an
# error) instead of "stopped by the time limit", on a machine fast enough to start the warm-up within 0.3 s.
LIMIT_GRACE_S = 5.0

def _load(v: PageValues, policy: HostPolicy, kind: str) -> Load:
    arrivals = ARRIVALS[choice(v.arrivals, "arrivals", ARRIVALS)] if kind == ONE else CLOSED
    concurrency = whole_number(v.concurrency, "concurrency", 1, 1_024)
    rate = number(v.rate, "request rate (requests/s)", 0, 10_000, low_open=True) if arrivals != CLOSED else None
    load = Load(arrivals=arrivals, concurrency=concurrency, requests=whole_number(v.requests, "requests", 1, 100_000),
                output_tokens=whole_number(v.output_tokens, "output tokens", 1, 100_000), rate=rate,
                duration_s=number(v.duration_s, "duration (s)", 0, 24 * 3600, low_open=True))
    if policy.hosted:  # a hosted request may not wait much longer than the host's time limit either
        return replace(load, timeout_s=min(load.timeout_s, policy.time_limit_s + LIMIT_GRACE_S))
    return load


def _check_size(v: PageValues, policy: HostPolicy, kind: str, load: Load, prompt_tokens: int) -> tuple[int, int]:
    """(max concurrency, requests per slot) of a sweep; the host's limits on the largest run the plan makes."""
    top = whole_number(v.max_concurrency, "max concurrency", 1, 1_024) if kind == SWEEP else load.concurrency
    per_level = whole_number(v.per_level, "requests per slot", 1, 1_000) if kind == SWEEP else 1
    requests = level_requests(top, per_level) if kind == SWEEP else load.requests  # the largest run it sends
    policy.check_load(top, requests, load.output_tokens, prompt_tokens, load.duration_s, load.rate)
    return top, per_level


def _remote(v: PageValues, policy: HostPolicy, api: str) -> tuple:
    """(endpoint, tokenizer folder, architecture) of a URL the visitor typed (hosted: one the host listed)."""
    url = policy.check_endpoint(v.url)
    ep = endpoint(url, text(v.model, "model name", 512), api, text(v.api_key or "", "API key", 4096).strip() or None)
    folder = text(v.tokenizer or "", "tokenizer folder", 4096).strip()
    if not folder:
        return ep, None, None
    if policy.hosted:
        raise InputError("policy.no_tokenizer_folder")
    path = Path(folder).expanduser()
    if not (path / "config.json").is_file():
        raise InputError("serving.not_model_folder", folder=folder)
    return ep, path, _architecture(path)


def _architecture(folder: Path | None):
    try:
        return architecture_from_source(folder) if folder is not None else None
    except ConfigError:
        return None  # no prediction for an architecture kvviz cannot read; the measurement goes on


def plan_from_page(v: PageValues, policy: HostPolicy, engine: LocalEngine) -> Plan:
    """The Plan for the page's values; ValueError (PolicyError, EndpointError) in one line for the first bad one."""
    kind = choice(v.kind, "what to run", KINDS)
    api = choice(v.api, "API", APIS)
    prompt_tokens = whole_number(v.prompt_tokens, "prompt tokens", 1, 100_000)
    shared = whole_number(v.shared_prefix, "shared prefix tokens", 0, prompt_tokens - 1)
    if kind == PREFIX and shared == 0:
        raise InputError("live.set_shared_prefix")
    load = _load(v, policy, kind)
    top, per_level = _check_size(v, policy, kind, load, prompt_tokens)
    slo = Slo(number(v.slo_ttft_s, "SLO TTFT (s)", 0, 3600, low_open=True),
              number(v.slo_tpot_s, "SLO TPOT (s)", 0, 3600, low_open=True))
    if choice(v.target, "target", TARGETS) == LOCAL:
        status = engine.status()
        if status.state != READY:
            raise EndpointError("serving.failed", why=status.line())
        ep, folder, arch = engine.endpoint(api), status.folder, _architecture(status.folder)
    else:
        ep, folder, arch = _remote(v, policy, api)
    return Plan(kind, ep, load, prompt_tokens, shared, top, per_level, slo, folder, arch, policy.request_time_limit_s)
