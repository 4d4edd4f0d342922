"""kvviz's errors as data, and how an exception becomes a message a person reads.

An error kvviz raises is a KvvizError: a catalogue key and the values it names (InputError("input.text",
name="seed", value="'x'"); its key and values are a kvviz.i18n.Said), nothing parsed back from text. Its English
and Chinese live once, in the catalogues of kvviz/i18n (errors.py); str() of the error is the English, for logs,
the CLI and the API, and kvviz.i18n.errors.translate renders it in a person's language. The subclasses keep the
built-in type a caller catches (InputError is a ValueError, LoadError a RuntimeError, ...), so catching stays as
it was. tests/test_error_keys.py finds every place that builds one and checks its key renders in both languages.

Every boundary that reports a failure (the CLI, the app, the engine, the loaders, the benchmarks) calls
first_line, so a message is cut the same way everywhere. Nothing here knows what failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvviz.i18n import Said

MAX_MESSAGE_CHARS = 300  # longer than this, a message can only be echoing back what was sent


class KvvizError(Exception):
    """An error kvviz raises: a catalogue key and its values. str() is its English, a kvviz.i18n.Said that carries
    the key and values on (into an event's error, the worker's Failed, a log line), so that where a person reads
    it, it is rendered in their language."""

    def __init__(self, key: str, /, **values: Any) -> None:
        self.said = Said(key, values)
        super().__init__(self.said)

    @property
    def key(self) -> str:
        return self.said.key

    @property
    def values(self) -> Mapping[str, Any]:
        return self.said.values

    def __str__(self) -> Said:
        return self.said

    def __reduce__(self) -> tuple:
        # The default pickles args (the English text), which __init__ would read as a key: rebuild from the key.
        return _rebuilt, (type(self), self.key, dict(self.values))

    def recast(self, cls: type[KvvizError]) -> KvvizError:
        """The same key and values as another kind of kvviz error (an input check's refusal as a PolicyError)."""
        return cls(self.key, **self.values)


def _rebuilt(cls: type[KvvizError], key: str, values: dict[str, Any]) -> KvvizError:
    return cls(key, **values)


class InputError(KvvizError, ValueError):
    """A value from outside (the API, the page, the command line, a config) that kvviz does not take."""


class StateError(KvvizError, RuntimeError):
    """Something that went wrong while running, not because of what was asked: a run stopped, a process gone."""


def first_line(exc: BaseException, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The exception's first non-blank line, stripped and clipped to `limit`; its type's name when it has none.
    A kvviz error's one-line English comes back as it is: its Said, key and values kept."""
    message = str(exc)
    if isinstance(message, Said) and message.strip() == message and "\n" not in message and len(message) <= limit:
        return message
    line = next((line.strip() for line in message.splitlines() if line.strip()), type(exc).__name__)
    return clip(line, limit)


SHOWN_CHARS = 40  # what a message quotes of a value, at most (kvviz.base.inputs quotes through clip)


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """text cut to `limit` characters, with an ellipsis and the full length when it was longer."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"
