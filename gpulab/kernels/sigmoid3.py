"""Three stacked sigmoids, y = s(s(s(x))), as a fused Triton autograd Function that recomputes in backward.

s is the logistic sigmoid, s(x) = 1 / (1 + exp(-x)), with s'(x) = s(x)(1 - s(x)). Write s1 = s(x),
s2 = s(s1), s3 = s(s2) = y. By the chain rule

    dx = dy * s3(1 - s3) * s2(1 - s2) * s1(1 - s1).

Eager autograd saves s1, s2 and s3 for that product. Here the forward kernel reads x and writes y, and the
Function saves only x; the backward kernel reads x and dy, rebuilds s1, s2, s3 in registers and writes dx
(Stanford CS336 Lecture 5, "Recompute a cheap value instead of saving it"; the seed lecture notes' three
stacked sigmoids). Counts by hand are in ``gpulab.models.recompute``.

Arithmetic is in fp32 registers whatever the storage dtype (fp32, fp16, bf16: cast on load and on store; this
also avoids Triton 3.9's interpreter holding bf16 as raw bits), and in fp64 for float64 inputs, so that
``torch.autograd.gradcheck`` can check the Function. The first sigmoid and its derivative use
t = exp(-|x|), p = 1 / (1 + t): s(x) = p for x >= 0 and t*p otherwise, and s(x)(1 - s(x)) = t*p*p for both
signs, so 1 - s1 never cancels for large |x| (s1 and s2 lie in (0, 1), where 1 - s is well conditioned).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._autograd import differentiable_once
from ._checks import check_block, check_same, check_tensor

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
BLOCK = 1024


@triton.jit
def _sigmoid_and_slope(x):
    """s(x) and s'(x) = s(x)(1 - s(x)) without cancellation: t = exp(-|x|), p = 1/(1+t)."""
    t = tl.exp(-tl.abs(x))
    p = 1.0 / (1.0 + t)
    s = tl.where(x >= 0, p, t * p)
    return s, t * p * p


@triton.jit
def sigmoid3_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, F64: tl.constexpr):
    """Forward: read x, write y = s(s(s(x))). Nothing else is stored."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if F64:
        x = x.to(tl.float64)
    else:
        x = x.to(tl.float32)
    s1, _ = _sigmoid_and_slope(x)
    s2 = 1.0 / (1.0 + tl.exp(-s1))
    s3 = 1.0 / (1.0 + tl.exp(-s2))
    tl.store(y_ptr + offs, s3.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def sigmoid3_backward_kernel(
    x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr, F64: tl.constexpr, DY_SCALAR: tl.constexpr = False
):
    """Backward: read x and dy, rebuild s1, s2, s3 in registers, write dx = dy * s3' * s2' * s1'.
    DY_SCALAR: dy is one value broadcast to every element (the gradient of loss = y.sum() or y.mean(), which
    autograd hands over as an expanded tensor with stride 0): read it once, never as n elements."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if DY_SCALAR:
        dy = tl.load(dy_ptr)
    else:
        dy = tl.load(dy_ptr + offs, mask=mask)
    if F64:
        x = x.to(tl.float64)
        dy = dy.to(tl.float64)
    else:
        x = x.to(tl.float32)
        dy = dy.to(tl.float32)
    s1, ds1 = _sigmoid_and_slope(x)  # recomputed, never loaded
    s2 = 1.0 / (1.0 + tl.exp(-s1))
    s3 = 1.0 / (1.0 + tl.exp(-s2))
    dx = dy * (s3 * (1.0 - s3)) * (s2 * (1.0 - s2)) * ds1
    tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def _launch(kernel, out, *args, block: int, **constexprs) -> torch.Tensor:
    n = out.numel()
    if n:
        kernel[(triton.cdiv(n, block),)](*args, out, n, BLOCK=block, F64=out.dtype == torch.float64, **constexprs)
    return out


def is_broadcast_scalar(t: torch.Tensor) -> bool:
    """True when every element of ``t`` is the same stored value: all strides 0 (``torch.Tensor.expand`` of
    a one-element tensor), as autograd passes the gradient of ``y.sum()`` or ``y.mean()`` on to y."""
    return t.numel() > 0 and all(st == 0 for st in t.stride())


