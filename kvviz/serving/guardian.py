"""The guardian: a small process between kvviz and vLLM that stops vLLM's whole process group once kvviz is gone.

vLLM is an API server with an engine-core process and a worker under it; kvviz starts it in a process group of
its own so that one signal reaches them all. Handlers in kvviz stop that group on SIGTERM, SIGINT, SIGHUP, an
exception or a normal exit (kvviz.serving.vllm), but none runs when kvviz is killed with SIGKILL, crashes in
C, or dies of a signal it does not handle; vLLM would then keep serving with parent 1. So kvviz starts this
guardian, which starts vLLM:

    kvviz ──lifeline pipe──> guardian (own session) ──> vLLM (own session: process group = vLLM's pid)

kvviz holds the only write end of the lifeline, the guardian its read end. When kvviz closes it (kvviz.serving.
vllm.stop) or dies for any reason (the kernel closes a dead process's files), the read end reads EOF and the
guardian stops vLLM's group: SIGTERM, then SIGKILL after a grace period, then it exits. The grace is long once
kvviz has written READY_BYTE on the lifeline (vLLM answers: let it drain and exit, about 2 s) and short before:
a vLLM still importing or loading has nothing to drain, and its engine core defers SIGTERM until its
construction ends (vllm/v1/engine/core.py), a minute on a small CPU: that is why vLLM seemed to ignore it.
The guardian also stops the group when its parent changes (a child forked from kvviz without exec would
inherit the write end and hold the pipe open past kvviz's death; this check does not depend on the pipe),
when it is sent SIGTERM, SIGINT or SIGHUP itself, and when vLLM's server exits by itself (its engine core may
linger). It is a child subreaper, so vLLM's processes orphaned by their parent's death come to it and it reaps
them: no zombie is left to look like a live member of the group, whoever PID 1 is. Being in sessions of their
own, neither the guardian nor vLLM gets a terminal's Ctrl-C or hang-up: kvviz gets it and decides.

Why not PR_SET_PDEATHSIG on vLLM instead: it reaches only the direct child (the API server), not its engine
core and worker; it fires when the *thread* that forked exits (kvviz's app starts vLLM from a worker thread);
and its SIGTERM is what a starting vLLM defers. The guardian reaches the whole group and escalates to SIGKILL.
It is not itself protected against SIGKILL: nothing kills it but someone who names its pid.

Standard library only, run as a script (`python guardian.py --lifeline-fd N --grace S --starting-grace S2 --
vLLM's command`) so that it starts in milliseconds. It writes vLLM's pid on its stdout once vLLM started, its
own notes on stderr (kvviz points its stderr, and so vLLM's output, at vLLM's log), and exits with vLLM's exit
status (128 + the signal for a signal). Knows processes, not vLLM.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import time

KILL_WAIT_S = 5.0  # after SIGKILL a process is gone at once; this only bounds a stuck kernel
POLL_S = 0.1
LIFELINE_SETTLE_S = 2.0  # how long the lifeline may trail a parent change (kvviz's last thread still closing it)
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
GUARDIAN_NOTE = "[kvviz guardian"  # how the guardian's notes in vLLM's log begin
READY_BYTE = b"r"  # the one message kvviz writes on the lifeline: vLLM answers, give it the ready grace
LIFELINE_CLOSED = "kvviz closed the lifeline (stopped, or ended)"


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still exists (a zombie not yet reaped counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of the group exists, owned by someone else
        return True
    return True


def stop_group(pgid: int, grace_s: float, note=lambda text: None, reap=lambda: None) -> bool:
    """End process group `pgid`: SIGTERM, then SIGKILL if it is still there after grace_s. True when it is gone.
    reap: called while waiting, by a parent of group members, so that a dead child is not counted as alive."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, KILL_WAIT_S)):
        reap()
        if not group_alive(pgid):
            return True
        note(f"sending {signal.Signals(sig).name} to vLLM's process group {pgid}")
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            reap()
            if not group_alive(pgid):
                return True
            time.sleep(POLL_S)
    reap()
    return not group_alive(pgid)


class Children:
    """This process's children as a subreaper sees them: vLLM's server, and any of its processes orphaned here."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.server_status: int | None = None  # os.waitstatus_to_exitcode's: -signal for a signal

    def reap(self) -> None:
        """Reap every child that has ended, keeping the server's status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.server_pid:
                self.server_status = os.waitstatus_to_exitcode(status)


