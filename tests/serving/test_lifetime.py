"""vLLM never outlives kvviz, on a real vLLM: every command that starts it (start, run --start, sweep --start,
capacity, the serving benchmark) and the app's engine is ended while vLLM is still importing or loading, by
SIGTERM (each), SIGINT and SIGHUP (run --start), SIGKILL (no handler runs: the guardian stops vLLM), and once
under load; a start that fails stops everything too and says why in one line. After each, no process of that
vLLM is left.

A vLLM's processes are told apart by a tag in their environment (tests/serving/procs.py), not by the process
groups kvviz relies on: what is checked does not trust the mechanism checked. Only the under-load test waits
for a ready vLLM (35-90 s); the others end it within seconds of its start. Needs vLLM's environment (`python
-m kvviz.serving setup`; CI builds it first).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from kvviz.serving.guardian import GUARDIAN_NOTE
from kvviz.serving.metrics_reader import parse
from kvviz.serving.vllm import STARTING_GRACE_S, ServerSpec, VllmError, free_port, running_vllm
from tests.helpers import REPO
from tests.serving.procs import TAG_VAR, Proc, kill_tagged, left_after, new_tag, tagged, wait_for

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
CONFIG_ONLY = Path(__file__).with_name("config-only")  # tiny's config.json and nothing else: no weights, no tokenizer
APPEAR_S = 120  # until vLLM's first processes exist (kvviz's imports first)
LOADING_S = 180  # until its engine core exists (vLLM's own imports, about 10 s on an idle machine)
GONE_S = 5  # after a kvviz that ran its handlers has exited: they waited for vLLM's group to end


def is_server(p: Proc) -> bool:
    """vLLM's API server (the guardian's command line names it too, after its own)."""
    return "vllm.entrypoints.openai.api_server" in p.cmdline and "guardian.py" not in p.cmdline


def is_engine_core(p: Proc) -> bool:
    return "multiprocessing.spawn" in p.cmdline


class Kvviz:
    """A kvviz process started by the test with its own tag; its output in a file."""

    def __init__(self, tmp_path: Path, argv: list[str]) -> None:
        self.tag, self.out = new_tag(), tmp_path / "kvviz.out"
        with open(self.out, "wb") as out:
            self.process = subprocess.Popen([sys.executable, *argv], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                            env=os.environ | {TAG_VAR: self.tag}, stdin=subprocess.PIPE)

    def vllm(self) -> list[Proc]:
        """vLLM's processes: the tagged ones in the server's process group."""
        servers = [p.pid for p in tagged(self.tag) if is_server(p)]
        return [p for p in tagged(self.tag) if p.pgid in servers]

    def wait_for_vllm(self, loading: bool) -> list[Proc]:
        """vLLM's processes once its server exists (importing) or, loading, once its engine core does too."""
        def found() -> list[Proc]:
            assert self.process.poll() is None, f"kvviz ended ({self.process.returncode}): {self.output()}"
            procs = self.vllm()
            return procs if not loading or any(is_engine_core(p) for p in procs) else []

        what = "vLLM's engine core" if loading else "vLLM's server process"
        return wait_for(found, LOADING_S if loading else APPEAR_S,
                        lambda: f"{what}; kvviz's output: {self.output()!r}; its processes: {tagged(self.tag)}")

    def end(self, sig: int, timeout_s: float = 90) -> int:
        self.process.send_signal(sig)
        return self.process.wait(timeout=timeout_s)

    def output(self) -> str:
        return self.out.read_text(errors="replace")[-2000:]


@pytest.fixture
def kvviz(tmp_path):
    started = []

    def start(*argv: str) -> Kvviz:
        started.append(Kvviz(tmp_path, list(argv)))
        return started[-1]

    yield start
    for k in started:  # a failed test leaves nothing running
        if k.process.poll() is None:
            k.process.kill()
        kill_tagged(k.tag)


def serving(*args: str) -> list[str]:
    return ["-m", "kvviz.serving", *args]


# (command, the exit status after SIGTERM): start stops on SIGTERM as a service does (0); the others are cut
# short (128 + 15).
COMMANDS = {
    "start": (lambda port, tmp: serving("start", "tiny", "--port", str(port)), 0),
    "run --start": (lambda port, tmp: serving("run", "--start", "tiny", "--port", str(port)), 143),
    "sweep --start": (lambda port, tmp: serving("sweep", "--start", "tiny", "--port", str(port)), 143),
    "capacity --dummy-weights": (lambda port, tmp: serving("capacity", "--models", str(CONFIG_ONLY), "--dummy-weights",
                                                           "--port", str(port)), 143),
    "bench serving": (lambda port, tmp: ["-m", "kvviz.bench", "serving", "--quick", "--out", str(tmp)], 143),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_sigterm_while_vllm_starts_leaves_nothing(kvviz, tmp_path, name):
    """SIGTERM as soon as vLLM's server process exists (it is still importing): the command exits, and by
    then no process of its vLLM is left: it waited for the group to end."""
    argv, status = COMMANDS[name]
    k = kvviz(*argv(free_port(), tmp_path))
    procs = k.wait_for_vllm(loading=False)
    if "dummy" in name:  # the option reached vLLM's command line
        assert "--load-format dummy" in next(p.cmdline for p in procs if is_server(p))
    code = k.end(signal.SIGTERM)
    assert code == status, k.output()
    assert left_after(k.tag, GONE_S) == [], k.output()


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGHUP, 129)], ids=["SIGINT", "SIGHUP"])
def test_sigint_and_sighup_while_vllm_loads_leave_nothing(kvviz, sig, status):
    """Ctrl-C and a hang-up once vLLM's engine core runs (loading the model): the same, exit 128 + the signal."""
    k = kvviz(*serving("run", "--start", "tiny", "--port", str(free_port())))
    k.wait_for_vllm(loading=True)
    assert k.end(sig) == status, k.output()
    assert left_after(k.tag, GONE_S) == [], k.output()
    assert "interrupted" in k.output()


