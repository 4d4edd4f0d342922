"""What the page says, from known numbers: every expected string here is written out by hand."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pandas as pd
import pytest

from kvviz.base.units import fmt_ms as ms
from kvviz.engine.compare import Comparison, ModeRun
from kvviz.engine.events import Finished, TokenEvent
from kvviz.engine.metrics import RunSummary
from kvviz.ui.compare.text import agreement, compare_verdict
from kvviz.ui.generation.history import RunHistory, run_ids
from kvviz.ui.generation.live import RunRecord
from kvviz.ui.generation.text import final_metrics, metrics_markdown, run_details, time_limit_message
from kvviz.ui.worker import Loaded


def summary(**changes) -> RunSummary:
    """10 prompt tokens, then 5 new: the first at 50 ms (prefill 40 ms), the rest 10 ms apart, done at 90 ms."""
    values = dict(model="tiny", device="cpu", dtype="fp32", mode="cached", finish_reason="max_new_tokens",
                  prompt_tokens=10, new_tokens=5, ttft_s=0.05, tpot_s=0.01, tokens_per_s=5 / 0.09, queue_s=0.001,
                  tokenize_s=0.002, prefill_s=0.04, prefill_tokens_per_s=250.0, e2e_s=0.09,
                  decode_tokens_per_s=100.0, itl_s=[0.01] * 4, itl_p50_s=0.01, itl_p90_s=0.012, itl_p99_s=0.015,
                  bandwidth_achieved=2e9, bandwidth_bound=8e9, bandwidth_utilisation=0.25)
    return RunSummary(**(values | changes))


def token(index: int, t_s: float) -> TokenEvent:
    return TokenEvent(index=index, token_id=100 + index, text=f"t{index}", phase="prefill" if index == 0 else "decode",
                      dt_s=0.01, t_s=t_s, seq_len=10 + index, kv_bytes=1024 * (10 + index),
                      kv_bytes_predicted=1024 * (10 + index), cuda_allocated_bytes=None)


def finished_record(run_id: int = 7, cpu_threads: int | None = 2, random_weights: bool = False) -> RunRecord:
    record = RunRecord(model="tiny", mode="cached", prompt="The kernel", run_id=run_id, cpu_threads=cpu_threads,
                       random_weights=random_weights)
    for i in range(5):
        record.add(token(i, 0.05 + 0.01 * i))
    record.add(Finished(t_s=0.09, reason="max_new_tokens", text="t0t1t2t3t4", summary=summary()))
    return record


METRICS = """\
| TTFT | TPOT | tokens/s | decode tokens/s | ITL p50 / p90 / p99 | queue | prefill | bandwidth |
|---|---|---|---|---|---|---|---|
| 50.00 ms | 10.00 ms | 55.6 | 100.0 | 10.00 ms / 12.00 ms / 15.00 ms | 1.00 ms | 40.00 ms | \
2.00 GB/s, 25% of 8.0 GB/s |

