"""Many visitors at once: clients on loopback mixing generations, comparisons and calculator moves against one
running app, as a shared demo sees them.

Each generation and comparison has its own prompt. Its text is first fetched alone (the reference); under
load every client must get exactly its own reference text back (greedy decoding is deterministic), and
every streamed partial text must be a prefix of it, so nobody receives another's tokens. Each device job
is finished, or refused because the queue is full (with the message the visitor sees). The time each
waited before it started, as the client saw it, is reported; so is the calculator's latency while the
device is busy. Imports gradio_client (not part of kvviz's core).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pandas as pd

from kvviz.base.errors import first_line

PROMPTS = (
    "What is a package?", "How do I install a kernel?", "What does apt do?", "Explain the boot process.",
    "What is a mirror?", "How are users created?", "What is a service?", "Where are logs kept?",
    "What is the root account?", "How does dpkg work?", "What is a repository?", "How do I upgrade?",
)
CALC_ARGS = ("llama-3-8b", "", 8, 8192, 32, 8, 128, "bf16", "h100-sxm", 0.9, 16, 1, 1, 1)  # ..., tp, pp, dp


@dataclass(frozen=True)
class Job:
    client: int
    kind: str  # "generate" or "compare"
    prompt: str


def plan(clients: int) -> list[Job]:
    """Every third client compares, the others generate; all with different prompts."""
    return [Job(i, "compare" if i % 3 == 2 else "generate", PROMPTS[i % len(PROMPTS)]) for i in range(clients)]


def _text_of(kind: str, outputs) -> str:
    # /generate ends with (text, metrics, latency, kv, details); /compare returns (verdict, cached text, ...)
    return outputs[-1]["text"] if kind == "generate" else outputs[1]


def _run(client, job: Job, model: str, new_tokens: int) -> tuple[str, list[str], float | None]:
    """Submit one job and follow it to the end: (final text, streamed texts, seconds until it started)."""
    from gradio_client.utils import Status

    args = (model, job.prompt, new_tokens, 0, 0, 1, 0, True, True) if job.kind == "generate" else (
        model, job.prompt, new_tokens)
    submitted = time.perf_counter()
    handle = client.submit(*args, api_name=f"/{job.kind}")
    started = None
    while not handle.done():
        code = handle.status().code
        if started is None and code in (Status.PROCESSING, Status.ITERATING, Status.PROGRESS, Status.FINISHED):
            started = time.perf_counter() - submitted
        time.sleep(0.01)
    outputs = handle.result()  # raises the app's error (queue full, refused...) as the client sees it
    if started is None:
        started = time.perf_counter() - submitted  # started and ended between two polls
    streamed = [o[0] for o in handle.outputs()[:-1]] if job.kind == "generate" else []
    return _text_of(job.kind, outputs), streamed, started


def references(url: str, jobs: list[Job], model: str, new_tokens: int) -> dict[tuple[str, str], str]:
    """Each job's text fetched alone, before any load."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    return {(j.kind, j.prompt): _run(client, j, model, new_tokens)[0] for j in jobs}


def _visit(client, job: Job, model: str, new_tokens: int, expected: dict, origin: float) -> dict:
    """One client's job, timed: its row for the results (finished with its own text, or refused and why)."""
    t0 = time.perf_counter()
    row = {"client": job.client, "kind": job.kind, "prompt": job.prompt}
    try:
        text, streamed, queue_s = _run(client, job, model, new_tokens)
        row |= {"status": "finished", "queue_s": queue_s, "own_text": text == expected[(job.kind, job.prompt)],
                "stream_prefixes": all(text.startswith(p) for p in streamed), "streamed_updates": len(streamed)}
    except Exception as exc:
        message = first_line(exc)
        row |= {"status": "queue full" if "full" in message.lower() else "error", "message": message}
    return row | {"wall_s": time.perf_counter() - t0, "start_s": t0 - origin}


