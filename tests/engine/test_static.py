"""The static mode (cached, static + compiled) on a tiny real model: the same tokens as the plain cached loop,
a cache allocated whole and predicted exactly, one compile reused by later requests, cancel and refusals.

Compiling costs seconds, so the module compiles one tiny model's step once (the `first` fixture) and every
test after it runs requests of the same shape, which must reuse it.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass

import pytest
import torch

from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.memory import static_cache_bytes, transformers_cache_bytes
from kvviz.cli import main
from kvviz.engine.compare import compare
from kvviz.engine.compiled import (
    SMALLEST_BUCKET,
    StaticCacheFull,
    compiled_graphs,
    static_decoder,
    static_length,
)
from kvviz.engine.events import Compiled, Event, Finished, PrefillDone, TokenEvent
from kvviz.engine.loading import load_model, transformers_keeps_mla_latent
from kvviz.engine.loop import generate, run_to_end
from kvviz.engine.regions import grouped_count, packed_count
from kvviz.engine.request import MODE_LABELS, GenerationRequest
from kvviz.engine.steps import cache_bytes, decode_step, new_static_cache, prefill
from tests.tiny import FAMILIES

PROMPT = "The KV cache keeps every layer's keys and values."
REQ = GenerationRequest(PROMPT, max_new_tokens=24, ignore_eos=True)


@dataclass(frozen=True)
class Run:
    events: list[Event]

    @property
    def tokens(self) -> list[TokenEvent]:
        return [e for e in self.events if isinstance(e, TokenEvent)]

    @property
    def ids(self) -> list[int]:
        return [t.token_id for t in self.tokens]

    @property
    def compiled(self) -> Compiled:
        return next(e for e in self.events if isinstance(e, Compiled))

    @property
    def finished(self) -> Finished:
        return self.events[-1]


@pytest.fixture(scope="module")
def lm(tiny_models):
    return load_model(str(tiny_models["qwen2"]))


@pytest.fixture(scope="module")
def cached(lm) -> Run:
    return Run(list(generate(lm, REQ)))


@pytest.fixture(scope="module")
def first(lm) -> Run:
    """The first static run of its shape in this process: it compiles."""
    return Run(list(generate(lm, REQ.with_mode("static"))))


@pytest.fixture(scope="module")
def second(lm, first) -> tuple[Run, int]:
    """A second static run of the same shape, and the graphs torch.compile built while it ran."""
    before = compiled_graphs()
    run = Run(list(generate(lm, REQ.with_mode("static"))))
    return run, compiled_graphs() - before


def test_static_tokens_identical_to_the_cached_loop_in_fp32(cached, first, second):
    """Greedy fp32 decoding on the static cache with the compiled step gives the plain cached loop's tokens."""
    assert first.finished.reason == "max_new_tokens" and first.finished.error is None
    assert len(first.ids) == 24
    assert first.ids == cached.ids, "the static cache or the compiled step changed the result"
    assert second[0].ids == cached.ids, "a reused step (or its reset cache) changed the result"
    assert first.finished.text == cached.finished.text


def test_the_model_keeps_sdpa_outside_the_compiled_step(lm, first):
    """The compiled step traced the new token's attention as kvviz's decode attention; the model itself asks for
    transformers' sdpa again afterwards, so the eager modes run transformers' attention."""
    assert "attention in fp32 over grouped heads" in first.compiled.how
    assert lm.model.config._attn_implementation == "sdpa"


def test_static_kv_bytes_allocated_up_front_and_predicted_exactly(lm, cached, first):
    """The static cache holds its whole length from the first token on: measured == static_cache_bytes, at every
    step, more than the growing cache held at the first token and no less at the last."""
    length = first.compiled.cache_tokens
    predicted = static_cache_bytes(lm.arch, 1, length, kv_dtype(lm.dtype_name), transformers_keeps_mla_latent())
    assert {t.kv_bytes for t in first.tokens} == {predicted}, "a static cache should neither grow nor be mispredicted"
    assert all(t.kv_bytes_predicted == predicted for t in first.tokens)
    assert cached.tokens[0].kv_bytes < predicted and cached.tokens[-1].kv_bytes <= predicted
    prompt = first.tokens[0].seq_len
    assert length == static_length(prompt + 24, lm.context_length) and length >= prompt + 24


