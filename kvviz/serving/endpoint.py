"""Where a load goes: an OpenAI-compatible server's address, the model it serves, which API, and the key.

Owns the one error type every serving failure becomes (EndpointError: one line a person reads, never a
traceback) and the rule for API keys: they come from an argument or an environment variable, live only in
the request headers, and are never part of a repr, a log line or a result. Knows nothing of how requests
are timed or what the server is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kvviz.base.errors import InputError, KvvizError
from kvviz.base.inputs import choice
from kvviz.base.urls import base_url as normalized_url

COMPLETIONS = "completions"
CHAT = "chat"
APIS = {COMPLETIONS: "/v1/completions", CHAT: "/v1/chat/completions"}
API_KEY_ENV = ("KVVIZ_API_KEY", "OPENAI_API_KEY")  # read in this order when no key is given


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


def api_key_from_env() -> str | None:
    """The first of KVVIZ_API_KEY, OPENAI_API_KEY that is set and not empty."""
    return next((os.environ[name] for name in API_KEY_ENV if os.environ.get(name)), None)


def endpoint(base_url: str, model: str, api: str = COMPLETIONS, api_key: str | None = None) -> Endpoint:
    """The Endpoint for a URL as a person types it (with or without a trailing /v1); ValueError in one line."""
    url = normalized_url(base_url)
    if not str(model).strip():
        raise InputError("endpoint.no_model")
    return Endpoint(url, str(model).strip(), choice(api, "API", APIS), api_key or api_key_from_env())
