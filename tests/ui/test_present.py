"""What the page says, from known numbers: every expected string here is written out by hand."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from kvviz.engine.compare import Comparison
from kvviz.engine.events import Finished, TokenEvent
from kvviz.engine.metrics import RunSummary
from kvviz.ui.live import RunRecord
from kvviz.ui.present import (
    RunHistory,
    agreement,
    compare_verdict,
    final_metrics,
    metrics_markdown,
    ms,
    run_details,
    run_ids,
    time_limit_message,
)
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
| 50.00 ms | 10.00 ms | 55.6 | 100.0 | 10.00 ms / 12.00 ms / 15.00 ms | 1.00 ms | 40.00 ms | 2.00 GB/s, 25% of 8.0 |

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


def comparison(identical: bool = True, divergence: int | None = None, decode_speedup: float | None = 4.0):
    empty = pd.DataFrame()
    return Comparison(rows=empty, prediction=empty, cached=summary(),
                      uncached=summary(mode="uncached", tpot_s=0.04, tokens_per_s=20.0), cached_text="a",
                      uncached_text="a", speedup=3.5, decode_speedup=decode_speedup, tokens_identical=identical,
                      first_divergence=divergence, compared_tokens=5)


LOADED = Loaded(job_id=1, spec="tiny", random_weights=False, tokenizer_note="", device="cpu", dtype="fp32",
                cpu_threads=2)


def test_compare_verdict():
    """The headline speedup, agreement, both modes' TPOT and rate, and what ran where."""
    assert compare_verdict(comparison(), LOADED) == (
        "### 3.50× faster with the cache (4.00× per decode token)\n"
        "The tokens are identical. Cached: TPOT 10.00 ms, 55.6 tokens/s. Uncached: TPOT 40.00 ms, 20.0 tokens/s. "
        "tiny on cpu in fp32.")


def test_compare_verdict_of_a_twin_with_one_token():
    """No per-decode speedup with a single token; random weights are flagged."""
    twin = Loaded(job_id=1, spec="random:gpt2", random_weights=True, tokenizer_note="", device="cpu", dtype="fp32",
                  cpu_threads=2)
    verdict = compare_verdict(comparison(decode_speedup=None), twin)
    assert verdict.startswith("### 3.50× faster with the cache\nThe tokens are identical.")
    assert verdict.endswith("random:gpt2 on cpu in fp32.\n\n*Random weights: the timing is real, the text is noise.*")


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
    """present, sessions and worker import without gradio: what the page says is checked without a server."""
    code = "import sys, kvviz.ui.present, kvviz.ui.sessions, kvviz.ui.worker; print(sorted(m for m in sys.modules " \
           "if m.split('.')[0] in ('gradio', 'gradio_client')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"imported: {out.stdout.strip()}"
