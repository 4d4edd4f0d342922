"""`python -m kvviz.bench.parallel_capacity`: the capacity table for parallel layouts, measured on a real vLLM
(kvviz.serving.parallel_capacity: one start per model and layout) and written with the command and the machine
as results/parallel/parallel-capacity.{json,csv,md}. The serving layer measures; this writes the record, as
the other benchmark parts do (kvviz.bench.common.machine)."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kvviz.calc.machine import machine
from kvviz.serving.parallel_capacity import ParallelRow, measure, parse_layout, plan_layouts

COLUMNS = ("model", "layout", "kv_heads", "kv_heads_per_rank", "stage_layers", "bytes_per_token_per_rank",
           "calc_token_slots", "modelled_blocks", "vllm_blocks", "modelled_logged_tokens", "vllm_logged", "ranks",
           "ready_s", "agree")


def flat(record: dict) -> dict:
    """A row's JSON as one line of the table: the prediction's fields beside vLLM's."""
    merged = record | record["predicted"]
    merged["model"], merged["layout"] = record["model"], record["layout"]
    merged["ranks"] = " ".join(f"{name}:{gib:g}GiB" for name, gib in record.get("ranks", []))
    merged["vllm_logged"] = " ".join(str(n) for n in record.get("vllm_logged", []))
    merged["stage_layers"] = "+".join(str(n) for n in merged["stage_layers"])
    return {c: merged.get(c) for c in COLUMNS}


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:.0f}"


def earlier(out: Path) -> tuple[list[str], list[dict]]:
    """The commands and rows already in out/parallel-capacity.json (none if there is none)."""
    path = out / "parallel-capacity.json"
    if not path.exists():
        return [], []
    done = json.loads(path.read_text())
    return done["commands"], done["rows"]


def write(out: Path, records: list[dict], command: str) -> None:
    """Add `records` (measured by `command`) to out/parallel-capacity.json (the rows, the commands, the machine
    now), .csv and .md (the table); a model and layout measured again replaces its earlier row."""
    out.mkdir(parents=True, exist_ok=True)
    commands, rows = earlier(out)
    fresh = {(r["model"], r["layout"]) for r in records}
    records = [r for r in rows if (r["model"], r["layout"]) not in fresh] + records
    records = [ParallelRow.from_record(r).record() for r in records]  # each judged by today's rules
    commands = [c for c in commands if c != command] + [command]
    (out / "parallel-capacity.json").write_text(json.dumps({"commands": commands, "machine": machine(),
                                                            "rows": records}, indent=1) + "\n")
    write_tables(out)


def write_tables(out: Path) -> None:
    """out/parallel-capacity.csv and .md from the rows and commands in out/parallel-capacity.json."""
    commands, records = earlier(out)
    rows = [flat(r) for r in records]
    with open(out / "parallel-capacity.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    table = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    table += ["| " + " | ".join(_cell(r[c]) for c in COLUMNS) + " |" for r in rows]
    (out / "parallel-capacity.md").write_text("".join(f"    {c}\n" for c in commands) + "\n" + "\n".join(table) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m kvviz.bench.parallel_capacity", description=__doc__)
    p.add_argument("--models", nargs="+", default=["tiny"], help="tiny, random:<preset>[@layers], folders")
    p.add_argument("--layouts", nargs="+", default=["tp1", "tp2", "pp2", "dp2"], help="tp2, pp2, dp2, tp2pp2...")
    p.add_argument("--kv-space-gib", type=int, default=1)
    p.add_argument("--max-model-len", type=int, default=1024)
    p.add_argument("--dummy-weights", action="store_true")
    p.add_argument("--out", type=Path, default=Path("results/parallel"))
    args = p.parse_args(argv)
    plans = plan_layouts(args.models, [parse_layout(t) for t in args.layouts], args.kv_space_gib,
                         args.max_model_len, args.dummy_weights)
    for model, _, layout, _ in plans:
        record = measure(model, layout, args.kv_space_gib, args.max_model_len, args.dummy_weights).record()
        print(json.dumps(flat(record)), flush=True)
        write(args.out, [record], "python -m kvviz.bench.parallel_capacity " + " ".join(argv))  # each row kept
    return 0


if __name__ == "__main__":
    sys.exit(main())