run 7: tiny on cpu in fp32, cached; 10 prompt tokens, 5 new, finished by max_new_tokens.
Prefill read 10 prompt tokens in 40.00 ms (250 tokens/s); decode then made one token every 10.00 ms \
(100 tokens/s). Prefill moves 2.5× more tokens per second because it multiplies every weight by all prompt \
tokens at once, while each decode step reads every weight (and the cache) for a single token.
The device worker runs this model with 2 torch thread(s) on this CPU."""


def test_metrics_of_a_finished_run():
    """The table, the run's line and the prefill/decode explanation carry this run's own numbers."""
    assert metrics_markdown(finished_record()) == METRICS


def test_metrics_of_a_random_twin_without_threads():
    """A twin says its text is noise; a run without a thread count (a GPU) says nothing about threads."""
    text = metrics_markdown(finished_record(cpu_threads=None, random_weights=True))
    assert text.endswith("for a single token.\n*Random weights: the timing and memory are real, the text is noise.*")
    assert "torch thread" not in text


def test_metrics_before_the_end():
    """A run still streaming says so; one that failed says how."""
    running = RunRecord(model="tiny", mode="cached", prompt="p")
    assert metrics_markdown(running) == "running…"
    running.add(Finished(t_s=0.1, reason="failed", text="", summary=None, error="out of memory on cpu"))
    assert metrics_markdown(running) == "**failed**: out of memory on cpu"


def test_metrics_without_decode_leave_the_explanation_out():
    """One new token has no decode rate: no n/a-filled sentence comparing prefill with decode."""
    record = finished_record()
    record.summary = summary(new_tokens=1, tpot_s=None, decode_tokens_per_s=None, itl_p50_s=None, itl_p90_s=None,
                             itl_p99_s=None, bandwidth_achieved=None)
    lines = metrics_markdown(record).splitlines()
    assert lines[2] == "| 50.00 ms | n/a | 55.6 | 0.0 | n/a / n/a / n/a | 1.00 ms | 40.00 ms | n/a |"
    assert not any(line.startswith("Prefill read") for line in lines)


def test_time_limit_wording():
    """The refusal and the note under a run stopped by the limit say the same, in the host's seconds."""
    assert time_limit_message(120) == "stopped by the time limit: this demo allows 120 s per request"
    assert time_limit_message(0.5) == "stopped by the time limit: this demo allows 0.5 s per request"
    assert final_metrics(finished_record(), None) == METRICS
    assert final_metrics(finished_record(), 8) == \
        METRICS + "\n\n**Stopped by the time limit: this demo allows 8 s per request.**"


def test_run_details():
    """The JSON of a run: the lesson's five keys, the whole summary, the text; the time limit when it stopped it."""
    details = run_details(finished_record(), stopped_by_time_limit=False)
    assert details["lesson"] == {"prompt_tokens": 10, "new_tokens": 5, "ttft_s": 0.05, "tpot_s": 0.01,
                                 "tokens_per_s": 5 / 0.09}
    assert details["summary"]["finish_reason"] == "max_new_tokens" and details["text"] == "t0t1t2t3t4"
    assert "stopped_by" not in details
    assert run_details(finished_record(), stopped_by_time_limit=True)["stopped_by"] == "time_limit"


@pytest.mark.parametrize("seconds,shown", [(None, "n/a"), (0.0123456, "12.35 ms"), (2.5, "2,500.00 ms")])
def test_milliseconds(seconds, shown):
    assert ms(seconds) == shown


def comparison(identical: bool = True, divergence: int | None = None, decode_speedup: float | None = 4.0,
               static: ModeRun | None = None):
    """Cached: 20 MB a step at 100 steps/s (2 GB/s, 25% of 8 GB/s); uncached: TPOT 40 ms, no bandwidth figure."""
    empty = pd.DataFrame()
    uncached = summary(mode="uncached", tpot_s=0.04, tokens_per_s=20.0, decode_tokens_per_s=25.0,
                       e2e_s=0.3125, bytes_per_decode_step=None, bandwidth_achieved=None, bandwidth_utilisation=None)
    return Comparison(rows=empty, prediction=empty, cached=summary(bytes_per_decode_step=2e7), uncached=uncached,
                      cached_text="a", uncached_text="a", speedup=3.5, decode_speedup=decode_speedup,
                      tokens_identical=identical, first_divergence=divergence, compared_tokens=5, static=static)


def static_run(utilisation: float = 0.6, compile_s: float = 12.34, achieved: float = 4.8e9) -> ModeRun:
    """24 MB a step (the whole 64-token cache) at 200 steps/s: 4.8 GB/s, 60% of 8 GB/s; TPOT 5 ms."""
    s = summary(mode="static", tpot_s=0.005, decode_tokens_per_s=200.0, e2e_s=0.07, bytes_per_decode_step=2.4e7,
                bandwidth_achieved=achieved, bandwidth_utilisation=utilisation)
    return ModeRun("static", s, "a", speedup=4.5, decode_speedup=8.0, tokens_identical=True, first_divergence=None,
                   compile_s=compile_s, cache_tokens=64)


LOADED = Loaded(job_id=1, spec="tiny", random_weights=False, tokenizer_note="", device="cpu", dtype="fp32",
                cpu_threads=2)
