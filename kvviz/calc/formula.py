"""A formula that shows its work: the symbols, the same expression with numbers, and the result.

Every figure kvviz reports carries one of these, so the app and the CLI print exactly the
arithmetic the code evaluated. Byte results are rendered in bytes, GiB (2^30) and GB (10^9),
each under its own label. A formula's label, any words in its formula ("weights read once + KV cache
written") and a unit that is a word ("GPUs") are keyed texts (kvviz.i18n.said): str() is their English, and
text(lang) renders the formula in the reader's language, its identifiers (batch, seq_len) and numbers as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.base.units import fmt_int, fmt_scaled, fmt_seconds, fmt_si, to_gb, to_gib
from kvviz.i18n import t
from kvviz.i18n.errors import translate


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
    """label: symbolic = substituted = value, with value in `unit`: a symbol ('B', 's', 'FLOP', 'FLOP/B', ...) or a
    keyed word (said("calc.unit.gpus"))."""

    label: str
    symbolic: str
    substituted: str
    value: float
    unit: str = "B"

    def value_lines(self, lang: str = "en") -> list[str]:
        """The result in each unit that applies, one labelled line each, in `lang`."""
        if self.unit == "B":
            return [
                t("calc.value.bytes", lang, n=fmt_int(self.value)),
                t("calc.value.gib", lang, n=fmt_scaled(to_gib(self.value))),
                t("calc.value.gb", lang, n=fmt_scaled(to_gb(self.value))),
            ]
        if self.unit == "s":
            return [fmt_seconds(self.value)]
        if self.unit in ("FLOP", "FLOP/s", "B/s"):
            return [f"{fmt_int(self.value)} {self.unit}", fmt_si(self.value, self.unit)]
        unit = translate(self.unit, lang)
        if float(self.value).is_integer():
            return [f"{fmt_int(self.value)} {unit}"]
        return [f"{self.value:,.3f} {unit}"]

    def text(self, lang: str = "en") -> str:
        """Multi-line rendering in `lang`: the label and formula, then '= substituted', then '= value' lines."""
        symbolic, substituted = translate(self.symbolic, lang), translate(self.substituted, lang)
        lines = [f"{translate(self.label, lang)}: {symbolic}"]
        if substituted and self.substituted != self.symbolic:
            lines.append(f"  = {substituted}")
        lines += [f"  = {line}" for line in self.value_lines(lang)]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """JSON-ready form; byte results carry the GiB and GB figures under their own keys."""
        out = {"label": self.label, "formula": self.symbolic, "substituted": self.substituted,
               "value": self.value, "unit": self.unit}
        if self.unit == "B":
            out["gib"] = to_gib(self.value)
            out["gb"] = to_gb(self.value)
        return out
