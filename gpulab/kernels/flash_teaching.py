"""FlashAttention for teaching: a forward of one screen and its backward, with nothing a learner must skip.

For one head, with ``Q, K, V: (L, d)`` and ``scale = 1/sqrt(d)``:

    S = scale * Q K^T,   P = softmax_row(S),   O = P V,   lse_i = log sum_j exp(S_ij)

The forward is the online softmax of ``gpulab.models.online_softmax`` run on tiles: one program owns ``BLOCK_M``
query rows and walks the keys ``BLOCK_N`` at a time, keeping per row the running maximum ``m``, the running
sum ``l`` and the unnormalised output ``acc`` (the ``u`` of the model). A new tile raises the maximum to
``m_new``; the old ``l`` and ``acc`` are rescaled by ``alpha = exp(m - m_new)`` before the tile's terms are
added. With ``causal=True`` (query i sees keys 0..i) a query block stops at its last row: the tiles right of
the diagonal are never loaded. Tile 0 holds key 0, which every row sees, so ``m`` is finite from the first tile
on and ``exp(-inf - (-inf))`` is never formed. Rows and keys past ``L`` are masked loads (zeros), masked
scores (``-inf``) and masked stores.

The backward (FlashAttention-2, Algorithm 2) rebuilds ``P = exp(S - lse)`` tile by tile from the saved
``lse``; with ``delta_i = sum_d dO_id O_id`` (= rowsum(P o dP), so the softmax's Jacobian needs no ``L x L``
matrix):

    dV = P^T dO,   dP = dO V^T,   dS = P o (dP - delta),   dQ = scale * dS K,   dK = scale * dS^T Q

One kernel owns a block of keys and loops over query blocks (``dK``, ``dV``); a second owns a block of queries
and loops over keys (``dQ``). Each honours the causal flag. Each kernel takes 64x64 tiles where one block's shared
memory allows, smaller ones where not (``planned_blocks``: the backward at d=128 on a T4 or an L4).

What this file leaves out, and ``gpulab.kernels.flash_attention`` (the production kernel) adds: ``exp2`` with
``log2(e)`` folded into the scale, unmasked full tiles, autotuned tile shapes, TMA loads on Hopper, three ways to
make ``dQ``, ``Lq != Lk``, any strides, and a ``torch.autograd.Function``. Here q, k, v are contiguous
``(B, H, L, d)`` of one length ``L``. Sources: Dao et al., FlashAttention (2022), Algorithm 1; FlashAttention-2
(2023), Algorithms 1 and 2; the seed lecture (Stanford CS336 Lecture 5, "FlashAttention brings the ideas
together"); Triton's fused-attention tutorial.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

import gpulab
from gpulab.core import plan

from ._checks import check_tensor
from .flash_attention import flash_attention_ref
from .matmul_precision import bf16_dot_is_exact

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
HEAD_DIMS = (16, 32, 64, 128)
#: (d, L) of lesson 08's teaching-against-production step, both causal flags (``gpulab.bench.lesson08.teaching``,
#: ``gpulab.measure.targets``' rows).
LESSON_SETTINGS = ((128, 4096), (128, 16384))
#: (BLOCK_M, BLOCK_N) a GPU may take, largest first: ``planned_blocks`` takes the first that fits.
GPU_TILES = ((64, 64), (64, 32), (32, 32), (32, 16), (16, 16))
#: The tiles where shared memory allows (every kernel, d <= 128, on an A100 or an H200).
GPU_BLOCKS = GPU_TILES[0]
#: The tiles where tl.dot compiles to FMA (``plan.Plan.small_tiles``, below 8.0): there the dot's operands and
#: accumulator live in registers, and a 64-row tile spills. Compiled for 7.5 at d = 128 (fp16, 4 warps, 3
#: stages; ``gpulab.measure.targets``), bytes spilled at 64x64 / 32x32 / 32x16: forward 49650 / 1840 / 0, dK/dV
#: 87018 / 1964 / 0, dQ 70606 / 15420 / 1016.
FMA_TILES = ((32, 16), (16, 16))
#: fp32 inputs from 8.0, part -> head dimension -> tiles, largest first: the dots are "ieee" (``dot_precision``),
#: which compile to FP32 FMA with operands and accumulators in registers, so 64-row tiles spill as on 7.5.
#: Compiled for 8.0 and 9.0 (4 warps, 3 stages, ``gpulab.measure.targets``' compile), registers / spill bytes at the
#: first tile: forward d<=64 32x32 168-197 / 0, d=128 16x16 73-80 / 0 (32x16 spills 616 on 9.0); dQ 32x32
#: at every d, at most 255 / 0; dK/dV d<=32 16x16 203 / 0, d=64 16x16 255 / 752-828, d=128 16x16 32 /
#: 8776-11300 (the least of any tile: 64x64 spills 141328).
FP32_TILES = {
    "fwd": {16: ((32, 32), (16, 16)), 32: ((32, 32), (16, 16)), 64: ((32, 32), (16, 16)), 128: ((16, 16),)},
    "dkdv": {d: ((16, 16),) for d in HEAD_DIMS},
    "dq": {d: ((32, 32), (32, 16), (16, 16)) for d in HEAD_DIMS},
}
#: The tiles in the interpreter (tl.dot needs at least 16).
INTERPRETER_BLOCKS = (16, 16)
#: The kernels, as ``planned_blocks`` names them -> (a, b): the estimate of one block's shared memory is
#: ``(a * BLOCK_M + b * BLOCK_N) * d * itemsize`` bytes, twice that for fp32 (``smem_bytes``).
PARTS = {"fwd": (2, 2), "dkdv": (4, 4), "dq": (4, 2)}
#: fp32's factor over the formula: tf32 dots take up to 1.75 times it (``smem_bytes``); the "ieee" dots of
#: ``dot_precision`` take less (at most 100 KiB at d = 128, dQ 32x32, where the factor gives 196 KiB).
FP32_FACTOR = 2


def smem_bytes(part: str, block_m: int, block_n: int, head_dim: int, itemsize: int) -> int:
    """Shared memory one block of a teaching kernel needs, in bytes: ``(a * BLOCK_M + b * BLOCK_N) * d *
    itemsize`` with (a, b) = ``PARTS[part]`` ("fwd": flash_fwd_kernel, "dkdv": flash_bwd_dkdv_kernel, "dq":
    flash_bwd_dq_kernel), Triton's default 4 warps and 3 stages; times ``FP32_FACTOR`` for ``itemsize`` 4.
    ``itemsize``: 2 (fp16, bf16) or 4 (fp32).

    Source: what Triton 3.9 allocates (``metadata.shared`` of ``python -m gpulab.measure.targets``' compiles, 16-bit
    dtypes, CAUSAL=False) for compute capabilities 7.5, 8.0, 8.9, 9.0, d in (64, 128), tiles ``GPU_TILES``.
    On 7.5 (tl.dot on FMA) the formula is exact for all 30 compiles: at d=128 and 64x64 the forward takes 64
    KiB, the dK/dV kernel 128 KiB, the dQ kernel 96 KiB. From 8.0 (tensor-core mma) the compiler takes at most
    the formula: at d=128, 64x64 at most 48 KiB (forward), 73 KiB (dK/dV), 64 KiB (dQ) on 8.0, 8.9 and 9.0;
    its largest dK/dV there is 73 KiB at 64x32 on 9.0, so no smaller formula bounds it. fp32 (tf32 dots from
    8.0; compiled at d=128, tiles 64x64, 64x32, 32x32 on 8.0 and 9.0) takes up to 1.75 times the formula (the
    forward at 64x64 on 9.0: 224 KiB), hence ``FP32_FACTOR``. Raises ValueError for an unknown part or
    itemsize."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {tuple(PARTS)}, got {part!r}")
    if itemsize not in (2, 4):
        raise ValueError(f"itemsize must be 2 (fp16, bf16) or 4 (fp32) bytes, got {itemsize!r}")
    a, b = PARTS[part]
    return (a * block_m + b * block_n) * head_dim * itemsize * (FP32_FACTOR if itemsize == 4 else 1)


