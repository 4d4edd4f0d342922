"""What an HTTP server's address is, as a person types it: the one rule for reading an endpoint's URL.

"http://host:8000/v1/" and "http://host:8000" name the same OpenAI-compatible server; both read as
"http://host:8000". The serving client builds its requests from that form, and a hosted demo compares a
visitor's URL with the operator's list in that form, so the two can never disagree. Knows URLs only.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from kvviz.base.errors import InputError
from kvviz.base.inputs import clip

MAX_URL_CHARS = 2_048


def base_url(url: object) -> str:
    """The server's base URL (scheme://host[:port][/path], without a trailing / or /v1); ValueError in one line
    for anything that is not an http:// or https:// URL with a host."""
    text = str(url).strip()
    if len(text) > MAX_URL_CHARS:
        raise InputError("url.too_long", n=len(text), most=MAX_URL_CHARS)
    text = text.rstrip("/")
    if text.endswith("/v1"):
        text = text[: -len("/v1")]
    try:
        parts = urlsplit(text)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        host = None
    if host and (parts.username or parts.password):  # not echoed: it may hold a secret
        raise InputError("url.credentials")
    if parts.scheme not in ("http", "https") or not host:
        raise InputError("url.not_http", url=clip(text))
    return text
