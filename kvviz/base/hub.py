"""Reaching the Hugging Face Hub without hanging when it cannot be reached.

huggingface_hub retries a failed connection five times with back-off (about 25 s) before it
gives up. A user who typed a hub id on an offline machine deserves an answer at once, so this
module looks in the local cache first, then spends at most a few seconds finding out whether
the hub answers at all, and only then lets transformers download. It knows nothing of models.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from urllib.parse import urlparse

from kvviz.base.errors import KvvizError

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class HubUnreachable(KvvizError, RuntimeError):
    """The hub cannot be reached and what was asked for is not in the local cache."""


def looks_like_hub_id(text: str) -> bool:
    """True for 'org/name' or 'name' shaped strings (what the hub accepts as a repo id)."""
    return bool(_HUB_ID.match(text)) and ".." not in text and len(text) <= 96


def source_kind(spec: str) -> str | None:
    """What a model or config source names: "path", "hub" or None (neither). The one rule kvviz follows.

    A path is anything shaped like one (/x, ./x, ~/x, C:\\x, x\\y) or anything that exists on this
    machine, so a folder called gpt2 in the working directory is the folder, not the hub's gpt2.
    Everything else shaped like 'org/name' or 'name' is a hub id.
    """
    if spec.startswith(("/", ".", "~")) or "\\" in spec or re.match(r"[A-Za-z]:", spec):
        return "path"
    try:
        if Path(spec).expanduser().exists():
            return "path"
    except (OSError, ValueError):  # a name the file system cannot even look up: not a hub id either
        return None
    return "hub" if looks_like_hub_id(spec) else None


def offline_mode() -> bool:
    """True when the user asked huggingface_hub to stay offline (HF_HUB_OFFLINE=1)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether a TCP connection to the hub endpoint opens within timeout_s (DNS included)."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (443 if parsed.scheme != "http" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def from_hub(load, repo_id: str, what: str):
    """Call load(local_files_only=...) for a hub repo: cache first, then the network if it answers.

    `load` is a callable such as functools.partial(AutoConfig.from_pretrained, repo_id). Raises
    HubUnreachable with a one-line reason when the cache misses and the hub is out of reach.
    """
    try:
        return load(local_files_only=True)
    except OSError:
        pass  # not cached: try the network below
    if offline_mode():
        raise HubUnreachable("hub.offline", what=what, repo=repo_id)
    if not hub_reachable():
        raise HubUnreachable("hub.unreachable", what=what, repo=repo_id)
    return load(local_files_only=False)
