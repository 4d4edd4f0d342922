"""The hosted demo's policy (kvviz.engine.hosting), as pure functions: when it is on, what it reads, what it allows."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.calc.params import count_params
from kvviz.calc.presets import load_preset, preset_names
from kvviz.engine.hosting import BUNDLED_MODEL, ENGINE_MAX_NEW_TOKENS, TWIN_PREFIX, HostPolicy, PolicyError
from tests.helpers import REPO

HOSTED = HostPolicy(hosted=True)
LOCAL = HostPolicy()


@pytest.mark.parametrize("args,env,hosted", [
    ({}, {}, False),
    ({"share": True}, {}, True),
    ({}, {"SPACE_ID": "someone/kvviz"}, True),
    ({"share": True, "hosted": False}, {}, False),
    ({}, {"SPACE_ID": "someone/kvviz", "KVVIZ_HOSTED": "0"}, False),
    ({}, {"KVVIZ_HOSTED": "1"}, True),
    ({}, {"KVVIZ_HOSTED": "yes"}, True),
    ({"hosted": True}, {"KVVIZ_HOSTED": "off"}, True),
    ({"hosted": None, "share": False}, {"SPACE_ID": ""}, False),
])
def test_when_hosted_mode_is_on(args, env, hosted):
    """On under --share or on a Space; --hosted/--no-hosted, then KVVIZ_HOSTED, decide over both."""
    assert HostPolicy.from_env_and_args(args, env).hosted is hosted


@pytest.mark.parametrize("field,variable,given_env,given_arg,expected", [
    ("max_new_tokens", "KVVIZ_MAX_NEW_TOKENS", "100", None, 100),
    ("max_new_tokens", "KVVIZ_MAX_NEW_TOKENS", "100", "200", 200),
    ("max_prompt_tokens", "KVVIZ_MAX_PROMPT_TOKENS", "2_048", None, 2048),
    ("max_twin_params", "KVVIZ_MAX_TWIN_PARAMS", "150M", None, 150_000_000),
    ("max_twin_params", "KVVIZ_MAX_TWIN_PARAMS", "150M", "1.2B", 1_200_000_000),
    ("max_twin_params", "KVVIZ_MAX_TWIN_PARAMS", "600,000,000", None, 600_000_000),
    ("allowed_models", "KVVIZ_ALLOWED_MODELS", "a/b, c/d ,", None, ("a/b", "c/d")),
    ("allowed_models", "KVVIZ_ALLOWED_MODELS", "a/b", "Qwen/Qwen2.5-0.5B-Instruct", ("Qwen/Qwen2.5-0.5B-Instruct",)),
    ("queue_size", "KVVIZ_QUEUE_SIZE", "3", None, 3),
    ("time_limit_s", "KVVIZ_TIME_LIMIT_S", "2.5", None, 2.5),
    ("time_limit_s", "KVVIZ_TIME_LIMIT_S", "2.5", "30", 30.0),
    ("allowed_endpoints", "KVVIZ_ALLOWED_ENDPOINTS", "http://a:8000/v1/, https://b.example ,", None,
     ("http://a:8000", "https://b.example")),
    ("max_concurrency", "KVVIZ_MAX_CONCURRENCY", "4", "64", 64),
    ("max_requests", "KVVIZ_MAX_REQUESTS", "1k", None, 1000),
])
def test_limits_come_from_options_over_environment(field, variable, given_env, given_arg, expected):
    """Each limit reads its KVVIZ_* variable; the command-line option, when given, wins."""
    policy = HostPolicy.from_env_and_args({field: given_arg}, {variable: given_env})
    assert getattr(policy, field) == expected
    assert getattr(HostPolicy.from_env_and_args({}, {}), field) == getattr(HostPolicy(), field), "defaults"


@pytest.mark.parametrize("args,env,message", [
    ({"queue_size": "0"}, {}, "--queue-size must be between 1"),
    ({}, {"KVVIZ_QUEUE_SIZE": "many"}, "KVVIZ_QUEUE_SIZE must be a whole number"),
    ({}, {"KVVIZ_MAX_NEW_TOKENS": "5000"}, f"between 1 and {ENGINE_MAX_NEW_TOKENS:,}"),
    ({}, {"KVVIZ_MAX_NEW_TOKENS": "1.5"}, "KVVIZ_MAX_NEW_TOKENS must be a whole number"),
    ({}, {"KVVIZ_MAX_TWIN_PARAMS": "-1M"}, "KVVIZ_MAX_TWIN_PARAMS"),
    ({}, {"KVVIZ_TIME_LIMIT_S": "nan"}, "KVVIZ_TIME_LIMIT_S (seconds) must be a number"),
    ({"time_limit_s": "0"}, {}, "--time-limit-s (seconds) must be in (0, 86400]"),
    ({}, {"KVVIZ_HOSTED": "maybe"}, "KVVIZ_HOSTED must be 1 or 0"),
    ({}, {"KVVIZ_ALLOWED_MODELS": "Qwen/Qwen2.5-0.5B-Instruct,/srv/models/secret"}, "must be hub ids"),
    ({"allowed_models": "../up"}, {}, "--allowed-models"),
    ({}, {"KVVIZ_ALLOWED_ENDPOINTS": "http://ok:1, 10.0.0.1:80"}, "KVVIZ_ALLOWED_ENDPOINTS: the endpoint must be"),
    ({"max_concurrency": "0"}, {}, "--max-concurrency must be between 1"),
])
def test_bad_settings_name_where_they_came_from(args, env, message):
    """A bad option or variable stops start-up with one line naming it."""
    with pytest.raises(PolicyError, match=re.escape(message)) as info:
        HostPolicy.from_env_and_args(args, env)
    assert "\n" not in str(info.value)


def test_local_mode_allows_everything():
    """Off, every model spec passes through unchanged and no limit applies."""
    for spec in (str(REPO / "assets" / "tiny"), "/any/folder", "Org/any-model", "random:deepseek-v3", " tiny "):
        assert LOCAL.check_model(spec) == spec.strip()
        assert LOCAL.check_source(spec) == spec.strip()
    LOCAL.check_request(ENGINE_MAX_NEW_TOKENS)
    assert (LOCAL.queue_max_size, LOCAL.request_time_limit_s, LOCAL.prompt_token_limit, LOCAL.note()) == \
        (None, None, None, "")


def test_hosted_offers_tiny_small_twins_and_named_hub_ids():
    """The picker lists tiny and SmolLM2-Instruct, every twin under the size limit (smallest first), then the host's
    hub ids."""
    policy = HostPolicy(hosted=True, max_twin_params=600_000_000, allowed_models=("Qwen/Qwen2.5-0.5B-Instruct",))
    twins = [f"{TWIN_PREFIX}{name}" for name in preset_names()
             if count_params(load_preset(name)).total < 600_000_000]
    choices = policy.model_choices()
    assert choices[:2] == [BUNDLED_MODEL, "smollm2-135m-instruct"] and choices[-1] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert sorted(choices[2:-1]) == sorted(twins) and "random:smollm2-135m" in twins
    sizes = [count_params(load_preset(c[len(TWIN_PREFIX):])).total for c in choices[2:-1]]
    assert sizes == sorted(sizes), "twins must be listed smallest first"
    assert all(policy.check_model(c) == c for c in choices)
    assert policy.check_model("  RANDOM: SmolLM2-135M ") == "random:smollm2-135m", "one canonical spec per twin"


@pytest.mark.parametrize("spec,message", [
    ("random:tinyllama-1.1b", "random:tinyllama-1.1b has 1,100 M parameters; this demo allows twins under 600 M"),
    ("random:deepseek-v3", "has 671 B parameters"),
    ("random:nope", "unknown preset 'nope' for a random twin"),
    ("random:../../etc", "unknown preset"),
    ("Qwen/Qwen2.5-7B-Instruct", "does not offer 'Qwen/Qwen2.5-7B-Instruct'; choose one of tiny, "),
    ("/etc", "loads no local folders or files"),
    ("./assets/tiny", "loads no local folders"),
    ("assets/tiny", "loads no local folders"),  # exists relative to the app's folder
    (str(REPO / "assets" / "tiny"), "loads no local folders"),
    ("~/models", "loads no local folders"),
    ("C:\\models\\x", "loads no local folders"),
    ("", "no model given"),
    (None, "no model given"),
    (7, "model must be text, got 7"),
    ("x" * 10_000, "model has 10,000 characters; the limit is 256"),
])
def test_hosted_refuses_what_it_does_not_offer(spec, message, monkeypatch):
    """Anything outside the offer is refused with a one-line reason that says what is offered."""
    monkeypatch.chdir(REPO)
    with pytest.raises(PolicyError) as info:
        HOSTED.check_model(spec)
    assert message in str(info.value) and "\n" not in str(info.value)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.one_of(st.text(max_size=300), st.from_regex(r"random: ?[a-z0-9.\-]{0,20}", fullmatch=True),
                 st.sampled_from(["tiny", "random:gpt2", "random:qwen3-8b", "/", "."]),
                 st.integers(), st.floats(), st.none(), st.lists(st.text(max_size=3))))
def test_nothing_outside_the_allowlist_passes(spec):
    """Whatever is sent, hosted check_model returns one of the offered choices or refuses in one short line."""
    try:
        allowed = HOSTED.check_model(spec)
    except PolicyError as exc:
        assert "\n" not in str(exc) and len(str(exc)) <= 300, str(exc)
    else:
        assert allowed in HOSTED.model_choices(), f"{spec!r} passed as {allowed!r}, which is not offered"


def test_request_limits_give_both_numbers():
    """Too many new tokens: the message has what was asked and what is allowed; the prompt limit rides along."""
    with pytest.raises(PolicyError, match="max_new_tokens is 1,000; this demo allows up to 256"):
        HOSTED.check_request(1000)
    HOSTED.check_request(256)
    assert HOSTED.prompt_token_limit == 1024
    assert (HOSTED.queue_max_size, HOSTED.request_time_limit_s) == (16, 120.0)


@pytest.mark.parametrize("source,ok", [
    ("", True), ("Qwen/Qwen2.5-0.5B-Instruct", True), ("gpt2", True),
    ("/etc/passwd", False), ("assets/presets/gpt2.json", False), ("../config.json", False), ("kvviz", False),
    ("~/.cache/huggingface", False), ("not a hub id", False),
])
def test_hosted_calculator_reads_hub_ids_only(source, ok, monkeypatch):
    """Hosted, the calculator's config box takes a hub id, never a path on the server (local mode takes both)."""
    monkeypatch.chdir(REPO)
    if ok:
        assert HOSTED.check_source(source) == source
    else:
        with pytest.raises(PolicyError, match="reads no local files"):
            HOSTED.check_source(source)
    assert LOCAL.check_source(source) == source


