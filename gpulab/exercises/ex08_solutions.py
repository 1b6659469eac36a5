"""Reference solution kernel for lesson 08's kernel exercise (hidden behind show_solution): the FlashAttention
forward, one program per block of queries of one (batch, head), the online softmax over key tiles."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def flash_forward_kernel(
    Q, K, V, O, L, scale, CAUSAL: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    Q, K, V, O = Q + bh * L * D, K + bh * L * D, V + bh * L * D, O + bh * L * D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < L, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    hi = L
    if CAUSAL:  # keys past the block's last row are masked for every row: skip those tiles
        hi = tl.minimum((pid_m + 1) * BLOCK_M, L)
    for start in range(0, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < L, other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < L, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        valid = offs_n[None, :] < L
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        l = alpha * l + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    tl.store(
        O + offs_m[:, None] * D + offs_d[None, :], (acc / l[:, None]).to(O.dtype.element_ty), mask=offs_m[:, None] < L
    )


def flash_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    out: torch.Tensor,
    block_m: int = 16,
    block_n: int = 16,
) -> None:
    B, H, L, d = q.shape
    grid = (triton.cdiv(L, block_m), B * H)
    flash_forward_kernel[grid](
        q, k, v, out, L, 1.0 / math.sqrt(d), CAUSAL=causal, D=d, BLOCK_M=block_m, BLOCK_N=block_n
    )
