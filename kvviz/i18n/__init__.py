"""Two languages for everything kvviz says: English (en) and Simplified Chinese (zh).

Every sentence a person reads (the app's labels, explanations, results, plot titles and axes, error messages,
the CLI's messages and reports) is looked up here by key: t("compare.verdict.headline", lang, speedup=...).
The texts live in the catalogue modules of this package, one per area of kvviz (kvviz/i18n/common.py,
calculator.py, ...); each defines EN and ZH, two dicts with the same keys, and calls register(EN, ZH). All of
them are imported when this package is, so t() knows every key. Texts are str.format templates with named
fields; a static label (no fields) is also what the app hands Gradio's I18n, which translates it in the browser.
What the core says before it knows the reader's language (an error, a progress line, a reason) it says as a Said:
said("load.no_such_model", spec=...) is its English as a str, carrying the key and values to wherever it is shown,
where render(lang) (kvviz.i18n.errors.translate) gives it in that language. Nothing is parsed back from English.

Chinese uses the terms Chinese inference engineers use (预填充 prefill, 解码 decode, 首 token 延迟 TTFT,
每 token 延迟 TPOT, 吞吐 throughput, KV Cache), the English term beside it where that helps.
Nothing here knows gradio, torch or models.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

LANGS = ("en", "zh")
DEFAULT = "en"
LANG_NAMES = {"en": "English", "zh": "中文"}

CATALOG: dict[str, dict[str, str]] = {lang: {} for lang in LANGS}


def normalize(lang: object) -> str:
    """"zh" for any Chinese tag a browser, a locale or a caller sends (zh, zh-CN, zh_CN.UTF-8, zh-Hans, 中文), "en"
    for anything else (None, "", junk included): every language kvviz does not speak falls back to English."""
    if not isinstance(lang, str):
        return DEFAULT
    tag = lang.strip().lower()
    return "zh" if tag.startswith("zh") or tag == "中文" else DEFAULT


def locale_lang(environ: Mapping[str, str] = os.environ) -> str:
    """The language of the process's locale (LC_ALL, then LC_MESSAGES, LANG, LANGUAGE; the first one set), as
    normalize reads it: the CLI's default for --lang."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        if environ.get(name):
            return normalize(environ[name])
    return DEFAULT


def asked_lang(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> str:
    """The language a command line asks for, read before it is parsed (so its help is built in it, and a line
    that does not parse is refused in it): its --lang (--lang zh or --lang=zh) if valid, else the locale's."""
    for arg, following in pairwise([*argv, None]):
        value = arg.removeprefix("--lang=") if arg.startswith("--lang=") else following if arg == "--lang" else None
        if value in LANGS:
            return value
    return locale_lang(environ)


def register(en: Mapping[str, str], zh: Mapping[str, str]) -> None:
    """Add one catalogue's texts. Both languages must have the same keys, and no key may be registered twice
    (ValueError at import: a missing translation or a clash is a bug, found before anything runs)."""
    if set(en) != set(zh):
        raise ValueError(f"catalogue keys differ between en and zh: {sorted(set(en) ^ set(zh))[:10]}")
    clash = set(en) & set(CATALOG["en"])
    if clash:
        raise ValueError(f"catalogue keys registered twice: {sorted(clash)[:10]}")
    CATALOG["en"].update(en)
    CATALOG["zh"].update(zh)


def t(key: str, lang: object = DEFAULT, /, **values: object) -> str:
    """The text of `key` in `lang` (normalized), its fields filled from `values`. KeyError for a key no
    catalogue has: a typo in code, not something a visitor can cause."""
    text = CATALOG[normalize(lang)][key]
    return text.format(**values) if values else text


class Said(str):
    """A text kvviz says, as data: a str, its English (what logs, JSON, the API and anything that stores text
    read), that carries its catalogue key and the values of its fields, so that where a person reads it, it is
    rendered in their language from the key (render, kvviz.i18n.errors.translate), never parsed back from the
    English. It travels wherever a message travels as text (an event's error, the worker's Failed, a sweep's stop
    reason) and through pickling; an operation that makes a new string of it (strip, a slice, an f-string around
    it) gives plain English, without the key."""

    key: str
    values: Mapping[str, Any]

    def __new__(cls, key: str, values: Mapping[str, Any] | None = None, /) -> Said:
        values = dict(values or {})
        said = super().__new__(cls, _rendered(key, DEFAULT, values))
        said.key, said.values = key, values
        return said

    def render(self, lang: object = DEFAULT) -> str:
        """The text in `lang`; a value that is itself a Said (a reason inside a reason) is rendered in it too."""
        return _rendered(self.key, lang, self.values)

    def __reduce__(self) -> tuple:
        return Said, (self.key, self.values)


def said(key: str, /, **values: Any) -> Said:
    """The Said of `key` with these values, by keyword (as a KvvizError is built: tests/test_error_keys.py reads
    both kinds of call)."""
    return Said(key, values)


def _rendered(key: str, lang: object, values: Mapping[str, Any]) -> str:
    return t(key, lang, **{name: v.render(lang) if isinstance(v, Said) else v for name, v in values.items()})


def translations() -> dict[str, dict[str, str]]:
    """Every text in both languages, as Gradio's I18n takes them (the browser's locale zh-CN falls back to zh)."""
    return {lang: dict(texts) for lang, texts in CATALOG.items()}


for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