def test_note_names_every_limit():
    """The page's one-line note shows each limit the host set."""
    policy = HostPolicy(hosted=True, max_new_tokens=64, max_prompt_tokens=512, max_twin_params=200_000_000,
                        allowed_models=("a/b",), queue_size=1, time_limit_s=7.5)
    note = policy.note()
    for part in ("64 new tokens", "512 prompt tokens", "under 200 M", "a/b", "7.5 s per request", "1 request waiting"):
        assert part in note, f"{part!r} missing from {note!r}"
    assert "\n" not in note


def test_policy_is_frozen_and_checked_when_built():
    """A policy cannot change after start-up, and a bad one cannot be built directly either."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        HOSTED.max_new_tokens = 10**6  # type: ignore[misc]
    with pytest.raises(PolicyError, match="queue_size"):
        HostPolicy(queue_size=0)
    with pytest.raises(PolicyError, match="allowed_models"):
        HostPolicy(allowed_models="a/b")  # type: ignore[arg-type]


def test_constants_agree_with_the_loader_and_engine():
    """hosting names the bundled model, the twin prefix and the engine's token cap without importing torch."""
    from kvviz.engine import loading, request

    assert set(loading.BUNDLED) == {BUNDLED_MODEL}
    assert loading.TWIN_PREFIX == TWIN_PREFIX
    assert request.MAX_NEW_TOKENS == ENGINE_MAX_NEW_TOKENS