def test_compile_reported_apart_and_reused_by_the_same_shape(first, second):
    """The first run compiles (seconds, outside TTFT); the second of the same shape reuses it: compile_s 0 and
    no new graph built by torch.compile."""
    run, graphs = second
    c1, c2 = first.compiled, run.compiled
    assert not c1.reused and c1.compile_s > 0 and c1.graphs >= 1
    assert first.finished.summary.compile_s == c1.compile_s
    assert first.finished.summary.ttft_s < c1.compile_s, "TTFT should not include the compile"
    assert c2.reused and c2.compile_s == 0 and c2.graphs == 0 and run.finished.summary.compile_s == 0
    assert graphs == 0, f"the second request recompiled: {graphs} new graph(s)"
    assert c2.cache_tokens == c1.cache_tokens and c2.how == c1.how
    assert run.finished.summary.mode == "static" and MODE_LABELS["static"] == "cached, static + compiled"


def test_events_in_order_with_times_that_leave_the_compile_out(lm, first):
    """The compile comes between tokenizing and the prefill; every t_s after it excludes it, so they stay in
    order and TTFT is the first token's t_s."""
    kinds = [type(e).__name__ for e in first.events]
    assert kinds.index("PromptTokenized") < kinds.index("Compiled") < kinds.index("PrefillDone")
    times = [e.t_s for e in first.events]
    assert times == sorted(times)
    done = next(e for e in first.events if isinstance(e, PrefillDone))
    s = first.finished.summary
    assert s.ttft_s == first.tokens[0].t_s and done.prefill_s < s.ttft_s
    assert s.bandwidth_achieved > 0, "the bandwidth rule applies to the static mode too"
    assert s.bytes_per_decode_step == lm.weight_bytes + first.tokens[0].kv_bytes, "a static step reads the whole cache"


def test_cancel_mid_run_then_the_next_run_is_whole(lm, cached, first):
    """A cancel stops a static run at the next token; the next run of the shape starts from a clean cache."""
    cancel = threading.Event()
    tokens = []
    for event in generate(lm, REQ.with_mode("static"), cancel):
        if isinstance(event, TokenEvent):
            tokens.append(event)
            if len(tokens) == 5:
                cancel.set()
        elif isinstance(event, Finished):
            assert event.reason == "cancelled" and event.error is None
    assert len(tokens) == 5
    again, _ = run_to_end(lm, REQ.with_mode("static"))
    assert [t.token_id for t in again] == cached.ids


def test_a_run_longer_than_the_static_cache_is_refused(lm):
    """Asking for more tokens than a pinned static cache holds is the asker's error, said with both numbers."""
    tokens, fin = run_to_end(lm, REQ.with_mode("static", static_tokens=16))
    assert tokens == [] and fin.reason == "failed" and fin.bad_input
    assert "the static cache holds 16" in fin.error and "this run needs" in fin.error


