"""Reference solution kernels for lesson 06's kernel exercises (hidden behind show_solution): a strided read
y[k] = x[k * stride], and a transpose coalesced on both sides."""

import torch
import triton
import triton.language as tl


@triton.jit
def strided_copy_kernel(x_ptr, y_ptr, n_out, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    # lane k reads x at k * stride: a stride above 1 spreads a warp's request over more sectors
    x = tl.load(x_ptr + offs * stride, mask=mask)
    tl.store(y_ptr + offs, x, mask=mask)


def strided_copy(x: torch.Tensor, stride: int, out: torch.Tensor, block: int = 128) -> None:
    strided_copy_kernel[(triton.cdiv(out.numel(), block),)](x, out, out.numel(), stride, BLOCK=block)


@triton.jit
def transpose_kernel(a_ptr, b_ptr, M, N, BLOCK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_m = pid_m * BLOCK + tl.arange(0, BLOCK)
    offs_n = pid_n * BLOCK + tl.arange(0, BLOCK)
    # a is row-major (M, N): A[i, j] at i * N + j; lanes run along j, so the load is coalesced
    tile = tl.load(a_ptr + offs_m[:, None] * N + offs_n[None, :], mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    # b is row-major (N, M): B[j, i] at j * M + i; after tl.trans, lanes run along i, so the store is coalesced
    tl.store(
        b_ptr + offs_n[:, None] * M + offs_m[None, :],
        tl.trans(tile),
        mask=(offs_n[:, None] < N) & (offs_m[None, :] < M),
    )


def transpose(a: torch.Tensor, out: torch.Tensor, block: int = 32) -> None:
    M, N = a.shape
    transpose_kernel[(triton.cdiv(M, block), triton.cdiv(N, block))](a, out, M, N, BLOCK=block)