def test_sigkill_of_kvviz_leaves_the_guardian_to_stop_vllm(kvviz):
    """kvviz killed with SIGKILL while vLLM loads (no handler of kvviz runs): the guardian reads the lifeline's
    EOF and stops vLLM's group; nothing is left after the starting grace and a margin."""
    port = free_port()
    k = kvviz(*serving("capacity", "--models", "tiny", "--port", str(port)))
    k.wait_for_vllm(loading=True)
    assert k.end(signal.SIGKILL) == -signal.SIGKILL
    assert left_after(k.tag, STARTING_GRACE_S + 30) == []
    log = (REPO / "results-tmp" / f"vllm-tiny-{port}.log").read_text(errors="replace")
    assert f"{GUARDIAN_NOTE}" in log and "kvviz closed the lifeline" in log


APP_ENGINE = textwrap.dedent("""
    import signal, sys
    from kvviz.serving.local import LocalEngine, exit_on_stop_signals
    exit_on_stop_signals()  # as app.py's main does
    engine = LocalEngine()  # as build_app does: its atexit hook stops vLLM
    engine.start("tiny")
    print("starting", flush=True)
    if sys.argv[1] == "wait":
        signal.pause()
    sys.stdin.read()  # until the test closes it; then the script ends as a program does
""")


@pytest.mark.parametrize("how", ["SIGTERM", "normal exit"])
def test_the_apps_engine_stops_vllm_when_the_app_exits(kvviz, how):
    """The app's engine (kvviz.serving.local) with the app's own exit path (exit_on_stop_signals, atexit): the
    process exits with 0 by SIGTERM while vLLM loads, or by ending normally while it imports, and leaves no
    vLLM."""
    k = kvviz("-c", APP_ENGINE, "wait" if how == "SIGTERM" else "exit")
    k.wait_for_vllm(loading=how == "SIGTERM")
    if how == "SIGTERM":
        code = k.end(signal.SIGTERM)
    else:
        k.process.stdin.close()
        code = k.process.wait(timeout=90)
    assert code == 0, k.output()
    assert left_after(k.tag, GONE_S) == [], k.output()


def test_a_failing_start_says_its_root_cause_and_leaves_nothing(tmp_path, monkeypatch):
    """A folder with only a config.json (served without dummy weights; the CLI refuses it before vLLM starts,
    so this goes through the library): vLLM's worker fails with "Cannot find any model weights", its engine
    core and API server with wrappers that point at it; the one line is the worker's, and nothing is left."""
    tag = new_tag()
    monkeypatch.setenv(TAG_VAR, tag)  # vLLM's environment is this process's
    spec = ServerSpec(CONFIG_ONLY, "config-only", port=free_port())
    try:
        with pytest.raises(VllmError) as failed, running_vllm(spec, log_path=tmp_path / "vllm.log"):
            pass
        assert f"Cannot find any model weights with `{CONFIG_ONLY}`" in str(failed.value)
        assert str(failed.value).startswith("vLLM exited (1) while starting: RuntimeError: Cannot find")
        assert [p for p in tagged(tag) if p.pid != os.getpid()] == []
    finally:
        kill_tagged(tag)


def metric(url: str, name: str) -> float:
    return sum(s.value for s in parse(httpx.get(url + "/metrics", timeout=10).text) if s.name == name)


def test_sigterm_under_load_leaves_nothing(kvviz):
    """A config-only folder served with --dummy-weights (kvviz's twin tokenizer, random weights), under a
    closed loop of 8: once vLLM has generated tokens for it and requests are running, SIGTERM. kvviz exits
    with 143, and by then no process of its vLLM is left. (The one test here that waits for a ready vLLM.)"""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    k = kvviz(*serving("run", "--start", str(CONFIG_ONLY), "--dummy-weights", "--port", str(port),
                       "--concurrency", "8", "--requests", "2000", "--output-tokens", "128"))
    wait_for(lambda: "vLLM ready" in k.output() or k.process.poll() is not None, 300, "vLLM ready")
    assert k.process.poll() is None, k.output()
    wait_for(lambda: metric(url, "vllm:num_requests_running") >= 1 and metric(url, "vllm:generation_tokens_total"),
             120, "requests running on vLLM")
    assert k.end(signal.SIGTERM) == 143, k.output()
    assert left_after(k.tag, GONE_S) == [], k.output()
