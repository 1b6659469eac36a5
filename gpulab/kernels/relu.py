"""ReLU, y = max(x, 0), out of place: a memory-bound kernel with no FLOPs worth the name.

Counts by hand for n elements of s bytes: n comparisons (counted as n "FLOPs" to place it on a roofline);
2ns bytes (read x, write y): 8n bytes in fp32, 4n in fp16 (Stanford CS336 Lecture 5, "Reduce precision").
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..core import validate
from ..models import precision
from ._checks import check_block, check_tensor

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    # Compare in fp32: Triton 3.9's interpreter holds bf16 as raw uint16 bits, so comparing the bf16 value
    # itself keeps negatives there (seen in gpulab's tests); on a GPU the casts are free. `where(x < 0, 0, x)`
    # keeps NaN as torch.relu does; tl.maximum(x, 0) would turn NaN into 0. The interpreter's bf16 casts garble
    # subnormals (see vector_add_kernel); a GPU's are exact.
    xf = x.to(tl.float32)
    y = tl.where(xf < 0.0, 0.0, xf)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def relu(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """y = max(x, 0) elementwise. x: contiguous fp32/fp16/bf16 on gpulab.DEVICE, not requiring grad (no backward).
    Returns a new tensor. Raises TypeError/ValueError naming the bad argument."""
    check_tensor("x", x, dtypes=DTYPES, torch_op="torch.relu")
    check_block("block", block)
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        relu_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)
    return y


def relu_ref(x: torch.Tensor) -> torch.Tensor:
    """The torch reference, in float64."""
    return torch.relu(x.double())


def relu_counts(n: int, dtype: str) -> tuple[int, int]:
    """(FLOPs, bytes) by hand for n elements of ``dtype`` ("fp32", "fp16" or "bf16"): n comparisons; the bytes
    are the model's, ``gpulab.models.precision.relu_bytes`` (read x, write y). Raises ValueError naming the argument."""
    return validate.integer("n", n), precision.relu_bytes(n, dtype)
