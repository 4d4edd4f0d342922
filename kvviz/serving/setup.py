"""vLLM's environment, built: a virtual environment, pip's install, (CPU) the CUDA-built extras out, an import check.

The one build the CLI's `setup` and the Serving tab's button both run (SetupJob, on a thread of its own): it says
what it is doing from pip's own output (the package collected or downloaded, how many) and, while pip installs
silently, from the packages that have landed in the venv (k of n); it can be stopped (pip runs in a process group
of its own, which is ended whole); one build per environment at a time, across processes (a lock on its log file
beside the venv); a failure is one line with pip's last words (redacted) and the log's path. A venv this build
made is marked half-built (MARKER) until its import check passes: stopped or failed, what it made is removed, and
one left behind by a killed process is cleared by the next build and is not taken for an environment
(environment_ready). What is installed is a Recipe, so the same machinery installs anything (the tests install a
small local wheel with --no-index). Knows venvs, pip and processes; nothing of pages or of serving.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kvviz.i18n import Said, said
from kvviz.serving.guardian import stop_group
from kvviz.serving.redact import known_keys, redact_text
from kvviz.serving.vllm import (
    BREAKS_CPU_IMPORT,
    CPU_PACKAGE,
    GPU_PACKAGE,
    MARKER,
    VllmError,
    environment_ready,
    has_cuda_gpu,
)

VENV_STEP, INSTALL, REMOVE, CHECK = "venv", "install", "remove", "check"  # the steps, in order
DONE, FAILED, STOPPED = "done", "failed", "stopped"  # how a build ends
STOPPING = "stopping"
VLLM_CHECK = "import vllm, vllm.entrypoints.openai.api_server; print('vllm', vllm.__version__)"
STOP_GRACE_S = 5.0  # pip has nothing to save: SIGTERM, then SIGKILL
TAIL_LINES = 2  # pip's last words quoted in a failure's line
TAIL_CHARS = 200
# pip's lines (23.x-25.x) that say what it is doing
_COLLECTING = re.compile(r"^Collecting (\S+)")
_DOWNLOADING = re.compile(r"^\s+Downloading \S+ \((.+)\)")
_PROCESSING = re.compile(r"^Processing (\S+)")  # a local file: its name begins with the package's
_INSTALLING = re.compile(r"^Installing collected packages: (.+)$")
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Recipe:
    """What a build installs in `venv`: pip's requirements and options (an index, --no-index --find-links ...),
    the packages removed after (vLLM's CPU build: the CUDA-built extras), and Python code run in the venv to check
    the result (it must exit 0)."""

    venv: Path
    requirements: tuple[str, ...]
    pip_options: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    check: str = VLLM_CHECK


def vllm_recipe(venv: Path, gpu: bool | None = None) -> Recipe:
    """vLLM's environment: the CUDA build if gpu, else the CPU build less its CUDA-built extras (None: whichever
    this machine needs)."""
    gpu = has_cuda_gpu() if gpu is None else gpu
    return Recipe(Path(venv), (GPU_PACKAGE if gpu else CPU_PACKAGE,), remove=() if gpu else BREAKS_CPU_IMPORT)


@dataclass(frozen=True)
class Step:
    phase: str
    argv: tuple[str, ...]


def steps(recipe: Recipe) -> list[Step]:
    """The commands of a build, in order: the venv, pip's install, the removals (if any), the check."""
    python = str(recipe.venv / "bin" / "python")
    pip = (python, "-m", "pip")
    quiet = ("--disable-pip-version-check", "--no-input")
    found = [Step(VENV_STEP, (sys.executable, "-m", "venv", str(recipe.venv))),
             Step(INSTALL, (*pip, "install", *quiet, "--progress-bar", "off", *recipe.pip_options,
                            *recipe.requirements))]
    if recipe.remove:
        found.append(Step(REMOVE, (*pip, "uninstall", *quiet, "-y", *recipe.remove)))
    return [*found, Step(CHECK, (python, "-c", recipe.check))]


def log_path(venv: Path) -> Path:
    """The build's log, beside the venv (it outlives a venv removed after a failure)."""
    return Path(venv).parent / f"{Path(venv).name}-setup.log"


