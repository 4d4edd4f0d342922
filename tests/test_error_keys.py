"""Every error kind kvviz can raise, found by reading the source (not a hand list), reads in both languages.

The family is kvviz.base.errors.KvvizError and every class in kvviz/ that derives from it; kvviz.i18n.said builds
the same kind of keyed text for what is not an error (progress lines, a reason inside a reason, a status line).
Every call that builds one names a catalogue key (a literal string) and its values by keyword; each key must be
in the catalogue in English and Chinese, with exactly the fields its call sites give, and render with them:
nothing left unfilled, Chinese that is Chinese, the English equal to str() of the error itself.
"""

from __future__ import annotations

import ast
import pickle
import re
import string
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvviz.base.errors import InputError, KvvizError
from kvviz.i18n import CATALOG
from kvviz.i18n.errors import translate
from tests.helpers import REPO

CJK = re.compile(r"[\u4e00-\u9fff]")
PACKAGE = REPO / "kvviz"
# Texts whose Chinese is a term Chinese engineers write in Latin letters: "KV cache" reads "KV Cache".
LATIN_TERMS = {"calc.label.kv"}


@dataclass(frozen=True)
class Site:
    """One place that builds a kvviz error: file:line, the class, the key, the keyword values it gives."""

    where: str
    cls: str
    key: str | None  # None: the key is not a literal (refused below)
    fields: frozenset[str]
    splat: bool  # **values: the fields are not all readable here


def _trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.rglob("*.py"))}


def _family(trees: dict[Path, ast.Module]) -> set[str]:
    """KvvizError and every class in kvviz/ that derives from it (to any depth), by name."""
    bases = {node.name: {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
             for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    family = {"KvvizError"}
    while grown := {name for name, of in bases.items() if of & family} - family:
        family |= grown
    return family


def _sites() -> list[Site]:
    trees = _trees()
    family = _family(trees) | {"said"}
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in family:
                first = node.args[0] if node.args else None
                key = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
                found.append(Site(f"{path.relative_to(REPO)}:{node.lineno}", node.func.id, key,
                                  frozenset(k.arg for k in node.keywords if k.arg),
                                  any(k.arg is None for k in node.keywords)))
    return found


SITES = _sites()
KEYS = sorted({site.key for site in SITES if site.key})


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_the_walk_finds_the_family():
    """The walk sees the errors it must (a walk that finds nothing would pass everything below)."""
    classes = {site.cls for site in SITES}
    expected = {"InputError", "LoadError", "ConfigError", "PolicyError", "HttpError", "VllmError", "said"}
    assert expected <= classes, expected - classes
    assert len(KEYS) > 200, len(KEYS)


def test_every_site_names_a_literal_key():
    """A key computed at run time cannot be checked here (nor found by grep): every site writes its key out."""
    computed = [site.where for site in SITES if site.key is None]
    assert not computed, f"kvviz errors built with a computed key: {computed}"


@pytest.mark.parametrize("site", [s for s in SITES if s.key], ids=lambda s: s.where)
def test_a_site_gives_the_fields_its_text_names(site):
    """The key is in both catalogues, and the call gives exactly the fields its English and Chinese name."""
    assert site.key in CATALOG["en"], f"{site.where}: {site.key!r} is in no catalogue"
    en, zh = _fields(CATALOG["en"][site.key]), _fields(CATALOG["zh"][site.key])
    assert en == zh, f"{site.key}: English names {sorted(en)}, Chinese {sorted(zh)}"
    if not site.splat:
        assert site.fields == en, f"{site.where}: gives {sorted(site.fields)}, the text names {sorted(en)}"


@pytest.mark.parametrize("key", KEYS)
def test_each_error_renders_in_both_languages_with_its_values(key):
    """Raised with a distinct value in each field, the error renders every value in English (its str()) and in
    Chinese, leaves no field unfilled, and its Chinese is Chinese (but for a text that is its fields alone and
    punctuation, which gives another text a kind, and a term written in Latin letters); it survives a pickle (the
    worker's pipe)."""
    names = sorted(_fields(CATALOG["en"][key]))
    values = {name: 7001 + i for i, name in enumerate(names)}  # a number: fits every format spec ({n:,}, {x!r})
    error = InputError(key, **values)
    en, zh = str(error), translate(error, "zh")
    assert translate(error, "en") == en
    for text in (en, zh):
        assert "{" not in text and "}" not in text, f"{key}: a field left unfilled: {text}"
        missing = [name for name, v in values.items() if str(v) not in text and f"{v:,}" not in text]
        assert not missing, f"{key}: {missing} not shown in {text!r}"
    literals = "".join(literal for literal, *_ in string.Formatter().parse(CATALOG["zh"][key]))
    wrapper = not re.search(r"[^\W\d_]", literals)  # fields and punctuation: "{why}", "{name}：{how}", a kind only
    term = key in LATIN_TERMS and zh != en
    assert CJK.search(zh) or wrapper or term, f"{key}: its Chinese has no Chinese: {zh!r}"
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - bytes made on the line itself
    assert (type(copy), copy.key, dict(copy.values), str(copy)) == (InputError, key, values, en)


CORE = ("base", "calc", "engine", "serving")  # the packages whose errors reach a person through the CLI, page, API
BUILTINS = {"ValueError", "RuntimeError", "TypeError", "OSError", "LookupError", "KeyError"}


def test_the_core_raises_no_message_built_as_text():
    """In the core, an error with a message is a kvviz error with a key (a built-in one raised with English text
    would show English on the Chinese page): the only exceptions say why on their line (`# internal: ...`)."""
    found = []
    for path in sorted(p for package in CORE for p in (PACKAGE / package).rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            exc = node.exc if isinstance(node, ast.Raise) else None
            if isinstance(exc, ast.Call) and getattr(exc.func, "id", None) in BUILTINS and exc.args \
                    and "# internal:" not in lines[exc.lineno - 1]:
                found.append(f"{path.relative_to(REPO)}:{exc.lineno}")
    assert not found, f"raised with a message as text, not a key: {found}"


def test_a_foreign_error_is_shown_as_it_is():
    """An exception that is not kvviz's (torch, the OS) has no key: both languages show its first line."""
    error = OSError("disk full\nmore detail")
    assert translate(error, "zh") == translate(error, "en") == "disk full"
    assert not isinstance(error, KvvizError)
