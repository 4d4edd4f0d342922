"""The one redaction step (kvviz.serving.redact) and the key check (kvviz.serving.endpoint.check_key): every form
a known key can take in a server's text is removed, Authorization values too, a Said keeps its key; a key that
cannot be an HTTP header value is refused naming the field, never showing the key. Forms are built here with the
standard library (base64, urllib), independently of the module's own list."""

from __future__ import annotations

import base64
from urllib.parse import quote, quote_plus

import pytest

from kvviz.base.errors import InputError
from kvviz.i18n import Said, said
from kvviz.serving.endpoint import Endpoint, api_key_from_env, check_key, endpoint
from kvviz.serving.redact import HIDDEN, redact

KEY = "sk-live/Abc+def=ghi_0123456789"


def _b64_inside(prefix: bytes) -> str:
    """The key encoded as part of a longer text (a JSON body, a header dump), starting `prefix` bytes in."""
    return base64.b64encode(prefix + KEY.encode() + b'", "more": 1}').decode()


@pytest.mark.parametrize("text", [
    f"bad key {KEY}", f"key={quote(KEY, safe='')}", f"key={quote_plus(KEY)}",
    base64.b64encode(KEY.encode()).decode(), base64.urlsafe_b64encode(KEY.encode()).decode(),
    "Basic " + base64.b64encode(f"user:{KEY}".encode()).decode(), _b64_inside(b'{"k": "'),
    _b64_inside(b'{"k": "x'), _b64_inside(b'{"k": "xy'),
])
def test_every_form_of_a_key_is_removed(text, monkeypatch):
    monkeypatch.delenv("KVVIZ_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cleaned = redact(text, (KEY,))
    assert HIDDEN in cleaned
    for form in (KEY, quote(KEY, safe=""), base64.b64encode(KEY.encode()).decode()[:-4]):
        assert form not in cleaned, cleaned
    # what is left of a base64 text says nothing of the key: at most a few characters at its edges
    assert not any(part in cleaned for part in (KEY[4:12], base64.b64encode(KEY.encode()).decode()[4:16]))


def test_the_operators_key_is_removed_without_being_named(monkeypatch):
    monkeypatch.setenv("KVVIZ_API_KEY", KEY)
    assert redact(f"echo: {KEY}") == f"echo: {HIDDEN}"


@pytest.mark.parametrize("text", ["Authorization: Bearer sk-unknown-to-kvviz", "authorization=Basic dXNlcjpwYXNz",
                                  '{"Authorization": "token abc"}', "sent Bearer sk-unknown-to-kvviz"])
def test_authorization_values_are_removed_whoever_they_belong_to(text):
    cleaned = redact(text)
    assert "sk-unknown" not in cleaned and "dXNlcjpwYXNz" not in cleaned and "abc" not in cleaned, cleaned


def test_a_said_stays_a_said_with_its_values_cleaned(monkeypatch):
    monkeypatch.setenv("KVVIZ_API_KEY", KEY)
    message = said("serving.failed", why=said("http.refused", status=401, why=f"bad {KEY}"))
    cleaned = redact(message)
    assert isinstance(cleaned, Said) and cleaned.key == "serving.failed"
    assert cleaned == f"HTTP 401: bad {HIDDEN}" and KEY not in cleaned.render("zh")


def test_ordinary_text_is_left_as_it_is():
    text = "basic idea: token 5 of 10, Bearer of news is 'x'"
    assert redact("no complete answer within the request timeout (4 s)") == \
        "no complete answer within the request timeout (4 s)"
    assert redact(text).startswith("basic idea: token 5 of 10")


CONTROL, NON_ASCII = "a control character", "a character outside ASCII"


@pytest.mark.parametrize(("key", "what"), [("sk-a\r\nX-Injected: 1", CONTROL), ("sk-a\nb", CONTROL),
                                           ("sk-a\x00b", CONTROL), ("sk-a\x7fb", CONTROL), ("sk-ключ", NON_ASCII)])
def test_a_key_that_cannot_be_a_header_is_refused_naming_the_field(key, what):
    for attempt in (lambda: check_key(key), lambda: endpoint("http://127.0.0.1:1", "m", api_key=key),
                    lambda: Endpoint("http://127.0.0.1:1", "m", api_key=key)):
        with pytest.raises(InputError) as info:
            attempt()
        message = str(info.value)
        assert message.startswith("the API key must be printable ASCII text") and what in message, message
        assert key not in message and "X-Injected" not in message and "ключ" not in message


def test_a_bad_operator_key_is_refused_naming_its_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("KVVIZ_API_KEY", "sk-a\r\nb")
    with pytest.raises(InputError, match=r"^KVVIZ_API_KEY must be printable ASCII text"):
        api_key_from_env()
    monkeypatch.setenv("KVVIZ_API_KEY", "sk-good key")  # a space is a header value's character
    assert api_key_from_env() == "sk-good key"