def test_hosted_serving_reaches_only_the_listed_endpoints():
    """A visitor's URL is compared with the operator's list in one normal form; anything else is refused, so the
    app never sends traffic to an address a visitor chose. Locally any http(s) URL goes."""
    policy = HostPolicy(hosted=True, allowed_endpoints=("http://10.0.0.5:8000/v1",))
    assert policy.check_endpoint("http://10.0.0.5:8000/") == "http://10.0.0.5:8000"
    for url in ("http://169.254.169.254/latest/meta-data", "http://10.0.0.5:8001", "http://127.0.0.1:8000"):
        with pytest.raises(PolicyError, match="loads only its own endpoints"):
            policy.check_endpoint(url)
    with pytest.raises(PolicyError, match="none: only the local vLLM"):
        HOSTED.check_endpoint("http://10.0.0.5:8000")
    assert LOCAL.check_endpoint("http://169.254.169.254/v1") == "http://169.254.169.254"
    with pytest.raises(PolicyError, match="http:// or https://"):
        LOCAL.check_endpoint("gopher://x")


@pytest.mark.parametrize("load,message", [
    ((17, 10, 10, 10, 10.0), "concurrency is 17; this demo allows up to 16"),
    ((1, 257, 10, 10, 10.0), "requests is 257; this demo allows up to 256"),
    ((1, 10, 257, 10, 10.0), "output tokens is 257; this demo allows up to 256"),
    ((1, 10, 10, 1025, 10.0), "prompt tokens is 1,025; this demo allows up to 1,024"),
    ((1, 10, 10, 10, 121.0), "duration (s) is 121.0; this demo allows up to 120.0"),
])
def test_hosted_serving_loads_stay_within_the_limits(load, message):
    """Each limit of a hosted load is its own line with both numbers; the defaults are 16 in flight, 256
    requests, 256 tokens out, 1,024 in and 120 s; the largest load allowed passes, and locally nothing is checked."""
    with pytest.raises(PolicyError, match=re.escape(message)):
        HOSTED.check_load(*load)
    HOSTED.check_load(16, 256, 256, 1024, 120.0)
    LOCAL.check_load(10**6, 10**6, 10**6, 10**6, 10**6)


