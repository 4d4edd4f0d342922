"""The calculator's one error: a config that cannot describe a model.

It lives apart from arch.py (the parser) so that state.py, which arch.py calls to size a layer's state, can
raise it without importing the parser back: no import cycle between the two.
"""

from __future__ import annotations

from kvviz.base.errors import KvvizError


class ConfigError(KvvizError, ValueError):
    """A config that cannot describe a model: missing key, bad value, unreachable source."""
