"""A formula that shows its work: the symbols, the same expression with numbers, and the result.

Every figure kvviz reports carries one of these, so the app and the CLI print exactly the
arithmetic the code evaluated. Byte results are rendered in bytes, GiB (2^30) and GB (10^9),
each under its own label. A formula's label, and any words in its formula ("weights read once + KV cache
written"), are keyed texts (kvviz.i18n.said): English here, in the reader's language where
kvviz.calc.report.formula_text renders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.base.units import fmt_int, fmt_scaled, fmt_seconds, fmt_si, to_gb, to_gib


@dataclass(frozen=True)
class Factor:
    """One factor of a product: its symbol and the number that stands for it."""

    symbol: str
    value: str


def product(*factors: Factor) -> tuple[str, str]:
    """(symbolic, substituted) text of a product of factors."""
    return " × ".join(f.symbol for f in factors), " × ".join(f.value for f in factors)


def total(*terms: tuple[str, str]) -> tuple[str, str]:
    """(symbolic, substituted) text of a sum of products, each term in parentheses when there are several."""
    if len(terms) == 1:
        return terms[0]
    return " + ".join(f"({s})" for s, _ in terms), " + ".join(f"({v})" for _, v in terms)


@dataclass(frozen=True)
class Formula:
    """label: symbolic = substituted = value, with value in `unit` ('B', 's', 'FLOP', 'FLOP/B', ...)."""

    label: str
    symbolic: str
    substituted: str
    value: float
    unit: str = "B"

    def value_lines(self) -> list[str]:
        """The result in each unit that applies, one labelled line each."""
        if self.unit == "B":
            return [
                f"{fmt_int(self.value)} bytes",
                f"{fmt_scaled(to_gib(self.value))} GiB (2^30 bytes)",
                f"{fmt_scaled(to_gb(self.value))} GB (10^9 bytes)",
            ]
        if self.unit == "s":
            return [fmt_seconds(self.value)]
        if self.unit in ("FLOP", "FLOP/s", "B/s"):
            return [f"{fmt_int(self.value)} {self.unit}", fmt_si(self.value, self.unit)]
        if float(self.value).is_integer():
            return [f"{fmt_int(self.value)} {self.unit}"]
        return [f"{self.value:,.3f} {self.unit}"]

    def text(self) -> str:
        """Multi-line rendering: the label and formula, then '= substituted', then '= value' lines."""
        lines = [f"{self.label}: {self.symbolic}"]
        if self.substituted and self.substituted != self.symbolic:
            lines.append(f"  = {self.substituted}")
        lines += [f"  = {line}" for line in self.value_lines()]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """JSON-ready form; byte results carry the GiB and GB figures under their own keys."""
        out = {"label": self.label, "formula": self.symbolic, "substituted": self.substituted,
               "value": self.value, "unit": self.unit}
        if self.unit == "B":
            out["gib"] = to_gib(self.value)
            out["gb"] = to_gb(self.value)
        return out