TABLE = """\
| mode | TTFT | TPOT | decode tokens/s | time (no queue or compile) | × uncached | bandwidth (decode) | of the limit |
|---|---|---|---|---|---|---|---|
| cached | 50.00 ms | 10.00 ms | 100.0 | 89.00 ms | 3.50× | 2.00 GB/s | 25% of 8.0 GB/s |
| uncached | 50.00 ms | 40.00 ms | 25.0 | 311.50 ms | 1.00× | n/a | n/a |"""


def test_compare_verdict():
    """The headline speedup, agreement, what ran where, and each mode's figures in a table."""
    assert compare_verdict(comparison(), LOADED) == (
        "### 3.50× faster with the cache (4.00× per decode token)\n\n"
        "The tokens are identical. tiny on cpu in fp32.\n\n" + TABLE)


def test_compare_verdict_of_a_twin_with_one_token():
    """No per-decode speedup with a single token; random weights are flagged."""
    twin = Loaded(job_id=1, spec="random:gpt2", random_weights=True, tokenizer_note="", device="cpu", dtype="fp32",
                  cpu_threads=2)
    verdict = compare_verdict(comparison(decode_speedup=None), twin)
    assert verdict.startswith("### 3.50× faster with the cache\n\nThe tokens are identical.")
    assert verdict.endswith("n/a | n/a |\n\n*Random weights: the timing is real, the text is noise.*")


def test_compare_verdict_with_the_static_mode():
    """The third mode: its row, its pace against the plain loop, its compile and cache, and why it is faster, with
    the floors its bytes set at the device's bandwidth (20 MB / 8 GB/s = 2.5 ms; 24 MB / 8 GB/s = 3 ms)."""
    verdict = compare_verdict(comparison(static=static_run()), LOADED)
    parts = verdict.split("\n\n")
    assert parts[2] == TABLE + "\n| cached, static + compiled | 50.00 ms | 5.00 ms | 200.0 | 69.00 ms | 4.50× | " \
        "4.80 GB/s | 60% of 8.0 GB/s |"
    assert parts[3] == ("**cached, static + compiled**: 2.00× the plain cached loop per decode token; the same tokens "
                        "as the cached loop; compiling its step took 12.3 s, left out of its time. Its cache was "
                        "allocated for 64 tokens before the first step.")
    why = parts[4]
    assert "20.0 MB per token for the plain loop" in why and "8.0 GB/s" in why
    assert "that read alone takes 2.50 ms: the floor under TPOT" in why
    assert "The plain cached loop took 10.00 ms, 7.50 ms above the floor" in why
    assert "5.00 ms per token against a floor of 3.00 ms" in why and "24.0 MB a step" in why
    assert why.endswith("60% of the limit."), "no note on going past the limit when it was not passed"
    assert "inductor" in why and "CUDA graph" not in why


def test_compare_verdict_static_reused_and_past_the_limit():
    """A reused compile says so; past 100% of the measured limit the verdict says why that can happen; on CUDA the
    fast path is a CUDA graph."""
    cuda = Loaded(job_id=1, spec="tiny", random_weights=False, tokenizer_note="", device="cuda:0", dtype="bf16",
                  cpu_threads=None)
    verdict = compare_verdict(comparison(static=static_run(utilisation=1.1, compile_s=0.0)), cuda)
    assert "its compiled step was reused from an earlier request: no compile" in verdict
    assert "110% of the limit. Above 100%: the limit is the speed of a measured matrix-vector product" in verdict
    assert "replayed as one CUDA graph" in verdict


@pytest.mark.parametrize("identical,divergence,sentence", [
    (True, None, "The tokens are identical."),
    (False, 3, "The tokens part at position 3."),
    (False, 0, "The tokens part at position 0."),
    (False, None, "The tokens agree where both ran; one run stopped earlier."),
])
def test_agreement(identical, divergence, sentence):
    assert agreement(comparison(identical, divergence)) == sentence


@pytest.mark.parametrize("picked,ids", [
    (["1", "2"], [1, 2]),
    ([3, "x", True, 2.0, "-1", "", "1" * 12, "42"], [3, 42]),
    ("1", []),
    (None, []),
    ({"1": 1}, []),
])
def test_run_ids_from_the_picker(picked, ids):
    """Only whole, non-negative ids of fewer than 12 digits count; anything else sent is ignored."""
    assert run_ids(picked) == ids


