"""The linear step-time model: its arithmetic, its fit recovering coefficients it did not see, its file."""

from __future__ import annotations

import json
import random

import pytest

from kvviz.base.errors import InputError
from kvviz.sim import step_time
from kvviz.sim.step_time import Calibration, LinearStepTime, StepContents

TRUE = LinearStepTime(a=0.004, b=2.5e-5, c=3e-4, d=4e-7)


def _rows(n: int, noise_s: float, seed: int = 1) -> list[tuple[StepContents, float]]:
    """Steps of random contents, timed by TRUE plus Gaussian noise of noise_s."""
    draw = random.Random(seed)
    rows = []
    for _ in range(n):
        step = StepContents(draw.randint(0, 2048), draw.randint(0, 128), draw.randint(0, 200_000))
        rows.append((step, TRUE.seconds(step) + draw.gauss(0.0, noise_s)))
    return rows


def test_seconds_is_the_linear_sum():
    """0.004 + 2.5e-5 * 100 + 3e-4 * 8 + 4e-7 * 10,000 = 0.004 + 0.0025 + 0.0024 + 0.004 = 0.0129 s."""
    assert TRUE.seconds(StepContents(100, 8, 10_000)) == pytest.approx(0.0129, rel=1e-12)


def test_e_prices_the_pairs_of_two_requests_prompt_tokens():
    """e = 1e-9 s a pair: 5,000 pairs of prompt tokens of two requests in the step add 5e-6 s, 0.012905 in all."""
    model = LinearStepTime(a=0.004, b=2.5e-5, c=3e-4, d=4e-7, e=1e-9)
    assert model.seconds(StepContents(100, 8, 10_000, prompt_cross=5_000)) == pytest.approx(0.012905, rel=1e-12)
    assert model.seconds(StepContents(100, 8, 10_000)) == pytest.approx(0.0129, rel=1e-12)


def test_the_fit_recovers_known_coefficients_exactly_without_noise():
    fitted = step_time.fit(_rows(40, 0.0))
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.fit.residual_max_s < 1e-12 and fitted.fit.r_squared == pytest.approx(1.0)


def test_the_fit_with_noise_states_residuals_near_the_noise():
    """With 0.5 ms of noise on 2,000 rows, each coefficient lands within a few standard errors and the residuals'
    rms is the noise's (the estimate of sigma from n - 4 degrees of freedom)."""
    fitted = step_time.fit(_rows(2000, 5e-4))
    a, b, c, d, e = fitted.step.coefficients()
    assert e == 0.0  # rows' fit knows four terms (a step of one request cannot tell e from d)
    assert a == pytest.approx(TRUE.a, abs=2e-4) and b == pytest.approx(TRUE.b, rel=0.02)
    assert c == pytest.approx(TRUE.c, rel=0.05) and d == pytest.approx(TRUE.d, rel=0.02)
    assert fitted.fit.residual_rms_s == pytest.approx(5e-4, rel=0.1)
    assert fitted.fit.rows == 2000


def test_the_fit_refuses_rows_that_cannot_tell_the_coefficients_apart():
    """No decode sequences anywhere: c cannot be told from nothing (rank 3); and fewer than 4 rows."""
    rows = [(StepContents(p, 0, 3 * p), 0.01 + p * 1e-5) for p in range(1, 10)]
    with pytest.raises(InputError) as caught:
        step_time.fit(rows)
    assert caught.value.key == "sim.fit_rows"
    with pytest.raises(InputError):
        step_time.fit(_rows(3, 0.0))


def test_a_calibration_file_round_trips_and_refuses_another_model(tmp_path):
    path = tmp_path / "cal.json"
    fitted = step_time.fit(_rows(10, 1e-4))
    step_time.save(Calibration(fitted.step, "tiny", "cpu", fitted.fit), path)
    loaded = step_time.load(path, model="tiny", device="cpu")
    assert loaded.step == fitted.step and loaded.fit == fitted.fit
    assert json.loads(path.read_text())["coefficients"]["a"] == fitted.step.a
    with pytest.raises(InputError) as caught:
        step_time.load(path, model="SmolLM2-135M-Instruct")
    assert str(caught.value) == f"{path} was calibrated for model tiny, not SmolLM2-135M-Instruct"


@pytest.mark.parametrize(("content", "why"), [
    ("not json", "JSONDecodeError"),
    ('{"format": "other"}', "format"),
    ('{"format": "kvviz.sim.step_time/2", "coefficients": {"a": 1, "b": 2, "c": 3}}', "coefficients"),
    ('{"format": "kvviz.sim.step_time/2", "coefficients": {"a": 1, "b": 2, "c": 3, "d": true}}', "coefficients"),
    ('{"format": "kvviz.sim.step_time/3", "coefficients": {"a": 1, "b": 2, "c": 3, "d": 4}}', "coefficients"),
])
def test_a_bad_calibration_file_is_refused_in_one_line(tmp_path, content, why):
    path = tmp_path / "cal.json"
    path.write_text(content)
    with pytest.raises(InputError) as caught:
        step_time.load(path)
    assert str(caught.value) == f"{path} is not a kvviz step-time calibration (its {why} is wrong)"


def test_a_calibration_of_the_old_format_is_refused_with_what_to_do(tmp_path):
    """Format 1's d was per KV token read, format 2's per attention pair: the same numbers would predict another
    prefill, so an old file is refused in one line that says why and how to make a new one."""
    path = tmp_path / "cal.json"
    path.write_text('{"format": "kvviz.sim.step_time/1", "coefficients": {"a": 1, "b": 2, "c": 3, "d": 4}}')
    with pytest.raises(InputError) as caught:
        step_time.load(path)
    assert str(caught.value) == (f"{path} is a calibration of format kvviz.sim.step_time/1, whose d was per KV token "
                                 "read; d is now per attention pair (a prompt's attention grows with its square): "
                                 "make it again with `python -m kvviz.sim calibrate`")


def test_a_calibration_of_four_terms_is_read_with_e_zero(tmp_path):
    """Format 2 had no e: its file predicts as it was fitted, e = 0; format 3 keeps e."""
    path = tmp_path / "cal.json"
    path.write_text('{"format": "kvviz.sim.step_time/2", "coefficients": {"a": 1, "b": 2, "c": 3, "d": 4}}')
    assert step_time.load(path).step == LinearStepTime(1, 2, 3, 4, 0)
    path.write_text('{"format": "kvviz.sim.step_time/3", "coefficients": {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}}')
    assert step_time.load(path).step == LinearStepTime(1, 2, 3, 4, 5)


def test_a_missing_calibration_file(tmp_path):
    with pytest.raises(InputError, match="no calibration file"):
        step_time.load(tmp_path / "none.json")


@pytest.mark.parametrize("text", ["1,2,3", "1,2,3,x", "1,2,3,-1", "1,2,3,nan", "", "1,2,3,4,-5", "1,2,3,4,5,6"])
def test_coefficients_on_the_command_line_are_four_or_five_numbers(text):
    with pytest.raises(InputError) as caught:
        step_time.parse_coefficients(text)
    assert caught.value.key == "sim.coefficients"


def test_coefficients_parse():
    assert step_time.parse_coefficients("0.004, 2.5e-5,3e-4,4e-7") == TRUE
    assert step_time.parse_coefficients("0.004,2.5e-5,3e-4,4e-7,1e-9").e == 1e-9
