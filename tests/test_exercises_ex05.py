"""Lesson 05's kernel exercise: the fused sigmoid^3 forward and its recomputing backward, each checked with a
right, a wrong and an unmasked kernel and a too-small grid (each mistake gets the message naming it, none
crashes); the tolerance by hand."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pytest
import torch
import triton
import triton.language as tl

from gpulab.exercises import ex05, hint, kernelcheck


@pytest.fixture(autouse=True)
def _short_long_case(monkeypatch):
    """The long case (``kernelcheck.LONG_N``) costs interpreter time; tests/test_kernelcheck_hostile.py runs it."""
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


@triton.jit
def _fwd(x_ptr, y_ptr, n, BLOCK: tl.constexpr, MASK: tl.constexpr, TIMES: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(x_ptr + offs, mask=mask) if MASK else tl.load(x_ptr + offs)
    for _ in tl.static_range(TIMES):
        s = 1.0 / (1.0 + tl.exp(-s))
    if MASK:
        tl.store(y_ptr + offs, s, mask=mask)
    else:
        tl.store(y_ptr + offs, s)


@triton.jit
def _bwd(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr, MASK: tl.constexpr, WRONG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask) if MASK else tl.load(x_ptr + offs)
    dy = tl.load(dy_ptr + offs, mask=mask) if MASK else tl.load(dy_ptr + offs)
    s1 = 1.0 / (1.0 + tl.exp(-x))
    s2 = 1.0 / (1.0 + tl.exp(-s1))
    s3 = 1.0 / (1.0 + tl.exp(-s2))
    if WRONG:  # every slope taken at x
        dx = dy * (s1 * (1.0 - s1)) * (s1 * (1.0 - s1)) * (s1 * (1.0 - s1))
    else:
        dx = dy * (s3 * (1.0 - s3)) * (s2 * (1.0 - s2)) * (s1 * (1.0 - s1))
    if MASK:
        tl.store(dx_ptr + offs, dx, mask=mask)
    else:
        tl.store(dx_ptr + offs, dx)


def fwd(block=128, mask=True, times=3, grid=None):
    def sigmoid3_fwd(x, out):
        n = x.numel()
        _fwd[(grid(n, block) if grid else triton.cdiv(n, block),)](x, out, n, BLOCK=block, MASK=mask, TIMES=times)

    return sigmoid3_fwd


def bwd(block=128, mask=True, wrong=False, grid=None):
    def sigmoid3_bwd(x, dy, out):
        n = x.numel()
        _bwd[(grid(n, block) if grid else triton.cdiv(n, block),)](x, dy, out, n, BLOCK=block, MASK=mask, WRONG=wrong)

    return sigmoid3_bwd


def _too_small(n, b):
    return max(n // b, 1) - (n > b)


def test_right_kernels_pass():
    for check, right in ((ex05.check_sigmoid3_fwd, fwd()), (ex05.check_sigmoid3_bwd, bwd())):
        rep = check(right)
        assert rep.ok and rep.cases == 6, str(rep)
        assert check(check.solution).ok, str(check(check.solution))


def test_wrong_kernels_name_the_mistake():
    rep = ex05.check_sigmoid3_fwd(fwd(times=2))
    assert not rep.ok and "values differ" in str(rep) and "two sigmoids" in str(rep), str(rep)
    rep = ex05.check_sigmoid3_bwd(bwd(wrong=True))
    assert not rep.ok and "differentiated at their own inputs" in str(rep), str(rep)


def test_unmasked_kernels_are_named_and_do_not_crash():
    for rep in (ex05.check_sigmoid3_fwd(fwd(mask=False)), ex05.check_sigmoid3_bwd(bwd(mask=False))):
        assert not rep.ok and "past the end of out" in str(rep) and "mask the store" in str(rep), str(rep)


def test_grid_too_small_is_named():
    for rep in (ex05.check_sigmoid3_fwd(fwd(grid=_too_small)), ex05.check_sigmoid3_bwd(bwd(grid=_too_small))):
        assert not rep.ok and "grid is too" in str(rep), str(rep)


def test_backward_tolerance_by_hand():
    # x = 16: s1 = 1 - 1.1254e-7, so fp32's 1 - s1 is off by up to 2^-24 / 1.1e-7 (about 50%) of itself; the
    # absolute term 2^-24 |dy| covers it. A kernel off by a factor 1/4 (a slope s(1-s) <= 1/4 missing) is not.
    x = torch.tensor([16.0, 0.5])
    dy = torch.tensor([1.0, -2.0])
    ref = ex05._grad64(x, dy)
    got = ref.clone()
    got[0] += 0.9 * 2.0**-24
    assert ((got - ref).abs() <= ex05.BWD_REL * ref.abs() + ex05.BWD_ABS * dy.double().abs()).all()
    got[1] *= 1.25
    assert not ((got - ref).abs() <= ex05.BWD_REL * ref.abs() + ex05.BWD_ABS * dy.double().abs()).all()


def test_stub_reports_not_attempted_and_hints_come_before_the_solution(capsys):
    def stub(*args):
        raise NotImplementedError

    for check in (ex05.check_sigmoid3_fwd, ex05.check_sigmoid3_bwd):
        assert not check(stub).attempted and "not attempted" in str(check(stub))
        check._hints_shown = 0
        for i in range(2):
            hint(check)
            assert f"hint {i + 1} of 2" in capsys.readouterr().out
        hint(check)
        assert f"show_solution(ex05.{check.__name__})" in capsys.readouterr().out
        check._hints_shown = 0
