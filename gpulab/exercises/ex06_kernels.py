"""Reference solution kernel for lesson 06's transpose exercise (hidden behind show_solution)."""
import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(a_ptr, b_ptr, M, N, BLOCK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_m = pid_m * BLOCK + tl.arange(0, BLOCK)
    offs_n = pid_n * BLOCK + tl.arange(0, BLOCK)
    # a is row-major (M, N): A[i, j] at i * N + j; lanes run along j, so the load is coalesced
    tile = tl.load(a_ptr + offs_m[:, None] * N + offs_n[None, :],
                   mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    # b is row-major (N, M): B[j, i] at j * M + i; after tl.trans, lanes run along i, so the store is coalesced
    tl.store(b_ptr + offs_n[:, None] * M + offs_m[None, :], tl.trans(tile),
             mask=(offs_n[:, None] < N) & (offs_m[None, :] < M))


def transpose(a: torch.Tensor, block: int = 32) -> torch.Tensor:
    a = a.contiguous()
    M, N = a.shape
    b = torch.full((N, M), float("nan"), dtype=a.dtype, device=a.device)  # poisoned: a missed element fails
    transpose_kernel[(triton.cdiv(M, block), triton.cdiv(N, block))](a, b, M, N, BLOCK=block)
    return b
