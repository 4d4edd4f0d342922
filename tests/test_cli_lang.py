"""The command line in Chinese and English: --lang on every subcommand, the locale as its default, the JSON
unchanged. The Chinese expected here is typed out by hand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from kvviz.cli import main
from tests.helpers import REPO

CJK = re.compile(r"[\u4e00-\u9fff]")
LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE")
MEMORY = ("memory", "--preset", "llama-2-7b", "--batch", "16", "--seq-len", "4096")


def run_cli(*args: str, locale: str | None = None) -> subprocess.CompletedProcess:
    """python -m kvviz in a process whose locale is `locale` (LANG) and nothing else; None: no locale set."""
    env = {k: v for k, v in os.environ.items() if k not in LOCALE_VARS} | {"HF_HUB_OFFLINE": "1"}
    if locale:
        env["LANG"] = locale
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
    out = proc.stdout
    for line in ("有缓存（cached）：", "无缓存（uncached）：", "有缓存运行：", "无缓存运行："):
        assert f"\n{line}\n" in f"\n{out}", f"no line {line!r}"
    assert re.search(r"^加速比（无缓存用时 / 有缓存用时）：\d+\.\d\dx", out, re.M)
    parted = "完全一致|从第 \\d+ 个 token 起不同|两次都生成的部分一致，但其中一次更长"
    assert re.search(rf"^token：({parted})（共比较 \d+ 个）$", out, re.M)
    lesson = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert set(lesson) == {"prompt_tokens", "new_tokens", "ttft_s", "tpot_s", "tokens_per_s"}