def canonical(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503): lower case, runs of -_. as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class SetupProgress:
    """Where a build stands: its phase (a step, or how it ended), seconds since it began, the package pip is on,
    how many it has collected (resolving and downloading) or installed, of how many (once pip said), and the
    environment's size once done."""

    phase: str
    elapsed_s: float
    venv: Path
    package: str | None = None
    count: int = 0
    total: int | None = None
    size: str | None = None  # what pip said it downloads ("190.5 MB"), or the finished venv's size
    installing: bool = False

    def line(self) -> Said:
        """One line a person reads, in English (kvviz.i18n.errors.translate renders it in theirs)."""
        s = f"{self.elapsed_s:.0f}"
        if self.phase == VENV_STEP:
            return said("vllm.setup.venv", venv=self.venv, s=s)
        if self.phase == INSTALL and self.installing and self.package is None:
            return said("vllm.setup.installed", count=self.count, total=self.total or 0, s=s)
        if self.phase == INSTALL and self.installing:
            return said("vllm.setup.installing", package=self.package, count=self.count, total=self.total or 0,
                        s=s)
        if self.phase == INSTALL and self.size:
            return said("vllm.setup.downloading", package=self.package or "", size=self.size, count=self.count, s=s)
        if self.phase == INSTALL and self.package:
            return said("vllm.setup.collecting", package=self.package, count=self.count, s=s)
        if self.phase == INSTALL:
            return said("vllm.setup.pip_starting", s=s)
        if self.phase == REMOVE:
            return said("vllm.setup.removing", packages=self.package or "", s=s)
        if self.phase == CHECK:
            return said("vllm.setup.check", s=s)
        if self.phase == DONE:
            return said("vllm.setup.done", venv=self.venv, s=s, size=self.size or "")
        if self.phase == STOPPING:
            return said("vllm.setup.stopping", s=s)
        if self.phase == STOPPED:
            return said("vllm.setup.stopped", venv=self.venv)
        return said("vllm.setup.ended", s=s)  # FAILED: the job's error says why


@dataclass
class _PipWatch:
    """What pip's output has said so far (the install step's)."""

    package: str | None = None
    collected: int = 0
    size: str | None = None
    to_install: list[str] = field(default_factory=list)

    def feed(self, line: str) -> None:
        if m := _COLLECTING.match(line):
            self._collected(m.group(1))
        elif m := _PROCESSING.match(line):
            self._collected(Path(m.group(1)).name.split("-")[0])
        elif m := _DOWNLOADING.match(line):
            self.size = m.group(1)
        elif m := _INSTALLING.match(line):
            self.to_install = [p.strip() for p in m.group(1).split(",") if p.strip()]

    def _collected(self, requirement: str) -> None:
        name = _NAME.match(requirement)
        self.package, self.size = (name.group(1) if name else requirement), None
        self.collected += 1


def installed_so_far(to_install: list[str], before: set[str], now: set[str]) -> tuple[int, str | None]:
    """(how many of the packages pip said it installs have landed, the first that has not: the one pip is on, None
    when all have), from the venv's metadata folders before the step and now."""
    landed = {canonical(folder.split("-")[0]) for folder in now - before}
    done = [p for p in to_install if canonical(p) in landed]
    return len(done), next((p for p in to_install if canonical(p) not in landed), None)


def _dist_infos(venv: Path) -> set[str]:
    """The distributions installed in `venv` now, as their metadata folders' names (name-version.dist-info: an
    upgrade, as of setuptools, is a new folder)."""
    return {p.name for p in Path(venv).glob("lib/python*/site-packages/*.dist-info")}


def size_text(n_bytes: int) -> str:
    """A venv's size as a person reads it: GB (10^9 bytes) with one decimal, or whole MB below 1 GB."""
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:,.0f} MB"


def _tree_bytes(folder: Path) -> int:
    """The folder's apparent size as `du -sb` counts it: every file, folder and link (its own size, not its
    target's)."""
    return Path(folder).lstat().st_size + sum(p.lstat().st_size for p in Path(folder).rglob("*"))