def test_a_host_that_fetches_nothing_offers_only_converted_packaged_models(tmp_path, monkeypatch):
    """--no-fetch on a hosted demo: SmolLM2-Instruct, not converted here, is neither listed nor loadable (a visitor
    cannot make the host download and convert it); once its conversion is finished here (its done marker written by
    hand), it is both. A host that fetches offers it either way."""
    monkeypatch.setenv("KVVIZ_CACHE", str(tmp_path))
    no_fetch = HostPolicy.from_env_and_args({"hosted": True, "fetch": False}, env={})
    assert no_fetch.fetch is False and "smollm2-135m-instruct" not in no_fetch.model_choices()
    with pytest.raises(PolicyError) as info:
        no_fetch.check_model("smollm2-135m-instruct")
    assert "smollm2-135m-instruct is not converted on this host and it fetches nothing (--no-fetch)" in str(info.value)
    assert "smollm2-135m-instruct" not in no_fetch.note()
    assert HostPolicy.from_env_and_args({}, env={"KVVIZ_FETCH": "0", "KVVIZ_HOSTED": "1"}).fetch is False
    assert HOSTED.check_model("smollm2-135m-instruct") == "smollm2-135m-instruct"
    (tmp_path / "smollm2-135m-instruct").mkdir()
    (tmp_path / "smollm2-135m-instruct" / "kvviz-packaged.json").write_text("{}")
    assert no_fetch.check_model("smollm2-135m-instruct") == "smollm2-135m-instruct"
    assert no_fetch.model_choices()[:2] == [BUNDLED_MODEL, "smollm2-135m-instruct"]
