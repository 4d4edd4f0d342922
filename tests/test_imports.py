"""kvviz's core stays free of the UI libraries, so it runs where gradio and plotly are not installed."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO

CHECK = """
import importlib, pkgutil, sys
import kvviz
# The UI may import gradio and the benchmarks' figures plotly; the GPU script is held to the core's rule, as it
# runs where only torch, transformers and pandas are. A __main__ module runs its command line when imported.
core = [m.name for m in pkgutil.walk_packages(kvviz.__path__, 'kvviz.')
        if not m.name.startswith(('kvviz.ui', 'kvviz.bench')) and not m.name.endswith('__main__')]
core.append('kvviz.bench.gpu')
for name in core:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('gradio', 'plotly'))
print(len(core), loaded)
"""


def test_core_imports_neither_gradio_nor_plotly():
    """Importing every core module loads no gradio or plotly module."""
    proc = subprocess.run([sys.executable, "-c", CHECK], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    count, loaded = proc.stdout.split(" ", 1)
    assert int(count) >= 25, "the check must actually import the core modules"
    assert loaded.strip() == "[]", f"core imported UI libraries: {loaded}"
