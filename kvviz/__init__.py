"""kvviz: see how LLM inference really behaves.

The package is the computation behind the app and the CLI: the KV-cache memory model, the
parameter count, capacity and roofline estimates. Nothing here imports gradio or plotly; the
user interfaces sit on top of it.
"""

from __future__ import annotations

__version__ = "0.1.0"