class SetupJob:
    """One build of one environment on a thread of its own: start(), progress() from any thread, stop(), wait().
    error: the VllmError it failed with (one line), once it has."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.venv = Path(recipe.venv)
        self.log = log_path(self.venv)
        self.error: VllmError | None = None
        self.seconds: float | None = None
        self._lock = threading.Lock()
        self._phase = VENV_STEP
        self._pip = _PipWatch()
        self._before: set[str] = set()
        self._size: str | None = None
        self._started = time.monotonic()
        self._ended: float | None = None
        self._process: subprocess.Popen | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        # Set once the build has ended and cleaned up. Waited on rather than the thread: a signal's exception
        # raised inside Thread.join (Ctrl-C, the CLI's SIGTERM) marks the thread ended in Python 3.11, and a
        # second join returned at once, leaving the clean-up cut off by the process's exit.
        self._ended_event = threading.Event()
        self._log_file: IO[str] | None = None
        self._ours = False  # whether this build made the venv (and removes it if it does not finish)

    # --- the caller's side ---
    def start(self) -> SetupJob:
        """Take the environment's lock and begin; VllmError in one line when another build holds it or the folder
        is neither empty, nor a venv, nor one a build left half-made."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log, "a+", encoding="utf-8")  # held (and its lock) until the build ends
        try:
            fcntl.flock(log, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.close()
            raise VllmError("vllm.setup_busy", venv=self.venv, log=self.log) from None
        try:
            self._ours = self._prepare()
        except BaseException:
            log.close()
            raise
        log.truncate(0)
        self._log_file = log
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True, name="vllm-setup")
        self._thread.start()
        return self

    def progress(self) -> SetupProgress:
        with self._lock:
            phase, pip, before = self._phase, self._pip, self._before
            elapsed = (self._ended or time.monotonic()) - self._started
        common = {"phase": phase, "elapsed_s": elapsed, "venv": self.venv}
        if phase == DONE:
            return SetupProgress(**common, size=self._size)
        if phase == REMOVE:
            return SetupProgress(**common, package=", ".join(self.recipe.remove))
        if phase != INSTALL:
            return SetupProgress(**common)
        if pip.to_install:  # pip installs them in this order, silently: what has landed says how far it is
            count, current = installed_so_far(pip.to_install, before, _dist_infos(self.venv))
            return SetupProgress(**common, package=current, count=count, total=len(pip.to_install),
                                 installing=True)
        return SetupProgress(**common, package=pip.package, count=pip.collected, size=pip.size)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._ended_event.is_set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """True once the build has ended (done, failed or stopped) and cleaned up after itself."""
        return self._thread is None or self._ended_event.wait(timeout_s)

    def stop(self, timeout_s: float = 120.0) -> None:
        """End the build now: the running step's whole process group, then what it made removed; returns once
        it has ended."""
        with self._lock:
            self._stopping = True
            if self._ended is None:
                self._phase = STOPPING
            process = self._process
        if process is not None:
            stop_group(process.pid, STOP_GRACE_S, reap=process.poll)
        self.wait(timeout_s)

    # --- the build's thread ---
    def _prepare(self) -> bool:
        """Make the folder ready for the venv step; True when this build makes the venv (a fresh one)."""
        venv = self.venv
        if environment_ready(venv):
            return False  # built before: pip installs into it again, and nothing is removed if that fails
        if venv.is_dir() and any(venv.iterdir()) and not (venv / MARKER).exists():
            raise VllmError("vllm.setup_not_empty", venv=venv)
        _clear(venv)  # a half-built one a killed build left: start clean
        venv.mkdir(parents=True, exist_ok=True)
        (venv / MARKER).write_text("kvviz is building this environment; it is not usable until the mark goes\n")
        return True

    def _run(self) -> None:
        try:
            for step in steps(self.recipe):
                if step.phase == VENV_STEP and not self._ours:
                    continue
                with self._lock:
                    if self._stopping:
                        break
                    self._phase, self._pip = step.phase, _PipWatch()
                    self._before = _dist_infos(self.venv)
                code, tail = self._call(step)
                if self._stopping:
                    break
                if code != 0:
                    self.error = VllmError("vllm.setup_failed", step=STEP_SAID[step.phase], code=code,
                                           why=tail or "-", log=self.log)
                    break
            else:
                (self.venv / MARKER).unlink(missing_ok=True)
                self._size = size_text(_tree_bytes(self.venv))
        except OSError as exc:  # the venv's Python missing, a disk full while the log is written, ...
            self.error = VllmError("vllm.setup_failed", step=STEP_SAID[self._phase] if self._phase in STEP_SAID
                                   else self._phase, code=-1, why=str(exc), log=self.log)
        finally:
            self._finish()

    def _call(self, step: Step) -> tuple[int, str]:
        """Run one step in a process group of its own, its output into the log and (the install's) into the
        watch; (its exit code, its last lines as one line, redacted)."""
        log = self._log_file
        log.write(f"$ {' '.join(step.argv)}\n")
        log.flush()
        process = subprocess.Popen(step.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,  # noqa: S603
                                   errors="replace", bufsize=1, start_new_session=True,
                                   env=os.environ | {"PYTHONUNBUFFERED": "1", "PIP_NO_COLOR": "1"})
        with self._lock:
            self._process, stopping = process, self._stopping
        if stopping:  # stop() came between the step's start and here: it saw no process to end
            stop_group(process.pid, STOP_GRACE_S, reap=process.poll)
        tail: list[str] = []
        for line in process.stdout:
            log.write(line)
            log.flush()
            if line.strip():
                tail = [*tail[-(4 * TAIL_LINES):], line.strip()]
            with self._lock:
                self._pip.feed(line)
        code = process.wait()
        with self._lock:
            self._process = None
        return code, last_words(tail)

    def _finish(self) -> None:
        try:
            if (self._stopping or self.error is not None) and self._ours:
                _clear(self.venv)
            with self._lock:
                self._ended = time.monotonic()
                self.seconds = self._ended - self._started
                self._phase = STOPPED if self._stopping else FAILED if self.error is not None else DONE
            if self._log_file is not None:
                self._log_file.write(f"# {self._phase} after {self.seconds:.0f} s\n")
                self._log_file.close()  # and the lock with it
        finally:
            self._ended_event.set()