def sigmoid3_forward(x: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """y = s(s(s(x))) by one kernel launch, no autograd (x must not require grad under grad mode; ``sigmoid3`` is
    the differentiable one). x: contiguous, any shape, fp32/fp16/bf16/fp64, on gpulab.DEVICE; y: same shape and
    dtype. Reads x, writes y: 2n elements. Raises TypeError/ValueError naming the argument."""
    check_tensor("x", x, dtypes=DTYPES)
    check_block("block", block)
    return _launch(sigmoid3_kernel, torch.empty_like(x), x, block=block)


def sigmoid3_backward(x: torch.Tensor, dy: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """dx = dy * d/dx s(s(s(x))), recomputing s1, s2, s3 from x. x, dy: contiguous, same shape and dtype.
    Reads x and dy, writes dx: 3n elements. Raises TypeError/ValueError naming the argument."""
    check_tensor("x", x, dtypes=DTYPES)
    check_tensor("dy", dy, dtypes=DTYPES)
    check_same("x", x, "dy", dy)
    check_block("block", block)
    return _launch(sigmoid3_backward_kernel, torch.empty_like(x), x, dy, block=block)


class Sigmoid3Function(torch.autograd.Function):
    """The fused way: forward saves only x; backward recomputes s1, s2, s3 from it. Differentiable once: a second
    derivative (``create_graph=True`` and differentiating again) raises instead of silently dropping this term."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return sigmoid3_forward(x)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        with torch.no_grad():
            if is_broadcast_scalar(dy) and dy.shape == x.shape and dy.dtype == x.dtype:
                # loss = y.sum() (or .mean()): dy is one value expanded with stride 0. dy.contiguous() would
                # write it out as n elements (memory and bytes); the kernel reads the one value instead.
                dx = _launch(sigmoid3_backward_kernel, torch.empty_like(x), x, dy, block=BLOCK, DY_SCALAR=True)
            else:
                dx = sigmoid3_backward(x, dy.contiguous())
        (dx,) = differentiable_once("sigmoid3", (dx,), (x, dy))
        return dx


def sigmoid3(x: torch.Tensor) -> torch.Tensor:
    """y = s(s(s(x))) with autograd through the fused kernels (saves x only). x: contiguous fp32/fp16/bf16
    (or float64, for gradcheck) on gpulab.DEVICE, any shape, may require grad. Differentiable once: a second
    derivative raises RuntimeError. Raises TypeError/ValueError naming the argument."""
    check_tensor("x", x, dtypes=DTYPES, autograd=True)
    return Sigmoid3Function.apply(x)


def sigmoid3_eager(x: torch.Tensor) -> torch.Tensor:
    """Way (a): three torch.sigmoid calls; autograd saves s1, s2 and s3 (each sigmoid saves its output)."""
    return torch.sigmoid(torch.sigmoid(torch.sigmoid(x)))


def sigmoid3_checkpoint(x: torch.Tensor) -> torch.Tensor:
    """Way (b): the same three sigmoids under torch.utils.checkpoint (use_reentrant=False): nothing but x is
    kept for backward, which reruns the three sigmoids before differentiating them."""
    from torch.utils.checkpoint import checkpoint

    return checkpoint(sigmoid3_eager, x, use_reentrant=False)


WAYS = {"eager": sigmoid3_eager, "checkpoint": sigmoid3_checkpoint, "fused": sigmoid3}


def sigmoid3_ref(x: torch.Tensor) -> torch.Tensor:
    """The torch reference, in float64."""
    return torch.sigmoid(torch.sigmoid(torch.sigmoid(x.double())))


def sigmoid3_grad_ref(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx in float64 from the chain rule written out: dy * s3(1-s3) * s2(1-s2) * s1(1-s1), with 1 - s1 taken as
    s(-x) (1 - s1 itself cancels for large |x|, even in float64)."""
    x64, dy64 = x.double(), dy.double()
    s1 = torch.sigmoid(x64)
    s2 = torch.sigmoid(s1)
    s3 = torch.sigmoid(s2)
    return dy64 * s3 * (1 - s3) * s2 * (1 - s2) * s1 * torch.sigmoid(-x64)
