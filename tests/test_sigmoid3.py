"""The fused sigmoid3 kernels and Function against float64 references: seeded random inputs (fresh each run,
the seed in a failure's report), awkward sizes, every dtype, poisoned outputs, gradcheck, the three ways
agreeing, a second derivative refused, and input checks naming the argument."""

import gpulab  # first: it picks the mode before triton is imported  # isort: skip
import pytest
import torch
import triton

from gpulab.kernels import sigmoid3 as S
from gpulab.kernels import sigmoid3_teaching as T

pytestmark = pytest.mark.usefixtures("seed")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [1, 17, 1000, 1793, 4097] if not gpulab.ON_GPU else [1, 17, 1000, 1793, 4097, 2**20 + 3]
# Relative tolerance per dtype. fp32: on a GPU tl.exp is ex2.approx of x*log2(e), and rounding that product
# alone makes exp(-|x|) off by about |x| * 2**-24 relatively (|x| ~ 15 here), which the slope t*p*p inherits:
# 2**-17 leaves room for that and the other roundings. fp16/bf16: that fp32 result rounded once to the storage
# dtype (the interpreter's bf16 cast truncates, so up to 1 ulp), plus the fp32 part.
FP32_REL = 2.0**-17
REL = {
    torch.float32: FP32_REL,
    torch.float16: 2.0**-10 + FP32_REL,
    torch.bfloat16: 2.0**-7 + FP32_REL,
    torch.float64: 1e-10,
}
ABS = {
    torch.float32: 1e-37,
    torch.float16: 2.0**-24,
    torch.bfloat16: 1e-37,
    torch.float64: 1e-300,
}  # fp16: subnormal step


def _rand(n, dtype, scale=3.0):
    return (torch.randn(n, dtype=torch.float64) * scale).to(dtype).to(gpulab.DEVICE)


def _assert_close(got, ref, dtype, what):
    assert got.dtype == dtype and got.shape == ref.shape, (what, got.dtype, got.shape)
    got64, ref64 = got.double().cpu(), ref.double().cpu()
    assert not torch.isnan(got64).any(), f"{what}: NaN left in the output (an element was not written)"
    bad = ((got64 - ref64).abs() > REL[dtype] * ref64.abs() + ABS[dtype]).flatten().nonzero()
    if len(bad):
        i = bad[0].item()
        raise AssertionError(
            f"{what} {dtype}: {len(bad)} of {got64.numel()} off; first at {i}: "
            f"got {got64.flatten()[i].item()!r}, expected {ref64.flatten()[i].item()!r}"
        )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_forward_and_backward_kernels_match_float64(n, dtype):
    x, dy = _rand(n, dtype), _rand(n, dtype, 1.0)
    _assert_close(S.sigmoid3_forward(x), S.sigmoid3_ref(x), dtype, "y")
    _assert_close(S.sigmoid3_backward(x, dy), S.sigmoid3_grad_ref(x, dy), dtype, "dx")


@pytest.mark.parametrize("dtype", DTYPES)
def test_function_any_shape_requires_grad(dtype):
    x = _rand(3 * 7 * 11, dtype).reshape(3, 7, 11).requires_grad_()
    dy = _rand(3 * 7 * 11, dtype, 1.0).reshape(3, 7, 11)
    y = S.sigmoid3(x)
    assert y.requires_grad and y.grad_fn is not None
    y.backward(dy)
    _assert_close(y.detach(), S.sigmoid3_ref(x.detach()), dtype, "y")
    _assert_close(x.grad, S.sigmoid3_grad_ref(x.detach(), dy), dtype, "dx")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_scalar_loss_reads_the_broadcast_gradient_without_materialising_it(dtype, reduce):
    # loss = y.sum() / y.mean(): autograd passes y's gradient as one value expanded with stride 0
    x = _rand(3 * 1017, dtype).reshape(3, -1).requires_grad_()
    loss = getattr(S.sigmoid3(x), reduce)()
    loss.backward()
    scale = 1.0 if reduce == "sum" else 1.0 / x.numel()
    dy = torch.full_like(x, scale).detach()
    _assert_close(x.grad, S.sigmoid3_grad_ref(x.detach(), dy), dtype, "dx")
    g = torch.full((1,), 2.5, device=gpulab.DEVICE, dtype=dtype).expand(x.shape)
    assert S.is_broadcast_scalar(g) and not S.is_broadcast_scalar(dy) and not S.is_broadcast_scalar(g[:0])
    (dx,) = torch.autograd.grad(S.sigmoid3(x), x, g)
    _assert_close(dx, S.sigmoid3_grad_ref(x.detach(), g), dtype, "dx (stride-0 dy)")


