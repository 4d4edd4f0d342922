"""Checking values that arrive from outside: the web API, the page's controls and the command line.

Each check takes whatever a caller sent (a JSON value from the API: any type, NaN, infinity, a
number with four hundred digits, a megabyte of text) and returns it in the type the core wants, or
raises InputError (a ValueError) with one short line that names the value and says what is allowed. A value is
quoted at most SHOWN_CHARS characters long, so no message ever echoes a megabyte back. Nothing here
knows gradio, torch or what the values are for.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from kvviz.base.errors import SHOWN_CHARS as SHOWN_CHARS  # re-exported: messages quote values through inputs
from kvviz.base.errors import InputError
from kvviz.base.errors import clip as clip


def shown(value: object) -> str:
    """value as a message quotes it: repr, clipped; big or odd numbers in short scientific form."""
    if isinstance(value, float) and math.isfinite(value) and abs(value) >= 1e15:
        return f"{value:.3g}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        try:
            return f"{float(value):.3g}"
        except OverflowError:  # beyond any float: say how long it is (str() refuses over 4,300 digits)
            return f"a number with about {math.ceil(value.bit_length() * math.log10(2)):,} digits"
    return clip(repr(value))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def whole_number(value: object, name: str, low: int, high: int, integral_floats: bool = True) -> int:
    """value as an int in [low, high], or ValueError naming it (bools, NaN, text and fractions refused).

    integral_floats: accept 3.0 as 3, as a JSON client may send it; off where the caller is kvviz's own code,
    which should hold ints."""
    if not _is_number(value) or (isinstance(value, float) and (
            not integral_floats or not math.isfinite(value) or not value.is_integer())):
        raise InputError("input.whole_number", name=name, value=shown(value))
    if not low <= value <= high:
        raise InputError("input.between", name=name, low=low, high=high, value=shown(int(value)))
    return int(value)


def number(value: object, name: str, low: float, high: float, low_open: bool = False) -> float:
    """value as a finite float in [low, high] (or (low, high] when low_open), or ValueError naming it."""
    if not _is_number(value) or not math.isfinite(value):
        raise InputError("input.number", name=name, value=shown(value))
    if value < low or value > high or (low_open and value == low):
        interval = f"({low:g}, {high:g}]" if low_open else f"[{low:g}, {high:g}]"
        raise InputError("input.interval", name=name, interval=interval, value=shown(value))
    return float(value)


def text(value: object, name: str, max_chars: int) -> str:
    """value as a str of at most max_chars characters (None counts as empty), or ValueError naming it."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError("input.text", name=name, value=shown(value))
    if len(value) > max_chars:
        raise InputError("input.too_long", name=name, n=len(value), limit=max_chars)
    return value


def choice(value: object, name: str, choices: Collection[str]) -> str:
    """value if it is one of `choices`, or ValueError listing them (when there are few)."""
    if isinstance(value, str) and value in choices:
        return value
    if len(choices) > 12:
        raise InputError("input.unknown", name=name, value=shown(value))
    raise InputError("input.unknown_choice", name=name, value=shown(value), choices=", ".join(choices))


def flag(value: object, name: str) -> bool:
    """value if it is true or false, or ValueError naming it (no guessing what "no" or 0 meant)."""
    if not isinstance(value, bool):
        raise InputError("input.flag", name=name, value=shown(value))
    return value
