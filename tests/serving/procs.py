"""Processes found by a tag in their environment: how the tests see whether anything kvviz started outlives it.

A test puts KVVIZ_TEST_TAG=<a fresh tag> in the environment of the process it starts; every process started
under it inherits the variable (kvviz passes its environment to the guardian and to vLLM, vLLM to its engine
core and workers), whatever process group or session it moves to. So `tagged` finds them from /proc/*/environ,
independently of the process groups that kvviz itself relies on to stop them. A zombie has no environment to
read: it has ended, and is not counted.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TAG_VAR = "KVVIZ_TEST_TAG"


@dataclass(frozen=True)
class Proc:
    """One live process: its ids, its state letter (R, S, D...), its command line."""

    pid: int
    ppid: int
    pgid: int
    state: str
    cmdline: str


def new_tag() -> str:
    return uuid.uuid4().hex


def tagged(tag: str) -> list[Proc]:
    """Every live process whose environment holds KVVIZ_TEST_TAG=tag."""
    mark = f"{TAG_VAR}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            # fields after the command name, which may hold spaces and parentheses: state ppid pgrp ...
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # it ended while being read, or is not ours to read
            continue
        if fields[0] != "Z":
            found.append(Proc(int(entry.name), int(fields[1]), int(fields[2]), fields[0], cmdline))
    return found


def wait_for(condition: Callable[[], object], timeout_s: float, what: str | Callable[[], str]) -> object:
    """condition()'s first true value within timeout_s (polled every 0.2 s); AssertionError naming `what` (or
    what it returns, called then: a process's output so far)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s:g} s: {what() if callable(what) else what}")


def left_after(tag: str, timeout_s: float) -> list[Proc]:
    """The tagged processes still alive after waiting up to timeout_s for them all to end ([] once they have)."""
    deadline = time.monotonic() + timeout_s
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def kill_tagged(tag: str) -> None:
    """SIGKILL whatever still carries the tag (never this process): a failed test leaves nothing running."""
    for proc in tagged(tag):
        if proc.pid == os.getpid():
            continue
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