def test_large_inputs_do_not_lose_the_gradient():
    # |x| up to 30: a naive 1 - s(x) in fp32 is 0 there, and the gradient would be 0 instead of ~1e-14
    x = torch.tensor([-30.0, -15.0, -8.0, 8.0, 15.0, 30.0], device=gpulab.DEVICE)
    dy = torch.ones_like(x)
    _assert_close(S.sigmoid3_backward(x, dy), S.sigmoid3_grad_ref(x, dy), torch.float32, "dx")


def test_gradcheck_float64():
    x = torch.randn(17, dtype=torch.float64, device=gpulab.DEVICE).mul_(3).requires_grad_()
    assert torch.autograd.gradcheck(S.sigmoid3, (x,))


@pytest.mark.parametrize("loss", ["sum", "dense dy"])
def test_second_derivative_raises_instead_of_dropping_the_term(loss):
    # d/dx of sigmoid3(x) + x^3 is sigmoid3'(x) + 3x^2: right with create_graph=True. Differentiating again
    # must raise: the backward kernels have no derivative, and returning 6x alone would be silently wrong.
    x = _rand(37, torch.float64).requires_grad_()
    y = S.sigmoid3(x) + x**3
    dy = torch.ones_like(x) if loss == "sum" else _rand(37, torch.float64, 1.0)
    (g,) = torch.autograd.grad(y.sum() if loss == "sum" else y, x, None if loss == "sum" else dy, create_graph=True)
    x64 = x.detach()
    _assert_close(g.detach(), S.sigmoid3_grad_ref(x64, dy) + 3 * x64**2 * dy, torch.float64, "dx")
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="sigmoid3 is differentiable once"):
        torch.autograd.grad(g.sum(), x)
    (g2,) = torch.autograd.grad(S.sigmoid3(x).sum(), x)  # without create_graph: one derivative, no graph
    assert not g2.requires_grad


@pytest.mark.parametrize("way", list(S.WAYS))
def test_every_way_gives_the_float64_gradient(way):
    x = _rand(1793, torch.float32).requires_grad_()
    dy = _rand(1793, torch.float32, 1.0)
    y = S.WAYS[way](x)
    (dx,) = torch.autograd.grad(y, x, dy)
    ref = S.sigmoid3_grad_ref(x.detach(), dy)
    # eager and checkpoint compute 1 - s1 in fp32, which cancels for large |x| (1.5% off at x = 12.7 in a
    # run here): allow an absolute floor there; the fused kernel avoids the cancellation (see the kernel tests)
    assert torch.allclose(dx.double().cpu(), ref.cpu(), rtol=1e-5, atol=1e-7), way
    assert torch.allclose(y.detach().double().cpu(), S.sigmoid3_ref(x.detach()).cpu(), rtol=1e-6), way


@pytest.mark.parametrize("block", [16, 128, 1024])
def test_kernels_write_every_element_of_a_poisoned_output(block):
    n = 3 * block + 5
    x, dy = _rand(n, torch.float32), _rand(n, torch.float32, 1.0)
    y = torch.full((n,), float("nan"), device=gpulab.DEVICE)
    S.sigmoid3_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block, F64=False)
    _assert_close(y, S.sigmoid3_ref(x), torch.float32, "y")
    dx = torch.full((n,), float("nan"), device=gpulab.DEVICE)
    S.sigmoid3_backward_kernel[(triton.cdiv(n, block),)](x, dy, dx, n, BLOCK=block, F64=False)
    _assert_close(dx, S.sigmoid3_grad_ref(x, dy), torch.float32, "dx")


