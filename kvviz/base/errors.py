"""How an exception becomes a message a person reads: its first non-blank line, never a traceback.

Every boundary that reports a failure (the CLI, the app, the engine, the loaders, the benchmarks)
calls first_line, so a message is cut the same way everywhere. Nothing here knows what failed.
"""

from __future__ import annotations

from kvviz.base.inputs import clip

MAX_MESSAGE_CHARS = 300  # longer than this, a message can only be echoing back what was sent


def first_line(exc: BaseException, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The exception's first non-blank line, stripped and clipped to `limit`; its type's name when it has none."""
    line = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return clip(line, limit)
