"""Reference solution kernels for lesson 08b's optional Triton exercise (hidden behind show_solution): the
FlashAttention backward in two kernels, from the saved logsumexp and delta = rowsum(dO o O). One program per block
of keys sums dK and dV over the query blocks; one program per block of queries sums dQ over the key blocks; both
rebuild P = exp(scale q k^T - lse) tile by tile (Dao et al. 2022, Algorithm 4; FlashAttention-2's split of dQ)."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _p_tile(q, k, lse, offs_m, offs_n, L, scale, CAUSAL: tl.constexpr):
    p = tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None])  # P rebuilt from the saved lse
    valid = (offs_m[:, None] < L) & (offs_n[None, :] < L)
    if CAUSAL:
        valid = valid & (offs_n[None, :] <= offs_m[:, None])
    return tl.where(valid, p, 0.0)


@triton.jit
def dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, L, scale, CAUSAL: tl.constexpr, D: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    pid_n, bh = tl.program_id(0), tl.program_id(1)  # a block of keys of one (batch, head)
    base = bh * L * D
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    kv = base + offs_n[:, None] * D + offs_d[None, :]
    k = tl.load(K + kv, mask=offs_n[:, None] < L, other=0.0)
    v = tl.load(V + kv, mask=offs_n[:, None] < L, other=0.0)
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M if CAUSAL else 0  # earlier query blocks see none of these keys
    for start in range(lo, L, BLOCK_M):
        offs_m = start + tl.arange(0, BLOCK_M)
        qo = base + offs_m[:, None] * D + offs_d[None, :]
        q = tl.load(Q + qo, mask=offs_m[:, None] < L, other=0.0)
        do = tl.load(DO + qo, mask=offs_m[:, None] < L, other=0.0)
        lse = tl.load(LSE + bh * L + offs_m, mask=offs_m < L, other=0.0)
        delta = tl.load(DELTA + bh * L + offs_m, mask=offs_m < L, other=0.0)
        p = _p_tile(q, k, lse, offs_m, offs_n, L, scale, CAUSAL)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)  # dV = P^T dO (tl.dot takes operands of one dtype)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])  # dS = P o (dP - delta)
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)  # dK = scale dS^T Q
    tl.store(DK + kv, dk * scale, mask=offs_n[:, None] < L)
    tl.store(DV + kv, dv, mask=offs_n[:, None] < L)


@triton.jit
def dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, L, scale, CAUSAL: tl.constexpr, D: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    pid_m, bh = tl.program_id(0), tl.program_id(1)  # a block of queries of one (batch, head)
    base = bh * L * D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    qo = base + offs_m[:, None] * D + offs_d[None, :]
    q = tl.load(Q + qo, mask=offs_m[:, None] < L, other=0.0)
    do = tl.load(DO + qo, mask=offs_m[:, None] < L, other=0.0)
    lse = tl.load(LSE + bh * L + offs_m, mask=offs_m < L, other=0.0)
    delta = tl.load(DELTA + bh * L + offs_m, mask=offs_m < L, other=0.0)
    dq = tl.zeros([BLOCK_M, D], tl.float32)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, L) if CAUSAL else L  # later keys are masked for every row
    for start in range(0, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        kv = base + offs_n[:, None] * D + offs_d[None, :]
        k = tl.load(K + kv, mask=offs_n[:, None] < L, other=0.0)
        v = tl.load(V + kv, mask=offs_n[:, None] < L, other=0.0)
        p = _p_tile(q, k, lse, offs_m, offs_n, L, scale, CAUSAL)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)  # dQ = scale dS K
    tl.store(DQ + qo, dq * scale, mask=offs_m[:, None] < L)


def flash_backward_kernel(q, k, v, do, lse, delta, causal, out, block_m: int = 16, block_n: int = 16) -> None:
    B, H, L, d = q.shape
    dq, dk, dv = out[0], out[1], out[2]  # out: (3, B, H, L, d)
    scale = 1.0 / math.sqrt(d)
    dkdv_kernel[(triton.cdiv(L, block_n), B * H)](
        q, k, v, do, lse, delta, dk, dv, L, scale, CAUSAL=causal, D=d, BLOCK_M=block_m, BLOCK_N=block_n
    )
    dq_kernel[(triton.cdiv(L, block_m), B * H)](
        q, k, v, do, lse, delta, dq, L, scale, CAUSAL=causal, D=d, BLOCK_M=block_m, BLOCK_N=block_n
    )


def flash_backward(q, k, v, o, lse, do, causal, block: int = 16):
    """The tiled backward in torch (the first exercise): blocks of ``block`` queries against blocks of ``block``
    keys, P rebuilt from lse, delta = rowsum(dO o O); returns (dq, dk, dv), each (B, H, L, d) in q's dtype."""
    L, d = q.shape[2], q.shape[3]
    scale = 1.0 / math.sqrt(d)
    delta = (do * o).sum(-1)  # (B, H, L)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i in range(0, L, block):
        rows = slice(i, min(i + block, L))
        for j in range(0, (i + block if causal else L), block):
            keys = slice(j, min(j + block, L))
            s = q[..., rows, :] @ k[..., keys, :].transpose(-1, -2) * scale  # (B, H, rows, keys)
            p = torch.exp(s - lse[..., rows, None])
            if causal:
                keep = torch.arange(j, keys.stop)[None, :] <= torch.arange(i, rows.stop)[:, None]
                p = p * keep.to(p.dtype)
            dv[..., keys, :] += p.transpose(-1, -2) @ do[..., rows, :]
            ds = p * (do[..., rows, :] @ v[..., keys, :].transpose(-1, -2) - delta[..., rows, None])
            dq[..., rows, :] += ds @ k[..., keys, :] * scale
            dk[..., keys, :] += ds.transpose(-1, -2) @ q[..., rows, :] * scale
    return dq, dk, dv
