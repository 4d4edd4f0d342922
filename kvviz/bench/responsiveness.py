"""Part 5, app responsiveness: the calculator handler's latency on every preset, and decode speed seen in
the running app against the CLI for the same generation. Both import the UI (gradio), unlike the rest.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd


def calculator_latency(repeats: int) -> pd.DataFrame:
    """Seconds the calculator's handler takes, all figures built and serialised, for every preset."""
    from kvviz.calc.presets import preset_names
    from kvviz.ui.calculator.answer import calculate, preset_dims

    rows = []
    for preset in preset_names():
        layers, kv_heads, head_dim = preset_dims(preset)
        args = (preset, "", 8, 8192, layers, kv_heads, head_dim, "bf16", "h100-sxm", 0.9, 16)
        calculate(*args)  # warm the caches a real session warms on its first move
        for rep in range(repeats):
            start = time.perf_counter()
            r = calculate(*args)
            for fig in (r.memory_fig, r.curves_fig, r.attention_fig, r.window_fig, r.roofline_fig):
                json.dumps(fig)
            rows.append({"preset": preset, "repeat": rep, "seconds": time.perf_counter() - start})
    return pd.DataFrame(rows)


ROOT = Path(__file__).resolve().parents[2]


def app_against_cli(model: str, prompt: str, new_tokens: int, repeats: int) -> pd.DataFrame:
    """Decode speed of the same generation shown in the running app (through gradio_client) and from the
    CLI, interleaved. The app is started here on a free loopback port and stopped at the end."""
    import os
    import subprocess

    from gradio_client import Client

    from kvviz.ui.serve import running_app

    env = os.environ | {"GRADIO_ANALYTICS_ENABLED": "False"}
    with running_app() as app:
        client = Client(app.url, verbose=False)
        rows = []
        for rep in range(repeats + 1):  # the first round warms both up and is dropped
            job = client.submit(model, prompt, new_tokens, 0, 0, 1, 0, True, True, api_name="/generate")
            for _ in job:
                pass
            app_summary = job.outputs()[-1][-1]["summary"]
            cli = subprocess.run([sys.executable, "-m", "kvviz", "generate", "--model", model, "--prompt", prompt,  # noqa: S603
                                  "--max-new-tokens", str(new_tokens), "--json"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, check=True)
            cli_summary = json.loads(cli.stdout)["summary"]
            if rep:
                for where, summ in (("app", app_summary), ("cli", cli_summary)):
                    rows.append({"model": model, "where": where, "repeat": rep, "new_tokens": summ["new_tokens"],
                                 "tpot_s": summ["tpot_s"], "decode_tokens_per_s": summ["decode_tokens_per_s"]})
        return pd.DataFrame(rows)
