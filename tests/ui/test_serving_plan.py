"""The Serving tab's values turned into a Plan (kvviz.ui.serving.plan): what is refused, in one line, before
anything is sent, and what a plan carries. No gradio, no server: the local engine here is never started."""

from __future__ import annotations

import re

import pytest

from kvviz.engine.hosting import HostPolicy, PolicyError
from kvviz.serving.endpoint import EndpointError
from kvviz.serving.live import ONE, PREFIX, SWEEP
from kvviz.serving.load import CLOSED, POISSON
from kvviz.serving.local import LocalEngine
from kvviz.ui.serving.plan import ARRIVALS, LOCAL, REMOTE, PageValues, plan_from_page
from tests.helpers import REPO

LOCAL_POLICY = HostPolicy()
HOSTED = HostPolicy(hosted=True, allowed_endpoints=("http://10.1.2.3:8000",))
POISSON_LABEL = next(k for k, v in ARRIVALS.items() if v == POISSON)


@pytest.fixture
def engine(tmp_path) -> LocalEngine:
    return LocalEngine(venv=tmp_path / "no-venv")


def remote(**kw) -> PageValues:
    return PageValues(**{"target": REMOTE, "url": "http://10.1.2.3:8000/v1", "model": "m", **kw})


def test_a_remote_load_becomes_the_plan_the_page_asked_for(engine):
    """The URL in its one form, the model, the load's numbers, the SLO; no tokenizer and no prediction."""
    plan = plan_from_page(remote(concurrency=4, requests=12, output_tokens=64, prompt_tokens=20, duration_s=30,
                                 slo_ttft_s=0.5, slo_tpot_s=0.02), LOCAL_POLICY, engine)
    assert (plan.kind, plan.endpoint.base_url, plan.endpoint.model) == (ONE, "http://10.1.2.3:8000", "m")
    assert (plan.load.arrivals, plan.load.concurrency, plan.load.requests, plan.load.output_tokens,
            plan.load.duration_s) == (CLOSED, 4, 12, 64, 30)
    assert (plan.prompt_tokens, plan.slo.ttft_s, plan.slo.tpot_s) == (20, 0.5, 0.02)
    assert plan.tokenizer_folder is None and plan.arch is None


def test_an_open_loop_carries_its_rate_and_a_sweep_its_levels(engine):
    plan = plan_from_page(remote(arrivals=POISSON_LABEL, rate=2.5), LOCAL_POLICY, engine)
    assert (plan.load.arrivals, plan.load.rate) == (POISSON, 2.5)
    plan = plan_from_page(remote(kind=SWEEP, arrivals=POISSON_LABEL, max_concurrency=8, per_level=3), LOCAL_POLICY,
                          engine)
    assert (plan.load.arrivals, plan.max_concurrency, plan.per_level) == (CLOSED, 8, 3), "a sweep is closed loops"


def test_a_hosted_requests_timeout_comes_after_the_runs_time_limit(engine):
    """Hosted, the whole run stops at the time limit (120 s by default); each request's own timeout is 5 s later,
    so the run's limit ends a run that reaches it, never one request's timeout first (they raced when equal)."""
    plan = plan_from_page(remote(), HOSTED, engine)
    assert plan.time_limit_s == HOSTED.time_limit_s
    assert plan.load.timeout_s == HOSTED.time_limit_s + 5.0
    assert plan_from_page(remote(), LOCAL_POLICY, engine).time_limit_s is None


def test_a_tokenizer_folder_gives_the_prediction_its_architecture(engine):
    """tiny's folder: 4 layers, 2 KV heads of 32 dims (assets/tiny/config.json)."""
    plan = plan_from_page(remote(tokenizer=str(REPO / "assets" / "tiny")), LOCAL_POLICY, engine)
    assert plan.tokenizer_folder == REPO / "assets" / "tiny"
    assert (plan.arch.num_layers, plan.arch.num_kv_heads, plan.arch.head_dim) == (4, 2, 32)  # 256 / 8 heads


def test_the_key_from_the_password_box_is_used_and_never_shown(engine):
    plan = plan_from_page(remote(api_key="sk-secret-123"), LOCAL_POLICY, engine)
    assert plan.endpoint.headers() == {"Authorization": "Bearer sk-secret-123"}
    assert "sk-secret" not in repr(plan) and "sk-secret" not in str(plan.endpoint.describe())


@pytest.mark.parametrize("values,policy,message", [
    (remote(url="http://169.254.169.254/"), HOSTED, "loads only its own endpoints"),
    (remote(concurrency=17), HOSTED, "concurrency is 17; this demo allows up to 16"),
    (remote(kind=SWEEP, max_concurrency=32), HOSTED, "concurrency is 32; this demo allows up to 16"),
    (remote(kind=SWEEP, max_concurrency=16, per_level=20), HOSTED, "requests is 320; this demo allows up to 256"),
    (remote(output_tokens=300), HOSTED, "output tokens is 300; this demo allows up to 256"),
    (remote(duration_s=600), HOSTED, "duration (s) is 600.0; this demo allows up to 120.0"),
    (remote(tokenizer="/etc"), HOSTED, "reads no local folders"),
    (remote(tokenizer="/etc"), LOCAL_POLICY, "is not a model folder"),
    (remote(url="localhost:8000"), LOCAL_POLICY, "must be an http:// or https:// URL"),
    (remote(model=""), LOCAL_POLICY, "the model name is empty"),
    (remote(concurrency=0), LOCAL_POLICY, "concurrency must be between 1"),
    (remote(concurrency="many"), LOCAL_POLICY, "concurrency must be a whole number"),
    (remote(arrivals=POISSON_LABEL, rate=0), LOCAL_POLICY, "request rate (requests/s) must be in (0"),
    (remote(prompt_tokens=10, shared_prefix=10), LOCAL_POLICY, "shared prefix tokens must be between 0 and 9"),
    (remote(kind=PREFIX, shared_prefix=0), LOCAL_POLICY, "needs shared prefix tokens"),
    (remote(kind="everything"), LOCAL_POLICY, "unknown what to run 'everything'"),
    (remote(api="grpc"), LOCAL_POLICY, "unknown API 'grpc'"),
    (remote(target="mars"), LOCAL_POLICY, "unknown target 'mars'"),
    (remote(slo_ttft_s=-1), LOCAL_POLICY, "SLO TTFT (s) must be in (0"),
    (PageValues(target=LOCAL), LOCAL_POLICY, "vLLM is not running"),
])
def test_bad_values_are_refused_in_one_line_before_anything_is_sent(values, policy, message, engine):
    with pytest.raises((ValueError, PolicyError, EndpointError), match=re.escape(message)) as caught:
        plan_from_page(values, policy, engine)
    assert "\n" not in str(caught.value)
