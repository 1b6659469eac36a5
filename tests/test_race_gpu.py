"""The race on a GPU with the real clock (gpulab.exercises.race's live path, as a learner's notebook runs it): each
lesson's solution passes its checker, is timed beside gpulab's kernel and torch's on the same inputs at a size past
one tile (smaller than the lesson's, to keep the run short), and its result on those inputs matches torch's; a
kernel that fails its checker times nothing and gets the recording. GPU only: without one the same path runs under
the test clock (tests/test_exercises_race*.py)."""

import pytest

import gpulab
from gpulab.exercises import (
    ex00_solutions,
    ex01_solutions,
    ex02_solutions,
    ex03_solutions,
    ex04_solutions,
    ex05_solutions,
    ex06_solutions,
    ex07_solutions,
    ex07b_solutions,
    ex08_solutions,
    ex08b_solutions,
    ex09_solutions,
    race,
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpulab.ON_GPU, reason="the real clock needs a GPU")]


def flash_forward(q, k, v, causal, out):
    ex08_solutions.flash_forward(q, k, v, causal, out, 64, 64)


# lesson: (the learner's launcher, n): elements; 06, 07 and 07b the output's elements (a square); 08 and 08b L
SOLUTIONS = {
    "00b": (ex00_solutions.add, 2**20 + 3),
    "01": (ex01_solutions.scale_add, 2**20 + 3),
    "02": (ex02_solutions.loop_grouped, 2**16 + 3),
    "03": (ex03_solutions.relu_cast, 2**20 + 3),
    "04": (ex04_solutions.sincos_fused, 2**20 + 3),
    "05": (ex05_solutions.sigmoid3_bwd, 2**20 + 3),
    "06": (ex06_solutions.transpose, 1000**2),
    "07": (ex07_solutions.tiled_matmul, 1000**2),
    "07b": (ex07b_solutions.persistent_matmul, 1024**2),
    "08": (flash_forward, 1000),
    "08b": (ex08b_solutions.flash_backward_kernel, 1000),
    "09": (ex09_solutions.bias_gelu, 4 * 3072),
}


@pytest.mark.parametrize("lesson", sorted(SOLUTIONS))
def test_the_solution_is_timed_beside_gpulab_and_torch_and_matches_torch(lesson):
    fn, n = SOLUTIONS[lesson]
    r = race.race(fn, lesson=lesson, n=n, show=False)
    assert r.live and not r.fake and r.lesson == lesson and r.n == n, str(r)
    assert not r.message, str(r)  # the result on the race's inputs matches torch's within the lesson's tolerance
    assert all(e.ms is not None and e.ms > 0 for e in r.entries), str(r)
    assert r.model_ms is None or r.model_ms > 0
    assert "measured now" in r.where and len(str(r).splitlines()) <= 8


def test_a_kernel_that_fails_its_checker_times_nothing_on_a_gpu():
    def add(x, y, out):
        out.copy_(x)  # no y, and no Triton launch

    r = race.race(add, show=False)
    assert not r.live and r.ms("yours") is None and "does not pass ex00.check_add" in r.message
    assert r.entries[0].note == "not timed"
