"""An answer shown before its question (tests/answer_leaks.py, run by tests/nbval_answers.py as nbval executes a
lesson): what counts as showing it (the number printed to its rounding, its quotient's terms printed in one unit, a
figure's value), what does not (one-digit numbers, a figure's whole numbers, cells below the question, the model
beside a measurement), and the plugin failing a reveal cell of a small notebook run under nbval."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import answer_leaks as A

pytestmark = pytest.mark.cpu_same
ROOT = Path(__file__).resolve().parents[1]


def _stream(text):
    return [{"output_type": "stream", "name": "stdout", "text": text}]


def _figure(xs, ys, name="trace"):
    fig = {"data": [{"type": "scatter", "x": xs, "y": ys, "name": name}], "layout": {}}
    return [{"output_type": "display_data", "data": {"application/vnd.plotly.v1+json": fig}}]


def test_numbers_carry_their_rounding_and_skip_one_digit_and_words():
    found = {n.text: (n.lo, n.hi) for n in A.numbers("fp32 naive x0.110 4,096 warps, 2 waves, 1.5e-3 s, sm_90")}
    assert set(found) == {"0.110", "4,096", "1.5e-3"}
    assert found["0.110"] == pytest.approx((0.1095, 0.1105)) and found["4,096"] == pytest.approx((4095.5, 4096.5))
    assert found["1.5e-3"] == pytest.approx((1.45e-3, 1.55e-3))


def test_an_answer_printed_to_its_rounding_or_plotted_is_shown():
    measured = A.Answer("measured", 0.1089)
    assert A.leaks(measured, A.Shown.of(_stream("fp32 naive  0.468 TB/s  x0.110"))) == "prints 0.110"  # within 1%
    assert A.leaks(measured, A.Shown.of(_stream("x0.150"))) is None
    assert A.leaks(A.Answer("measured", 0.0715), A.Shown.of(_stream("flash 0.071 ms"))) == "prints 0.071"
    assert A.leaks(A.Answer("measured", 0.0715), A.Shown.of(_stream("flash 0.07 ms"))) is None  # one digit
    assert A.leaks(A.Answer("measured", 589.31), A.Shown.of(_figure([2048], [589.31]))) == "plots 589.3"
    assert A.leaks(A.Answer("measured", 4096.0), A.Shown.of(_figure([4096], [1.0]))) is None  # an axis's size
    assert A.leaks(A.Answer("model", 27.0), A.Shown.of(_stream("attention  27 kernels"))) is None  # a count
    assert A.leaks(A.Answer("model", 120.0), A.Shown.of(_stream("120 tiles"))) == "prints 120"


def test_a_quotients_terms_printed_in_one_unit_show_it():
    ratio = A.Answer("measured", 99000 / 42000, (99000.0, 42000.0))
    table = "2010  2,308 M  3.28 GHz  42.0\n2020  39,500 M  3.20 GHz  99.0\n"
    assert A.leaks(ratio, A.Shown.of(_stream(table))) == "prints 99.0 and 42.0, the terms of its quotient"
    assert A.leaks(ratio, A.Shown.of(_stream("2020: 99.0"))) is None  # one term only
    assert A.leaks(ratio, A.Shown.of(_stream("99.0 and 4.20"))) is None  # not in one unit
    step = A.Answer("measured", 270.1 / 589.3, (270.1, 589.3))
    assert "terms of its quotient" in A.leaks(step, A.Shown.of(_figure([2048, 2056], [589.3, 270.1])))


def _cells(*sources):
    return [{"cell_type": "code", "source": s, "outputs": []} for s in sources]


def test_only_cells_above_the_question_count_and_only_the_measurement_beside_a_model():
    cells = _cells(
        "print(t)", "my_x = None  # your number: ms", "print(t)", "print(reveal(my_x, model=m, measured=a / b))"
    )
    [call] = A.reveal_calls(cells[3]["source"])
    assert call.guess == "my_x" and call.expressions == {"model": "m", "measured": "a / b", "measured:num": "a",
                                                         "measured:den": "b"}  # fmt: skip
    values = {"model": 0.016, "measured": 0.0715, "measured:num": 0.143, "measured:den": 2.0}
    above, below = {0: _stream("0.016 ms at the best rate")}, {2: _stream("0.0715 ms")}
    assert A.check_reveal(cells, above, 3, call, values) == []  # the model, computed by the learner
    assert A.check_reveal(cells, below, 3, call, values) == []  # shown after the question
    [line] = A.check_reveal(cells, {0: _stream("0.0715 ms")}, 3, call, values)
    assert line.startswith("cell 0 prints 0.0715 (measured 0.0715) before cell 1 asks for my_x")
    near = {"model": 159.1, "measured": 158.2}  # a model that lands on the measurement (the H100's bf16 rung)
    [call2] = A.reveal_calls("print(reveal(my_x, model=m, measured=t))")
    assert A.check_reveal(cells, {0: _stream("predicted 159.1 ms")}, 3, call2, near) == []
    assert A.check_reveal(cells, {0: _stream("measured 158.2 ms")}, 3, call2, near)  # the measurement itself
    assert (
        A.check_reveal(cells, {0: _stream("15 lanes take the branch")}, 3, call2, {"model": 9.0, "measured": 15.24})
        == []
    )
    assert A.check_reveal(cells, {0: _stream("15.2 times faster")}, 3, call2, {"model": 9.0, "measured": 15.24})
    only_model = A.reveal_calls("reveal(my_x, model=tiles)")[0]
    # a model's number is printed as it is: a measurement 0.5% from it (10: 0.876 GB/s beside 0.8711 GB) is not it
    assert A.check_reveal(cells, {0: _stream("busbw 0.876")}, 3, only_model, {"model": 0.8711}) == []
    assert A.check_reveal(cells, {0: _stream("0.871 GB")}, 3, only_model, {"model": 0.8711})
    assert A.check_reveal(cells, {0: _stream("120 tiles")}, 3, only_model, {"model": 120.0})


def test_the_root_conftest_loads_the_plugin():
    assert "tests.nbval_answers" in (ROOT / "conftest.py").read_text()


def _notebook(path, cells):
    nb = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": s}
            for i, s in enumerate(cells)
        ],  # fmt: skip
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


@pytest.mark.parametrize("leak", [True, False])
def test_nbval_fails_the_reveal_cell_whose_answer_was_printed_above_its_question(tmp_path, leak):
    show = "print(f'flash {t:.3f} ms')" if leak else "print('timed')"
    cells = ["t = 0.0715", show, "my_guess = None  # your number: ms",
             "from gpulab.exercises.predict import reveal\nprint(reveal(my_guess, model=0.016, measured=t, unit='ms'))"]  # fmt: skip
    nb = tmp_path / "lesson.ipynb"
    _notebook(nb, cells)
    run = subprocess.run(  # the plugin as the root conftest.py loads it, on a notebook outside the repository
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.nbval_answers",
            "--nbval-lax",
            str(nb),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if leak:
        assert run.returncode == 1, run.stdout[-2000:]
        assert "cell 1 prints 0.071 (measured 0.0715) before cell 2 asks for my_guess" in run.stdout
    else:
        assert run.returncode == 0, run.stdout[-2000:]
