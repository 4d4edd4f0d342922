"""kvviz.base.units: one rule per unit, checked on values worked by hand."""

from __future__ import annotations

import math

from kvviz.base.units import display_width, fmt_bytes_short, fmt_ms, fmt_pair, fmt_rate, fmt_seconds


def test_a_latency_is_milliseconds_with_two_decimals():
    assert [fmt_ms(0.00305), fmt_ms(0.0412), fmt_ms(1.2345), fmt_ms(0.0)] == \
        ["3.05 ms", "41.20 ms", "1,234.50 ms", "0.00 ms"]


def test_a_missing_latency_is_said_so():
    assert [fmt_ms(None), fmt_ms(math.nan), fmt_ms(None, "无")] == ["n/a", "n/a", "无"]


def test_a_duration_takes_the_unit_that_reads_best():
    assert [fmt_seconds(23.4), fmt_seconds(0.0123), fmt_seconds(0.0002)] == ["23.400 s", "12.300 ms", "200.000 µs"]


def test_a_rate_keeps_the_digits_that_matter():
    assert [fmt_rate(8000), fmt_rate(333.3), fmt_rate(12.46)] == ["8,000", "333", "12.5"]


def test_bytes_in_a_sentence_take_a_decimal_prefix():
    # 20,462,592 B = 20.46 MB; 96,256 B = 96.3 KB; 1.98e9 B = 1.98 GB
    assert [fmt_bytes_short(1.98e9), fmt_bytes_short(20_462_592), fmt_bytes_short(96_256)] == \
        ["1.98 GB", "20.5 MB", "96.3 KB"]


def test_a_brackets_two_ends_print_apart():
    # 0.1512 and 0.1527 differ at the third significant digit; 0.15 and 0.1502 only at the fourth; 1234.5 and
    # 1236 at the fourth (printed with a separator); equal ends print equal at nine digits
    assert fmt_pair(0.1512, 0.1527) == ("0.151", "0.153")
    assert fmt_pair(0.15, 0.1502) == ("0.15", "0.1502")
    assert fmt_pair(1234.5, 1236.0) == ("1,234", "1,236")
    assert fmt_pair(2.0, 2.0) == ("2", "2")


def test_display_width_counts_a_wide_character_as_two_columns():
    """Latin letters, digits and spaces one column each; CJK ideographs and full-width forms two (as a terminal
    lays them out); counted by hand."""
    assert display_width("") == 0
    assert display_width("TPOT p90") == 8
    assert display_width("首字延迟") == 8
    assert display_width("TTFT 上限 0.5 s") == 15
    assert display_width("（）") == 4, "full-width parentheses"
