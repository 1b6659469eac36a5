"""Lesson 03's checkers: the ReLU-and-cast kernel exercise with right and wrong kernels (each usual mistake gets
the message that names it, none crashes), and the counting exercises' reference solutions against wrong ones."""

import gpulab  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import pytest
import triton
import triton.language as tl

from gpulab.exercises import ex03, kernelcheck
from tests.exercise_checks import check_hints_then_solution, check_stub_not_attempted


@pytest.fixture(autouse=True)
def _short_long_case(monkeypatch):
    """The long case (``kernelcheck.LONG_N``) costs interpreter time; tests/test_kernelcheck_hostile.py runs it."""
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK: tl.constexpr, IN_FP32: tl.constexpr, WRONG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask) if MASK else tl.load(x_ptr + offs)
    if IN_FP32:
        x = x.to(tl.float32)
    y = tl.abs(x) if WRONG else tl.where(x < 0.0, 0.0, x)
    if IN_FP32:
        y = y.to(out_ptr.dtype.element_ty)
    if MASK:
        tl.store(out_ptr + offs, y, mask=mask)
    else:
        tl.store(out_ptr + offs, y)


def launcher(block=128, mask=True, in_fp32=True, wrong=False, grid=None):
    def relu_cast(x, out):
        n = x.numel()
        g = grid(n, block) if grid else triton.cdiv(n, block)
        _relu[(g,)](x, out, n, BLOCK=block, MASK=mask, IN_FP32=in_fp32, WRONG=wrong)

    return relu_cast


def test_right_kernels_pass():
    rep = ex03.check_relu_cast(launcher())
    assert rep.ok and rep.cases == 5 * len(ex03.RELU_CAST_PAIRS) + 1, str(rep)
    assert ex03.check_relu_cast(ex03.check_relu_cast.solution).ok


def test_wrong_values_name_index_expected_and_got():
    rep = ex03.check_relu_cast(launcher(wrong=True))  # |x| instead of max(x, 0)
    text = str(rep)
    assert not rep.ok and "values differ" in text and "expected" in text and "got" in text, text


def test_unmasked_kernel_is_named_and_does_not_crash():
    rep = ex03.check_relu_cast(launcher(mask=False))
    assert not rep.ok and "past the end of out" in str(rep) and "mask the store" in str(rep), str(rep)


def test_grid_too_small_is_named():
    rep = ex03.check_relu_cast(launcher(grid=lambda n, b: n // b))
    assert not rep.ok and "grid is too" in str(rep) and "cdiv" in str(rep), str(rep)


@pytest.mark.skipif(gpulab.ON_GPU, reason="the interpreter's bf16 pitfall; a GPU computes bf16 correctly")
def test_bf16_without_fp32_compute_gets_the_note():
    rep = ex03.check_relu_cast(launcher(in_fp32=False))
    text = str(rep)
    assert not rep.ok and "bf16" in text, text
    assert all("bf16" in f.split("(")[0] for f in rep.failures), text  # fp32 and fp16 pairs pass
    assert rep.failures[0].endswith("-> " + ex03._BF16_NOTE) and text.count(ex03._BF16_NOTE) == 1, text


def test_stub_reports_not_attempted():
    check_stub_not_attempted(ex03.check_relu_cast, 2)


def test_hints_then_solution(capsys):
    check_hints_then_solution(ex03.check_relu_cast, capsys)


# ---- the counting exercises (moved from the notebook): reference solutions pass, wrong answers fail -----------


def test_counting_checkers_accept_the_solutions_and_refuse_wrong_answers():
    assert ex03.check_relu_bytes(ex03.check_relu_bytes.solution).ok
    rep = ex03.check_relu_bytes(lambda n, dtype: n * dtype.itemsize)
    assert not rep.ok and "reads x AND writes y" in str(rep)
    assert ex03.check_relative_error(ex03.check_relative_error.solution).ok
    rep = ex03.check_relative_error(lambda c, c_ref: float((c.double() - c_ref).norm()))
    assert not rep.ok and "absolute error" in str(rep)
    assert ex03.check_fastest_within(ex03.check_fastest_within.solution).ok
    assert not ex03.check_fastest_within(lambda budget, errors, rates: "fp32").ok
