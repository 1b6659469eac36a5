"""Lesson 03's quantizer exercise (block-scaled fp8: one fp32 scale per block of 32 values, e4m3 elements): the
solution passes, and each class of wrong kernel gets the message that names it (none crashes)."""

import gpulab  # noqa: F401  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import pytest
import torch
import triton
import triton.language as tl

from gpulab.exercises import ex03, kernelcheck
from tests.exercise_checks import check_hints_then_solution, check_stub_not_attempted


@pytest.fixture(autouse=True)
def _short_long_case(monkeypatch):
    """The long case (``kernelcheck.LONG_N``) costs interpreter time; tests/test_kernelcheck_hostile.py runs it."""
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


@triton.jit
def _quant(
    gmax,
    x_ptr,
    q_ptr,
    s_ptr,
    n,
    DIV: tl.constexpr,
    MASK: tl.constexpr,
    ABS: tl.constexpr,
    RTZ: tl.constexpr,
    GUARD: tl.constexpr,
    RECIP: tl.constexpr,
    GLOBAL: tl.constexpr,
):
    blocks = tl.program_id(0) * 4 + tl.arange(0, 4)
    offs = blocks[:, None] * 32 + tl.arange(0, 32)[None, :]
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0) if MASK else tl.load(x_ptr + offs)
    amax = tl.max(tl.abs(x), axis=1) if ABS else tl.max(x, axis=1)
    if GLOBAL:  # one scale for the whole tensor
        amax = tl.zeros_like(amax) + gmax
    scale = amax / DIV
    q = x / (tl.where(amax > 0.0, scale, 1.0) if GUARD else scale)[:, None]
    if RTZ:  # toward zero: keep e4m3's 3 mantissa bits of the fp32 quotient (Hopper has no rtz cast to fp8)
        q = (q.to(tl.int32, bitcast=True) & -0x100000).to(tl.float32, bitcast=True)
    tl.store(q_ptr + offs, q.to(tl.float8e4nv), mask=mask)
    tl.store(s_ptr + blocks, 1.0 / scale if RECIP else scale, mask=blocks * 32 < n)


def launcher(div=448.0, mask=True, abs_=True, rtz=False, guard=True, recip=False, global_=False, grid=None):
    def quantize_fp8(x, q, scales):
        n = x.numel()
        g = grid(n) if grid else triton.cdiv(triton.cdiv(n, 32), 4)
        gmax = float(x.abs().max())
        _quant[(g,)](
            gmax, x, q, scales, n, DIV=div, MASK=mask, ABS=abs_, RTZ=rtz, GUARD=guard, RECIP=recip, GLOBAL=global_
        )

    return quantize_fp8


def test_right_kernels_pass():
    assert ex03.check_quantize_fp8(launcher()).ok
    rep = ex03.check_quantize_fp8(ex03.check_quantize_fp8.solution)
    assert rep.ok and rep.cases == 16, str(rep)  # 8 cases, each judged once for q and once for scales


def test_reference_follows_the_formats_rules():
    # by hand: a block [1, -2, 0.5, ...zeros] has amax 2, scale 2/448; x / scale = 224, -448, 112 (all on the grid)
    x = torch.zeros(32)
    x[:3] = torch.tensor([1.0, -2.0, 0.5])
    assert ex03._quant_amax(x).tolist() == [2.0]
    assert ex03._quant_quotient(x)[:3].tolist() == [224.0, -448.0, 112.0]
    assert ex03._quant_quotient(torch.zeros(40)).abs().sum() == 0  # a block of zeros: 0, not 0/0


def test_unmasked_kernel_is_named():
    rep = ex03.check_quantize_fp8(launcher(mask=False))
    assert not rep.ok and "mask the" in str(rep), str(rep)


