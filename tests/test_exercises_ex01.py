"""Lesson 01's transfer exercise, the batch at which a linear layer reaches the ridge: the solution by hand, and each
usual wrong answer gets the message that names it."""

import math

from gpulab.exercises import ex01


def test_batch_to_ridge_by_hand():
    sol = ex01.check_batch_to_ridge.solution
    # the seed accelerator (ridge 100), fp32, K = N = 1000: 2B * 1e6 >= 400 (2000 B + 1e6) -> B >= 4e8 / 1.2e6 = 333.3
    assert sol(1000, 1000, 4, 100.0, 1.0) == 334
    # K = N = 64 in bf16: the intensity tends to 2 * 64 * 64 / (128 * 2) = 32 FLOP/B, below any ridge above 32
    assert sol(64, 64, 2, 100.0, 1.0) is None and sol(64, 64, 2, 31.0, 1.0) is not None
    assert ex01.check_batch_to_ridge(sol).ok


def test_batch_to_ridge_mistakes_are_named():
    check, sol = ex01.check_batch_to_ridge, ex01.check_batch_to_ridge.solution
    for wrong, said in (
        (lambda K, N, s, C, B: (sol(K, N, s, C, B) or 2) - 1, "round up"),
        (lambda K, N, s, C, B: max(1, math.ceil(s * C / B / 2)), "no batch reaches it"),
        (lambda K, N, s, C, B: sol(K, N, 1, C, B), "elements x itemsize"),
        (lambda K, N, s, C, B: float(sol(K, N, s, C, B) or 0), "expected an int"),
    ):
        rep = check(wrong)
        assert not rep.ok and said in str(rep), str(rep)
    # the weights-only count on a case where a batch exists
    rep = check(lambda K, N, s, C, B: max(1, math.ceil(s * C / B / 2)) if sol(K, N, s, C, B) else None)
    assert not rep.ok and "x and y move too" in str(rep), str(rep)
