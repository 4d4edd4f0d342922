"""What every benchmark part shares: the prompts, the description of the machine, and writing a part's rows
(CSV) and summary (JSON, with the machine and the command). Timed regions sync the device through
kvviz.base.device, as the engine does.

Nothing under kvviz.bench except figures.py imports more than torch, transformers, pandas and kvviz's
core, so the measuring parts run on a GPU machine with nothing else installed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from kvviz.calc.machine import machine

LESSON_PROMPT = "用三句话解释 LLM 推理中的 KV Cache。"
LONG_PROMPT = (
    "The KV cache keeps every layer's keys and values, so that decoding a token does not recompute the "
    "history of the sequence. Prefill reads the whole prompt at once; decode produces one token at a time. "
) * 8  # about 430 tokens of the bundled model: with 512 new ones it stays inside its 1,024 context


def command(argv: Sequence[str] | None) -> str:
    return "python -m kvviz.bench " + " ".join(sys.argv[1:] if argv is None else argv)


def write_results(out: Path, tag: str, frame: pd.DataFrame, summary: dict, argv: Sequence[str] | None) -> None:
    """out/<tag>.csv holds every measured row; out/<tag>.json the summary, the machine and the command."""
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / f"{tag}.csv", index=False)
    (out / f"{tag}.json").write_text(json.dumps(
        {"machine": machine(), "command": command(argv), "results": summary}, indent=2) + "\n")
    print(json.dumps({tag: summary}, indent=2), flush=True)
