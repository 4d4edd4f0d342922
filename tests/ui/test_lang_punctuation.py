"""Chinese texts punctuate as Chinese does: a question mark or a comma between Chinese words is the full-width ？
or ，, never the ASCII ? or , (issue 25: the lesson's Chinese questions once used "?" and ","). ASCII stays right
where the text around it is not Chinese: a formula's max(a, b), an English term's list, a number's 1,024."""

from __future__ import annotations

import re

import pytest

from kvviz.i18n import CATALOG

CJK = r"[\u3400-\u4dbf\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]"
# ASCII ? or , with a Chinese character (or Chinese punctuation) on both sides, spaces allowed between; or an ASCII ?
# closing a Chinese sentence (a Chinese character before it, the text's end or a line's end after it).
HALF_WIDTH = re.compile(rf"{CJK} *[?,] *{CJK}|{CJK} *\?(?=\s|$)")


def half_width_in_chinese(text: str) -> list[str]:
    """Each ASCII ? or , that stands inside Chinese in `text`, with the characters around it."""
    return [text[max(0, m.start() - 6):m.end() + 6] for m in HALF_WIDTH.finditer(text)]


@pytest.mark.parametrize(("text", "found"), [
    ("为什么 KV Cache 会增长?", True),  # a Chinese question ending in ASCII ?
    ("它们之间有哪些常见权衡?它们", True),
    ("输入形态,attention 计算", False),  # , before an English term: not between Chinese words
    ("输入形态, 性能瓶颈", True),
    ("屋顶线：max(字节 / 带宽, FLOPs / 峰值算力)", False),  # a formula's argument list
    ("为什么 KV Cache 会增长？", False),
    ("batch 16 × seq_len 4,096，bf16", False),
])
def test_the_check_finds_ascii_punctuation_inside_chinese(text, found):
    """The check itself: it flags ? and , between Chinese characters and nothing else."""
    assert bool(half_width_in_chinese(text)) is found, text


def test_no_chinese_text_has_ascii_question_marks_or_commas_inside_chinese():
    """Every Chinese text of every catalogue (the page's, the CLI's, the errors'): no ASCII ? or , inside Chinese."""
    bad = {key: half_width_in_chinese(text) for key, text in CATALOG["zh"].items() if half_width_in_chinese(text)}
    assert not bad, f"ASCII ? or , inside Chinese (use ？ and ，): {bad}"


# A Chinese character written against a Latin letter, with no space between ("预填充token"): the catalogue spaces
# them everywhere else ("预填充 token", "每 GPU 小时").
UNSPACED = re.compile(r"[\u4e00-\u9fff][A-Za-z]|[A-Za-z][\u4e00-\u9fff]")


@pytest.mark.parametrize(("text", "found"), [
    ("× 预填充token +", True),
    ("token对", True),
    ("× 预填充 token +", False),
    ("（每 GPU 小时 2.5）", False),
    ("每{hour} {price}", False),  # a placeholder is checked where it is filled (tests/ui/test_plan_view.py)
])
def test_the_check_finds_chinese_against_latin_letters(text, found):
    assert bool(UNSPACED.search(text)) is found, text


def test_no_chinese_text_writes_a_chinese_character_against_a_latin_letter():
    """Every Chinese text of every catalogue: a space between a Chinese character and a Latin letter (the CLI's
    step-time formula once read "预填充token" and "预填充token对")."""
    bad = {key: UNSPACED.findall(text) for key, text in CATALOG["zh"].items() if UNSPACED.search(text)}
    assert not bad, f"a Chinese character against a Latin letter (put a space between): {bad}"
