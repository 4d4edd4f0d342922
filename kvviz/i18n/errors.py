"""kvviz's error messages in Chinese.

The core raises its errors in English (ValueError, LoadError, PolicyError, ...): one text that the API, the
logs, the CLI's --lang en and the tests share. Where a person reads one in Chinese, translate() matches the
message against the English templates here and fills the matching Chinese template with the same values.
A template's fields ({name}) match any text; the first template that matches the whole message wins, so a
more specific template goes before a general one. A message no template matches is shown as it is (English).
"""

from __future__ import annotations

import re
from functools import cache

from kvviz.i18n import normalize

# (English template, Chinese template): the same {fields} in both.
TEMPLATES: list[tuple[str, str]] = [
    ("the prompt is empty", "提示词（prompt）为空"),
]


@cache
def _pattern(template: str) -> re.Pattern:
    """The template as a regular expression: its text literal, each {field} a named group matching any text."""
    parts = re.split(r"\{(\w+)\}", template)
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
    return re.compile(f"{regex}$", re.DOTALL)


def translate(message: str, lang: object) -> str:
    """`message` in `lang`: as it is for English (or a message no template knows), else the Chinese template
    of the first English template that matches it whole, with the values the message carried."""
    if normalize(lang) == "en":
        return message
    for en, zh in TEMPLATES:
        found = _pattern(en).match(message)
        if found:
            return zh.format(**found.groupdict())
    return message
