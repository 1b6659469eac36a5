"""The reveal of a prediction (gpulab.exercises.predict): an empty guess still shows the answer, a guess is judged
against the nearer of the model and the measurement with its ratio, far misses get a why, a gap of 2x or more
between model and measurement gets its reason, units convert, bad input names itself."""

import math

import pytest

from gpulab.exercises.predict import reveal


@pytest.mark.parametrize("empty", [None, ..., "", "   "])
def test_an_empty_guess_asks_for_one_and_still_shows_the_answer(empty):
    r = reveal(empty, model=0.5, measured=0.625, unit="ms", where="recorded on X")
    text = str(r)
    assert r.guess is None and r.ratio is None and r.verdict == "none"
    assert text.startswith("no prediction yet") and "in the prediction cell above" in text
    assert "0.5 ms" in text and "0.625 ms (recorded on X)" in text
    assert repr(r) == text and len(text.splitlines()) <= 6


def test_a_guess_is_judged_against_the_nearer_answer_and_the_report_names_it():
    r = reveal(0.7, model=0.5, measured=0.625, unit="ms")
    assert r.matches == "measurement" and r.answer == 0.625 and r.ratio == pytest.approx(0.7 / 0.625)
    text = str(r)
    assert "1.4x the model" in text and "1.12x the measurement" in text and "why" not in text
    assert r.verdict == "close" and "close to the measurement: within 25%" in text
    low = reveal(0.45, model=0.5, measured=0.625, unit="ms")
    assert low.matches == "model" and low.verdict == "close" and "close to the model" in str(low)
    # with one answer only, that one, and the verdict names no answer
    assert reveal(0.7, model=0.5, unit="ms").verdict == "off" and reveal(0.7, model=0.5, unit="ms").matches == "model"
    assert str(reveal(0.6, measured=0.625, unit="ms")).splitlines()[-1] == "close: within 25%"
    off = reveal(1.0, model=0.5, measured=5.0, unit="ms")
    assert off.matches == "model" and "off by 2x (too high) against the model, the nearer answer" in str(off)


@pytest.mark.parametrize("gap", [1 / 1000, 1 / 4.6, 1 / 2, 1.0, 2.0, 4.6, 12.8 / 5, 1000.0])
def test_a_guess_equal_to_the_model_or_the_measurement_is_never_far_off(gap):
    model = 893.0
    for guess in (model, model * gap):
        r = reveal(guess, model=model, measured=model * gap, unit="warps", why="count again")
        assert r.verdict == "close", (gap, guess, str(r))
        assert "far off" not in str(r) and "why: count again" not in str(r)
    assert reveal(model, model=model, measured=model * gap).matches == ("measurement" if gap == 1 else "model")


def test_a_gap_of_2x_or_more_between_model_and_measurement_gives_its_reason():
    why_gap = "the measured kernel keeps more loads in flight than Little's law needs"
    r = reveal(893, model=893.0, measured=4096.0, unit="warps", gap_why=why_gap)
    assert r.gap == pytest.approx(4096 / 893)
    assert str(r).splitlines()[-1] == f"the measurement is 4.6x above the model: {why_gap}"
    below = str(reveal(None, model=10.0, measured=2.0, unit="ms", gap_why="it overlaps"))
    assert below.splitlines()[-1] == "the measurement is 5x below the model: it overlaps"
    assert "measurement is 2x above" in str(reveal(1.0, model=1.0, measured=2.0, gap_why="g"))
    for near in (1.99, 1 / 1.99, 1.0):  # under 2x apart: no gap line
        assert "the measurement is" not in str(reveal(1.0, model=1.0, measured=near, gap_why="g"))
    assert "does not say" in str(reveal(1.0, model=1.0, measured=3.0))  # no reason passed: said so
    assert reveal(1.0, model=1.0).gap is None and reveal(1.0, measured=1.0).gap is None


def test_off_and_far_say_by_how_much_and_far_says_why():
    off = reveal(0.625, measured=1.0, unit="ms")
    assert off.verdict == "off" and str(off).splitlines()[-1] == "off by 1.6x (too low)"
    far = reveal(30.0, model=10.0, unit="GB", why="count the write as well as the read")
    assert far.verdict == "far" and far.ratio == 3.0
    lines = str(far).splitlines()
    assert lines[-2] == "far off: 3x too high" and lines[-1] == "why: count the write as well as the read"
    unit_miss = reveal(750.0, measured=0.75, unit="ms")  # microseconds written as milliseconds
    assert "factor of about 1000" in str(unit_miss) and "check the unit" in str(unit_miss)
    bits = reveal(1.0, model=8.0, unit="GB")  # bytes counted as bits
    assert "bits against bytes" in str(bits)


