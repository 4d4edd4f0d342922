"""app.py started as a user starts it, on a free loopback port: the one app starter of the tests and the benchmarks.

running_app() yields a ServedApp (its URL and process) once the app listens, and stops it at the end with
SIGTERM, as a service manager would; ServedApp.stop() sends another signal (SIGINT is a user's Ctrl-C).
The app's output goes to `log` (or to a temporary file when none is given), so a failure can show it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # where app.py is
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


def free_port() -> int:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class ServedApp:
    url: str
    process: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        """The app's process id (its device worker is a child of it)."""
        return self.process.pid

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """Send `sig` and wait for the app to exit (killing it past timeout_s); its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def _wait_until_listening(app: ServedApp, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if app.process.poll() is not None:
                raise RuntimeError(f"app.py exited with status {app.process.returncode}:\n"
                                   f"{app.log.read_text(errors='replace')[-3000:]}") from None
            if time.monotonic() > deadline:
                app.stop()
                raise RuntimeError(f"app.py did not listen within {timeout_s:g} s") from None
            time.sleep(0.5)


@contextmanager
def running_app(*args: str, log: Path | None = None, env: dict[str, str] | None = None,
                start_timeout_s: float = START_TIMEOUT_S) -> Iterator[ServedApp]:
    """app.py started with `args` on a free loopback port; yields it once it listens, then stops it (SIGTERM).

    env: variables added to this process's environment (analytics are off; KVVIZ_FETCH=0 unless env says).
    """
    with tempfile.TemporaryDirectory(prefix="kvviz-app-") as scratch:
        log = log or Path(scratch) / "app.log"
        port = free_port()
        # Callers drive the app with the models they name, so it fetches nothing at start unless they ask.
        full_env = os.environ | {"GRADIO_ANALYTICS_ENABLED": "False", "KVVIZ_FETCH": "0"} | (env or {})
        with log.open("w") as out:
            process = subprocess.Popen([sys.executable, "app.py", "--port", str(port), *args], cwd=ROOT,  # noqa: S603
                                       env=full_env, stdout=out, stderr=subprocess.STDOUT, text=True)
        app = ServedApp(f"http://127.0.0.1:{port}/", process, log)
        try:
            _wait_until_listening(app, port, start_timeout_s)
            yield app
        finally:
            app.stop()
