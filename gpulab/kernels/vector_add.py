"""Vector add, z = x + y: the smallest memory-bound kernel (Triton tutorial 01's shape).

Counts by hand for n elements of s bytes: n FLOPs; 3ns bytes (read x, read y, write z); intensity 1/(3s)
FLOP/byte, far left of any GPU's ridge point.

The kernel adds in fp32 and rounds once: Triton 3.9's interpreter holds bf16 as raw uint16 bits and would add
the bits (NaN or garbage). On a GPU the casts are free and exact, subnormals included (bf16 -> fp32 widens,
fp32 -> bf16 rounds to nearest). The interpreter's bf16 casts (its ``_convert_float``) differ:

- fp32 -> bf16 truncates normal values (toward zero), so a bf16 sum can be one ulp off;
- both casts garble subnormals (|v| < 2^-126): they drop the leading 1 of the significand and shift the rest
  up. A value m * 2^-133 (m in 1..127, 2^p <= m < 2^(p+1)) becomes (m - 2^p) * 2^(7-p) * 2^-133, sign kept:
  2^-133, ..., 2^-127 become 0, 3 * 2^-133 becomes 2^-127 (64 times larger), 127 * 2^-133 becomes
  126 * 2^-133. So a subnormal input or result is neither flushed to zero nor within one ulp; each cast moves
  it by less than 2^-126. fp16 casts are NumPy's, exact. The tests pin this down (bf16 subnormals).
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
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: offsets past 2^31 elements do not wrap
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    # add in fp32, round once: the interpreter cannot add bf16 (the module docstring says more)
    z = x.to(tl.float32) + y.to(tl.float32)
    tl.store(z_ptr + offs, z.to(z_ptr.dtype.element_ty), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """z = x + y elementwise. x, y: same shape, contiguous, fp32/fp16/bf16, on gpulab.DEVICE, not requiring grad
    (no backward).

    Returns a new tensor like x. Raises TypeError/ValueError naming the bad argument.
    """
    check_tensor("x", x, dtypes=DTYPES, torch_op="torch.add")
    check_tensor("y", y, dtypes=DTYPES, torch_op="torch.add")
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
