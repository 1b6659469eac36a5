"""The race of the flash-attention forward (lesson 08) and backward (08b) (gpulab.exercises.race): without a GPU
the recorded headline point of gpulab's kernel and SDPA's; under the test clock the learner's kernel checked,
then timed, and a kernel wrong only on the race's inputs flagged."""

import pytest

import gpulab
from gpulab.core import reference, timing
from gpulab.exercises import ex08_solutions, ex08b_solutions, race

pytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="the CPU paths: on a GPU the real clock times these")

ROW = next(
    r for r in reference.load("h200")["lesson08"]["headline"] if (r["d"], r["L"], r["causal"]) == (128, 4096, False)
)


def _fastest_sdpa(part: str) -> float:
    """The recorded time of SDPA's fastest backend in the headline row (the race names it)."""
    return min(ROW[b][part] for b in race._SDPA08 if b in ROW and part in ROW[b])


def flash_forward(q, k, v, causal, out):
    ex08_solutions.flash_forward(q, k, v, causal, out, 64, 64)


def test_without_a_gpu_lesson_08_shows_the_recorded_headline_point():
    def never(*a):
        pytest.fail("race launched the learner's kernel without a GPU")

    never.__name__ = "flash_forward"
    r = race.race(never, show=False)
    assert r.lesson == "08" and not r.live and r.n == 4096 and r.message.startswith("timing needs a GPU")
    assert r.ms("gpulab") == ROW["ours"]["fwd_ms"] and r.ms("torch") == _fastest_sdpa("fwd_ms")
    assert r.model_ms is None and len(str(r).splitlines()) <= 8


def test_under_the_test_clock_lesson_08_checks_then_times_the_learners_forward():
    launched = []

    def mine(q, k, v, causal, out):
        launched.append(q.shape[2])
        flash_forward(q, k, v, causal, out)

    mine.__name__ = "flash_forward"
    with timing.test_clock(ms=0.5):
        r = race.race(mine, show=False)
    assert r.live and r.n == race.FAKE_L08 and not r.message, str(r)
    assert [e.ms for e in r.entries] == [0.5, 0.5, 0.5] and race.FAKE_L08 in launched
    assert r.model_ms > 0 and timing.is_fake_record(r.asdict())


def test_without_a_gpu_lesson_08b_shows_the_recorded_backward_point():
    def never(*a):
        pytest.fail("race launched the learner's kernel without a GPU")

    never.__name__ = "flash_backward_kernel"
    r = race.race(never, show=False)
    assert r.lesson == "08b" and not r.live and r.n == 4096 and r.message.startswith("timing needs a GPU")
    assert r.ms("gpulab") == ROW["ours"]["bwd_ms"] and r.ms("torch") == _fastest_sdpa("bwd_ms")
    assert r.model_ms is None and len(str(r).splitlines()) <= 8


def test_under_the_test_clock_lesson_08b_checks_then_times_the_learners_backward():
    launched = []

    def flash_backward_kernel(q, k, v, do, lse, delta, causal, out):
        launched.append(q.shape[2])
        ex08b_solutions.flash_backward_kernel(q, k, v, do, lse, delta, causal, out)

    with timing.test_clock(ms=0.5):
        r = race.race(flash_backward_kernel, show=False)
    assert r.live and r.n == race.FAKE_L08 and not r.message, str(r)
    assert [e.ms for e in r.entries] == [0.5, 0.5, 0.5] and race.FAKE_L08 in launched
    assert r.model_ms > 0 and timing.is_fake_record(r.asdict())


def test_a_backward_wrong_only_on_the_race_inputs_is_flagged():
    def flash_backward_kernel(q, k, v, do, lse, delta, causal, out):
        ex08b_solutions.flash_backward_kernel(q, k, v, do, lse, delta, causal, out)
        if q.shape[2] == race.FAKE_L08:  # a length of no checker case
            out[0] += 1.0

    with timing.test_clock(ms=0.5):
        r = race.race(flash_backward_kernel, show=False)
    assert "differs from torch's" in r.message
