"""The command line in Chinese and English: --lang on every subcommand, the locale as its default, the JSON
unchanged. The Chinese expected here is typed out by hand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from kvviz.cli import USAGE_ERROR, main
from tests.helpers import REPO

CJK = re.compile(r"[\u4e00-\u9fff]")
LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE")
MEMORY = ("memory", "--preset", "llama-2-7b", "--batch", "16", "--seq-len", "4096")


def run_cli(*args: str, locale: str | None = None, columns: int | None = None) -> subprocess.CompletedProcess:
    """python -m kvviz in a process whose locale is `locale` (LANG) and nothing else; None: no locale set.
    `columns`: the terminal width argparse wraps its help to."""
    env = {k: v for k, v in os.environ.items() if k not in LOCALE_VARS} | {"HF_HUB_OFFLINE": "1"}
    if locale:
        env["LANG"] = locale
    if columns:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "kvviz", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture
def no_locale(monkeypatch):
    for name in LOCALE_VARS:
        monkeypatch.delenv(name, raising=False)


def test_memory_in_chinese_by_flag_and_by_locale():
    """--lang zh and a zh_CN locale both print the report in Chinese, with the same formula and numbers; the two
    outputs are the same."""
    by_flag = run_cli(*MEMORY, "--lang", "zh")
    by_locale = run_cli(*MEMORY, locale="zh_CN.UTF-8")
    assert by_flag.returncode == by_locale.returncode == 0, by_flag.stderr + by_locale.stderr
    assert CJK.search(by_flag.stdout), "the report is not in Chinese"
    assert "= 16 × 4096 × 32 × 2 × 32 × 128 × 2" in by_flag.stdout
    assert by_flag.stdout == by_locale.stdout


def test_english_flag_beats_a_chinese_locale():
    """--lang en under a zh_CN locale prints what a process with no locale prints: English, as before."""
    english = run_cli(*MEMORY, "--lang", "en", locale="zh_CN.UTF-8")
    plain = run_cli(*MEMORY)
    assert english.returncode == plain.returncode == 0, english.stderr
    assert english.stdout == plain.stdout and not CJK.search(plain.stdout)
    assert "32.000 GiB (2^30 bytes)" in plain.stdout


def test_json_stays_english():
    """--json gives the same object whatever the language: its keys and values are for scripts."""
    zh, en = run_cli(*MEMORY, "--json", "--lang", "zh"), run_cli(*MEMORY, "--json", "--lang", "en")
    assert zh.returncode == en.returncode == 0, zh.stderr
    assert json.loads(zh.stdout) == json.loads(en.stdout)


def test_an_error_in_chinese_from_the_locale():
    """A bad preset under a zh_CN locale: one Chinese line on stderr, exit status 2, no traceback."""
    proc = run_cli("memory", "--preset", "nope", locale="zh_CN.UTF-8")
    assert proc.returncode == 2
    assert proc.stderr == "kvviz：错误：未知的预设 'nope'；运行 'python -m kvviz presets' 查看全部预设\n"


@pytest.mark.parametrize(("argv", "zh"), [
    (["memory"], "--preset NAME、--config PATH_OR_HUB_ID、--layers/--kv-heads/--head-dim 三者须恰好给出一个"),
    (["memory", "--layers", "4"], "按原始维度计算还需要 --kv-heads, --head-dim"),
    (["memory", "--preset", "llama-2-7b", "--batch", "0"], "batch 须在 1 到 1,000,000 之间，收到 0"),
    (["memory", "--preset", "llama-2-7b", "--tp", "3"],
     "tp 3 不能整除模型的 32 个查询头（每块 GPU 持有完整的注意力头）；这个模型可用 tp = 1, 2, 4, 8, 16 或 32"),
    (["generate", "--prompt", ""], "提示词（prompt）为空"),
    (["compare", "--prompt", "hi", "--max-new-tokens", "0"], "max_new_tokens 须在 1 到 4,096 之间，收到 0"),
    (["batch", "--new-tokens", "1"], "--new-tokens 须在 2 到 4,096 之间，收到 1"),
    (["generate", "--prompt", "hi", "--device", "tpu"], "未知的设备 'tpu'；可用：auto、cpu、cuda 或 mps"),
])
def test_every_subcommand_refuses_in_chinese(argv, zh, capsys, no_locale):
    """--lang zh on each subcommand: its refusal is one Chinese line (checked before any model loads)."""
    assert main([*argv, "--lang", "zh"]) == 2
    assert capsys.readouterr().err == f"kvviz：错误：{zh}\n"


def test_argparse_errors_keep_argparse_words_after_a_chinese_prefix(capsys, no_locale):
    """A value argparse refuses (--lang=zh given before it) is reported with argparse's words, kvviz's prefix in
    Chinese."""
    assert main(["memory", "--lang=zh", "--batch", "x"]) == 2
    assert capsys.readouterr().err == "kvviz：错误：argument --batch: invalid int value: 'x'\n"


def test_presets_in_chinese(capsys, no_locale):
    """presets --lang zh: each row's parameter count in Chinese; --json the same list as in English."""
    assert main(["presets", "--lang", "zh"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert any(row.startswith("qwen2.5-0.5b") and " 0.49 B 参数  " in row for row in rows), rows[:3]
    assert main(["presets", "--json", "--lang", "zh"]) == 0
    zh = json.loads(capsys.readouterr().out)
    assert main(["presets", "--json", "--lang", "en"]) == 0
    assert zh == json.loads(capsys.readouterr().out)


def test_compare_on_tiny_in_chinese():
    """compare --lang zh on the bundled model: loading progress, headings and verdict in Chinese; the lesson's
    JSON line keeps its English keys."""
    proc = run_cli("compare", "--model", "tiny", "--prompt", "hello", "--max-new-tokens", "3", "--device", "cpu",
                   "--lang", "zh")
    assert proc.returncode == 0, proc.stderr
    assert "[ 10%] 正在加载 tiny 的分词器（tokenizer）" in proc.stderr and "tiny 已就绪：cpu，fp32" in proc.stderr
    # the comparison's own progress: its phase at once, its token counts (one kind) at most every 2 s, and the
    # whole run of 3 + 3 tokens takes far less: one count, the first measured token's (7 of 12 tokens planned)
    assert "\n[  0%] 两种模式先各预热几个 token（不计入测量）\n" in proc.stderr
    counts = re.findall(r"^\[ *(\d+)%\] .+：第 (\d+) 个 token，共 3 个$", proc.stderr, re.M)
    assert counts == [("58", "1")], proc.stderr
    out = proc.stdout
    for line in ("有缓存（cached）：", "无缓存（uncached）：", "有缓存运行：", "无缓存运行："):
        assert f"\n{line}\n" in f"\n{out}", f"no line {line!r}"
    assert re.search(r"^加速比（无缓存用时 / 有缓存用时）：\d+\.\d\dx", out, re.M)
    parted = "完全一致|从第 \\d+ 个 token 起不同|两次都生成的部分一致，但其中一次更长"
    assert re.search(rf"^token：({parted})（共比较 \d+ 个）$", out, re.M)
    lesson = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert set(lesson) == {"prompt_tokens", "new_tokens", "ttft_s", "tpot_s", "tokens_per_s"}


SUBCOMMANDS = ("memory", "presets", "generate", "compare", "batch")
HELP_COLUMN = 24  # where argparse starts an option's help text


@pytest.fixture
def columns(monkeypatch, no_locale):
    """Help wrapped at 100 columns, whatever the terminal, and no locale: English unless asked."""
    monkeypatch.setenv("COLUMNS", "100")


def test_memory_help_in_chinese_by_flag():
    """`python -m kvviz memory --help --lang zh` (--lang after --help): the options' help in Chinese, argparse's
    own words as argparse prints them."""
    proc = run_cli("memory", "--help", "--lang", "zh", columns=100)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "  --tp TP               张量并行（tp）：每层切分到的 GPU 数（默认 1）" in lines, proc.stdout
    assert "模型（以下任选其一）:" in lines and "options:" in lines
    assert "tensor parallelism" not in proc.stdout


def test_help_in_chinese_from_the_locale():
    """A zh_CN locale and no --lang: the help is the one --lang zh gives."""
    by_locale = run_cli("compare", "--help", locale="zh_CN.UTF-8", columns=100)
    by_flag = run_cli("compare", "--help", "--lang=zh", columns=100)
    assert by_locale.returncode == by_flag.returncode == 0, by_locale.stderr
    assert "  --prompt PROMPT       提示词文本" in by_locale.stdout.splitlines(), by_locale.stdout
    assert by_locale.stdout == by_flag.stdout


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_english_help_by_flag_is_the_plain_help(command, capsys, columns, monkeypatch):
    """--lang en under a zh_CN locale prints the help a process with no locale prints: English only."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    plain = capsys.readouterr().out
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    with pytest.raises(SystemExit):
        main([command, "--help", "--lang", "en"])
    assert capsys.readouterr().out == plain
    assert not CJK.search(plain), "Chinese in the English help"


def test_english_help_lines_unchanged(capsys, columns):
    """A few English help lines as they were typed before the help went through the catalogue."""
    with pytest.raises(SystemExit):
        main(["memory", "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert "  --tp TP               tensor parallelism: GPUs each layer is split over (default 1)" in lines
    assert "model (one of):" in lines
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "\nSee how LLM inference really behaves.\n" in out
    assert "    presets             list the architecture presets" in out.splitlines()


def help_entries(out: str) -> list[str]:
    """The help texts in argparse's help output, one per option or subcommand, wrapped lines joined (the -h line
    and group titles left out). The help column is where argparse put the -h line's help."""
    body = out.split("\n\n", 1)[1].splitlines()  # past the usage block
    col = next(line.index("show this help") for line in body if line.startswith("  -h, --help"))
    entries: list[str] = []
    for line in body:
        if not line.startswith(" ") or line.startswith("  -h, --help"):
            entries.append("")  # a group title, a blank line, argparse's own -h: none of kvviz's help
        elif line[:col].strip():  # an option or subcommand; its help beside it, or on the next line
            entries.append(line[col:] if line[col - 2:col] == "  " else "")
        else:
            entries[-1] += line[col:]
    return [e for e in entries if e.strip()]


@pytest.mark.parametrize("command", [None, *SUBCOMMANDS])
def test_every_help_text_is_chinese(command, capsys, columns):
    """--lang zh: the program's description and every subcommand's and option's help has Chinese in it; only
    argparse's own words stay English."""
    argv = ["--help", "--lang=zh"] if command is None else [command, "--help", "--lang", "zh"]
    with pytest.raises(SystemExit):
        main(argv)  # the top level has no --lang option: --help exits before it is parsed, read all the same
    out = capsys.readouterr().out
    helps = help_entries(out)
    if command is None:
        helps.append(out.split("\n\n")[1])  # the description
    assert len(helps) >= 2, out
    english = [h for h in helps if not CJK.search(h)]
    assert not english, f"help left in English: {english}"


def test_help_entries_reads_english_help(capsys, columns):
    """The reader of the test above finds every option's help (so that it cannot pass by finding none)."""
    with pytest.raises(SystemExit):
        main(["memory", "--help"])
    helps = help_entries(capsys.readouterr().out)
    assert len(helps) == 21 and not any(CJK.search(h) for h in helps), helps
    assert "runtime reserve for activations and workspace, GiB (default 1)" in helps


def test_no_subcommand_prints_the_help(capsys, columns):
    """`python -m kvviz` alone: the program's help on stderr, exit status 2 (the --lang pre-scan of an empty
    command line once raised)."""
    assert main([]) == USAGE_ERROR
    assert "See how LLM inference really behaves." in capsys.readouterr().err
