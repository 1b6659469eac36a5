"""Reference solution kernel for lesson 09's fused bias + GELU exercise (hidden behind show_solution)."""

import torch
import triton
import triton.language as tl

SQRT_2_OVER_PI = 0.7978845608028654


@triton.jit
def bias_gelu_kernel(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    h = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(b_ptr + offs % N, mask=mask).to(tl.float32)
    z = 0.7978845608028654 * (h + 0.044715 * h * h * h)
    tanh = 2.0 * tl.sigmoid(2.0 * z) - 1.0
    tl.store(y_ptr + offs, 0.5 * h * (1.0 + tanh), mask=mask)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, block: int = 4096) -> torch.Tensor:
    """out = tanh-GELU(x + bias); x, out: (M, N) contiguous, bias: (N,); computed in fp32. One read of x, one
    write of out: the bias add's intermediate stays in registers."""
    n = x.numel()
    bias_gelu_kernel[(triton.cdiv(n, block),)](x, bias, out, n, x.shape[-1], BLOCK=block)
    return out
