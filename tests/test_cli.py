"""The command line, end to end: answers for every preset and for a config by path, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.calc.presets import PRESET_DIR, preset_names
from kvviz.cli import main
from tests.helpers import REPO


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "kvviz", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_memory_json_end_to_end():
    """`python -m kvviz memory --json` prints one JSON object with the lesson's 32 GiB."""
    proc = run_cli("memory", "--preset", "llama-2-7b", "--batch", "16", "--seq-len", "4096", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["kv_cache_bytes"] == 34_359_738_368
    assert out["kv_cache_gib"] == 32.0
    for key in ("kv_bytes_per_token", "kv_cache_bytes_no_window", "kv_cache_bytes_mla_expanded", "paged",
                "capacity", "weights", "roofline", "formulas"):
        assert key in out, key
    assert out["roofline"]["decode"]["is_lower_bound"] is True


def test_memory_text_shows_the_formula():
    """The default table shows the formula with the numbers substituted, in bytes, GiB and GB."""
    proc = run_cli("memory", "--preset", "llama-2-7b", "--batch", "16", "--seq-len", "4096")
    assert proc.returncode == 0, proc.stderr
    assert "= 16 × 4096 × 32 × 2 × 32 × 128 × 2" in proc.stdout
    assert "32.000 GiB (2^30 bytes)" in proc.stdout and "34.360 GB (10^9 bytes)" in proc.stdout


def test_memory_on_several_gpus(capsys):
    """--tp 8 --pp 2 --dp 2 on Llama-3-70B: one GPU caches 40 layers × 2 × 1 KV head × 128 × 2 bytes = 20,480 bytes a
    token; the JSON gives each stage and the 32 GPUs in all, the text says per GPU and in all."""
    args = ["memory", "--preset", "llama-3-70b", "--batch", "8", "--seq-len", "8192", "--tp", "8", "--pp", "2",
            "--dp", "2"]
    assert main([*args, "--json"]) == 0
    par = json.loads(capsys.readouterr().out)["parallel"]
    assert (par["gpus"], par["kv_heads_per_gpu"], [s["layers"] for s in par["stages"]]) == (32, 1, [40, 40])
    assert par["per_gpu"]["kv_bytes_per_token"] == 40 * 2 * 1 * 128 * 2 == 20_480
    assert par["deployment"]["token_slots"] == 2 * par["per_gpu"]["token_slots"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Deployment: tp 8 × pp 2 × dp 2 = 32 GPUs (H100 SXM)" in text and "= 40 × 2 × 1 × 128 × 2" in text
    assert "Capacity on one H100 SXM of 32" in text


def test_presets_lists_every_preset(capsys):
    """`presets` names them all; --json gives their dimensions."""
    assert main(["presets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == preset_names()


@pytest.mark.parametrize("name", preset_names())
def test_memory_answers_for_every_preset(name, capsys):
    """Every preset gives a positive cache that equals batch × seq_len × per-token bytes where no window caps it."""
    assert main(["memory", "--preset", name, "--batch", "2", "--seq-len", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_cache_bytes"] == 2 * 100 * out["kv_bytes_per_token"]  # 100 < every window (gpt-oss: 128)
    assert out["model"]["name"] == name


def test_config_by_path_and_folder_equal_preset(capsys, tmp_path):
    """A config.json given by path (file or folder) answers like the preset it copies."""
    answers = []
    folder = tmp_path / "gemma"
    folder.mkdir()
    (folder / "config.json").write_text((PRESET_DIR / "gemma-2-9b.json").read_text())
    for source in (["--preset", "gemma-2-9b"], ["--config", str(folder)], ["--config", str(folder / "config.json")]):
        assert main(["memory", *source, "--seq-len", "8192", "--json"]) == 0
        answers.append(json.loads(capsys.readouterr().out)["kv_cache_bytes"])
    assert answers == [(4096 * 21 + 8192 * 21) * 2 * 8 * 256 * 2] * 3


def test_raw_dimensions(capsys):
    """--layers --kv-heads --head-dim alone give the cache; weights are reported unknown."""
    assert main(["memory", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--seq-len", "8192",
                 "--kv-dtype", "fp16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_cache_bytes"] == 2**30
    assert out["weights"] is None and out["roofline"]["decode"] is None


@pytest.mark.parametrize("args,message", [
    (["memory", "--preset", "nope"], "unknown preset"),
    (["memory", "--preset", "gpt2", "--batch", "0"], "batch"),
    (["memory", "--preset", "gpt2", "--batch", "-4"], "batch"),
    (["memory", "--preset", "gpt2", "--batch", "1.5"], "invalid int"),
    (["memory", "--preset", "gpt2", "--seq-len", "0"], "seq_len"),
    (["memory", "--preset", "gpt2", "--seq-len", "x"], "invalid int"),
    (["memory", "--preset", "gpt2", "--mem-util", "1.5"], "mem_util"),
    (["memory", "--preset", "gpt2", "--mem-util", "nan"], "mem_util"),
    (["memory", "--preset", "gpt2", "--block-size", "0"], "block_size"),
    (["memory", "--preset", "gpt2", "--reserve-gib", "-1"], "reserve"),
    (["memory", "--preset", "gpt2", "--kv-dtype", "int3"], "invalid choice"),
    (["memory", "--preset", "llama-3-70b", "--tp", "3"], "tp 3 does not divide the model's 64 query heads"),
    (["memory", "--preset", "llama-3-70b", "--tp", "0"], "tp must be between 1 and 1,024"),
    (["memory", "--preset", "llama-3-70b", "--tp", "2.5"], "invalid int"),
    (["memory", "--preset", "llama-3-70b", "--pp", "81"], "pp 81 is more than the model's 80 layers"),
    (["memory", "--preset", "llama-3-70b", "--dp", "-2"], "dp must be between 1"),
    (["memory", "--preset", "gpt2", "--gpu", "tpu"], "invalid choice"),
    (["memory"], "exactly one of"),
    (["memory", "--preset", "gpt2", "--config", "x"], "exactly one of"),
    (["memory", "--layers", "4", "--kv-heads", "2"], "--head-dim"),
    (["memory", "--layers", "0", "--kv-heads", "2", "--head-dim", "64"], "layers"),
    (["memory", "--config", "/no/such/config.json"], "no such file"),
    (["memory", "--config", "org/uncached-model"], "HF_HUB_OFFLINE"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_one_line_exit_2(args, message, capsys, monkeypatch):
    """Bad input prints one line naming the problem, exit status 2, no traceback."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kvviz: error: "), err
    assert message in err


def test_config_missing_a_key_answers_with_the_class_default_and_says_so(capsys, tmp_path):
    """A config.json without num_attention_heads gets LlamaConfig's default (32), as transformers would build it,
    and the answer says which key was defaulted."""
    cfg = json.loads((PRESET_DIR / "llama-3-8b.json").read_text())
    del cfg["num_attention_heads"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["memory", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "note: taken from transformers' LlamaConfig defaults" in out and "num_attention_heads=32" in out


@pytest.mark.parametrize("config,message", [
    ({"model_type": "mystery", "num_hidden_layers": 2}, "unknown model_type 'mystery'"),
    ({"model_type": "distilbert"}, "encoder-only"),
    ({"model_type": "t5"}, "encoder-decoder"),
    ({"model_type": "llama", "layer_types": ["nonsense"] * 32}, "layer_types"),
])
def test_configs_kvviz_cannot_answer_exit_2_in_one_line(config, message, capsys, tmp_path):
    """An unknown model type, an encoder-only or encoder-decoder family, a config transformers rejects: one line
    naming the problem on stderr, exit status 2."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["memory", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_bad_input_in_a_real_process_has_no_traceback():
    """The installed entry point also exits 2 with one line, no traceback, for a broken config."""
    proc = run_cli("memory", "--preset", "gpt2", "--seq-len", "-1")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0


CLI_VALUES = st.sampled_from(["0", "-1", "1", "2", "1.5", "nan", "inf", "-inf", "1e999", "99999999999999999999999", "",
                              " ", "x", "gpt2", "bf16", "cpu", "tiny", "random:nope", "/no/such", "org/uncached",
                              "n" * 300, "x" * 100_000])
CLI_OPTIONS = {
    "memory": ["--preset", "--config", "--layers", "--kv-heads", "--head-dim", "--heads", "--sliding-window",
               "--sliding-layers", "--batch", "--seq-len", "--kv-dtype", "--weight-dtype", "--block-size", "--gpu",
               "--mem-util", "--reserve-gib", "--tp", "--pp", "--dp"],
    "presets": [],
    "generate": ["--model", "--device", "--dtype", "--temperature", "--top-k", "--top-p", "--seed"],
    "compare": ["--model", "--device", "--dtype", "--temperature", "--top-k", "--top-p", "--seed"],
}


@st.composite
def command_lines(draw) -> list[str]:
    command = draw(st.sampled_from(sorted(CLI_OPTIONS)))
    options = draw(st.lists(st.sampled_from(CLI_OPTIONS[command]), unique=True, max_size=5)) if CLI_OPTIONS[command] \
        else []
    argv = [command, *(part for option in options for part in (option, draw(CLI_VALUES)))]
    if command in ("generate", "compare"):  # always a short run: at most 2 new tokens of the tiny model
        argv += ["--prompt", draw(CLI_VALUES), "--max-new-tokens", draw(st.sampled_from(["1", "2", "0", "-3", "1e9"]))]
    return argv + draw(st.lists(st.sampled_from(["--json", "--no-cache", "--bogus"]), max_size=1))


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(command_lines())
def test_any_command_line_succeeds_or_fails_in_one_line(argv):
    """Random options with wrong, huge, empty and non-finite values: exit 0, or exit 2 with one short line."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        status = main(argv)
    message = err.getvalue()
    assert status in (0, 2), f"{argv!r:.300}: exit {status}, {message[:300]}"
    if status == 2:  # the error is the last line; before it only loading progress ("[ 10%] ...") and notes
        *before, last = message.splitlines()
        assert last.startswith("kvviz: error: ") and len(last) <= 400, f"{argv!r:.300}: {message[:500]}"
        assert all(line.startswith(("[", "note: ")) for line in before), f"{argv!r:.300}: {message[:500]}"


def test_batch_json_sweeps_tiny(capsys):
    """`python -m kvviz batch --json`: one row per B, tokens/s total = B / step, every cache as predicted, and the
    explanation in the run's own numbers."""
    assert main(["batch", "--model", "tiny", "--prompt-tokens", "16", "--new-tokens", "4", "--max-batch", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"]
    assert [r["batch"] for r in rows] == [1, 2] and out["model"] == "tiny"
    for r in rows:
        assert r["tokens_per_s_total"] == pytest.approx(r["batch"] / r["step_s"])
        assert r["kv_bytes"] == r["kv_bytes_predicted"] == r["batch"] * (16 + 4 - 1) * 2048
    assert out["summary"]["kv_exact"] is True and out["summary"]["batches"] == [1, 2]
    # the step's growth told, or, when the two steps differ by less than their own spread (a busy machine), the
    # rates with the spread named: both are the explanation's honest forms (kvviz/base/noise.py)
    assert out["explanation"].startswith(("From B=1 to B=2 the decode step went from ",
                                          "From B=1 to B=2 tokens/s went from "))


def test_batch_text_prints_the_table_and_the_explanation():
    """The text output: progress on stderr, the per-batch table and the explanation on stdout."""
    proc = run_cli("batch", "--model", "tiny", "--prompt-tokens", "8", "--new-tokens", "3", "--max-batch", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("| B | decode step | roofline |")
    assert "| 1 | " in proc.stdout and "| 2 | " in proc.stdout and "From B=1 to B=2" in proc.stdout
    assert "B=2: warm-up" in proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--new-tokens", "1"], "--new-tokens must be between 2"),
    (["--max-batch", "0"], "--max-batch must be between 1"),
    (["--max-batch", "5000"], "--max-batch must be between 1 and 1,024"),
    (["--prompt-tokens", "2000"], "context of 1,024"),
    (["--repeats", "x"], "invalid int value"),
])
def test_batch_bad_input_one_line_exit_2(args, message, capsys):
    """A sweep that cannot run as asked is refused in one line with exit status 2."""
    assert main(["batch", "--model", "tiny", *args]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("kvviz: error: ") and message in err[-1], err


def test_compare_shows_its_progress_on_stderr_and_none_with_json(capsys):
    """compare tells how far it is (after the loading's lines, where it loads): the warm-up as it starts, in
    English here; with --json, stdout holds the JSON alone and stderr no progress."""
    argv = ["compare", "--model", "tiny", "--prompt", "hello", "--max-new-tokens", "2", "--device", "cpu"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "[  0%] warming up both modes (a few tokens each, not measured)" in err.splitlines(), err
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert "[" not in err and json.loads(out)["tokens_identical"] in (True, False)


def test_progress_tells_each_kind_at_once_and_the_same_kind_at_most_every_interval(monkeypatch, capsys):
    """A new kind of message prints at once; the same kind again only once `every_s` has passed since it last
    printed (a clock stepped by hand: 0, 0.5, 1.0, 2.5, 2.6 s)."""
    import argparse

    from kvviz import cli
    from kvviz.i18n import said

    clock = iter([0.0, 0.5, 1.0, 2.5, 2.6])
    monkeypatch.setattr(cli.time, "monotonic", lambda: next(clock))
    progress = cli._progress(argparse.Namespace(json=False, lang="en"), every_s=2.0)
    progress(0.0, said("progress.warmup"))
    for k in (1, 2, 3):
        progress(k / 10, said("progress.compare_tokens", mode="cached", k=k, n=9))
    progress(0.4, said("progress.warmup"))
    assert capsys.readouterr().err.splitlines() == [
        "[  0%] warming up both modes (a few tokens each, not measured)", "[ 10%] cached: token 1 of 9",
        "[ 30%] cached: token 3 of 9", "[ 40%] warming up both modes (a few tokens each, not measured)"]
