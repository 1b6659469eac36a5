"""The race (gpulab.exercises.race) of the sigmoid3 backward (lesson 05), the transpose (06), the tiled matmul (07)
and the persistent matmul (07b): without a GPU it shows gpulab's and torch's recorded points beside the lesson's
model, read here from the reference file; under the labelled test clock the GPU path runs the learner's kernel,
gpulab's and torch's on the CPU, and a wrong kernel is flagged."""

import math

import pytest

import gpulab
from gpulab.core import reference, timing
from gpulab.exercises import ex05_solutions, ex06_solutions, ex07_solutions, ex07b_solutions, race

pytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="the CPU paths: on a GPU the real clock times these")

REC = reference.load("h200")
SOLUTIONS = {
    "05": ex05_solutions.sigmoid3_bwd,
    "06": ex06_solutions.transpose,
    "07": ex07_solutions.tiled_matmul,
    "07b": ex07b_solutions.persistent_matmul,
}
_T5 = next(r for r in REC["lesson05"]["teaching"] if r["pass"] == "backward" and r["kernel"] == "production")
_T6 = REC["lesson06"]["transpose"]
_MS6 = {r["method"]: r["ms"] for r in _T6["rows"] if r["dtype"] == "fp32"}
_B7 = {r["step"]: r for r in REC["lesson07"]["build"]}
_N7 = _B7["fast path"]["n"]
_H7 = {r["method"]: r for r in REC["lesson07"]["headline"] if r["n"] == 4096 and r["dtype"] == "fp16"}
# (n, gpulab ms, torch ms, model ms): the model by hand from the lesson's count and the recorded ceilings
RECORDED = {
    "05": (_T5["n"], _T5["ms"], None, 3 * 4 * _T5["n"] / (REC["profile"]["copy_tbps"] * 1e9)),
    "06": (
        _T6["m"] * _T6["n"],
        _MS6["tiled"],
        _MS6["torch"],
        8 * _T6["m"] * _T6["n"] / (REC["lesson06"]["copy_tbps"] * 1e9),
    ),
    "07": (
        _N7**2,
        _B7["fast path"]["ms"],
        _B7["torch"]["ms"],
        2 * _N7**3 / (REC["profile"]["matmul_tflops"]["fp16"] * 1e9),
    ),
    "07b": (
        4096**2,
        _H7["gpulab"]["ms"],
        _H7["torch"]["ms"],
        2 * 4096**3 / (REC["profile"]["matmul_tflops"]["fp16"] * 1e9),
    ),
}


def _named(name, fn):
    fn.__name__ = name
    return fn


def _never_called(*args):
    pytest.fail("race launched the learner's kernel without a GPU")


@pytest.mark.parametrize("lesson", sorted(SOLUTIONS))
def test_without_a_gpu_the_recorded_points_and_the_model(lesson):
    r = race.race(_named(SOLUTIONS[lesson].__name__, _never_called), show=False)
    n, g_ms, t_ms, model_ms = RECORDED[lesson]
    assert not r.live and r.lesson == lesson and r.message.startswith("timing needs a GPU")
    assert r.n == n and r.ms("yours") is None and r.ms("gpulab") == g_ms and r.ms("torch") == t_ms
    assert r.model_ms == pytest.approx(model_ms, rel=1e-12)
    assert len(str(r).splitlines()) <= 8 and list(r.figure.data[0].x) == [None, g_ms, t_ms]


@pytest.mark.parametrize("lesson", sorted(SOLUTIONS))
def test_under_the_test_clock_the_learners_kernel_runs_and_the_model_follows_its_count(lesson):
    launched = []

    def mine(*args):
        launched.append(tuple(args[0].shape))
        return SOLUTIONS[lesson](*args)

    with timing.test_clock(ms=0.5) as clock:
        r = race.race(_named(SOLUTIONS[lesson].__name__, mine), show=False)
    assert r.live and r.where == timing.FAKE_LABEL and r.n == race.FAKE_N and not r.message, str(r)
    assert [e.ms for e in r.entries] == [0.5, 0.5, 0.5] and clock.calls == 4
    # 05: 12n bytes over the copy's 8n (timed 0.5); 06: 8n over 8n; 07: (N / 2N)^3 of the matmul timed at 2N
    assert r.model_ms == pytest.approx({"05": 0.75, "06": 0.5, "07": 0.5 / 8, "07b": 0.5 / 8}[lesson])
    side = math.isqrt(race.FAKE_N)
    assert launched[-1] == ((race.FAKE_N,) if lesson == "05" else (side, side))
    assert timing.is_fake_record(r.asdict())


def test_a_kernel_wrong_only_on_the_race_inputs_is_flagged():
    side = 144  # no shape of the checkers' (their random sides stay below 130)

    def transpose(a, out):  # right on the checker's shapes, a copy at the race's
        if a.shape[0] == side:
            out.copy_(a)
        else:
            ex06_solutions.transpose(a, out)

    def tiled_matmul(a, b, out):
        ex07_solutions.tiled_matmul(a, b, out)
        if a.shape[0] == side:
            out[0, 0] += 100

    with timing.test_clock():
        for fn in (transpose, tiled_matmul):
            r = race.race(fn, n=side * side, show=False)
            assert r.ms("yours") == 1.0 and "differs from torch's" in r.message, str(r)


def test_the_lessons_are_found_by_name_and_a_size_that_is_no_square_is_refused():
    with timing.test_clock():
        assert race.race(ex07_solutions.tiled_matmul, lesson=7, n=256, show=False).n == 256
        with pytest.raises(ValueError, match="square number of elements"):
            race.race(ex06_solutions.transpose, n=1000, show=False)
    with pytest.raises(ValueError, match="sigmoid3_bwd \\(lesson 05\\).*transpose \\(lesson 06\\)"):
        race.race(_named("my_kernel", _never_called))
