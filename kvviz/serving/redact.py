"""The one redaction step: every text kvviz shows a visitor about a target server passes through redact().

A server may echo what it was sent (an error that quotes the request's Authorization header, a proxy's debug
page), so any text that came from a server or names what was sent is cleaned before a page, the API or a record
shows it: every key kvviz knows of (the operator's KVVIZ_API_KEY / OPENAI_API_KEY and the key of the run, the
visitor's) is removed in the forms it could take there (as typed, URL-encoded, base64 alone or in an HTTP Basic
credential, at any alignment inside a longer base64 text), and so is the value of anything that reads as an
Authorization header or a Bearer/Basic credential, whether kvviz knows that key or not. A kvviz.i18n.Said stays a
Said (its values are cleaned), so it is still rendered in the reader's language. Knows texts and keys, nothing of
HTTP clients or pages.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

from kvviz.i18n import Said

HIDDEN = "[redacted]"
API_KEY_ENV = ("KVVIZ_API_KEY", "OPENAI_API_KEY")  # the operator's keys (kvviz.serving.endpoint reads them too)
MIN_BASE64_CHARS = 6  # a shorter run of base64 inside a text would match ordinary words
_CREDENTIAL = re.compile(r"(?i)\b(?:(bearer)(?:\s+|%20|\+)[^\s\"',;&<>]+|(basic)(?:\s+|%20|\+)[A-Za-z0-9+/=_-]{8,})")
_HEADER = re.compile(r"(?i)(authorization|x-api-key|api-key|api_key)(\"?\s*[:=]\s*\"?)[^\r\n\"',;&<>]*")


def known_keys(*keys: str | None) -> tuple[str, ...]:
    """The keys to remove: the ones given (the run's) and the operator's, from the environment, longest first
    (so that a key that contains another is removed whole)."""
    found = {k for k in (*keys, *(os.environ.get(name) for name in API_KEY_ENV)) if k}
    return tuple(sorted(found, key=len, reverse=True))


def key_forms(key: str) -> list[str]:
    """The texts a key can appear as: itself, URL-encoded, and base64 (standard and URL-safe, alone, as a Basic
    credential's user:key or key:, and the part of it that is the same wherever it starts in a longer base64)."""
    forms = {key, quote(key, safe=""), quote_plus(key)}
    raw = key.encode("utf-8", "surrogatepass")
    for wrapped in (raw, b":" + raw, raw + b":"):
        forms |= {base64.b64encode(wrapped).decode(), base64.urlsafe_b64encode(wrapped).decode()}
    for shift in range(3):  # the key at byte offset 0, 1 or 2 of a 3-byte group: its own characters in between
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        head = -(-shift * 4 // 3)  # characters that carry the padding's bits
        tail = (len(raw) + shift) % 3
        core = encoded[head: len(encoded) - (4 if tail else 0)]
        if len(core) >= MIN_BASE64_CHARS:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return sorted((f for f in forms if f), key=len, reverse=True)


def redact_text(text: str, keys: Iterable[str]) -> str:
    """`text` with every form of every key and every credential-looking value replaced by [redacted]."""
    for key in keys:
        for form in key_forms(key):
            text = text.replace(form, HIDDEN)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}", text)
    return _CREDENTIAL.sub(lambda m: f"{m.group(1) or m.group(2)} {HIDDEN}", text)


def redact(message: object, keys: Iterable[str] = ()) -> object:
    """A message cleaned for a visitor: a Said keeps its key with its values cleaned (a reason inside a reason
    too), an exception becomes its cleaned text, other text is cleaned, anything else is returned as it is.
    keys: the run's keys besides the operator's (known_keys adds those)."""
    keys = known_keys(*keys)
    return _clean(message, keys)


def _clean(message: object, keys: tuple[str, ...]) -> object:
    if isinstance(message, Said):
        return Said(message.key, {name: _clean(value, keys) for name, value in message.values.items()})
    if isinstance(message, BaseException):
        return _clean(str(message), keys)
    if isinstance(message, str):
        return redact_text(message, keys)
    return message
