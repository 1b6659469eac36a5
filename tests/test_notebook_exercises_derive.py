"""The learner derives an exercise's answer, not copies it from the screen: no lesson shows a kernel's Triton code
in its prose before the learner writes one (the flash forward's loop body as snippets), no lesson prints the
kernel the exercise is a one-line change of right before it (vector add before scale_add) or the reference of an
exercise before it (the dq kernel before the Triton backward), and no lesson asks for a count its own model
module answers in one call (tiles and waves: ``waves.wave_plan``; ring bytes: ``comm.bytes_per_rank``). The
derived exercises that replace those are checked here with a right, a wrong and a crashing answer."""

import json
import re
from pathlib import Path

import pytest

from gpulab.exercises import ex07, ex10

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _cells(path):
    return [
        (c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"])
        for c in json.loads(path.read_text())["cells"]
    ]


def _kernel_stubs(cells):
    """Indices of the cells where the learner writes a kernel: a stub that raises NotImplementedError beside
    Triton."""
    return [i for i, (k, s) in enumerate(cells) if k == "code" and "NotImplementedError" in s and "triton" in s]


@pytest.mark.cpu_same
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_triton_code_in_the_prose_before_the_learner_writes_a_kernel(path):
    cells = _cells(path)
    stubs = _kernel_stubs(cells)
    for i, (kind, src) in enumerate(cells[: max(stubs, default=0)]):
        if kind == "markdown":
            for block in re.findall(r"```(?:python)?\n(.*?)```", src, re.S):
                assert "tl." not in block, f"{path.stem} cell {i} shows Triton code before a kernel exercise"


#: Code a lesson must not print before the exercise that it answers: (notebook, the stub's text, the print).
SHOWN_BEFORE = [
    ("01_roofline", "def scale_add(", "gpulab.source(va.vector_add_kernel)"),
    ("08b_flash_backward", "def flash_backward_kernel(", "gpulab.source(T.flash_bwd_dq_kernel)"),
]


@pytest.mark.cpu_same
@pytest.mark.parametrize("stem, stub, shown", SHOWN_BEFORE, ids=[s for s, _, _ in SHOWN_BEFORE])
def test_a_kernels_reference_is_not_printed_before_its_exercise(stem, stub, shown):
    cells = _cells(ROOT / "notebooks" / f"{stem}.ipynb")
    at = next(i for i, (k, s) in enumerate(cells) if k == "code" and stub in s)
    before = [i for i, (k, s) in enumerate(cells[:at]) if k == "code" and shown in s]
    assert not before, f"{stem}: cells {before} print {shown} before the exercise in cell {at}"


#: Checkers whose answer is one call of the lesson's own model module: no lesson asks them.
RESTATED = {
    "ex07.check_tile_count": "waves.wave_plan(...).tiles",
    "ex07.check_waves": "waves.wave_plan(...).waves and its last wave",
    "ex10.check_ring_bytes": "comm.bytes_per_rank",
}


@pytest.mark.cpu_same
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_lesson_asks_for_what_its_model_answers_in_one_call(path):
    code = "\n".join(s for k, s in _cells(path) if k == "code")
    asked = [name for name in RESTATED if f"{name}(" in code]
    assert not asked, f"{path.stem} asks {asked}: the learner would restate {[RESTATED[a] for a in asked]}"


def test_largest_one_wave_right_wrong_and_crashing():
    sol = ex07.check_largest_one_wave.solution
    assert sol(256, 128, 108) == 1792 and sol(128, 256, 132) == 2048  # the seed's and lesson 07b's step
    assert ex07.check_largest_one_wave(sol).ok
    floor = ex07.check_largest_one_wave(lambda tm, tn, s: max(n for n in range(1, 5000) if (n // tm) * (n // tn) <= s))
    assert not floor.ok and "a partial tile at an edge is a whole tile" in str(floor)
    short = ex07.check_largest_one_wave(lambda tm, tn, s: sol(tm, tn, s) - 1)
    assert not short.ok and "still fits one wave" in str(short)
    crash = ex07.check_largest_one_wave(lambda tm, tn, s: 1 // 0)
    assert not crash.ok and "ZeroDivisionError" in str(crash)


def _stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("checker", [ex07.check_largest_one_wave, ex10.check_half_busbw_bytes])
def test_the_derived_exercises_stubs_are_not_attempted(checker):
    assert not checker(_stub).attempted and checker.hints


def test_half_busbw_bytes_right_wrong_and_crashing():
    sol = ex10.check_half_busbw_bytes.solution
    assert sol("all_reduce", 8, 10e-6, 450e9) == pytest.approx(8 * 10e-6 * 450e9)  # p alpha beta
    assert ex10.check_half_busbw_bytes(sol).ok
    one_message = ex10.check_half_busbw_bytes(lambda c, p, a, b: a * b)
    assert not one_message.ok and "ring_steps messages" in str(one_message)
    twice = ex10.check_half_busbw_bytes(lambda c, p, a, b: 2 * sol(c, p, a, b))
    assert not twice.ok and "the latency term equals the bandwidth term" in str(twice)
    crash = ex10.check_half_busbw_bytes(lambda c, p, a, b: {}[c])
    assert not crash.ok and "KeyError" in str(crash)
