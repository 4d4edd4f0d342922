"""The one vLLM server an app process starts for its users: which model, where, whether it is ready yet.

Starting vLLM takes about 35 s on a small CPU, so start() returns at once and a thread waits for the server;
status() says where it stands (stopped, starting, ready, failed with the line that says why). Starting
another model stops the one that runs; stop() and the process's exit end it with every process it started
(kvviz.serving.vllm.stop): a normal exit and, through exit_on_stop_signals, SIGTERM and SIGHUP run the
atexit hook that stops it, starting or ready; any other end of the process (SIGKILL, a crash) closes the
lifeline of vLLM's guardian, which stops it then. Knows one server's life; loads are loadgen's, and who may
start what is the caller's policy.
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.errors import first_line
from kvviz.calc.parallel import Parallelism
from kvviz.i18n import Said, said
from kvviz.serving.endpoint import Endpoint, EndpointError
from kvviz.serving.vllm import (
    STOP_SIGNALS,
    VENV,
    ServerSpec,
    VllmError,
    VllmServer,
    free_port,
    ranks_text,
    start,
    stop,
    vllm_python,
    wait_ready,
)

STOPPED, STARTING, READY, FAILED = "stopped", "starting", "ready", "failed"


@dataclass(frozen=True)
class EngineStatus:
    """Where the local server stands: its state, the model it serves (or was asked for), its folder, its
    address, and once ready the start-up time and the KV capacity vLLM logged; message: why it failed."""

    state: str
    model: str | None = None
    folder: Path | None = None
    url: str | None = None
    ready_s: float | None = None
    kv_capacity_tokens: int | None = None
    kv_space_gib: int | None = None
    message: str | None = None
    layout: str | None = None  # "tp2 pp1 dp1" for a server on several ranks, None on one
    ranks: str | None = None  # vllm.ranks_text: each rank and the capacity vLLM logged for it
    workers: int = 1
    dtype: str | None = None  # the type vLLM's log states it runs the model in (torch's name: bfloat16, float32),
    # a Said with why kvviz asked for it where it did (VllmServer.dtype_text)

    def line(self) -> Said:
        """One line a person reads (its English; kvviz.i18n.errors.translate renders it in their language)."""
        if self.state == READY and self.workers > 1:
            return said("vllm.status.ready_ranks", model=self.model, url=self.url, s=self.ready_s, n=self.workers,
                        layout=self.layout, gib=self.kv_space_gib, ranks=self.ranks, dtype=self.dtype or "?")
        if self.state == READY:
            return said("vllm.status.ready", model=self.model, url=self.url, s=self.ready_s,
                        tokens=self.kv_capacity_tokens or 0, gib=self.kv_space_gib, dtype=self.dtype or "?")
        if self.state == STARTING:
            return said("vllm.status.starting", model=self.model)
        if self.state == FAILED:
            return said("vllm.status.failed", model=self.model, why=self.message)
        return said("vllm.status.stopped")


def _layout(spec: ServerSpec) -> str | None:
    """"tp2 pp1 dp1" for a server on several ranks; None for one on a single rank."""
    if spec.workers == 1:
        return None
    return Parallelism(spec.tensor_parallel, spec.pipeline_parallel, spec.data_parallel).label


def exit_on_stop_signals() -> None:
    """For the whole process (the app, whose vLLM is started from its handlers' threads): SIGTERM, SIGHUP and
    SIGINT (Ctrl-C) end it with sys.exit(0) in the main thread, so that its atexit hooks run (LocalEngine.stop,
    the device worker's clean-up) as they do at a normal exit. SIGINT too: left to Gradio, a Ctrl-C closes its
    server gracefully, which waits for the connections still open (seen in CI: an app still running 30 s after
    SIGINT, where SIGTERM's way ends in seconds)."""
    for sig in (*STOP_SIGNALS, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: sys.exit(0))


class LocalEngine:
    """One vLLM server at a time for this process; safe to call from any thread."""

    def __init__(self, venv: Path = VENV) -> None:
        self.venv = Path(venv)
        self._lock = threading.Lock()
        self._server: VllmServer | None = None
        self._status = EngineStatus(STOPPED)
        atexit.register(self.stop)

    def status(self) -> EngineStatus:
        with self._lock:
            return self._status

    def start(self, model: str, kv_space_gib: int = 1, max_model_len: int = 1024, tensor_parallel: int = 1,
              pipeline_parallel: int = 1, data_parallel: int = 1) -> EngineStatus:
        """Serve `model` (tiny, smollm2-135m-instruct, random:<preset>[@layers], a folder) on tensor ×
        pipeline × data parallel ranks: returns at once, starting; the same model and layout already up or
        starting is kept. ValueError or VllmError in one line for a model that is not one, a layout it cannot
        be split into, or no vLLM environment."""
        from kvviz.serving.models import model_folder

        vllm_python(self.venv)  # VllmError saying how to build the environment
        folder = model_folder(model)
        spec = ServerSpec(folder.path, folder.name, port=free_port(), max_model_len=max_model_len,
                          kv_space_gib=kv_space_gib, dummy=folder.dummy, tensor_parallel=tensor_parallel,
                          pipeline_parallel=pipeline_parallel, data_parallel=data_parallel)
        layout = _layout(spec)
        with self._lock:
            if self._status.model == folder.name and self._status.state in (STARTING, READY) \
                    and self._status.kv_space_gib == kv_space_gib and self._status.layout == layout:
                return self._status
        self.stop()
        server = start(spec, self.venv)
        with self._lock:
            self._server = server
            self._status = EngineStatus(STARTING, folder.name, folder.path, spec.base_url, kv_space_gib=kv_space_gib,
                                        layout=layout, workers=spec.workers)
        threading.Thread(target=self._wait, args=(server,), daemon=True, name="vllm-start").start()
        return self.status()

    def _wait(self, server: VllmServer) -> None:
        try:
            wait_ready(server)
        except VllmError as exc:
            with self._lock:
                if self._server is server:
                    self._status = EngineStatus(FAILED, server.spec.name, server.spec.model_dir,
                                                message=first_line(exc))
                    self._server = None
            return
        with self._lock:
            if self._server is server:
                self._status = EngineStatus(READY, server.spec.name, server.spec.model_dir, server.spec.base_url,
                                            server.ready_s, server.facts.kv_capacity_tokens, server.spec.kv_space_gib,
                                            layout=_layout(server.spec), ranks=ranks_text(server.facts),
                                            workers=server.spec.workers, dtype=server.dtype_text())

    def wait(self, timeout_s: float) -> EngineStatus:
        """The status once the server is no longer starting, or after timeout_s."""
        deadline = time.monotonic() + timeout_s
        while self.status().state == STARTING and time.monotonic() < deadline:
            time.sleep(0.25)
        return self.status()

    def endpoint(self, api: str = "completions") -> Endpoint:
        """The ready server's endpoint; EndpointError in one line when it is not ready."""
        with self._lock:
            server, status = self._server, self._status
        if server is None or status.state != READY:
            raise EndpointError("serving.failed", why=status.line())
        return server.endpoint(api)

    def stop(self) -> None:
        """Stop the server, if one runs or starts, and everything it started."""
        with self._lock:
            server, self._server = self._server, None
            self._status = EngineStatus(STOPPED)
        if server is not None:
            stop(server)