def _calculator_mover(url: str, direct: bool):
    """A function that moves the calculator's controls once, as a visitor's page would."""
    if direct:
        import httpx

        return lambda: httpx.post(f"{url}gradio_api/run/kv_memory", json={"data": list(CALC_ARGS)},
                                  timeout=60).raise_for_status()
    from gradio_client import Client

    calc = Client(url, verbose=False)
    return lambda: calc.predict(*CALC_ARGS, api_name="/kv_memory")


def _calculator_calls(move, busy: threading.Event, origin: float) -> list[dict]:
    """Move the calculator every 50 ms while the jobs run: one row per call, with its latency or refusal."""
    rows = []
    while busy.is_set():
        t = time.perf_counter()
        try:
            move()
            refused = None
        except Exception as exc:
            refused = first_line(exc)
        rows.append({"start_s": t - origin, "seconds": time.perf_counter() - t, "during_jobs": busy.is_set(),
                     "refused": refused})
        time.sleep(0.05)
    return rows


def load_test(url: str, clients: int, model: str, new_tokens: int,
              direct_calculator: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All clients at once, plus one client moving the calculator throughout: (job rows, calculator rows).

    direct_calculator: call the calculator as the page does in hosted mode, straight to its route outside
    the queue (gradio_client always goes through the queue, which a full queue refuses).
    """
    from gradio_client import Client

    jobs = plan(clients)
    expected = references(url, jobs, model, new_tokens)
    conns = [Client(url, verbose=False) for _ in jobs]
    move = _calculator_mover(url, direct_calculator)
    move()  # its first call (the app's own first use of the calculator) before any job, as the references are
    start_line = threading.Barrier(len(jobs) + 1)
    busy = threading.Event()
    rows: list[dict] = []
    calc_rows: list[dict] = []

    def visitor(job: Job, client) -> None:
        start_line.wait()
        rows.append(_visit(client, job, model, new_tokens, expected, origin))

    def calculator() -> None:
        start_line.wait()
        calc_rows.extend(_calculator_calls(move, busy, origin))

    origin = time.perf_counter()
    busy.set()
    threads = [threading.Thread(target=visitor, args=(j, c)) for j, c in zip(jobs, conns, strict=True)]
    watcher = threading.Thread(target=calculator)
    for t in (*threads, watcher):
        t.start()
    for t in threads:
        t.join()
    busy.clear()
    watcher.join()
    return pd.DataFrame(rows).sort_values("client"), pd.DataFrame(calc_rows)


def summarize_load(jobs: pd.DataFrame, calc: pd.DataFrame) -> dict:
    """What a host wants to know: how many finished or were turned away, queue waits, calculator latency."""
    jobs = jobs.reindex(columns=[*jobs.columns, *(c for c in ("message", "queue_s") if c not in jobs)])
    done = jobs[jobs["status"] == "finished"]
    answered = calc[calc["during_jobs"] & calc["refused"].isna()]
    ms = answered["seconds"] * 1e3
    return {
        "clients": len(jobs), "finished": len(done), "queue_full": int((jobs["status"] == "queue full").sum()),
        "errors": jobs.loc[jobs["status"] == "error", "message"].tolist(),
        "queue_full_message": next(iter(jobs.loc[jobs["status"] == "queue full", "message"]), None),
        "all_own_text": bool(done["own_text"].all()) if len(done) else None,
        "all_stream_prefixes": bool(done["stream_prefixes"].all()) if len(done) else None,
        "queue_s_median": float(done["queue_s"].median()) if len(done) else None,
        "queue_s_max": float(done["queue_s"].max()) if len(done) else None,
        "wall_s_max": float(jobs["wall_s"].max()),
        "calculator_calls": len(ms), "calculator_refused": int(calc["refused"].notna().sum()),
        "calculator_p50_ms": float(ms.quantile(0.5)) if len(ms) else None,
        "calculator_p95_ms": float(ms.quantile(0.95)) if len(ms) else None,
        "calculator_max_ms": float(ms.max()) if len(ms) else None,
    }
