"""Vector add, z = x + y: the smallest memory-bound kernel (Triton tutorial 01's shape).

Counts by hand for n elements of s bytes: n FLOPs; 3ns bytes (read x, read y, write z); intensity 1/(3s)
FLOP/byte, far left of any GPU's ridge point.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import check_block, check_same, check_tensor

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def vector_add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    # Add in fp32 and round once: Triton 3.9's interpreter holds bf16 as raw uint16 bits and would add the
    # bits (NaN or garbage). On a GPU the casts are free and the sum is rounded to nearest; the interpreter
    # rounds fp32 -> bf16 toward zero and flushes bf16 subnormals, so there bf16 sums can be one ulp off.
    z = x.to(tl.float32) + y.to(tl.float32)
    tl.store(z_ptr + offs, z.to(z_ptr.dtype.element_ty), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """z = x + y elementwise. x, y: same shape, contiguous, fp32/fp16/bf16, on gpulab.DEVICE.

    Returns a new tensor like x. Raises TypeError/ValueError naming the bad argument.
    """
    check_tensor("x", x, dtypes=DTYPES)
    check_tensor("y", y, dtypes=DTYPES)
    check_same("x", x, "y", y)
    check_block("block", block)
    z = torch.empty_like(x)
    n = x.numel()
    if n:
        vector_add_kernel[(triton.cdiv(n, block),)](x, y, z, n, BLOCK=block)
    return z


def vector_add_ref(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The torch reference, computed in float64."""
    return x.double() + y.double()


def vector_add_counts(n: int, itemsize: int) -> tuple[int, int]:
    """(FLOPs, bytes) by hand: n adds; read x and y, write z."""
    return n, 3 * n * itemsize
