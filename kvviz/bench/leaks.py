"""No leaks: many consecutive generations through the running app, with the resident memory of the app's
process and of its device worker sampled as they go; and on CUDA, the allocator's figure in-process.

Memory is read from /proc (Linux). The first runs warm caches (the model, tokenizer, Gradio's state), so
growth is measured from a sample after the warm-up to the last one. Imports gradio_client for the app run.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, in bytes (VmRSS of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def worker_pids(app_pid: int) -> list[int]:
    """The app's device-worker processes: its children started by multiprocessing's spawn."""
    kids = []
    for task in Path(f"/proc/{app_pid}/task").iterdir():
        kids += [int(p) for p in (task / "children").read_text().split()]
    return [p for p in kids if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]


def app_generations(url: str, app_pid: int, runs: int, model: str = "tiny", new_tokens: int = 8,
                    every: int = 10) -> pd.DataFrame:
    """`runs` generations one after another through /generate; memory sampled every `every` runs."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    rows = []
    for run in range(1, runs + 1):
        out = client.predict(model, f"Question {run}: what is a package?", new_tokens, 0, 0, 1, 0, True, True,
                             api_name="/generate")
        if not out[-1]["text"] and out[-1]["summary"]["new_tokens"] == 0:
            raise RuntimeError(f"run {run} produced nothing")
        if run == 1 or run % every == 0:
            workers = worker_pids(app_pid)
            rows.append({"run": run, "app_rss_bytes": rss_bytes(app_pid),
                         "worker_rss_bytes": sum(rss_bytes(p) for p in workers), "workers": len(workers)})
    return pd.DataFrame(rows)


def cuda_generations(spec: str, runs: int, new_tokens: int = 8, device: str = "cuda") -> pd.DataFrame:
    """`runs` generations in-process (no app) with the allocator's figure after each: CUDA memory flat."""
    import torch

    from kvviz.engine.loading import load_model
    from kvviz.engine.loop import run_to_end
    from kvviz.engine.request import GenerationRequest

    model, _, dtype = spec.partition("@")
    lm = load_model(model, device=device, dtype=dtype or None)
    cuda = lm.device.type == "cuda"
    rows = []
    for run in range(1, runs + 1):
        _, fin = run_to_end(lm, GenerationRequest(f"Question {run}", max_new_tokens=new_tokens, ignore_eos=True))
        if fin.error:
            raise RuntimeError(fin.error)
        rows.append({"run": run, "cuda_allocated_bytes": torch.cuda.memory_allocated(lm.device) if cuda else None,
                     "cuda_reserved_bytes": torch.cuda.memory_reserved(lm.device) if cuda else None})
    return pd.DataFrame(rows)


def summarize_leaks(frame: pd.DataFrame, warm_up: int = 20) -> dict:
    """Growth of each memory column from the first sample at or after `warm_up` runs to the last sample."""
    after = frame[frame["run"] >= warm_up]
    first, last = after.iloc[0], after.iloc[-1]
    cols = [c for c in frame.columns if c.endswith("_bytes") and frame[c].notna().all()]
    return {"runs": int(frame["run"].max()), "from_run": int(first["run"]),
            **{f"{c[:-6]}_mib_at_{int(first['run'])}": float(first[c]) / 2**20 for c in cols},
            **{f"{c[:-6]}_mib_at_{int(last['run'])}": float(last[c]) / 2**20 for c in cols},
            **{f"{c[:-6]}_growth_mib": float(last[c] - first[c]) / 2**20 for c in cols}}
