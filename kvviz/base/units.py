"""Units and number formatting, kept in one place so every figure is labelled the same way.

GiB means 2^30 bytes and GB means 10^9 bytes; the two are never shown under each other's name.
"""

from __future__ import annotations

import math
import unicodedata

GIB = 2**30
GB = 10**9
MIB = 2**20


def to_gib(n_bytes: float) -> float:
    """Bytes to gibibytes (2^30 bytes)."""
    return n_bytes / GIB


def to_gb(n_bytes: float) -> float:
    """Bytes to gigabytes (10^9 bytes), as accelerator vendors count."""
    return n_bytes / GB


def display_width(text: str) -> int:
    """The columns `text` takes in a terminal or a plot's title, in Latin characters: a wide (CJK) one is two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def fmt_int(n: float) -> str:
    """An integer with thousands separators: 34359738368 -> '34,359,738,368'."""
    return f"{round(n):,}"


def fmt_scaled(x: float) -> str:
    """A GiB or GB figure with three decimals, or three significant digits when it is below 1."""
    if x == 0 or abs(x) >= 1:
        return f"{x:,.3f}"
    return f"{x:.3g}"


def fmt_bytes(n_bytes: float) -> str:
    """Bytes in the three labelled units: '34,359,738,368 B = 32.000 GiB = 34.360 GB'."""
    return f"{fmt_int(n_bytes)} B = {fmt_scaled(to_gib(n_bytes))} GiB = {fmt_scaled(to_gb(n_bytes))} GB"


def fmt_seconds(seconds: float) -> str:
    """A duration in the unit that reads best: s, ms or µs."""
    if seconds >= 1:
        return f"{seconds:,.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:,.3f} ms"
    return f"{seconds * 1e6:,.3f} µs"


def fmt_si(value: float, unit: str) -> str:
    """A large rate or count with an SI prefix: fmt_si(9.89e14, 'FLOP/s') -> '989.00 TFLOP/s'."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:,.2f} {prefix}{unit}"
    return f"{value:,.2f} {unit}"


def fmt_ms(seconds: float | None, missing: str = "n/a") -> str:
    """A latency: seconds as milliseconds with two decimals and thousands separators ("1,234.57 ms"); `missing` for
    None or NaN (a column no run filled). Every latency the page, the lesson and the app's figures write uses this."""
    return missing if seconds is None or math.isnan(seconds) else f"{seconds * 1e3:,.2f} ms"


def fmt_rate(per_s: float) -> str:
    """A rate in tokens/s, to the digits that matter: '8,000' from 100 up, '12.5' below."""
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.1f}"


def fmt_bytes_short(n_bytes: float) -> str:
    """Bytes in GB, MB or KB (10^9, 10^6, 10^3 bytes), for a sentence: '1.98 GB', '20.5 MB', '96.3 KB'
    (fmt_bytes is the full statement, in bytes, GiB and GB)."""
    if n_bytes >= 1e9:
        return f"{n_bytes / 1e9:,.2f} GB"
    return f"{n_bytes / 1e6:,.1f} MB" if n_bytes >= 1e6 else f"{n_bytes / 1e3:,.1f} KB"


def fmt_pair(low: float, high: float, digits: int = 3) -> tuple[str, str]:
    """Two ends of a bracket (a rate held and the next that is not), fixed-point with thousands separators, with
    as many decimals as tell them apart: `digits` significant digits of the larger to start, up to 9 decimals,
    trailing zeros dropped. (0.1512, 0.1527) -> ('0.151', '0.153'); (0.15, 0.1502) -> ('0.15', '0.1502');
    (1234.5, 1236) -> ('1,234', '1,236'). Equal values print equal."""
    top = max(abs(low), abs(high))
    start = max(0, digits - 1 - math.floor(math.log10(top))) if top > 0 else 0

    def shown(x: float, decimals: int) -> str:
        text = f"{x:,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text

    for decimals in range(start, max(start, 9) + 1):
        a, b = shown(low, decimals), shown(high, decimals)
        if a != b:
            break
    return a, b