def test_run_history():
    """Each run adds a table row and its frame; the overlay holds the picked runs' rows; the old state is kept."""
    empty = RunHistory()
    first = empty.with_run(finished_record(run_id=1))
    both = first.with_run(finished_record(run_id=2))
    assert empty.table().empty and first.run_ids == [1]
    table = both.table()
    assert table["run"].tolist() == [1, 2] and table["new_tokens"].tolist() == [5, 5]
    assert table["finish"].tolist() == ["max_new_tokens"] * 2
    overlay = both.overlay(["2"])
    assert overlay["run"].tolist() == [2] * 5 and overlay["index"].tolist() == [0, 1, 2, 3, 4]
    assert len(both.overlay(["1", 2])) == 10
    assert both.overlay(["9"]) is None and both.overlay([]) is None


def test_the_text_the_sessions_and_the_worker_need_no_gradio():
    """The features' text, the history, sessions and worker import without gradio: what the page says is checked
    without a server."""
    code = "import sys, kvviz.ui.generation.text, kvviz.ui.generation.history, kvviz.ui.compare.text, " \
           "kvviz.ui.batch.run_text, kvviz.ui.sessions, kvviz.ui.worker; print(sorted(m for m in sys.modules " \
           "if m.split('.')[0] in ('gradio', 'gradio_client')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"imported: {out.stdout.strip()}"


@pytest.mark.parametrize("load_s,lang,expected", [
    (23.4, "en", "**Model load: 23.400 s** before this request"),
    (23.4, "zh", "**模型加载：23.400 s**，在本次请求之前"),
    (0.0002, "en", "Model already loaded (200.000 µs to get it ready): nothing waited for a load."),
])
def test_the_model_load_is_told_apart_from_ttft(load_s, lang, expected):
    """A run's metrics say what loading the model cost before the request, in a paragraph of their own, and that
    TTFT leaves it out; a model already kept says so."""
    from dataclasses import replace as changed

    record = changed(RunRecord(model="tiny", mode="cached", prompt="p"), load_s=load_s)
    record.summary = summary()
    text = metrics_markdown(record, lang)
    assert f"\n\n{expected}" in text
    if load_s > 1:
        assert ("TTFT excludes it" if lang == "en" else "TTFT 不含加载") in text


def test_a_sweep_becomes_history_rows():
    """Each B of a batch sweep is one history row with what the lesson's question 5 reads: B, the batch's tokens/s
    (B / step), TTFT and the decode pass."""
    from kvviz.ui.batch.run_text import sweep_history_rows

    frame = pd.DataFrame({"model": ["tiny"] * 2, "batch": [1, 4], "prompt_tokens": [32, 32], "new_tokens": [16, 16],
                          "ttft_s": [0.01, 0.02], "step_s": [0.005, 0.008], "tokens_per_s_total": [200.0, 500.0]})
    rows = sweep_history_rows(frame)
    assert [(r["kind"], r["batch_size"], r["batch_tokens_per_s"], r["decode_step_median_s"]) for r in rows] == \
        [("sweep", 1, 200.0, 0.005), ("sweep", 4, 500.0, 0.008)]
    assert rows[0]["sweep"] == rows[1]["sweep"] and rows[1]["label"] == f"sweep {rows[0]['sweep']} B=4"