def become_subreaper() -> None:
    """Orphaned descendants come to this process instead of PID 1 (Linux; elsewhere nothing happens)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def read_lifeline(fd: int, timeout_s: float) -> bytes | None:
    """What the lifeline's read end gives within timeout_s: b"" at EOF (every write end closed), READY_BYTE
    when kvviz says vLLM is ready, None if nothing came."""
    readable, _, _ = select.select([fd], [], [], timeout_s)
    return os.read(fd, 1) if readable else None


def exit_status(returncode: int | None) -> int:
    """An exit code (-signal for a signal) as a process exit status: 128 + the signal, 0 if it never ended."""
    if returncode is None:
        return 0
    return 128 - returncode if returncode < 0 else returncode


class Watch:
    """Why the guardian should stop vLLM now, if it should: one reason, or None."""

    def __init__(self, lifeline_fd: int) -> None:
        self.lifeline_fd = lifeline_fd
        self.parent = os.getppid()
        self.signalled: int | None = None
        self.children: Children | None = None
        self.ready = False  # kvviz saw vLLM answer /health

    def on_signal(self, signum: int, frame) -> None:
        self.signalled = signum

    def reason(self) -> str | None:
        # The lifeline first: kvviz's stop closes it and sends SIGTERM at once, and a READY_BYTE written before
        # must still count.
        got = read_lifeline(self.lifeline_fd, POLL_S)
        self.ready = self.ready or got == READY_BYTE
        if self.signalled is not None:
            return f"the guardian got {signal.Signals(self.signalled).name}"
        if got == b"":
            return LIFELINE_CLOSED
        if os.getppid() != self.parent:
            return self.why_parent_changed()
        if self.children is not None:
            self.children.reap()
            if self.children.server_status is not None:
                return f"vLLM's server exited ({self.children.server_status})"
        return None

    def why_parent_changed(self) -> str:
        """kvviz is gone. A kvviz of several threads can hand its children to a new parent before its last
        thread closes the lifeline's write end, so the lifeline gets a moment to say so; only a write end held
        elsewhere (a child forked without exec) leaves the new parent as the reason."""
        got = read_lifeline(self.lifeline_fd, LIFELINE_SETTLE_S)
        self.ready = self.ready or got == READY_BYTE
        if got == b"":
            return LIFELINE_CLOSED
        return "kvviz is gone (the guardian has a new parent)"


def note(text: str) -> None:
    print(f"{GUARDIAN_NOTE} {os.getpid()}] {text}", file=sys.stderr, flush=True)


def report_pid(pid: int) -> None:
    """vLLM's pid on stdout for kvviz, which then closes its end; a kvviz already gone is not an error here
    (the watch sees it next)."""
    try:
        print(pid, flush=True)
        sys.stdout.close()
    except OSError:
        pass


def guard(command: list[str], lifeline_fd: int, grace_s: float, starting_grace_s: float) -> int:
    """Start `command` in a session of its own, report its pid, and stop its group when a Watch reason comes:
    SIGTERM, then SIGKILL after grace_s once kvviz said it is ready, after starting_grace_s before."""
    become_subreaper()
    watch = Watch(lifeline_fd)
    # Set before vLLM starts, so that no stop signal is missed; exec gives vLLM back the default handlers.
    for sig in STOP_SIGNALS:
        signal.signal(sig, watch.on_signal)
    # stdout is kvviz's pipe for the pid; vLLM writes where this process writes its notes (vLLM's log).
    # Popen only starts it: its status is read by Children.reap, which reaps whatever ends under this subreaper.
    server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(),  # noqa: S603
                              stderr=sys.stderr.fileno(), start_new_session=True)
    watch.children = children = Children(server.pid)
    report_pid(server.pid)
    reason = None
    while reason is None:
        reason = watch.reason()
    note(f"{reason}: stopping vLLM")
    for sig in STOP_SIGNALS:  # the stop is under way and ends by itself
        signal.signal(sig, signal.SIG_IGN)
    gone = stop_group(server.pid, grace_s if watch.ready else starting_grace_s, note, children.reap)
    note("vLLM's process group is gone" if gone else "vLLM's process group is still there after SIGKILL")
    return exit_status(children.server_status)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="start a command in its own process group; stop the group when "
                                            "the lifeline pipe closes or the parent is gone")
    p.add_argument("--lifeline-fd", type=int, required=True)
    p.add_argument("--grace", type=float, required=True, help="seconds between SIGTERM and SIGKILL once ready")
    p.add_argument("--starting-grace", type=float, required=True, help="the same while the command starts (until "
                   "the lifeline brings READY_BYTE)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command to guard")
    return guard(command, args.lifeline_fd, args.grace, args.starting_grace)


if __name__ == "__main__":
    sys.exit(main())