def test_kernels_do_not_write_past_the_end():
    n, block = 100, 64
    x, dy = _rand(n, torch.float32), _rand(n, torch.float32, 1.0)
    buf = torch.full((2 * block,), -7.0, device=gpulab.DEVICE)
    S.sigmoid3_backward_kernel[(triton.cdiv(n, block),)](x, dy, buf, n, BLOCK=block, F64=False)
    assert torch.all(buf[n:] == -7.0), "the mask must stop writes beyond n"


def test_empty_input():
    e = torch.empty(0, device=gpulab.DEVICE)
    assert S.sigmoid3_forward(e).numel() == 0 and S.sigmoid3_backward(e, e).numel() == 0


def test_bad_input_raises_naming_the_argument():
    x = torch.randn(8, device=gpulab.DEVICE)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        S.sigmoid3([1.0])
    with pytest.raises(TypeError, match="x must have dtype"):
        S.sigmoid3_forward(torch.arange(8, device=gpulab.DEVICE))
    with pytest.raises(ValueError, match="x must be contiguous"):
        S.sigmoid3(torch.randn(4, 4, device=gpulab.DEVICE).t())
    with pytest.raises(ValueError, match="x and dy must have the same shape"):
        S.sigmoid3_backward(x, torch.randn(9, device=gpulab.DEVICE))
    with pytest.raises(TypeError, match="x and dy must have the same dtype"):
        S.sigmoid3_backward(x, x.half())
    with pytest.raises((TypeError, ValueError), match="block must be"):
        S.sigmoid3_forward(x, block=1000)


# ---- the teaching pair (kernels.sigmoid3_teaching): lesson 05's suite and exercise 05's solution ---------------


def _nan_like(x):
    return torch.full_like(x, float("nan"))


@pytest.mark.parametrize("n", SIZES)
def test_teaching_pair_matches_float64(n):
    """fp32 only. dx within FP32_REL |dx| + 2^-24 |dy|: the plain s1 (1 - s1) rounds 1 - s1 to fp32 (the absolute
    term; exercise 05's checker allows the same), which the production pair avoids."""
    x, dy = _rand(n, torch.float32), _rand(n, torch.float32, 1.0)
    y, dx = _nan_like(x), _nan_like(x)
    T.sigmoid3_fwd(x, y)
    T.sigmoid3_bwd(x, dy, dx)
    _assert_close(y, S.sigmoid3_ref(x), torch.float32, "y")
    ref, got = S.sigmoid3_grad_ref(x, dy).cpu(), dx.double().cpu()
    bound = FP32_REL * ref.abs() + 2.0**-24 * dy.double().cpu().abs()
    assert not torch.isnan(got).any() and ((got - ref).abs() <= bound).all(), (got - ref).abs().max()


def test_teaching_pair_stops_at_n():
    n = 100
    x, dy = _rand(n, torch.float32), _rand(n, torch.float32, 1.0)
    for launch in (lambda out: T.sigmoid3_fwd(x, out[:n]), lambda out: T.sigmoid3_bwd(x, dy, out[:n])):
        buf = torch.full((2 * T.BLOCK,), -7.0, device=gpulab.DEVICE)
        launch(buf)
        assert torch.all(buf[n:] == -7.0) and not torch.any(buf[:n] == -7.0), "the mask must stop writes at n"


def test_teaching_pair_refuses_bad_input_naming_the_argument():
    x = torch.randn(8, device=gpulab.DEVICE)
    with pytest.raises(TypeError, match="x must have dtype"):
        T.sigmoid3_fwd(x.double(), x)
    with pytest.raises(ValueError, match="x and out must have the same shape"):
        T.sigmoid3_fwd(x, torch.empty(9, device=gpulab.DEVICE))
    with pytest.raises(ValueError, match="x and dy must have the same shape"):
        T.sigmoid3_bwd(x, torch.randn(7, device=gpulab.DEVICE), x.clone())
    with pytest.raises(ValueError, match="out must be contiguous"):
        T.sigmoid3_bwd(x[:4], x[:4], torch.empty(8, device=gpulab.DEVICE)[::2])
    with pytest.raises(ValueError, match="block must be"):
        T.sigmoid3_fwd(x, x.clone(), block=100)
    T.sigmoid3_fwd(x[:0], x[:0])  # an empty input launches nothing
    assert T.sigmoid3_counts(10) == {"forward": 80, "backward": 120}
