"""Fused bias + GELU, out = GELU_tanh(x + bias): the MLP's activation of lesson 09's GPT-2 step in one pass.

Eager torch computes ``F.gelu(x + bias, approximate="tanh")`` in two kernels: the add writes ``h = x + bias`` to
memory and the GELU reads it back. Here one program takes ``BLOCK`` elements of x seen as one flat array, loads
the bias of each element's column (flat index mod N), adds it in registers and writes only the result, with

    GELU_tanh(h) = h / 2 * (1 + tanh(sqrt(2 / pi) * (h + 0.044715 h^3)))

(Hendrycks and Gimpel, 2016; GPT-2's approximation), tanh(z) written as 2 sigmoid(2z) - 1. Counts by hand for an
(M, N) fp32 x: x read and out written, 8 M N bytes, and the N-element bias (4 N bytes, read from cache after the
first row): a copy's traffic, so its time is bounded by the copy bandwidth. Lesson 09's suite
(``gpulab.bench.lesson09.bias_gelu_times``) times it against torch's two kernels; exercise 09's solution shows it.
Arithmetic in fp32; offsets are int32 (fewer than 2^31 elements).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._checks import check_block, check_same, check_tensor

BLOCK = 4096  # elements a program
DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # storage; the arithmetic is fp32


@triton.jit
def bias_gelu_kernel(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    h = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(b_ptr + offs % N, mask=mask).to(tl.float32)
    z = 0.7978845608028654 * (h + 0.044715 * h * h * h)
    tanh = 2.0 * tl.sigmoid(2.0 * z) - 1.0
    tl.store(y_ptr + offs, 0.5 * h * (1.0 + tanh), mask=mask)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, out: torch.Tensor | None = None, block: int = BLOCK) -> torch.Tensor:
    """out = GELU_tanh(x + bias) by one launch of ``bias_gelu_kernel``; returns ``out``. x: (..., N) contiguous
    on gpulab.DEVICE (lesson 09: (M, N) fp32), bias: (N,), out: x's shape and dtype (default: a new tensor); each
    fp32, fp16 or bf16, computed in fp32. One read of x and one write of out: the sum x + bias stays in
    registers. Raises TypeError/ValueError naming the argument."""
    check_tensor("x", x, dtypes=DTYPES)
    check_tensor("bias", bias, dtypes=DTYPES, ndim=1)
    if x.ndim == 0 or bias.shape[0] != x.shape[-1]:
        raise ValueError(
            f"bias must have shape (N,) for x of shape (..., N), got {tuple(bias.shape)}, x {tuple(x.shape)}"
        )
    out = torch.empty_like(x) if out is None else out
    check_tensor("out", out, dtypes=DTYPES)
    check_same("x", x, "out", out)
    check_block("block", block)
    n = x.numel()
    if n:
        bias_gelu_kernel[(triton.cdiv(n, block),)](x, bias, out, n, x.shape[-1], BLOCK=block)
    return out


def bias_gelu_ref(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """GELU_tanh(x + bias) in float64."""
    h = x.double() + bias.double()
    return 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))


def bias_gelu_bytes(M: int, N: int, itemsize: int = 4) -> int:
    """Bytes by hand of one (M, N) bias + GELU: x read and out written (2 M N elements) and the bias once (N)."""
    return (2 * M * N + N) * itemsize
