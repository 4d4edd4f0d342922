"""Where a load goes: an OpenAI-compatible server's address, the model it serves, which API, and the key.

Owns the one error type every serving failure becomes (EndpointError: one line a person reads, never a
traceback) and the rule for API keys: they come from an argument or an environment variable, live only in
the request headers, and are never part of a repr, a log line or a result. A key is checked as an HTTP header
value before anything is sent (printable ASCII: no CR, LF, NUL or other control character), refused in a line
that names the field and never shows the key. Knows nothing of how requests are timed or what the server is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kvviz.base.errors import InputError, KvvizError
from kvviz.base.inputs import choice
from kvviz.base.urls import base_url as normalized_url
from kvviz.i18n import Said, said
from kvviz.serving.redact import API_KEY_ENV

COMPLETIONS = "completions"
CHAT = "chat"
APIS = {COMPLETIONS: "/v1/completions", CHAT: "/v1/chat/completions"}


class EndpointError(KvvizError, RuntimeError):
    """An endpoint that cannot be used as asked: unreachable, refused, not streaming, not Prometheus text...
    Its message is one line, fit to show as it is."""


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible server: base_url without /v1 (http://127.0.0.1:8011), the served model's name,
    the API to call (completions or chat) and the key (kept out of repr; None for none)."""

    base_url: str
    model: str
    api: str = COMPLETIONS
    api_key: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.api_key is not None:
            check_key(self.api_key)

    @property
    def url(self) -> str:
        return self.base_url + APIS[self.api]

    @property
    def metrics_url(self) -> str:
        return self.base_url + "/metrics"

    @property
    def health_url(self) -> str:
        return self.base_url + "/health"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def describe(self) -> dict[str, str | bool]:
        """What a result may record about the endpoint: never the key, only whether there was one."""
        return {"url": self.base_url, "model": self.model, "api": self.api, "api_key": bool(self.api_key)}


def check_key(key: object, field_name: str = "the API key") -> str:
    """key if it can go in an Authorization header as it is (RFC 9110 field values: visible ASCII and spaces);
    InputError naming `field_name` and what is wrong otherwise, never the key itself."""
    if not isinstance(key, str):
        raise InputError("endpoint.key_not_header_safe", field=field_name, what=said("endpoint.key_not_text"))
    wrong = _unsafe(key)
    if wrong is not None:
        raise InputError("endpoint.key_not_header_safe", field=field_name, what=wrong)
    return key


def _unsafe(key: str) -> Said | None:
    """What makes a key unfit for a header, or None."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        return said("endpoint.key_control")
    if not key.isascii():
        return said("endpoint.key_non_ascii")
    return None


def api_key_from_env() -> str | None:
    """The first of KVVIZ_API_KEY, OPENAI_API_KEY that is set and not empty (checked as a header value: a bad
    one is refused naming the variable)."""
    for name in API_KEY_ENV:
        if os.environ.get(name):
            return check_key(os.environ[name], name)
    return None


def endpoint(base_url: str, model: str, api: str = COMPLETIONS, api_key: str | None = None) -> Endpoint:
    """The Endpoint for a URL as a person types it (with or without a trailing /v1); ValueError in one line."""
    url = normalized_url(base_url)
    if not str(model).strip():
        raise InputError("endpoint.no_model")
    key = check_key(api_key) if api_key else api_key_from_env()
    return Endpoint(url, str(model).strip(), choice(api, "API", APIS), key)
