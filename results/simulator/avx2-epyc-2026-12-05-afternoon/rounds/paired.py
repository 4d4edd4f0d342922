"""The rounds experiment's paired scores: per run, the held-out loads' MAPE (output tok/s / TPOT / TTFT / E2E p50)
by the fit of all four calibration rounds and by the first round's own fit, from the same measured points; and the
preemption sweep's, by the rounds' fit. Run from the repository: python <this file> <run folders>."""

import sys

import pandas as pd

METRICS = ["output_tokens_per_s", "tpot_p50_s", "ttft_p50_s", "e2e_p50_s"]


def mape(frame: pd.DataFrame, prefix: str) -> str:
    return " / ".join(f"{100 * frame[f'{prefix}{m}'].abs().mean():.1f}" for m in METRICS)


for folder in sys.argv[1:]:
    points = pd.read_csv(f"{folder}/simulator.csv")
    held = points[points.kind == "held-out"]
    print(f"{folder}: {len(held)} held-out loads, rounds {mape(held, 'error_')}%, first round alone "
          f"{mape(held, 'error_first_')}%; sweep {mape(points[points.kind != 'held-out'], 'error_')}%")
