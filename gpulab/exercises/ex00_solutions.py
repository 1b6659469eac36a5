"""Reference solution kernels for lesson 00's kernel exercises (hidden behind show_solution): a vector add, and a
reversal out[i] = x[n - 1 - i]."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)  # which block of BLOCK elements this program owns
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # their indices
    mask = offs < n  # the last block runs past the end
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, block: int = 128) -> None:
    n = x.numel()
    add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)


@triton.jit
def reverse_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # the elements of out this program writes
    mask = offs < n
    x = tl.load(x_ptr + (n - 1 - offs), mask=mask)  # out[i] comes from x[n - 1 - i]: the same mask guards both ends
    tl.store(out_ptr + offs, x, mask=mask)


def reverse(x: torch.Tensor, out: torch.Tensor, block: int = 128) -> None:
    n = x.numel()
    reverse_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
