"""Lesson 05's teaching pair for y = s(s(s(x))): the fused forward and the backward that recomputes.

Teaching kernels, written as the lesson's exercise asks a learner to write them (exercise 05's solution shows
these): fp32, ``BLOCK`` elements a program, s(z) = 1 / (1 + exp(-z)) applied three times in registers. The
forward reads x and writes y (8 bytes an element); the backward reads x and dy and writes

    dx = dy * s3(1 - s3) * s2(1 - s2) * s1(1 - s1)

rebuilding s1, s2 and s3 from x instead of loading them (12 bytes an element). Lesson 05's suite
(``gpulab.bench.lesson05.teaching``) times them against the production pair, ``gpulab.kernels.sigmoid3``,
which moves the same bytes and adds what a learner may skip: every storage dtype (fp32 arithmetic), int64
offsets, a first sigmoid that does not cancel for large |x|, the broadcast dy of ``loss = y.sum()``, and the
autograd Function. Offsets here are int32: fewer than 2^31 elements.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import check_block, check_same, check_tensor

BLOCK = 128  # elements a program: the exercise's block


@triton.jit
def sigmoid3_fwd_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    s1 = 1.0 / (1.0 + tl.exp(-x))  # s1, s2 stay in registers: only y is written
    s2 = 1.0 / (1.0 + tl.exp(-s1))
    s3 = 1.0 / (1.0 + tl.exp(-s2))
    tl.store(y_ptr + offs, s3, mask=mask)


@triton.jit
def sigmoid3_bwd_kernel(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    dy = tl.load(dy_ptr + offs, mask=mask)
    s1 = 1.0 / (1.0 + tl.exp(-x))  # recomputed from x, never loaded
    s2 = 1.0 / (1.0 + tl.exp(-s1))
    s3 = 1.0 / (1.0 + tl.exp(-s2))
    dx = dy * (s3 * (1.0 - s3)) * (s2 * (1.0 - s2)) * (s1 * (1.0 - s1))
    tl.store(dx_ptr + offs, dx, mask=mask)


def sigmoid3_fwd(x: torch.Tensor, out: torch.Tensor, block: int = BLOCK) -> None:
    """out = s(s(s(x))) by one launch of ``sigmoid3_fwd_kernel``. x, out: contiguous fp32 of one shape on
    gpulab.DEVICE. Raises TypeError/ValueError naming the argument."""
    check_tensor("x", x, dtypes=(torch.float32,))
    check_tensor("out", out, dtypes=(torch.float32,))
    check_same("x", x, "out", out)
    check_block("block", block)
    if x.numel():
        sigmoid3_fwd_kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)


def sigmoid3_bwd(x: torch.Tensor, dy: torch.Tensor, out: torch.Tensor, block: int = BLOCK) -> None:
    """out = dx of y = s(s(s(x))) for the upstream gradient dy, by one launch of ``sigmoid3_bwd_kernel``. x, dy,
    out: contiguous fp32 of one shape on gpulab.DEVICE. Raises TypeError/ValueError naming the argument."""
    for name, t in (("x", x), ("dy", dy), ("out", out)):
        check_tensor(name, t, dtypes=(torch.float32,))
    check_same("x", x, "dy", dy)
    check_same("x", x, "out", out)
    check_block("block", block)
    if x.numel():
        sigmoid3_bwd_kernel[(triton.cdiv(x.numel(), block),)](x, dy, out, x.numel(), BLOCK=block)


def sigmoid3_counts(n: int) -> dict:
    """Bytes each kernel moves for n fp32 elements, by hand: forward 8n (x read, y written), backward 12n (x
    and dy read, dx written); the saved s1, s2, s3 are never read or written."""
    return {"forward": 8 * n, "backward": 12 * n}
