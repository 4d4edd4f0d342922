"""The prompts a load sends: synthetic ones of a chosen length in tokens, or a file of prompts.

A synthetic prompt is made of random common words, seeded, different for every request (so a server's
prefix cache finds nothing to share unless asked to). With the model's tokenizer (a local folder kvviz
can read with transformers) its length is counted exactly as the server will count it; without one it is
an estimate, about one token per word, and Prompt.counted says so. Files: .txt (one prompt per line) or
.jsonl (one object per line with "prompt" or "text"). Knows no HTTP and no server.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.inputs import clip, whole_number

WORDS = ("the time people year way day thing world life hand part child eye place work week case point "
         "number group problem fact water room mother area money story month lot right study book job word "
         "business issue side kind head house service friend father power hour game line end member law car "
         "city name team minute idea body back parent face others level office door health person art war "
         "history party result change morning reason research girl guy moment air teacher force education").split()
MAX_PROMPT_TOKENS = 100_000
MAX_PROMPTS = 100_000


@dataclass(frozen=True)
class Prompt:
    """One prompt; tokens: its length as the tokenizer counts it (counted) or as estimated (not counted)."""

    text: str
    tokens: int | None
    counted: bool


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _exact(tokenizer, rng: random.Random, n: int, prefix: str = "") -> str:
    """Text that opens with `prefix` and that the tokenizer encodes (as a server does, special tokens included)
    into exactly n tokens."""
    special = len(tokenizer("").input_ids)  # a BOS the server will add too
    room = max(n - special - len(tokenizer(prefix, add_special_tokens=False).input_ids), 0)
    seam = " " if prefix else ""  # a word boundary after the prefix, so its last token stays as it was
    text = prefix + seam + tokenizer.decode(
        tokenizer(_words(rng, 2 * room + 8), add_special_tokens=False).input_ids[:room])
    for _ in range(4):  # decoding then encoding may merge or split a token at the seams: trim or pad the end
        got = len(tokenizer(text).input_ids)
        if got == n:
            break
        text = tokenizer.decode(tokenizer(text, add_special_tokens=False).input_ids[: max(n - special, 0)]) \
            if got > n else text + " " + _words(rng, n - got)
    return text


def synthetic(count: int, tokens: int, tokenizer=None, seed: int = 0, shared_prefix: int = 0) -> list[Prompt]:
    """`count` different prompts of `tokens` tokens each, counted with `tokenizer` when there is one. With
    shared_prefix, every prompt opens with the same text of about that many tokens (a system prompt, a
    document asked about) and only the rest differs: the workload a server's prefix cache is for."""
    whole_number(count, "the number of prompts", 1, MAX_PROMPTS)
    whole_number(tokens, "prompt tokens", 1, MAX_PROMPT_TOKENS)
    whole_number(shared_prefix, "shared prefix tokens", 0, tokens - 1)
    rng = random.Random(seed)
    prefix = _words(random.Random(seed + 1), shared_prefix) + " " if shared_prefix else ""
    rest = tokens - shared_prefix
    if tokenizer is None:
        return [Prompt(prefix + _words(rng, rest), tokens, counted=False) for _ in range(count)]
    if prefix:  # the prefix's exact text, as the tokenizer cuts it, without the special tokens it adds
        prefix = tokenizer.decode(tokenizer(prefix, add_special_tokens=False).input_ids[:shared_prefix])
    out = []
    for _ in range(count):
        text = _exact(tokenizer, rng, tokens, prefix)
        out.append(Prompt(text, len(tokenizer(text).input_ids), counted=True))
    return out


def from_file(path: str | Path, tokenizer=None) -> list[Prompt]:
    """The prompts of a .txt (one per line) or .jsonl file ("prompt" or "text" per object); ValueError in one
    line for a file that is missing, empty, or not what its name says."""
    path = Path(path)
    if not path.is_file():
        raise InputError("prompts.no_file", path=clip(str(path), 200))
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:MAX_PROMPTS]
    texts = [_jsonl_text(line, n) for n, line in enumerate(lines, 1)] if path.suffix == ".jsonl" else lines
    if not texts:
        raise InputError("prompts.empty", name=path.name)
    if tokenizer is None:
        return [Prompt(t, len(t.split()), counted=False) for t in texts]
    return [Prompt(t, len(tokenizer(t).input_ids), counted=True) for t in texts]


def _jsonl_text(line: str, n: int) -> str:
    try:
        obj = json.loads(line)
    except ValueError:
        raise InputError("prompts.not_json", n=n, line=clip(line)) from None
    text = obj.get("prompt", obj.get("text")) if isinstance(obj, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise InputError("prompts.no_text", n=n)
    return text


def load_tokenizer(folder: str | Path | None):
    """The tokenizer of a local model folder, or None when there is none to read (the caller estimates)."""
    if folder is None or not (Path(folder) / "tokenizer_config.json").is_file():
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
