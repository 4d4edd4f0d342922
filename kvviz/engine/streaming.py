"""Incremental detokenization that never splits a character.

Byte-level tokenizers cut multi-byte UTF-8 characters (a Chinese character is three bytes) across
tokens, so decoding token by token yields U+FFFD replacement characters. This module holds text
back until it decodes whole, using the prefix/read offsets of text-generation-inference, so each
step decodes a few tokens rather than the whole output. A run that stops (max_new_tokens, Stop) between the
bytes of one character leaves bytes that no later token completes: they are not text, and the finished text
drops them (whole_text) rather than end in U+FFFD. It knows tokenizers, not models.
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def whole_text(text: str) -> str:
    """`text` without the U+FFFD a decoding ends in when its last character's bytes were cut off. Bytes that
    form no character anywhere decode to U+FFFD too; those at the very end go with the cut ones, as no later
    byte can make them text either."""
    return text.rstrip(REPLACEMENT)


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
        """Flush the held-back tail, less the bytes of a character the run stopped inside (no token will
        complete it, as transformers' TextStreamer would wait for one)."""
        before = self._decode(self._ids[self._prefix:self._read])
        after = self._decode(self._ids[self._prefix:])
        self._prefix = self._read = len(self._ids)
        return whole_text(after[len(before):])