def test_the_decoder_refuses_to_write_past_its_cache(lm, first):
    """Filling the compiled step's cache beyond its length raises StaticCacheFull instead of writing out of
    bounds (the step itself does not check)."""
    decoder, reused = static_decoder(lm.model, first.compiled.cache_tokens)
    assert reused
    if lm.device.type == "cpu":
        # tiny is a Qwen2 layout: per layer seven linears (q, k, v, o, gate, up, down), then lm_head; q, k and v
        # read one input and so do gate and up: two groups per layer, made one product each.
        layers = lm.model.config.num_hidden_layers
        assert decoder.packed == 7 * layers + 1, f"{decoder.packed} linears prepacked"
        groups = grouped_count(lm.model)
        assert groups == 2 * layers, f"{groups} groups: the q/k/v and gate/up grouping did not take"
        # what the step calls alone: o and down in each layer, then lm_head; q, k, v, gate and up live in groups
        assert packed_count(lm.model) == 2 * layers + 1, "a grouped weight kept a packed copy of its own"
        assert all("forward" not in vars(m) for m in lm.model.modules()), "the model was left patched"
    length = decoder.length
    with torch.inference_mode():
        decoder.prefill(lm.model, torch.zeros((1, length - 2), dtype=torch.long))
        token = torch.zeros((1, 1), dtype=torch.long)
        decoder.decode(lm.model, token)
        decoder.decode(lm.model, token)
        with pytest.raises(StaticCacheFull, match=f"holds {length}"):
            decoder.decode(lm.model, token)


def test_compare_runs_three_modes_from_one_comparison(lm, cached):
    """compare(static=True) adds the third run beside cached and uncached: same tokens, rows and predictions
    for it, the speedups and the compile; the two-mode fields keep their meaning."""
    result = compare(lm, REQ, static=True)
    assert [r.mode for r in result.runs] == ["cached", "uncached", "static"]
    st = result.static
    assert st.tokens_identical and st.first_divergence is None and st.summary.mode == "static"
    assert st.label == "cached, static + compiled" and st.speedup > 0 and st.cache_tokens >= 24
    assert st.compile_s >= 0 and st.summary.compile_s == 0, "the measured run reuses the warm-up's compile"
    assert result.tokens_identical and result.speedup > 0
    assert sorted(set(result.rows["mode"])) == ["cached", "static", "uncached"] and len(result.rows) == 72
    pred = result.prediction
    assert {"static_flops", "static_bytes", "static_lower_bound_s"} <= set(pred.columns)
    assert pred["static_bytes"].iloc[1] > pred["cached_bytes"].iloc[1], "a static step reads the whole cache"
    assert result.as_dict()["static"]["tokens_identical"] is True
    two = compare(lm, REQ.with_mode("cached"), warmup_tokens=2)
    assert two.static is None and [r.mode for r in two.runs] == ["cached", "uncached"] and "static" not in two.as_dict()


