"""The calculator tab's texts for its seq_len pair (kvviz.ui.calculator.tab): a slider dragged on a log₂ scale, from a
single token to 262,144, beside the box that holds the exact length. The calculator's other texts are in
kvviz/i18n/calculator.py."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    "calc.seq_len.drag": "seq_len, dragged on a log₂ scale (10 = 1,024; 13 = 8,192; 18 = 262,144)",
    "calc.seq_len.exact": "seq_len exactly (tokens per sequence; type any length, e.g. 1000)",
}

ZH = {
    "calc.seq_len.drag": "seq_len，按 log₂ 刻度拖动（10 = 1,024；13 = 8,192；18 = 262,144）",
    "calc.seq_len.exact": "seq_len 确切值（每条序列的 token 数；可输入任意长度，例如 1000）",
}

register(EN, ZH)
