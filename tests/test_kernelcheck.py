"""The kernel checker (gpulab.exercises.kernelcheck) on real Triton kernels, right and wrong: every usual
mistake gets the message that names it, and none crashes the process (the guards take the stray stores)."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pytest
import torch
import triton
import triton.language as tl

from gpulab.exercises import ex01, kernelcheck
from tests.exercise_checks import check_hints_then_solution, check_stub_not_attempted


@pytest.fixture(autouse=True)
def _short_long_case(monkeypatch):
    """The long case (``kernelcheck.LONG_N``) costs interpreter time; tests/test_kernelcheck_hostile.py runs it."""
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


@triton.jit
def _scale_add(
    x_ptr, y_ptr, a, b, n, BLOCK: tl.constexpr, MASK_LOAD: tl.constexpr, MASK_STORE: tl.constexpr, SHIFT: tl.constexpr
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK) + SHIFT
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask) if MASK_LOAD else tl.load(x_ptr + offs)
    if MASK_STORE:
        tl.store(y_ptr + offs, a * x + b, mask=mask)
    else:
        tl.store(y_ptr + offs, a * x + b)


def launcher(block=128, mask_load=True, mask_store=True, shift=0, grid=None, sign=1.0):
    def scale_add(x, a, b, out):
        n = x.numel()
        g = grid(n, block) if grid else triton.cdiv(n, block)
        _scale_add[(g,)](x, out, sign * a, b, n, BLOCK=block, MASK_LOAD=mask_load, MASK_STORE=mask_store, SHIFT=shift)

    return scale_add


def test_right_kernel_passes():
    rep = ex01.check_scale_add(launcher())
    assert rep.ok, str(rep)
    assert ex01.check_scale_add(ex01.check_scale_add.solution).ok


def test_unmasked_store_is_named_and_does_not_crash():
    rep = ex01.check_scale_add(launcher(mask_load=False, mask_store=False))
    assert not rep.ok and "past the end of out" in str(rep) and "mask the store" in str(rep), str(rep)


def test_grid_too_small_is_named():
    rep = ex01.check_scale_add(launcher(grid=lambda n, b: n // b))  # floor: drops the last partial block
    assert not rep.ok and "grid is too" in str(rep) and "cdiv" in str(rep), str(rep)


def test_store_before_start_is_named():
    rep = ex01.check_scale_add(launcher(shift=-3))
    assert not rep.ok and "before the start of out" in str(rep), str(rep)


def test_wrong_values_name_index_expected_and_got():
    rep = ex01.check_scale_add(launcher(sign=-1.0))
    text = str(rep)
    assert not rep.ok and "values differ" in text and "first at index" in text and "expected" in text, text


def test_python_errors_are_reported_not_raised():
    def broken(x, a, b, out):
        raise ValueError("oops")

    rep = ex01.check_scale_add(broken)
    assert not rep.ok and "ValueError: oops" in str(rep)


def test_stub_reports_not_attempted():
    check_stub_not_attempted(ex01.check_scale_add, 4)


def test_guard_sees_writes_on_each_side():
    g = kernelcheck.Guarded((5,), torch.float32, "cpu")
    assert g.written_before() == 0 and g.written_after() == 0 and g.unwritten().all()
    g.buf[g.g - 1] = 0.0
    g.buf[g.g + 5] = 1.0
    g.buf[g.g + 6] = 2.0
    g.view[2] = 3.0
    assert g.written_before() == 1 and g.written_after() == 2
    assert g.unwritten().tolist() == [True, True, False, True, True]


def test_guard_poison_is_not_a_plausible_value_in_each_dtype():
    for dt in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        g = kernelcheck.Guarded((3,), dt, "cpu")
        assert torch.isnan(g.view.double()).all(), dt  # a poisoned element reads as NaN
    g = kernelcheck.Guarded((3,), torch.int32, "cpu", fill=torch.tensor([1, 2, 3], dtype=torch.int32))
    assert g.view.tolist() == [1, 2, 3] and not g.unwritten().any()


def test_hints_come_one_at_a_time_then_point_to_the_solution(capsys):
    check_hints_then_solution(ex01.check_scale_add, capsys)


def test_scale_add_tolerance_holds_where_a_x_and_b_cancel():
    # the recorded GPU failure: a x = -1.4866 and b = 1.5472 leave 0.0606; an FMA's one rounding is within
    # 2^-22 (|a x| + |b|) but far more than one ulp of the small result
    import gpulab.exercises.ex01 as ex

    x = torch.tensor([-0.55357], dtype=torch.float32)
    a, b = 2.68542, 1.54725
    exact = a * x.double() + b
    fma_like = exact.float()  # the exact value rounded once: what an FMA returns
    two_roundings = torch.tensor(a, dtype=torch.float32) * x + torch.tensor(b, dtype=torch.float32)
    for got in (fma_like, two_roundings):
        assert abs(got.double() - exact).item() <= 2.0**-22 * (abs(a * x.double()).item() + b)
    assert ex.check_scale_add.solution is not None
