"""The calculator's seq_len pair (issue 25: a linear slider over 1-262,144 could not be set to 1,000, nor dragged
at the short end): a log₂ slider to drag and the exact box it writes; and what the Lesson asks the default model."""

from __future__ import annotations

from itertools import pairwise

import pytest

from kvviz.ui.calculator.tab import SEQ_LEN_TOP_LOG2, length_at, position_of, slider_follows
from kvviz.ui.common import EXAMPLE_PROMPTS
from kvviz.ui.lesson.tab import LONG_PROMPT


@pytest.mark.parametrize(("position", "length"), [(0, 1), (7, 128), (10, 1024), (13, 8192), (18, 262_144),
                                                  (9.97, 1003), (12.5, 5793)])  # 2^9.97 = 1,002.9; 2^12.5 = 5,792.6
def test_a_slider_position_gives_the_whole_length_two_to_its_power(position, length):
    assert length_at(position) == length


@pytest.mark.parametrize(("length", "position"), [(1, 0.0), (128, 7.0), (1000, 9.97), (4096, 12.0),
                                                  (262_144, 18.0), (10**6, 18.0)])  # log2(1000) = 9.966
def test_a_length_puts_the_slider_at_its_log2_on_the_step_and_within_the_ends(length, position):
    assert position_of(length) == pytest.approx(position)


def test_every_step_of_the_slider_is_a_small_change_in_length():
    """Dragging is as fine at 128 tokens as at 262,144: one step changes the length by under 2% (2^0.01 = 1.0069, and
    the rounding to a whole token adds at most 1 in 128 at the slider's short end), where a linear slider over 1-262,144
    moved about 800 tokens per pixel of its 330 (128 was the slider's first pixel)."""
    steps = [round(i * 0.01, 2) for i in range(700, SEQ_LEN_TOP_LOG2 * 100)]
    ratios = [length_at(b) / length_at(a) for a, b in pairwise(steps)]
    assert max(ratios) < 1.02


@pytest.mark.parametrize(("length", "position", "moved_to"), [
    (1000, 13.0, 9.97),  # typed in the box: the slider follows
    (1003, 9.97, None),  # written by a drag to 9.97: the slider stays where it was dragged
    (4096, 13.0, 12.0),  # set by the Lesson's "Show me"
    (0, 13.0, None), ("abc", 13.0, None), (None, 13.0, None), (float("nan"), 13.0, None),  # the calculator says why
])
def test_the_slider_follows_the_box_but_not_its_own_drag(length, position, moved_to):
    moved = slider_follows(length, position)
    if moved_to is None:
        assert not isinstance(moved, float), f"the slider moved to {moved} for {length!r}"
    else:
        assert moved == pytest.approx(moved_to)


def test_the_lessons_long_prompt_asks_what_the_default_model_answers_well():
    """Question 1's long prompt ends with one of the page's examples (SmolLM2-135M-Instruct answers them well), not a
    question about the KV cache, which the model answered a student with confident nonsense."""
    question = EXAMPLE_PROMPTS[0]
    assert LONG_PROMPT.endswith(question[0].lower() + question[1:])
    assert "KV cache stores" not in LONG_PROMPT