def test_compare_verdict_within_noise_names_no_cause():
    """Plain loop: 100, 96, 104, 98, 102 ms a token (IQR 102 - 98 = 4 ms); static: 3 ms less each (IQR 4 ms). TPOT
    100 ms against 97 ms is 1.03× apart, inside 4 ms: the verdict says so and explains no speed-up."""
    plain = [0.100, 0.096, 0.104, 0.098, 0.102]
    result = comparison(static=static_run())
    cached = summary(bytes_per_decode_step=2e7, tpot_s=0.100, itl_s=plain)
    fast = summary(mode="static", tpot_s=0.097, itl_s=[x - 0.003 for x in plain], bytes_per_decode_step=2.4e7,
                   bandwidth_utilisation=0.6)
    result = replace(result, cached=cached, static=replace(result.static, summary=fast))
    why = compare_verdict(result, LOADED).split("\n\n")[4]
    assert why == ("**Within noise.** The static mode took 97.00 ms per token and the plain cached loop 100.00 ms: "
                   "1.03× apart, less than the spread of either run's own per-token latencies (interquartile range "
                   "4.00 ms), so this run shows no speed-up to explain. Run it again, or with more tokens.")
    zh = compare_verdict(result, LOADED, "zh").split("\n\n")[4]
    assert zh.startswith("**在噪声范围内。**") and "相差 1.03×" in zh and "四分位距 4.00 ms" in zh
    # 10 ms apart with the same 4 ms spread: a difference, explained.
    far = replace(result, static=replace(result.static, summary=replace(fast, tpot_s=0.090)))
    assert compare_verdict(far, LOADED).split("\n\n")[4].startswith("**Why the fast path is faster.**")


def test_the_history_shows_readable_columns_and_keeps_the_raw_ones_for_the_csv():
    """A generation run (TTFT 0.0123 s, bandwidth share 0.2834) and a serving load (TTFT p50 0.3021 s) side by side:
    the page's view has the columns people compare by, times in ms, the share in %, a blank where a run has no
    such figure; the CSV's table keeps every raw column."""
    history = RunHistory().with_row({"run": 1, "model": "tiny", "mode": "cached", "ttft_s": 0.0123,
                                     "tpot_s": 0.00417, "tokens_per_s": 239.91, "bandwidth_utilisation": 0.2834,
                                     "bandwidth_achieved": 3742840104.1})
    history = history.with_row({"kind": "serving", "label": "one load c=4", "ttft_p50_s": 0.3021,
                                "output_tokens_per_s": 951.96})
    view = history.view()
    assert list(view.columns) == ["kind", "run", "label", "model", "mode", "TTFT (ms)", "TPOT (ms)",
                                  "TTFT p50 (ms)", "tokens_per_s", "output_tokens_per_s", "bandwidth_utilisation"]
    first, second = view.to_dict("records")
    assert (first["TTFT (ms)"], first["TPOT (ms)"], first["tokens_per_s"]) == (12.3, 4.17, 239.9)
    assert first["bandwidth_utilisation"] == "28%" and first["kind"] == ""
    assert second["TTFT p50 (ms)"] == 302.1 and second["TTFT (ms)"] == "" and second["output_tokens_per_s"] == 952.0
    assert "bandwidth_achieved" in history.table() and "bandwidth_achieved" not in view
    assert "TTFT（ms）" in history.view("zh")


def test_a_hundred_exports_leave_one_file_and_a_closed_page_none():
    """The History's CSV: 100 exports by one session rewrite one file (not 100 folders in /tmp), two sessions
    have one each, an id that is not a plain name gets a hashed folder inside the exports' folder (never a path
    outside it), forget removes a session's file, and the whole folder goes with the exports."""
    import tempfile
    from pathlib import Path

    from kvviz.ui.generation.history import CsvExports

    before = set(Path(tempfile.gettempdir()).iterdir())
    exports = CsvExports()
    history = RunHistory().with_run(finished_record(run_id=1))
    paths = {exports.write(history, "session-a") for _ in range(100)}
    assert len(paths) == 1 and next(iter(paths)).read_text().startswith("run,")
    odd = exports.write(history, "../../etc")
    assert odd.parent.parent == exports.folder
    exports.write(history, "session-b")
    assert sorted(p.name for p in exports.folder.iterdir() if p.is_dir())[-2:] == ["session-a", "session-b"]
    exports.forget("session-a")
    assert not (exports.folder / "session-a").exists() and (exports.folder / "session-b").exists()
    made = set(Path(tempfile.gettempdir()).iterdir()) - before
    assert exports.folder in made and not [p for p in made if p.name.startswith("tmp")], "mkdtemp's folders"
    folder = exports.folder
    del exports
    import gc

    gc.collect()
    assert not folder.exists()