def planned_blocks(head_dim: int, itemsize: int, part: str, plan_: plan.Plan | None = None) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) of one teaching kernel on ``plan_``'s GPU (default ``plan.current()``): the first of
    ``GPU_TILES`` (``FMA_TILES`` where ``plan_.small_tiles``; ``FP32_TILES[part][head_dim]`` for fp32 inputs
    elsewhere) whose ``smem_bytes(part, ...)`` fits ``plan_.smem_per_block_bytes``; the last if none does.
    ``head_dim``: d (a positive int); ``itemsize``: bytes per element of q (2 or 4); ``part``: "fwd", "dkdv"
    or "dq". Pure (the interpreter takes ``INTERPRETER_BLOCKS`` instead). Raises ValueError naming the
    argument."""
    if not isinstance(head_dim, int) or head_dim < 1:
        raise ValueError(f"head_dim must be a positive int, got {head_dim!r}")
    p = plan_ or plan.current()
    if part not in PARTS:
        raise ValueError(f"part must be one of {tuple(PARTS)}, got {part!r}")
    if p.small_tiles:
        tiles = FMA_TILES
    elif itemsize == 4:
        if head_dim not in HEAD_DIMS:
            raise ValueError(f"head_dim must be one of {HEAD_DIMS} for fp32 inputs, got {head_dim!r}")
        tiles = FP32_TILES[part][head_dim]
    else:
        tiles = GPU_TILES
    for bm, bn in tiles:
        if smem_bytes(part, bm, bn, head_dim, itemsize) <= p.smem_per_block_bytes:
            return bm, bn
    return tiles[-1]


def dot_precision(dtype: torch.dtype) -> str:
    """The ``input_precision`` (``DOT_PREC``) of every teaching ``tl.dot`` for inputs of ``dtype``: "ieee" for
    torch.float32, because the teaching check compares with float64 at fp32's bound and a GPU's default fp32
    dot rounds its inputs to TF32 (10 mantissa bits: the LSE off by about 5e-4); Triton's default ("tf32",
    ignored: 16-bit products are exact on the tensor cores) for fp16 and bf16."""
    return "ieee" if dtype == torch.float32 else "tf32"


@triton.jit
def flash_fwd_kernel(
    Q,
    K,
    V,
    O,
    LSE,
    L,
    scale,
    CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    pid_m, bh = tl.program_id(0), tl.program_id(1)  # a block of queries of one (batch, head)
    Q, K, V, O = Q + bh * L * D, K + bh * L * D, V + bh * L * D, O + bh * L * D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < L, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max
    l = tl.zeros([BLOCK_M], tl.float32)  # running sum of exp(s - m)
    acc = tl.zeros([BLOCK_M, D], tl.float32)  # running sum of exp(s - m) v
    hi = L
    if CAUSAL:  # skip the tiles right of the diagonal
        hi = tl.minimum((pid_m + 1) * BLOCK_M, L)
    for start in range(0, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < L, other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < L, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * scale  # (BLOCK_M, BLOCK_N) scores
        valid = offs_n[None, :] < L
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp(m - m_new)  # rescales the old state to the new max
        p = tl.exp(s - m_new[:, None])
        l = alpha * l + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PREC)
        m = m_new
    tl.store(
        O + offs_m[:, None] * D + offs_d[None, :], (acc / l[:, None]).to(O.dtype.element_ty), mask=offs_m[:, None] < L
    )
    tl.store(LSE + bh * L + offs_m, m + tl.log(l), mask=offs_m < L)


def flash_teaching_forward(q, k, v, causal: bool = False, blocks: tuple[int, int] | None = None):
    """Exact attention by the teaching forward: returns ``(out, lse)``, out: (B, H, L, d) in q's dtype, lse:
    (B, H, L) float32 (natural log). q, k, v: contiguous (B, H, L, d), the same dtype and shape, on
    gpulab.DEVICE; d in ``HEAD_DIMS``; ``causal``: query i sees keys 0..i. ``blocks``: (BLOCK_M, BLOCK_N),
    powers of two >= 16; None: ``planned_blocks(d, itemsize, "fwd")`` on a GPU, ``INTERPRETER_BLOCKS`` in the
    interpreter. Raises TypeError/ValueError naming the argument."""
    _check(q, k, v, causal, blocks)
    B, H, L, d = q.shape
    blocks = blocks or _default_blocks(d, q.element_size(), "fwd")
    out = torch.empty_like(q)
    lse = torch.empty((B, H, L), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(L, blocks[0]), B * H)
    flash_fwd_kernel[grid](
        q, k, v, out, lse, L, 1.0 / math.sqrt(d),
        CAUSAL=causal, D=d, BLOCK_M=blocks[0], BLOCK_N=blocks[1], DOT_PREC=dot_precision(q.dtype),
    )  # fmt: skip
    return out, lse


@triton.jit
def _rebuild_p(q, k, lse, offs_m, offs_n, L, scale, CAUSAL: tl.constexpr, DOT_PREC: tl.constexpr):
    """P of one (query block, key block) tile from the saved lse; 0 where masked."""
    p = tl.exp(tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * scale - lse[:, None])
    valid = (offs_m[:, None] < L) & (offs_n[None, :] < L)
    if CAUSAL:
        valid = valid & (offs_n[None, :] <= offs_m[:, None])
    return tl.where(valid, p, 0.0)


@triton.jit
def flash_bwd_dkdv_kernel(
    Q,
    K,
    V,
    DO,
    LSE,
    DELTA,
    DK,
    DV,
    L,
    scale,
    CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    pid_n, bh = tl.program_id(0), tl.program_id(1)  # a block of keys of one (batch, head)
    Q, K, V, DO, DK, DV = (
        Q + bh * L * D,
        K + bh * L * D,
        V + bh * L * D,
        DO + bh * L * D,
        DK + bh * L * D,
        DV + bh * L * D,
    )
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    kv = offs_n[:, None] * D + offs_d[None, :]
    k = tl.load(K + kv, mask=offs_n[:, None] < L, other=0.0)
    v = tl.load(V + kv, mask=offs_n[:, None] < L, other=0.0)
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    lo = 0
    if CAUSAL:  # query blocks above the diagonal see none of these keys
        lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M
    for start in range(lo, L, BLOCK_M):
        offs_m = start + tl.arange(0, BLOCK_M)
        qo = offs_m[:, None] * D + offs_d[None, :]
        q = tl.load(Q + qo, mask=offs_m[:, None] < L, other=0.0)
        do = tl.load(DO + qo, mask=offs_m[:, None] < L, other=0.0)
        lse = tl.load(LSE + bh * L + offs_m, mask=offs_m < L, other=0.0)
        delta = tl.load(DELTA + bh * L + offs_m, mask=offs_m < L, other=0.0)
        p = _rebuild_p(q, k, lse, offs_m, offs_n, L, scale, CAUSAL, DOT_PREC)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=DOT_PREC)  # dV = P^T dO
        dp = tl.dot(do, tl.trans(v), input_precision=DOT_PREC)  # dP = dO V^T
        ds = p * (dp - delta[:, None])  # dS = P o (dP - delta)
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=DOT_PREC)  # dK = dS^T Q (times scale below)
    tl.store(DK + kv, (dk * scale).to(DK.dtype.element_ty), mask=offs_n[:, None] < L)
    tl.store(DV + kv, dv.to(DV.dtype.element_ty), mask=offs_n[:, None] < L)


@triton.jit
def flash_bwd_dq_kernel(
    Q,
    K,
    V,
    DO,
    LSE,
    DELTA,
    DQ,
    L,
    scale,
    CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    pid_m, bh = tl.program_id(0), tl.program_id(1)  # a block of queries of one (batch, head)
    Q, K, V, DO, DQ = Q + bh * L * D, K + bh * L * D, V + bh * L * D, DO + bh * L * D, DQ + bh * L * D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    qo = offs_m[:, None] * D + offs_d[None, :]
    q = tl.load(Q + qo, mask=offs_m[:, None] < L, other=0.0)
    do = tl.load(DO + qo, mask=offs_m[:, None] < L, other=0.0)
    lse = tl.load(LSE + bh * L + offs_m, mask=offs_m < L, other=0.0)
    delta = tl.load(DELTA + bh * L + offs_m, mask=offs_m < L, other=0.0)
    dq = tl.zeros([BLOCK_M, D], tl.float32)
    hi = L
    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, L)
    for start in range(0, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < L, other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < L, other=0.0)
        p = _rebuild_p(q, k, lse, offs_m, offs_n, L, scale, CAUSAL, DOT_PREC)
        ds = p * (tl.dot(do, tl.trans(v), input_precision=DOT_PREC) - delta[:, None])  # dS = P o (dO V^T - delta)
        dq += tl.dot(ds.to(k.dtype), k, input_precision=DOT_PREC)  # dQ = dS K (times scale below)
    tl.store(DQ + qo, (dq * scale).to(DQ.dtype.element_ty), mask=offs_m[:, None] < L)


def flash_teaching_backward(q, k, v, out, lse, do, causal: bool = False, blocks: tuple[int, int] | None = None):
    """Gradients ``(dq, dk, dv)`` of the teaching forward, each (B, H, L, d) in q's dtype. ``out`` and ``lse``:
    what ``flash_teaching_forward`` returned for q, k, v, causal; ``do``: dL/dout, (B, H, L, d) in q's dtype.
    delta = rowsum(dO o O) is one torch line here (fp32); the two kernels do the rest. ``blocks``: (BLOCK_M,
    BLOCK_N) of both kernels; None: each kernel's ``planned_blocks`` ("dkdv", "dq") on a GPU,
    ``INTERPRETER_BLOCKS`` in the interpreter. Raises TypeError/ValueError naming the argument."""
    _check(q, k, v, causal, blocks)
    for name, t in (("out", out), ("do", do)):
        check_tensor(name, t, dtypes=(q.dtype,), ndim=4)
        if t.shape != q.shape:
            raise ValueError(f"{name} must have q's shape {tuple(q.shape)}, got {tuple(t.shape)}")
    check_tensor("lse", lse, dtypes=(torch.float32,), ndim=3)
    B, H, L, d = q.shape
    if lse.shape != (B, H, L):
        raise ValueError(f"lse must have shape {(B, H, L)}, got {tuple(lse.shape)}")
    delta = (do.float() * out.float()).sum(-1).contiguous()  # (B, H, L): delta_i = sum_d dO_id O_id
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    scale = 1.0 / math.sqrt(d)
    bm, bn = blocks or _default_blocks(d, q.element_size(), "dkdv")
    flash_bwd_dkdv_kernel[(triton.cdiv(L, bn), B * H)](
        q, k, v, do, lse, delta, dk, dv, L, scale,
        CAUSAL=causal, D=d, BLOCK_M=bm, BLOCK_N=bn, DOT_PREC=dot_precision(q.dtype),
    )  # fmt: skip
    bm, bn = blocks or _default_blocks(d, q.element_size(), "dq")
    flash_bwd_dq_kernel[(triton.cdiv(L, bm), B * H)](
        q, k, v, do, lse, delta, dq, L, scale,
        CAUSAL=causal, D=d, BLOCK_M=bm, BLOCK_N=bn, DOT_PREC=dot_precision(q.dtype),
    )  # fmt: skip
    return dq, dk, dv


def _default_blocks(head_dim: int, itemsize: int, part: str) -> tuple[int, int]:
    return planned_blocks(head_dim, itemsize, part) if gpulab.ON_GPU else INTERPRETER_BLOCKS


def _check(q, k, v, causal, blocks) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, dtypes=DTYPES, ndim=4)
    for name, t in (("k", k), ("v", v)):
        if t.shape != q.shape or t.dtype != q.dtype:
            raise ValueError(
                f"{name} must have q's shape and dtype {tuple(q.shape)} {q.dtype}, got "
                f"{tuple(t.shape)} {t.dtype} (the teaching kernel has one length L)"
            )
    if q.shape[3] not in HEAD_DIMS:
        raise ValueError(f"q: the head dimension d must be one of {HEAD_DIMS}, got shape {tuple(q.shape)}")
    if q.shape[2] < 1:
        raise ValueError(f"q must hold at least one row (L >= 1), got shape {tuple(q.shape)}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    if blocks is not None and not (
        isinstance(blocks, tuple)
        and len(blocks) == 2
        and all(isinstance(b, int) and b >= 16 and b & (b - 1) == 0 for b in blocks)
    ):
        raise ValueError(f"blocks must be a pair (BLOCK_M, BLOCK_N) of powers of two >= 16, got {blocks!r}")
    if q.dtype == torch.bfloat16 and not bf16_dot_is_exact():
        raise TypeError(
            "q: bf16 tl.dot is wrong in this Triton interpreter (it multiplies raw bits); use fp16 or "
            "fp32 here, bf16 on a GPU"
        )


def reference(q, k, v, causal: bool = False):
    """The float64 reference ``(out, lse)`` (``flash_attention.flash_attention_ref``): S and P materialised."""
    return flash_attention_ref(q, k, v, causal)
