"""An endpoint's URL as a person types it, read one way (kvviz.base.urls.base_url)."""

from __future__ import annotations

import pytest

from kvviz.base.urls import base_url


@pytest.mark.parametrize("typed,expected", [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
    ("  http://127.0.0.1:8000/v1/  ", "http://127.0.0.1:8000"),
    ("https://api.example.com/openai/v1", "https://api.example.com/openai"),
    ("http://[::1]:8000/v1", "http://[::1]:8000"),
])
def test_the_same_server_reads_the_same_however_typed(typed, expected):
    """A trailing slash or /v1 and surrounding blanks do not make another server."""
    assert base_url(typed) == expected


@pytest.mark.parametrize("typed,message", [
    ("127.0.0.1:8000", "must be an http:// or https:// URL"),
    ("ftp://host/v1", "must be an http:// or https:// URL"),
    ("file:///etc/passwd", "must be an http:// or https:// URL"),
    ("http://", "must be an http:// or https:// URL"),
    ("http://user:secret@host:8000", "must carry no user:password@"),
    ("http://host:notaport", "must be an http:// or https:// URL"),
    ("http://" + "a" * 5000, "at most 2,048"),
    (None, "must be an http:// or https:// URL"),
])
def test_what_is_not_a_server_url_is_refused_in_one_line(typed, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        base_url(typed)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300
    assert "secret" not in str(caught.value), "a password in the URL is never echoed"