def test_wrong_scale_is_named():
    rep = ex03.check_quantize_fp8(launcher(div=240.0))  # e4m3fnuz's max, not e4m3fn's
    assert not rep.ok and "constant factor" in str(rep) and "448" in str(rep), str(rep)
    rep = ex03.check_quantize_fp8(launcher(recip=True))
    assert not rep.ok and "448 / amax" in str(rep), str(rep)
    rep = ex03.check_quantize_fp8(launcher(abs_=False))  # max(x), not max(|x|)
    assert not rep.ok and "scales differ" in str(rep), str(rep)


def test_rounding_toward_zero_is_named():
    rep = ex03.check_quantize_fp8(launcher(rtz=True))
    assert not rep.ok and "rounded toward zero" in str(rep), str(rep)


def test_a_zero_block_divided_by_its_scale_is_named():
    rep = ex03.check_quantize_fp8(launcher(guard=False))
    assert not rep.ok and "block of zeros" in str(rep) and "amax > 0" in str(rep), str(rep)


def test_grid_too_small_is_named():
    rep = ex03.check_quantize_fp8(launcher(grid=lambda n: max(1, triton.cdiv(n, 32) // 4)))
    assert not rep.ok and "grid is too small" in str(rep), str(rep)


def test_one_scale_for_the_tensor_is_named():
    rep = ex03.check_quantize_fp8(launcher(global_=True))
    assert not rep.ok and "one scale for the whole tensor" in str(rep), str(rep)


def test_interpreter_rounding_is_allowed_only_in_the_interpreter():
    # Triton 3.9's interpreter truncates below e4m3's smallest normal: 1.5 * 2^-10 (0.75 of the smallest subnormal,
    # 2^-9) becomes 0, where round to nearest gives 2^-9. A CPU result is allowed that; a GPU result is not.
    tiny = 1.5 * 2.0**-10
    x = torch.zeros(32)
    x[0], x[1] = 448.0, tiny  # amax 448: scale 1, x / scale = x
    ref = torch.zeros(32, dtype=torch.float64)
    ref[0], ref[1] = 448.0, 2.0**-9
    q = lambda t: t.to(torch.float8_e4m3fn)  # noqa: E731
    # On a GPU machine the cast kernel compiles for the GPU: there is no interpreter cast to allow, and the
    # checker judges only what the GPU stored (interpreted=False).
    for interpreted in (False,) if gpulab.ON_GPU else (True, False):
        assert ex03._quant_values_mismatch(q(ref), ref, dict(x=x), interpreted) is None
    if gpulab.ON_GPU:
        return
    truncated = ref.clone()
    truncated[1] = ex03._interpreter_e4m3(torch.tensor([tiny])).item()
    if truncated[1] != ref[1]:  # the interpreter's rounding differs here (Triton 3.9)
        assert ex03._quant_values_mismatch(q(truncated), ref, dict(x=x), interpreted=True) is None
        assert "1 of 32 values differ" in ex03._quant_values_mismatch(q(truncated), ref, dict(x=x), interpreted=False)


def test_stub_reports_not_attempted():
    check_stub_not_attempted(ex03.check_quantize_fp8, 3)


def test_hints_then_solution(capsys):
    check_hints_then_solution(ex03.check_quantize_fp8, capsys)


def test_quant_bytes_by_hand_and_its_mistakes():
    check, sol = ex03.check_quant_bytes, ex03.check_quant_bytes.solution
    # by hand: 1000 bf16 values in blocks of 32: read 2000, write 1000 values and 32 scales (the last block has 8
    # values) of 4 bytes: 3128
    assert sol(1000, torch.bfloat16, 32) == 3128
    assert check(sol).ok
    for wrong, said in (
        (lambda n, d, b: n * d.itemsize + n, "scales are written too"),
        (lambda n, d, b: n * d.itemsize + n + n // b * 4, "partial last block"),
        (lambda n, d, b: n * d.itemsize + n + -(-n // b), "4 bytes"),
        (lambda n, d, b: 2 * n * d.itemsize + -(-n // b) * 4, "one byte each"),
    ):
        rep = check(wrong)
        assert not rep.ok and said in str(rep), str(rep)
