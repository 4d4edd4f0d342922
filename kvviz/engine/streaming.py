"""Incremental detokenization that never splits a character.

Byte-level tokenizers cut multi-byte UTF-8 characters (a Chinese character is three bytes) across
tokens, so decoding token by token yields U+FFFD replacement characters. This module holds text
back until it decodes whole, using the prefix/read offsets of text-generation-inference, so each
step decodes a few tokens rather than the whole output. It knows tokenizers, not models.
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


class TextStream:
    """put(token_id) returns the newly completed text (possibly ''); end() returns whatever is left."""

    def __init__(self, tokenizer, skip_special_tokens: bool = True) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix = 0  # start of the window decoded for context
        self._read = 0  # tokens whose text has been emitted

    def _decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=self._skip, clean_up_tokenization_spaces=False)

    def put(self, token_id: int) -> str:
        self._ids.append(token_id)
        before = self._decode(self._ids[self._prefix:self._read])
        after = self._decode(self._ids[self._prefix:])
        if len(after) > len(before) and not after.endswith(REPLACEMENT):
            self._prefix, self._read = self._read, len(self._ids)
            return after[len(before):]
        return ""

    def end(self) -> str:
        """Flush the held-back tail: a partial character the model really left unfinished."""
        before = self._decode(self._ids[self._prefix:self._read])
        after = self._decode(self._ids[self._prefix:])
        self._prefix = self._read = len(self._ids)
        return after[len(before):]
