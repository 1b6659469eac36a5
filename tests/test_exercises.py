"""The exercise checkers: reference solutions pass; common mistakes fail with the hint that names them."""

import math

import numpy as np
import pytest

from gpulab.exercises import MATH_FP32_ONLY, Report, describe_error, ex00, ex01, run_cases
from tests.exercise_checks import recorded_compile_error as _recorded_error


def _stub(**_):
    raise NotImplementedError


def test_reference_solutions_pass():
    for check in (
        ex00.check_copy_time,
        ex00.check_ridge,
        ex01.check_matmul_counts,
        ex01.check_bound_ms,
        ex01.check_scale_add,
    ):
        rep = check(check.solution)
        assert rep.ok, str(rep)


def test_stubs_report_not_attempted():
    rep = ex00.check_copy_time(lambda n_bytes, tbps: _stub())
    assert not rep.ok and not rep.attempted and "not attempted" in str(rep)


def test_copy_time_hints():
    rep = ex00.check_copy_time(lambda n_bytes, tbps: n_bytes / (tbps * 1e12) * 1e3)
    assert not rep.ok and "reads AND writes" in str(rep)
    rep = ex00.check_copy_time(lambda n_bytes, tbps: str(2 * n_bytes / (tbps * 1e12) * 1e3))
    assert not rep.ok and "expected a number" in str(rep)


def test_ridge_requires_none_for_missing_units():
    sol = ex00.check_ridge.solution
    rep = ex00.check_ridge(lambda gpu, dtype: sol(gpu, dtype) or 0.0)
    assert not rep.ok and "expected None" in str(rep)


def test_matmul_counts_hints_and_types():
    rep = ex01.check_matmul_counts(lambda M, N, K, itemsize: (M * N * K, (M * K + K * N) * itemsize))
    assert "a multiply-add is 2 FLOPs" in str(rep) and "C must be written too" in str(rep)
    sol = ex01.check_matmul_counts.solution
    assert ex01.check_matmul_counts(lambda *a: tuple(np.int64(v) for v in sol(*a))).ok
    assert not ex01.check_matmul_counts(lambda *a: tuple(float(v) for v in sol(*a))).ok
    rep = ex01.check_matmul_counts(lambda *a: (np.array([1, 2]), 3))
    assert not rep.ok and "pair of ints" in str(rep)


def test_bound_ms_hints():
    rep = ex01.check_bound_ms(
        lambda flops, bytes_moved, peak_tflops, hbm_tbps: (flops / peak_tflops + bytes_moved / hbm_tbps) / 1e9
    )
    assert not rep.ok and "the bound is the max" in str(rep)


def test_a_later_not_implemented_is_a_failure_not_a_skip():
    calls = []

    def partial(v):
        calls.append(v)
        if len(calls) > 1:
            raise NotImplementedError
        return v

    rep = run_cases("partial", partial, [dict(v=1), dict(v=2)], lambda case, got: None)
    assert rep.attempted and not rep.ok and "NotImplementedError" in str(rep)
    assert isinstance(rep, Report)


def test_learner_may_rename_parameters():
    assert ex00.check_copy_time(lambda size, bw: 2 * size / (bw * 1e12) * 1e3).ok


def test_checkers_copy_every_input_and_accept_float32_answers():
    from gpulab.exercises import ex02

    def cheat(cond, cost_a, cost_b):  # make the case uniform so that any answer "agrees"
        cond[:] = [True] * 32
        return 1.0

    assert not ex02.check_warp_efficiency(cheat).ok
    sol = ex02.check_warp_efficiency.solution
    assert ex02.check_warp_efficiency(lambda *a: float(np.float32(sol(*a)))).ok


def test_crossing_n_by_hand_and_its_mistakes():
    check = ex01.check_crossing_n
    sol = check.solution
    # seed: C/B = 100 FLOP/B; fp32: 2N / 12 >= 100 at N = 600; H200 datasheet bf16: 989.5 / 4.8 = 206.15 -> N = 619
    assert sol(100.0, 1.0, 4) == 600 and sol(989.5, 4.8, 2) == 619
    assert check(sol).ok and check(lambda c, b, s: np.int64(sol(c, b, s))).ok
    for wrong, said in (
        (lambda c, b, s: sol(c, b, s) - 1, "round up"),
        (lambda c, b, s: max(1, math.ceil(s * c / b)), "C is written too"),
        (lambda c, b, s: max(1, math.ceil(3 * s * c / b)), "2 FLOPs"),
        (lambda c, b, s: 1.5 * s * c / b, "expected an int"),
    ):
        rep = check(wrong)
        assert not rep.ok and said in str(rep), str(rep)


# ---- compile errors: what the GPU compiler says (fixtures recorded by tests/compile_errors.py) ---------------


@pytest.mark.parametrize(
    "name, want",
    [
        ("sin_fp16", ("tl.sin on fp16", "fp32 or fp64 only", "x.to(tl.float32)", "kernel line 6: s = tl.sin(x)")),
        ("sin_bf16", ("tl.sin on bf16", "fp32 or fp64 only", "kernel line 6")),
        ("exp_fp16", ("tl.exp on fp16", "fp32 or fp64 only", "kernel line 3")),
        ("arange_100", ("tl.arange's length must be a power of 2", "kernel line 2: offs = tl.arange(0, BLOCK)")),
        ("dot_8", ("tl.dot needs tiles of at least 16", "kernel line 4")),
        ("undefined_name", ("NameError", "undefined_value", "kernel line 3")),
    ],
)
def test_describe_error_reads_the_gpu_compilers_message(name, want):
    msg = describe_error(_recorded_error(name))
    assert all(w in msg for w in want), msg
    assert not msg.startswith("at ") and "\n" not in msg, msg  # one line, not the bare "at 7:8:"


def test_describe_error_reads_the_interpreters_exceptions_too():
    assert describe_error(ValueError("Expected dtype ['fp32', 'fp64'] but got bf16")).startswith(
        "a math function on bf16: " + MATH_FP32_ONLY
    )
    assert describe_error(ValueError("arange's range must be a power of 2")).startswith("tl.arange's length")
    assert describe_error(TypeError("bad\nmore")) == "TypeError: bad"


def test_a_checker_reports_a_compile_error_by_describe_error():
    def compiles_badly(x):
        raise _recorded_error("sin_fp16")

    rep = run_cases("f", compiles_badly, [{"x": 1}], lambda case, got: None)
    assert rep.failures == [f"f(x=1) raised {describe_error(_recorded_error('sin_fp16'))}"], rep.failures