def test_the_verdict_boundaries():
    assert reveal(1.25, model=1.0).verdict == "close" and reveal(1 / 1.25, model=1.0).verdict == "close"
    assert reveal(1.26, model=1.0).verdict == "off" and reveal(2.0, model=1.0).verdict == "off"
    assert reveal(2.01, model=1.0).verdict == "far" and reveal(0.49, model=1.0).verdict == "far"


def test_units_convert_a_guess_written_as_text():
    assert reveal("750 us", model=1.0, unit="ms").guess == pytest.approx(0.75)
    assert reveal("750µs", model=1.0, unit="ms").guess == pytest.approx(0.75)
    assert reveal("2 GiB", model=1.0, unit="B").guess == 2 * 2**30
    assert reveal("1.5e3 MB", model=1.0, unit="GB").guess == pytest.approx(1.5)
    assert reveal("4 TB/s", model=1.0, unit="GB/s").guess == pytest.approx(4000)
    assert reveal("50%", model=1.0, unit="x").guess == pytest.approx(0.5)
    assert reveal("0.25", model=1.0, unit="ms").guess == 0.25  # no unit: the reveal's
    assert reveal("62 instructions", model=62.0, unit="instructions").guess == 62.0  # a free-form unit, the same
    assert "62 instructions" in str(reveal(62, model=62.0, unit="instructions"))


@pytest.mark.parametrize(
    "guess, unit, match",
    [
        ("3 ms", "GB", "is a time .* asks for a bytes"),
        ("3 furlongs", "ms", "cannot convert 'furlongs'"),
        ("3 instructions", "ms", "cannot convert"),
        ("ten", "ms", "my_guess must be a number"),
        ("1 2", "ms", "cannot convert .2."),
        ("2 ms extra", "ms", "my_guess must be a number"),
    ],
)
def test_text_that_does_not_convert_is_refused_with_its_reason(guess, unit, match):
    with pytest.raises(ValueError, match=match):
        reveal(guess, model=1.0, unit=unit)


@pytest.mark.parametrize("guess", [True, [1.0], {"ms": 1}, 1j])
def test_a_guess_that_is_not_a_number_is_a_type_error_naming_it(guess):
    with pytest.raises(TypeError, match="my_guess must be a number"):
        reveal(guess, model=1.0, unit="ms")


@pytest.mark.parametrize("guess", [0, -1.0, math.nan, math.inf, "-2 ms"])
def test_a_guess_that_is_not_positive_and_finite_is_a_value_error(guess):
    with pytest.raises(ValueError, match="my_guess must be a positive, finite number"):
        reveal(guess, model=1.0, unit="ms")


def test_bad_answers_and_units_are_refused():
    with pytest.raises(ValueError, match="model must be a positive"):
        reveal(1.0, model=-1.0)
    with pytest.raises(ValueError, match="measured must be a positive"):
        reveal(1.0, model=1.0, measured=math.nan)
    with pytest.raises(ValueError, match="needs an answer"):
        reveal(1.0)
    with pytest.raises(ValueError, match="needs an answer"):
        reveal(None)  # an empty guess still needs something to reveal
    with pytest.raises(TypeError, match="unit must be a string"):
        reveal(1.0, model=1.0, unit=None)


@pytest.mark.parametrize("mu", ["\u00b5", "\u03bc"], ids=["micro sign", "greek mu"])
def test_microseconds_read_with_either_mu(mu):
    assert reveal(f"120 {mu}s", model=100.0, unit="us").guess == pytest.approx(120)
    assert reveal(f"120 {mu}s", model=0.1, unit="ms").guess == pytest.approx(0.12)
    assert reveal("120 us", model=100.0, unit=f"{mu}s").guess == pytest.approx(120)  # the reveal's unit too


def test_commas_group_thousands_and_nothing_else():
    assert reveal("1,000", model=1.0).guess == 1000.0
    assert reveal("12,345,678 us", model=1.0, unit="ms").guess == pytest.approx(12345.678)
    assert reveal("1,000.5 GB", model=1.0, unit="GB").guess == 1000.5
    with pytest.raises(ValueError, match="a comma may only group thousands"):
        reveal("1,5", model=1.0, unit="ms")
    with pytest.raises(ValueError, match="cannot convert '0'"):
        reveal("1,0000", model=1.0, unit="ms")


def test_guesses_at_the_ends_of_the_float_range_are_judged_or_refused_plainly():
    tiny = reveal(5e-324, model=100.0, unit="us")  # the smallest float: guess / answer underflows to 0
    assert tiny.verdict == "far" and "2.02e+325x too low" in str(tiny) and tiny.ratio == 0.0
    huge = reveal(1e308, model=1e-10, unit="us")  # guess / answer overflows
    assert huge.verdict == "far" and "1e+318x too high" in str(huge)
    with pytest.raises(ValueError, match="my_guess must be a positive, finite number: an int of 401 digits"):
        reveal(10**400, model=1.0)
    with pytest.raises(ValueError, match="model must be a positive, finite number: an int of 401 digits"):
        reveal(1.0, model=10**400)
