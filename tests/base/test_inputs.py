"""Checking values from outside (kvviz.base.inputs): the right value back, or one short line naming the problem."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.base.inputs import SHOWN_CHARS, choice, clip, flag, number, shown, text, whole_number

ANYTHING = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.binary(),
                     st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                          max_size=2))


@pytest.mark.parametrize("value,expected", [(1, 1), (7.0, 7), (10**3, 1000)])
def test_whole_number_accepts(value, expected):
    """Ints and integral floats in range come back as int."""
    assert whole_number(value, "n", 1, 1000) == expected and type(whole_number(value, "n", 1, 1000)) is int


@pytest.mark.parametrize("value,message", [
    (0, "n must be between 1 and 1,000, got 0"),
    (-5.0, "got -5"),
    (10**400, "got a number with about 401 digits"),
    pytest.param(-(10**5000), "got a number with about 5,001 digits", id="5000-digits"),
    (1e300, "got 1e+300"),
    (2.5, "n must be a whole number, got 2.5"),
    (math.nan, "whole number, got nan"),
    (math.inf, "whole number, got inf"),
    (True, "whole number, got True"),
    ("5", "whole number, got '5'"),
    (None, "whole number, got None"),
    ([1], "whole number, got [1]"),
])
def test_whole_number_refuses(value, message):
    """Out of range, fractional, non-finite and non-numbers each get a short line with the value."""
    with pytest.raises(ValueError, match=re.escape(message)):
        whole_number(value, "n", 1, 1000)


@pytest.mark.parametrize("value,low_open,ok", [
    (0.5, False, True), (0, False, True), (0, True, False), (1, True, True), (1.0001, False, False),
    (math.nan, False, False), (-math.inf, False, False), ("0.5", False, False), (False, False, False),
])
def test_number(value, low_open, ok):
    """Finite numbers in the interval pass as float; the rest are refused."""
    if ok:
        assert number(value, "x", 0, 1, low_open) == float(value)
    else:
        with pytest.raises(ValueError, match=r"^x must be"):
            number(value, "x", 0, 1, low_open)


def test_text_choice_flag():
    """Text up to a length (None is empty), one of a few names, true or false: nothing else."""
    assert text(None, "t", 5) == "" and text("abc", "t", 5) == "abc"
    with pytest.raises(ValueError, match="t has 1,000,000 characters; the limit is 5"):
        text("x" * 1_000_000, "t", 5)
    with pytest.raises(ValueError, match="t must be text, got 3"):
        text(3, "t", 5)
    assert choice("bf16", "dtype", ["bf16", "fp8"]) == "bf16"
    with pytest.raises(ValueError, match="unknown dtype 'int3'; choose one of bf16, fp8"):
        choice("int3", "dtype", ["bf16", "fp8"])
    with pytest.raises(ValueError, match=r"unknown dtype \['bf16'\]"):
        choice(["bf16"], "dtype", ["bf16"])  # unhashable: refused, not a TypeError
    assert flag(False, "f") is False
    with pytest.raises(ValueError, match="f must be true or false, got 'false'"):
        flag("false", "f")


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(ANYTHING)
def test_every_refusal_is_short(value):
    """Whatever the value, each check returns or raises ValueError in one line that quotes at most a snippet."""
    for check in (lambda v: whole_number(v, "n", 0, 10), lambda v: number(v, "x", 0, 1), lambda v: text(v, "t", 10),
                  lambda v: choice(v, "c", ["a", "b"]), lambda v: flag(v, "f")):
        try:
            check(value)
        except ValueError as exc:
            assert "\n" not in str(exc) and len(str(exc)) <= 2 * SHOWN_CHARS + 60, str(exc)


def test_shown_and_clip_never_echo_a_megabyte():
    """A huge value is quoted by its start and its length."""
    assert shown("x" * 1_000_000) == "'" + "x" * (SHOWN_CHARS - 1) + "… (1,000,002 characters)"
    assert clip("abc") == "abc" and clip("a" * 100, 10) == "a" * 10 + "… (100 characters)"