def test_cli_generate_and_compare_static(tiny_models, cached, capsys):
    """`generate --static --json` reports the static mode and its compile; `compare --static --json` the third run."""
    model = str(tiny_models["qwen2"])
    assert main(["generate", "--model", model, "--prompt", PROMPT, "--max-new-tokens", "24", "--static",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["mode"] == "static" and "compile_s" in out["summary"]
    assert [t["token_id"] for t in out["tokens"]][:8] == cached.ids[:8]
    assert main(["compare", "--model", model, "--prompt", PROMPT, "--max-new-tokens", "6", "--static",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["static"]["tokens_identical"] is True and out["static"]["label"] == "cached, static + compiled"
    assert main(["generate", "--model", model, "--prompt", PROMPT, "--static", "--no-cache"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("family", ["mistral", "gemma2"])
def test_static_mode_refuses_windowed_models(tiny_models, family):
    """Sliding-window models are refused by name (their static cache would recompile the step every token)."""
    lm = load_model(str(tiny_models[family]))
    tokens, fin = run_to_end(lm, REQ.with_mode("static"))
    assert tokens == [] and fin.bad_input
    assert "full-attention models only" in fin.error and "sliding-window" in fin.error


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("length", [6, 32])
def test_static_cache_bytes_predicted_equal_measured(tiny_models, family, length):
    """A StaticCache's tensors (allocated at the prefill, eagerly here) weigh exactly static_cache_bytes, windows
    (capped at the window, not window - 1) and MLA's latent included; no more than the growing cache at full
    length plus one window's worth."""
    lm = load_model(str(tiny_models[family]))
    cache = new_static_cache(lm.model, length)
    with torch.inference_mode():
        prefill(lm.model, torch.tensor([[1, 2, 3]]), cache)
        after_prefill = cache_bytes(cache).kv
        decode_step(lm.model, torch.tensor([[4]]), cache)
    dtype, latent = kv_dtype(lm.dtype_name), transformers_keeps_mla_latent()
    predicted = static_cache_bytes(lm.arch, 1, length, dtype, latent)
    assert after_prefill == cache_bytes(cache).kv == predicted, f"{family} at {length}: measured {after_prefill}"
    assert predicted >= transformers_cache_bytes(lm.arch, 1, length, dtype, latent)


@pytest.mark.parametrize("tokens,context,expected", [(1, None, SMALLEST_BUCKET), (64, None, 64), (65, None, 128),
                                                     (300, None, 512), (300, 400, 400), (5000, 32768, 8192)])
def test_static_length_buckets(tokens, context, expected):
    """Runs share a compiled step by bucket: the next power of two from 64, capped at the context."""
    assert static_length(tokens, context) == expected


@pytest.mark.parametrize("kwargs,message", [
    ({"static": True, "use_cache": False}, "static needs use_cache"),
    ({"static_tokens": 64}, "needs static"),
    ({"static": True, "static_tokens": 1}, "static_tokens must be between"),
    ({"static": "yes"}, "static"),
])
def test_static_request_fields_checked(kwargs, message):
    """The static fields are checked with the rest of the request, in one line naming the field."""
    with pytest.raises(ValueError, match=message):
        GenerationRequest(PROMPT, **kwargs)


def test_with_mode_round_trips():
    """with_mode gives each of the three modes and back; use_cache keeps its meaning for existing callers."""
    req = GenerationRequest(PROMPT)
    assert req.mode == "cached" and req.with_mode("static").mode == "static"
    assert req.with_mode("static", 128).static_tokens == 128
    assert req.with_mode("static", 128).with_mode("uncached") == GenerationRequest(PROMPT, use_cache=False)
    assert GenerationRequest.from_untrusted(PROMPT, 8, static=True).mode == "static"
    with pytest.raises(ValueError, match="unknown mode"):
        req.with_mode("fast")


def test_the_compile_cache_outlives_tmp(monkeypatch, tmp_path):
    """Unset, inductor's cache goes to kvviz's folder in the user's cache (XDG_CACHE_HOME here), not /tmp; a
    folder the user (or inductor, once it compiled) set already is left as it is."""
    from kvviz.engine.compiled import persist_compile_cache

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    persist_compile_cache()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "kvviz" / "inductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/else")
    persist_compile_cache()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere/else"


@pytest.mark.parametrize(("version", "dumped", "trusted"), [
    ("g++ (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.", "12", True),
    ("g++ (GCC) 11.4.1 20231218 (Red Hat 11.4.1-3)", "11", True),
    ("g++ (Ubuntu 9.4.0-1ubuntu1~20.04.2) 9.4.0", "9", False),  # no -mamx-tile before GCC 11
    ("Ubuntu clang version 14.0.0-1ubuntu1.1\nTarget: x86_64-pc-linux-gnu", "14.0.0", False),
    ("", "", False),  # no compiler answered
    ("g++ (GCC) 13.2.0", "thirteen", False),
])
def test_only_a_compiler_known_to_build_every_isa_is_taken_on_trust(version, dumped, trusted):
    """The version texts as GCC and clang print them (by hand): GCC 11 and newer are trusted, anything else is
    left to inductor's own checks."""
    from kvviz.engine.compiled import trusts_isa

    assert trusts_isa(version, dumped) is trusted


def test_the_isa_taken_on_trust_is_the_one_inductors_checks_pick():
    """On this machine (GCC 12 here and in CI) inductor is told to trust the CPU's ISA flags; the ISA it then
    picks, and the list it picks from, are those its own test builds give (each ISA compiled and loaded)."""
    from torch._inductor import config
    from torch._inductor.cpu_vec_isa import pick_vec_isa, valid_vec_isa_list

    from kvviz.engine.compiled import compile_settings

    assert compile_settings(torch.device("cpu")).inductor["cpp.vec_isa_ok"] is True
    picked = {}
    for trusted in (True, None):
        valid_vec_isa_list.cache_clear()
        with config.patch({"cpp.vec_isa_ok": trusted}):
            picked[trusted] = (str(pick_vec_isa()), [str(i) for i in valid_vec_isa_list()])
    valid_vec_isa_list.cache_clear()
    assert picked[True] == picked[None]
    assert picked[True][0]  # an ISA at all: the kernels are vectorised


def test_a_header_counts_as_built_only_when_newer_than_torch(monkeypatch, tmp_path):
    """header_built looks in inductor's default folder (here tmp_path) for a precompiled header written since torch
    was installed: none, one older than torch's files (another torch's: not counted), then one newer."""
    from torch._inductor.runtime import cache_dir_utils

    from kvviz.engine.compiled import header_built

    monkeypatch.setattr(cache_dir_utils, "default_cache_dir", lambda: str(tmp_path))
    folder = tmp_path / "precompiled_headers"
    folder.mkdir()
    assert not header_built()
    installed = os.stat(torch.__file__).st_mtime
    old = folder / "old.h.gch"
    old.write_bytes(b"")
    os.utime(old, (installed - 3600, installed - 3600))
    assert not header_built()
    (folder / "new.h.gch").write_bytes(b"")
    assert header_built()


@pytest.mark.slow
def test_the_header_built_beside_the_trace_is_the_one_the_step_uses(tiny_models, tmp_path):
    """prebuild_header's child builds inductor's precompiled header alone (one file), and a static step compiled
    afterwards in another process, with a cache of its own, builds no other: its kernels asked for the child's. Were
    the child's compiler command line another (another ISA setting, other flags), the step would have built a
    second header. Both processes see inductor's default folder under this test's TMPDIR."""
    import getpass
    import subprocess
    import sys

    env = {**os.environ, "TMPDIR": str(tmp_path), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    headers = tmp_path / f"torchinductor_{getpass.getuser()}" / "precompiled_headers"
    prebuild = ("from kvviz.engine.compiled import prebuild_header\n"
                "child = prebuild_header()\n"
                "assert child is not None and child.wait() == 0\n")
    subprocess.run([sys.executable, "-c", prebuild], env=env, check=True, timeout=300)
    built = {p.name: p.stat().st_mtime_ns for p in headers.glob("*.gch")}
    assert len(built) == 1
    step = ("import sys, torch\n"
            "from kvviz.engine.compiled import prebuild_header, static_decoder\n"
            "from kvviz.engine.loading import load_model\n"
            "lm = load_model(sys.argv[1])\n"
            "assert prebuild_header() is None\n"
            "with torch.inference_mode():\n"
            "    decoder, reused = static_decoder(lm.model, 64)\n"
            "assert not reused and decoder.packed > 0\n")
    subprocess.run([sys.executable, "-c", step, str(tiny_models["qwen2"])], env=env, check=True, timeout=600)
    assert {p.name: p.stat().st_mtime_ns for p in headers.glob("*.gch")} == built


def test_a_torch_without_isolate_recompiles_still_compiles_the_step(lm, cached, monkeypatch):
    """torch before 2.13 (the GPU machine's 2.11) has no isolate_recompiles argument: there the step is compiled
    without it, and decodes the cached loop's tokens. The stand-in takes 2.11's arguments only, as 2.11 does."""
    real, seen = torch.compile, []

    def compile_2_11(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
                     disable=False):
        seen.append(dynamic)
        return real(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                    disable=disable)

    monkeypatch.setattr(torch, "compile", compile_2_11)
    run = Run(list(generate(lm, REQ.with_mode("static", 3 * SMALLEST_BUCKET))))  # a length no other test compiled
    assert run.finished.error is None and seen == [False], (run.finished.error, seen)
    assert run.ids == cached.ids