STEP_SAID = {VENV_STEP: said("vllm.setup.step.venv"), INSTALL: said("vllm.setup.step.install"),
             REMOVE: said("vllm.setup.step.remove"), CHECK: said("vllm.setup.step.check")}


def last_words(lines: list[str]) -> str:
    """A failed step's last lines as one line, redacted (a private index's URL may carry a token): pip's ERROR
    lines when it wrote some (its reason), else the last few lines."""
    errors = [x for x in lines if x.startswith("ERROR:")]
    words = " / ".join((errors or lines)[-TAIL_LINES:])
    words = words if len(words) <= TAIL_CHARS else "..." + words[-TAIL_CHARS:]
    return redact_text(words, known_keys())


def _clear(venv: Path) -> None:
    """Remove what is in `venv` (the folder itself stays: the operator may have made it)."""
    if not venv.is_dir():
        return
    for child in venv.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


class SetupSlot:
    """The one build an app runs at a time, for every visitor: start() begins one, or hands back the one under
    way; job is the latest (running or ended), which a page that reloads reads again, and refused why the
    latest press could not begin one (the folder holds other files, another process builds it), kept until a
    build begins, so that no later redraw of the page (a language switch, a reload) hides it. The app's exit (atexit,
    which its SIGTERM and SIGHUP reach: kvviz.serving.local.exit_on_stop_signals) stops a build under way, so
    no pip outlives it."""

    def __init__(self, venv: Path, recipe: Callable[[Path], Recipe] = vllm_recipe) -> None:
        self.venv = Path(venv)
        self._recipe = recipe
        self._lock = threading.Lock()
        self.job: SetupJob | None = None
        self.refused: VllmError | None = None
        atexit.register(self.stop)

    def ready(self) -> bool:
        return environment_ready(self.venv)

    def start(self) -> SetupJob:
        """The build under way, or a new one begun now; VllmError when the environment is there already, or the
        build cannot begin."""
        with self._lock:
            if self.job is not None and self.job.running:
                return self.job
            if self.ready():
                raise VllmError("vllm.setup_exists", venv=self.venv)
            try:
                self.job = SetupJob(self._recipe(self.venv)).start()
            except VllmError as exc:
                self.refused = exc
                raise
            self.refused = None
            return self.job

    def stop(self) -> None:
        job = self.job
        if job is not None:
            job.stop()
