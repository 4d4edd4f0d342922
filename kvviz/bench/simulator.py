"""Part: the simulator against the real vLLM (issue 27). kvviz.sim.validate calibrates on some loads per model
(tiny, SmolLM2-135M-Instruct with its real weights), predicts held-out loads, runs them on vLLM with kvviz's load
generator, and sweeps a small KV pool for the concurrency at which preemption starts; this part writes what it
found: every point (simulator.csv: measured, predicted, error, the machine's load average), the summary (MAPE per
metric and model, the onsets, each calibration; simulator.json with the machine and the command), each model's
calibration file (calibration-<model>.json, reusable with `python -m kvviz.sim predict --calibration`), and the
predicted lines the figure draws under the measured points (simulator-lines.csv: the calibrated simulator over
closed loops of 1 to 32 of each held-out mix). Knows files; validating is kvviz.sim's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from kvviz.sim import calibrate, validate
from kvviz.sim.calibrate import LoadPoint
from kvviz.sim.validate import METRICS, ModelResult

LINE_CONCURRENCY = (1, 2, 4, 8, 12, 16, 24, 32)


def predicted_lines(result: ModelResult) -> pd.DataFrame:
    """The calibrated simulator's figures for closed loops of each held-out mix, concurrency 1 to 32."""
    rows = []
    mixes = dict.fromkeys(p.point.mix for p in result.points if p.kind == "held-out" and p.point.closed)
    for mix in mixes:
        for c in LINE_CONCURRENCY:
            point = LoadPoint(mix, 2 * c + 8, concurrency=c)
            stats, _ = validate.predicted_stats(point, result.engine, result.fitted)
            rows.append({"model": result.model, "mix": mix.label, "concurrency": c,
                         **{f"predicted_{name}": get(stats) for name, get in METRICS.items()}})
    return pd.DataFrame(rows)


def _progress(key: str, **fields) -> None:
    from kvviz.i18n import t

    print(t(key, "en", **fields), file=sys.stderr, flush=True)


def simulator_bench(quick: bool, out: Path, models: list[str] | None = None) -> tuple[pd.DataFrame, dict]:
    """Validate every plan, each held-out load run twice (how far a measurement moves by itself, beside each
    prediction's error), write each calibration and the predicted lines into out; the points and summary."""
    from kvviz.serving.vllm import VENV

    plans = validate.QUICK if quick else tuple(p for p in validate.FULL if not models or p.name in models)
    results = [validate.validate_model(plan, say=_progress, repeat=True)
               for plan in plans]
    out.mkdir(parents=True, exist_ok=True)
    tag = "-quick" if quick else ""
    for r in results:
        calibrate.save(out / f"calibration-{r.model}{tag}.json", r.fitted, r.engine, r.calibration_runs, VENV)
    pd.concat([predicted_lines(r) for r in results]).to_csv(out / f"simulator{tag}-lines.csv", index=False)
    summary = validate.summary(results)
    return pd.DataFrame(summary.pop("points")), summary


def _cell(row, name: str, scale: float) -> str:
    """measured → predicted (error), scaled; "-" for a figure the point lacks (a load whose every request's output
    reached the client in one read has no measured TPOT, nor an error on it)."""
    def num(value) -> str:
        return "-" if value is None or pd.isna(value) else f"{scale * value:.0f}"
    error = row[f"error_{name}"]
    return (f"{num(row[f'measured_{name}'])} → {num(row[f'predicted_{name}'])} "
            f"({'-' if error is None or pd.isna(error) else f'{error:+.0%}'})")


def markdown_table(points: pd.DataFrame, summary: dict) -> str:
    """The points' errors and the MAPE per model as a Markdown table (for docs/simulator.md and the issue)."""
    head = ("| model | load | load avg | out tok/s meas → pred | TPOT p50 ms meas → pred | TTFT p50 ms meas → pred "
            "| E2E p50 ms meas → pred |\n|---|---|---|---|---|---|---|\n")
    lines = []
    for _, r in points.iterrows():
        cells = [_cell(r, "output_tokens_per_s", 1)] + [_cell(r, name, 1e3)
                                                         for name in ("tpot_p50_s", "ttft_p50_s", "e2e_p50_s")]
        lines.append(f"| {r['model']} | {r['load']} | {r['load_average_1m']:.1f} | " + " | ".join(cells) + " |")
    mape = []
    for m, e in summary["mape"].items():
        mape.append(f"| **{m}: MAPE over {summary['held_out_points'][m]} points** | | | "
                    + " | ".join("-" if e[k] is None else f"**{e[k]:.0%}**" for k in METRICS) + " |")
        moved = summary["repeatability"][m]
        if moved["points"]:
            mape.append(f"| {m}: the same {moved['points']} loads measured twice moved by | | | "
                        + " | ".join("-" if moved[k] is None else f"{moved[k]:.0%}" for k in METRICS) + " |")
        drift = summary.get("drift", {}).get(m)
        if drift:
            mape.append(f"| {m}: calibration load {drift['load']} again after the held-out loads moved by | | | "
                        + " | ".join("-" if drift[f"moved_{k}"] is None else f"{drift[f'moved_{k}']:+.0%}"
                                     for k in METRICS) + " |")
    return head + "\n".join(lines + mape) + "\n"
