"""A vLLM that fails to start is told by its root cause, read from its log; a folder without weights is refused
before vLLM starts, with the option that serves it on random weights; with that option it is served so.

The logs in tests/serving/vllm_logs/ are real vLLM 0.32.0 start-up logs, kept whole (each file's #kvviz: lines
say how it was made; they are taken off before reading). The expected lines were read from them by hand: the
exception the failing process raised first, not the wrappers that point at it. The same on a live vLLM, and the
option on a ready one: tests/serving/test_lifetime.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.serving.models import model_folder
from kvviz.serving.vllm import ServerSpec, command, last_error_line
from tests.helpers import REPO

LOGS = Path(__file__).with_name("vllm_logs")
CONFIG_ONLY = Path(__file__).with_name("config-only")


def real_log(name: str) -> str:
    """The log as vLLM wrote it, without the #kvviz: lines that say how it was made."""
    lines = (LOGS / f"{name}.log").read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith("#kvviz:"))


def test_no_weights_is_the_workers_error_not_the_wrappers_after_it():
    """The worker raises "Cannot find any model weights"; then the engine core ("WorkerProc initialization
    failed ... See stack trace for root cause.") and the API server ("Engine core initialization failed. See
    root cause above.") raise wrappers, the latter last in the log: the worker's line is the one."""
    log = real_log("no-weights")
    assert log.rstrip().endswith("Failed core proc(s): {'EngineCore': 1}"), "the wrapper is the log's last line"
    assert last_error_line(log) == "RuntimeError: Cannot find any model weights with `/tmp/lt/cfgonly`"


def test_without_the_workers_lines_the_outermost_wrapper_is_all_there_is():
    log = "\n".join(line for line in real_log("no-weights").splitlines() if not line.startswith("(Worker pid="))
    assert last_error_line(log) == ("RuntimeError: Engine core initialization failed. See root cause above. "
                                    "Failed core proc(s): {'EngineCore': 1}")


@pytest.mark.parametrize(("name", "cause"), [
    ("too-long", "ValidationError for ModelConfig: User-specified max_model_len (100000) is greater than the derived "
                 "max_model_len (max_position_embeddings=1024.0 or model_max_length=None in model's config.json)."),
    ("bad-type", "ValidationError for ModelConfig: The checkpoint you are trying to load has model type `notamodel` "
                 "but Transformers does not recognize this architecture."),
    ("port-busy", "OSError: [Errno 98] Address already in use"),
])
def test_the_api_servers_own_errors(name, cause):
    """A pydantic error count ("1 validation error for ModelConfig") gets the error on its next line; a warning
    that quotes an error ("...errors like `OSError: [Errno 24] Too many open files`") is not one."""
    line = last_error_line(real_log(name))
    assert line.startswith(cause) and "\n" not in line, line
    assert "Too many open files" not in line


def test_the_guardians_notes_are_not_a_cause():
    log = real_log("port-busy") + "[kvviz guardian 12] vLLM's server exited (1): stopping vLLM\n"
    assert last_error_line(log) == "OSError: [Errno 98] Address already in use"
    assert last_error_line("[kvviz guardian 12] vLLM's process group is gone\n") == "(empty log)"


def test_a_folder_without_weights_is_refused_with_the_option_that_serves_it(tmp_path):
    with pytest.raises(ValueError, match=r"has no weights \(no \*\.safetensors, \*\.bin or \*\.pt file\); ask for "
                                         r"dummy weights .*\(--dummy-weights\)"):
        model_folder(str(CONFIG_ONLY), root=tmp_path)
    assert not model_folder(str(REPO / "assets" / "tiny"), root=tmp_path).dummy, "a folder with weights is served"


def test_dummy_weights_serve_a_config_only_folder_from_a_twin_with_a_tokenizer(tmp_path):
    """No tokenizer in the folder: its config.json, unchanged, beside kvviz's twin tokenizer (vLLM needs one),
    served under the folder's name with --load-format dummy."""
    folder = model_folder(str(CONFIG_ONLY), root=tmp_path, dummy_weights=True)
    assert folder.dummy and folder.name == "config-only" and folder.path.parent == tmp_path
    config = json.loads((CONFIG_ONLY / "config.json").read_text())
    assert json.loads((folder.path / "config.json").read_text()) == config
    assert (folder.path / "tokenizer.json").is_file()
    cmd = command(ServerSpec(folder.path, folder.name, dummy=folder.dummy), Path("python"))
    assert cmd[cmd.index("--load-format") + 1] == "dummy" and cmd[cmd.index("--model") + 1] == str(folder.path)


def test_dummy_weights_keep_a_folder_that_has_a_tokenizer(tmp_path):
    (tmp_path / "m").mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "m" / name).write_bytes((REPO / "assets" / "tiny" / name).read_bytes())
    folder = model_folder(str(tmp_path / "m"), root=tmp_path / "twins", dummy_weights=True)
    assert folder.path == tmp_path / "m" and folder.dummy and not (tmp_path / "twins").exists()


def serving(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvviz.serving", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=os.environ | {"KVVIZ_VLLM_VENV": str(REPO / "no-such-venv")})


@pytest.mark.parametrize(("lang", "says"), [("en", "(--dummy-weights)"), ("zh", "--dummy-weights")])
@pytest.mark.parametrize("args", [["capacity", "--models"], ["start"], ["run", "--start"]],
                         ids=["capacity", "start", "run --start"])
def test_each_command_refuses_a_folder_without_weights_in_one_line(args, lang, says):
    """Before any vLLM is looked for: exit status 2, one line naming the option, in the language asked."""
    proc = serving(*args, str(CONFIG_ONLY), "--lang", lang)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert says in line and str(CONFIG_ONLY) in line, line
    assert ("没有权重" in line) if lang == "zh" else line.startswith("error: "), line
