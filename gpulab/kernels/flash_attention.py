"""FlashAttention in Triton: a tiled forward with online softmax, and a backward that recomputes.

For one head, with ``Q: (Lq, d)``, ``K, V: (Lk, d)`` and ``scale = sm_scale`` (default ``1/sqrt(d)``):

    S = scale * Q K^T,   P = softmax_row(S),   O = P V,   lse = log(sum_j exp(S_ij))   (natural log)

Naive attention writes ``S`` and ``P`` (``Lq x Lk`` each) to HBM. Here one program owns a block of
``BLOCK_M`` query rows, keeps them in registers, and walks the keys ``BLOCK_N`` at a time: each score tile
is made by ``tl.dot``, folded into the running state ``(m, l, acc)`` of the online softmax (see
``gpulab.models.online_softmax``) and dropped. Only ``O`` and ``lse`` are written: ``O(L)`` memory, not ``O(L^2)``
(Dao et al., FlashAttention, 2022, Algorithm 1; FlashAttention-2, 2023, Section 3.1 for the loop order and
the rescaled accumulator; the seed lecture, Stanford CS336 Lecture 5, "FlashAttention brings the ideas
together").

Exponentials use ``exp2``: the kernel multiplies scores by ``scale * log2(e)`` once, so
``exp(scale * s - m) = exp2(s * scale * log2(e) - m')`` with ``m'`` kept in log2 units.

Masks and the tile stages. The keys a query block visits are split into two ranges:

- the full tiles that need no mask at all: for ``causal=False`` every complete tile of ``BLOCK_N`` keys;
  for ``causal=True`` the tiles left of the query block's diagonal (``n < start_m``);
- the masked tiles: the diagonal band (``causal=True``) and the last, partial tile when ``Lk`` is not a
  multiple of ``BLOCK_N``. There the mask is ``n < Lk`` (and ``n <= m`` when causal); masked scores are
  ``-inf`` and contribute ``exp2(-inf) = 0``.

Tiles right of the diagonal are never loaded: causal attention does about half the work. No row ever
meets a fully masked tile before a valid key (tile 0 holds key 0, which every row may see), so the running
maximum is finite from the first tile on and ``-inf - (-inf)`` never happens. Rows past ``Lq`` in the last
query block read zeros and are not stored. The TMA path runs only when Lq and Lk are multiples of
``TMA_ROW_MULTIPLE`` (128, the largest tile): a descriptor over the flattened (B*H*L, d) tensor would otherwise
hand a tile crossing a head's end the next head's rows, and a masked score alone does not stop an inf or NaN
there from reaching the output (0 * inf = NaN). Other lengths take the masked pointer loads, which read zeros.

The causal convention for ``Lq != Lk`` is SDPA's ``is_causal``: the top-left aligned mask
``torch.ones(Lq, Lk).tril(diagonal=0)``, query ``i`` sees keys ``0..i``. Every row sees key 0, so no row
is empty. (FlashAttention-2's own library aligns to the bottom right instead; pass ``causal=True`` only if
top-left is what you mean.)

The backward (FlashAttention-2, Algorithm 2) rebuilds ``P`` tile by tile from ``Q``, ``K`` and the saved
``lse`` instead of loading it, after one small kernel computes ``delta_i = sum_d dO_id * O_id``:

    dV = P^T dO,  dP = dO V^T,  dS = P * (dP - delta),  dQ = scale * dS K,  dK = scale * dS^T Q

One program owns a block of ``BLOCK_N1`` keys and loops over query blocks of ``BLOCK_M1`` rows
accumulating ``dK`` and ``dV`` in registers; ``dQ`` is either (``"fused"``) computed in the same launch by
the same program for its own block of ``BLOCK_M2`` queries looping over keys (for causal attention program
``j`` then does ``N - j`` key-side tiles and ``j`` query-side tiles, so every program has the same work), or
(``"split"``) the same two parts as two launches, or (``"atomic"``) added into an fp32 buffer by the
key-side loop with ``tl.atomic_add``, as FlashAttention-2 does (5 matmuls per tile instead of 7). The
causal flag is honoured in every part: one widely copied tutorial's backward masked as if always causal.

Dtypes: fp16 and bf16 (``tl.dot`` on tensor cores, fp32 accumulators, ``P`` and ``dS`` rounded to the
input dtype before their matmuls, as FlashAttention does), and fp32 (``input_precision="ieee"``). In
Triton 3.9's interpreter bf16 ``tl.dot`` multiplies raw bits (``matmul_precision.bf16_dot_is_exact``), so
there bf16 tiles are upcast to fp32 before every dot.

Which loads and configs a launch takes on each GPU generation is the plan policy, described once in
``gpulab.core.plan``'s module docstring (``planned_tma``, ``fwd_candidates``, ``bwd_candidates``). TMA loads need
``tma_available()`` (``kernels._hopper``) besides the plan, and run only where Lq and Lk are multiples of
``TMA_ROW_MULTIPLE`` on 16-byte aligned tensors. On a GPU each launch without a given config is autotuned by the
shared autotuner (``kernels._autotune``, keyed by ``_tune_key``: part, dtype, d, causal, TMA, ``l_bucket(L)``).

The file reads top to bottom: constants, helpers, the forward kernel, the backward kernels, configurations,
launchers, autograd, the float64 reference.
"""

from __future__ import annotations

import functools
import math
import numbers

import torch
import triton
import triton.language as tl

import gpulab

from ..core import plan
from . import _autotune
from ._autograd import differentiable_once
from ._checks import check_power_of_two, check_tensor
from ._hopper import TensorDescriptor, tma_available
from .matmul_precision import bf16_dot_is_exact

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
HEAD_DIMS = (16, 32, 64, 128)
#: The head dimensions of lesson 08's headline (``gpulab.bench.lesson08``, ``gpulab.measure.targets``' rows).
LESSON_HEAD_DIMS = (64, 128)
BWD_MODES = ("fused", "split", "atomic")
# The launches of each backward mode, and each launch's kernel flags.
BWD_PARTS = {
    "fused": dict(DKDV=True, DQ_MODE=1),
    "dkdv": dict(DKDV=True, DQ_MODE=0),
    "dq": dict(DKDV=False, DQ_MODE=1),
    "atomic": dict(DKDV=True, DQ_MODE=2),
}
MODE_PARTS = {"fused": ("fused",), "split": ("dkdv", "dq"), "atomic": ("atomic",)}
LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * LOG2E)
LN2 = 0.6931471805599453  # ln(2): lse (natural) = lse2 * LN2
_LOG2E = tl.constexpr(LOG2E)  # the same numbers as kernel constants (a kernel reads only constexpr globals)
_LN2 = tl.constexpr(LN2)
MAX_GRID_Y = 65535  # CUDA's limit on grid dimension 1, which holds B * H
TMA_ROW_MULTIPLE = 128  # TMA loads only when Lq and Lk are multiples of this (no tile crosses a head's end)
MAX_SM_SCALE = torch.finfo(torch.float32).max / LOG2E  # sm_scale * log2(e) goes to the kernel as an fp32


# ---- helpers -----------------------------------------------------------------------------------------------


@triton.jit
def _load_rows(ptr, offs_r, offs_d, n_rows, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr):
    """Rows ``offs_r`` of the (n_rows, HEAD_DIM) contiguous matrix at ``ptr`` (one head); rows >= n_rows read
    as 0 if MASKED. ``ptr`` already points at the head, so the offsets stay 32-bit."""
    ptrs = ptr + offs_r[:, None] * HEAD_DIM + offs_d[None, :]
    if MASKED:
        return tl.load(ptrs, mask=offs_r[:, None] < n_rows, other=0.0)
    return tl.load(ptrs)


@triton.jit
def _load_tile(
    desc, ptr, flat_row, offs_r, offs_d, n_rows,
    HEAD_DIM: tl.constexpr, MASKED: tl.constexpr, USE_TMA: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    """One (rows, d) tile of this head: through the TMA descriptor at row ``flat_row`` of the flattened
    (B*H*L, d) tensor, or by masked pointer loads from ``ptr`` (this head) at rows ``offs_r``; fp32 if UPCAST.
    The descriptor path has no mask: the launcher takes it only where no tile crosses a head's end."""
    if USE_TMA:
        t = desc.load([flat_row.to(tl.int32), 0])
    else:
        t = _load_rows(ptr, offs_r, offs_d, n_rows, HEAD_DIM=HEAD_DIM, MASKED=MASKED)
    if UPCAST:
        t = t.to(tl.float32)
    return t


# ---- the forward kernel ------------------------------------------------------------------------------------


@triton.jit
def _fwd_tiles(
    acc, l_i, m_i, q, offs_m,  # the running state of one query block, its Q tile and query indices
    kv, lo, hi, Lk, qk_scale,  # this head's (K, V, desc_k, desc_v, first flat row); key tiles [lo, hi)
    BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
    USE_TMA: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):  # fmt: skip
    """Fold key tiles [lo, hi) into the running state of the online softmax (FlashAttention-2, Algorithm 1,
    lines 8-10), in log2 units (``s`` is already scaled by ``scale * log2(e)``):

        m_new = max(m_i, rowmax(s)),  p = exp2(s - m_new),  alpha = exp2(m_i - m_new)
        l_i = alpha * l_i + rowsum(p),  acc = alpha * acc + p V

    ``acc`` is the unnormalised output (the caller divides by ``l_i`` once, at the end). Masks only if MASKED:
    keys ``n >= Lk`` and, if CAUSAL, keys ``n > m`` get ``s = -inf``, so ``p = 0``."""
    Kh, Vh, desc_k, desc_v, kv_base = kv
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_tile(desc_k, Kh, kv_base + start_n, offs_n, offs_d, Lk,
                       HEAD_DIM=HEAD_DIM, MASKED=MASKED, USE_TMA=USE_TMA, UPCAST=UPCAST)  # fmt: skip
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC)  # (BLOCK_M, BLOCK_N)
        if MASKED:
            valid = offs_n[None, :] < Lk
            if CAUSAL:
                valid = valid & (offs_n[None, :] <= offs_m[:, None])
            s = tl.where(valid, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s = s - m_new[:, None]
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            s = s * qk_scale - m_new[:, None]
        p = tl.math.exp2(s)
        alpha = tl.math.exp2(m_i - m_new)  # rescales the old state to the new maximum
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = _load_tile(desc_v, Vh, kv_base + start_n, offs_n, offs_d, Lk,
                       HEAD_DIM=HEAD_DIM, MASKED=MASKED, USE_TMA=USE_TMA, UPCAST=UPCAST)  # fmt: skip
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PREC)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["Lq", "Lk"])  # one binary for every length
def flash_attention_fwd_kernel(
    Q, K, V, O, LSE,  # Q, O: (B*H*Lq, d), K, V: (B*H*Lk, d), contiguous; LSE: (B*H*Lq,) fp32, natural log
    desc_q, desc_k, desc_v,  # TMA descriptors over the same flattened Q, K, V (None without USE_TMA)
    qk_scale, Lq, Lk,  # sm_scale * log2(e); queries and keys per head
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):  # fmt: skip
    """One program: BLOCK_M query rows of one (batch, head), grid ``(cdiv(Lq, BLOCK_M), B * H)``. Writes
    ``O = acc / l`` and ``LSE = (m + log2 l) * ln 2`` for its rows (rows past Lq are not stored). The keys
    are visited in two stages (the module docstring): the full tiles without a mask, then the masked ones.
    Causal programs take their query blocks last first, so the longest rows start first and the short ones
    fill the tail."""
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    start_m = pid_m * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    q_base = bh * Lq
    kv_base = bh * Lk
    Kh = K + kv_base * HEAD_DIM  # this head's keys and values
    Vh = V + kv_base * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = _load_tile(desc_q, Q + q_base * HEAD_DIM, q_base + start_m, offs_m, offs_d, Lq,
                   HEAD_DIM=HEAD_DIM, MASKED=True, USE_TMA=USE_TMA, UPCAST=UPCAST)  # fmt: skip
    # q: (BLOCK_M, d)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    lk_full = (Lk // BLOCK_N) * BLOCK_N  # keys in complete tiles
    if CAUSAL:  # left of the diagonal: no mask; the band (and a partial last tile): masked; right: skipped
        hi_full = tl.minimum(start_m, lk_full)
        hi = tl.minimum(start_m + BLOCK_M, Lk)
    else:
        hi_full = lk_full
        hi = Lk
    kv = (Kh, Vh, desc_k, desc_v, kv_base)
    acc, l_i, m_i = _fwd_tiles(
        acc, l_i, m_i, q, offs_m, kv, 0, hi_full, Lk, qk_scale,
        BLOCK_N=BLOCK_N, HEAD_DIM=HEAD_DIM, MASKED=False, CAUSAL=CAUSAL,
        USE_TMA=USE_TMA, UPCAST=UPCAST, DOT_PREC=DOT_PREC,
    )  # fmt: skip
    acc, l_i, m_i = _fwd_tiles(
        acc, l_i, m_i, q, offs_m, kv, hi_full, hi, Lk, qk_scale,
        BLOCK_N=BLOCK_N, HEAD_DIM=HEAD_DIM, MASKED=True, CAUSAL=CAUSAL,
        USE_TMA=USE_TMA, UPCAST=UPCAST, DOT_PREC=DOT_PREC,
    )  # fmt: skip
    acc = acc / l_i[:, None]
    row_ok = offs_m < Lq
    tl.store(LSE + q_base + offs_m, (m_i + tl.math.log2(l_i)) * _LN2, mask=row_ok)
    tl.store(
        O + (q_base + offs_m)[:, None] * HEAD_DIM + offs_d[None, :], acc.to(O.dtype.element_ty), mask=row_ok[:, None]
    )


# ---- the backward kernels ----------------------------------------------------------------------------------


@triton.jit(do_not_specialize=["n_rows"])
def flash_attention_bwd_preprocess_kernel(O, DO, DELTA, n_rows, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    """delta_i = sum_d dO_id * O_id in fp32 over rows of the (n_rows, d) contiguous O and dO (FlashAttention-2,
    Algorithm 2, line 4): ``rowsum(dP * P) = rowsum(dO * O)``, so dS needs no second pass over the keys."""
    offs_r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, HEAD_DIM)
    o = _load_rows(O, offs_r, offs_d, n_rows, HEAD_DIM=HEAD_DIM, MASKED=True).to(tl.float32)
    do = _load_rows(DO, offs_r, offs_d, n_rows, HEAD_DIM=HEAD_DIM, MASKED=True).to(tl.float32)
    tl.store(DELTA + offs_r, tl.sum(o * do, 1), mask=offs_r < n_rows)


@triton.jit
def _bwd_dkdv_tiles(
    dk, dv, k, v, offs_n,  # the accumulators and tiles (BLOCK_N1, d) of one key block, its key indices
    q_side, lo, hi, lengths, scales,  # this head's query side (see the kernel); query tiles [lo, hi)
    BLOCK_M1: tl.constexpr, HEAD_DIM: tl.constexpr,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, ATOMIC_DQ: tl.constexpr,
    USE_TMA: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):  # fmt: skip
    """For one block of keys, fold query blocks [lo, hi) into dk and dv (FlashAttention-2, Algorithm 2, lines
    8-14, on transposed tiles: keys along rows, so no tile is transposed in registers):

        P^T = exp2(K Q^T * scale * log2(e) - lse2),  dV += P^T dO,  dP^T = V dO^T,
        dS^T = P^T * (dP^T - delta),  dK += dS^T Q   (the caller multiplies dK by scale once)

    Masks only if MASKED: queries ``m >= Lq`` and, if CAUSAL, queries ``m < n`` get ``P = 0``. With ATOMIC_DQ
    also add this block's share ``scale * dS K`` of dQ into the fp32 buffer ``DQh`` (keys past Lk are zeroed
    first: their zero scores could give exp2 overflow). ``q_side = (Qh, DOh, LSEh, DELTAh, DQh, desc_q,
    desc_do, q_base)``: this head's pointers, the TMA descriptors of Q and dO (used only with USE_TMA, where
    Lq and Lk are multiples of TMA_ROW_MULTIPLE, so no tile reaches another head) and its first flat row;
    ``lengths = (Lq, Lk)``, ``scales = (qk_scale, sm_scale)``."""
    Qh, DOh, LSEh, DELTAh, DQh, desc_q, desc_do, q_base = q_side
    Lq, Lk = lengths
    qk_scale, sm_scale = scales
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in tl.range(lo, hi, BLOCK_M1):
        start_m = tl.multiple_of(start_m, BLOCK_M1)
        offs_m = start_m + tl.arange(0, BLOCK_M1)
        q = _load_tile(desc_q, Qh, q_base + start_m, offs_m, offs_d, Lq,
                       HEAD_DIM=HEAD_DIM, MASKED=MASKED, USE_TMA=USE_TMA, UPCAST=UPCAST)  # fmt: skip
        do = _load_tile(desc_do, DOh, q_base + start_m, offs_m, offs_d, Lq,
                        HEAD_DIM=HEAD_DIM, MASKED=MASKED, USE_TMA=USE_TMA, UPCAST=UPCAST)  # fmt: skip
        if MASKED:
            lse2 = tl.load(LSEh + offs_m, mask=offs_m < Lq, other=0.0) * _LOG2E
            delta = tl.load(DELTAh + offs_m, mask=offs_m < Lq, other=0.0)
        else:
            lse2 = tl.load(LSEh + offs_m) * _LOG2E
            delta = tl.load(DELTAh + offs_m)
        s_t = tl.dot(k, tl.trans(q), input_precision=DOT_PREC)  # (BLOCK_N1, BLOCK_M1)
        p_t = tl.math.exp2(s_t * qk_scale - lse2[None, :])  # P^T, rebuilt
        if MASKED:
            valid = offs_m[None, :] < Lq
            if CAUSAL:
                valid = valid & (offs_m[None, :] >= offs_n[:, None])
            p_t = tl.where(valid, p_t, 0.0)
        if ATOMIC_DQ:  # keys past Lk (zeros) could give exp2 overflow; they must not reach dQ
            p_t = tl.where(offs_n[:, None] < Lk, p_t, 0.0)
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=DOT_PREC)  # dV += P^T dO
        dp_t = tl.dot(v, tl.trans(do), input_precision=DOT_PREC)  # dP^T = V dO^T
        ds_t = p_t * (dp_t - delta[None, :])  # dS^T
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=DOT_PREC)  # dK += dS^T Q
        if ATOMIC_DQ:
            dq = tl.dot(tl.trans(ds_t.to(k.dtype)), k, input_precision=DOT_PREC)  # (BLOCK_M1, d)
            tl.atomic_add(
                DQh + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
                dq * sm_scale,
                mask=offs_m[:, None] < Lq,
                sem="relaxed",
            )
    return dk, dv


@triton.jit
def _bwd_dq_tiles(
    dq, q, do, lse2, delta, offs_m,  # the accumulator and tiles of one query block, its lse (log2), delta, rows
    kv, lo, hi, Lk, qk_scale,  # this head's (K, V, desc_k, desc_v, first flat row); key tiles [lo, hi)
    BLOCK_N2: tl.constexpr, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
    USE_TMA: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):  # fmt: skip
    """For one block of queries, fold key tiles [lo, hi) into dq (FlashAttention-2, Algorithm 2, lines 9-13
    seen from the query side):

        P = exp2(Q K^T * scale * log2(e) - lse2),  dP = dO V^T,  dS = P * (dP - delta),  dQ += dS K

    unscaled (the caller multiplies by scale once). Masks only if MASKED: keys ``n >= Lk`` and, if CAUSAL,
    keys ``n > m`` get ``P = 0``."""
    Kh, Vh, desc_k, desc_v, kv_base = kv
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in tl.range(lo, hi, BLOCK_N2):
        start_n = tl.multiple_of(start_n, BLOCK_N2)
        offs_n = start_n + tl.arange(0, BLOCK_N2)
        k = _load_tile(desc_k, Kh, kv_base + start_n, offs_n, offs_d, Lk,
                       HEAD_DIM=HEAD_DIM, MASKED=MASKED, USE_TMA=USE_TMA, UPCAST=UPCAST)  # fmt: skip
        v = _load_tile(desc_v, Vh, kv_base + start_n, offs_n, offs_d, Lk,
                       HEAD_DIM=HEAD_DIM, MASKED=MASKED, USE_TMA=USE_TMA, UPCAST=UPCAST)  # fmt: skip
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC)  # (BLOCK_M2, BLOCK_N2)
        p = tl.math.exp2(s * qk_scale - lse2[:, None])
        if MASKED:
            valid = offs_n[None, :] < Lk
            if CAUSAL:
                valid = valid & (offs_n[None, :] <= offs_m[:, None])
            p = tl.where(valid, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=DOT_PREC)  # dP = dO V^T
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=DOT_PREC)  # dQ += dS K
    return dq


@triton.jit(do_not_specialize=["Lq", "Lk"])
def flash_attention_bwd_kernel(
    Q, K, V, DO, LSE, DELTA,  # as in the forward (DO like Q); LSE, DELTA: (B*H*Lq,) fp32
    DQ, DK, DV,  # outputs like Q, K, V; DQ is an fp32 buffer of zeros for DQ_MODE 2
    desc_q, desc_k, desc_v, desc_do,  # TMA descriptors (None without USE_TMA)
    qk_scale, sm_scale, Lq, Lk,  # sm_scale * log2(e), sm_scale; queries and keys per head
    HEAD_DIM: tl.constexpr,
    BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr,
    CAUSAL: tl.constexpr, DKDV: tl.constexpr, DQ_MODE: tl.constexpr,
    USE_TMA: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):  # fmt: skip
    """Program (pid, bh), grid ``(max(cdiv(Lk, BLOCK_N1) if DKDV, cdiv(Lq, BLOCK_M2) if DQ_MODE 1), B * H)``.

    If DKDV: dK and dV of keys [pid*BLOCK_N1, +BLOCK_N1), looping over query blocks of BLOCK_M1 rows in up to
    three stages: the causal diagonal band (masked), the full query tiles (no mask), the partial last tile
    (masked). DQ_MODE 1: then dQ of queries [pid*BLOCK_M2, +BLOCK_M2), looping over key blocks of BLOCK_N2
    (recomputing the scores); DQ_MODE 2: dQ by atomic adds into the fp32 DQ from the key-side loop (needs
    DKDV); DQ_MODE 0: no dQ. USE_TMA: the loop tiles (q, dO in the key-side loop, k, v in the query-side loop)
    come through the descriptors (blocks BLOCK_M1 and BLOCK_N2 rows)."""
    pid = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    q_base = bh * Lq
    kv_base = bh * Lk
    Qh, DOh, LSEh, DELTAh = Q + q_base * HEAD_DIM, DO + q_base * HEAD_DIM, LSE + q_base, DELTA + q_base
    Kh, Vh = K + kv_base * HEAD_DIM, V + kv_base * HEAD_DIM
    offs_d = tl.arange(0, HEAD_DIM)
    lengths, scales = (Lq, Lk), (qk_scale, sm_scale)
    if DKDV:
        start_n = pid * BLOCK_N1
        if start_n < Lk:
            offs_n = start_n + tl.arange(0, BLOCK_N1)
            k = _load_rows(Kh, offs_n, offs_d, Lk, HEAD_DIM=HEAD_DIM, MASKED=True)  # stays on chip
            v = _load_rows(Vh, offs_n, offs_d, Lk, HEAD_DIM=HEAD_DIM, MASKED=True)
            if UPCAST:
                k = k.to(tl.float32)
                v = v.to(tl.float32)
            dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
            dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
            DQh = DQ + q_base * HEAD_DIM
            q_side = (Qh, DOh, LSEh, DELTAh, DQh, desc_q, desc_do, q_base)  # this head's query side
            lq_full = (Lq // BLOCK_M1) * BLOCK_M1
            if CAUSAL:  # queries m >= n see key n: the band [start_n, start_n + BLOCK_N1) is masked
                dk, dv = _bwd_dkdv_tiles(
                    dk, dv, k, v, offs_n, q_side, start_n, tl.minimum(start_n + BLOCK_N1, Lq), lengths, scales,
                    BLOCK_M1=BLOCK_M1, HEAD_DIM=HEAD_DIM, MASKED=True, CAUSAL=True, ATOMIC_DQ=DQ_MODE == 2,
                    USE_TMA=USE_TMA, UPCAST=UPCAST, DOT_PREC=DOT_PREC,
                )  # fmt: skip
                lo = start_n + BLOCK_N1
            else:
                lo = 0
            dk, dv = _bwd_dkdv_tiles(  # the full query tiles
                dk, dv, k, v, offs_n, q_side, lo, lq_full, lengths, scales,
                BLOCK_M1=BLOCK_M1, HEAD_DIM=HEAD_DIM, MASKED=False, CAUSAL=CAUSAL, ATOMIC_DQ=DQ_MODE == 2,
                USE_TMA=USE_TMA, UPCAST=UPCAST, DOT_PREC=DOT_PREC,
            )  # fmt: skip
            dk, dv = _bwd_dkdv_tiles(  # the partial last query tile
                dk, dv, k, v, offs_n, q_side, tl.maximum(lo, lq_full), Lq, lengths, scales,
                BLOCK_M1=BLOCK_M1, HEAD_DIM=HEAD_DIM, MASKED=True, CAUSAL=CAUSAL, ATOMIC_DQ=DQ_MODE == 2,
                USE_TMA=USE_TMA, UPCAST=UPCAST, DOT_PREC=DOT_PREC,
            )  # fmt: skip
            row_ok = offs_n[:, None] < Lk
            rows = offs_n[:, None] * HEAD_DIM + offs_d[None, :]
            tl.store(DK + kv_base * HEAD_DIM + rows, (dk * sm_scale).to(DK.dtype.element_ty), mask=row_ok)
            tl.store(DV + kv_base * HEAD_DIM + rows, dv.to(DV.dtype.element_ty), mask=row_ok)
    if DQ_MODE == 1:
        pid_m = pid
        if CAUSAL and not DKDV:  # a dQ-only launch: longest rows first (the fused launch is balanced as it is)
            pid_m = tl.num_programs(0) - 1 - pid
        start_m = pid_m * BLOCK_M2
        if start_m < Lq:
            offs_m = start_m + tl.arange(0, BLOCK_M2)
            q = _load_rows(Qh, offs_m, offs_d, Lq, HEAD_DIM=HEAD_DIM, MASKED=True)
            do = _load_rows(DOh, offs_m, offs_d, Lq, HEAD_DIM=HEAD_DIM, MASKED=True)
            if UPCAST:
                q = q.to(tl.float32)
                do = do.to(tl.float32)
            lse2 = tl.load(LSEh + offs_m, mask=offs_m < Lq, other=0.0) * _LOG2E
            delta = tl.load(DELTAh + offs_m, mask=offs_m < Lq, other=0.0)
            dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
            lk_full = (Lk // BLOCK_N2) * BLOCK_N2
            if CAUSAL:  # as in the forward: full tiles left of the diagonal, the band masked, the rest skipped
                hi_full = tl.minimum(start_m, lk_full)
                hi = tl.minimum(start_m + BLOCK_M2, Lk)
            else:
                hi_full = lk_full
                hi = Lk
            kv = (Kh, Vh, desc_k, desc_v, kv_base)
            dq = _bwd_dq_tiles(
                dq, q, do, lse2, delta, offs_m, kv, 0, hi_full, Lk, qk_scale,
                BLOCK_N2=BLOCK_N2, HEAD_DIM=HEAD_DIM, MASKED=False, CAUSAL=CAUSAL,
                USE_TMA=USE_TMA, UPCAST=UPCAST, DOT_PREC=DOT_PREC,
            )  # fmt: skip
            dq = _bwd_dq_tiles(
                dq, q, do, lse2, delta, offs_m, kv, hi_full, hi, Lk, qk_scale,
                BLOCK_N2=BLOCK_N2, HEAD_DIM=HEAD_DIM, MASKED=True, CAUSAL=CAUSAL,
                USE_TMA=USE_TMA, UPCAST=UPCAST, DOT_PREC=DOT_PREC,
            )  # fmt: skip
            tl.store(
                DQ + q_base * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
                (dq * sm_scale).to(DQ.dtype.element_ty),
                mask=offs_m[:, None] < Lq,
            )


# ---- configurations ----------------------------------------------------------------------------------------


def fwd_config(block_m: int, block_n: int, num_warps: int = 4, num_stages: int = 3) -> triton.Config:
    """A forward launch shape: BLOCK_M queries per program, BLOCK_N keys per tile."""
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_warps=num_warps, num_stages=num_stages)


def bwd_config(
    block_m1: int, block_n1: int, block_m2: int, block_n2: int, num_warps: int = 4, num_stages: int = 2
) -> triton.Config:
    """A backward launch shape: key side BLOCK_N1 keys x BLOCK_M1 queries per step; query side BLOCK_M2
    queries x BLOCK_N2 keys per step."""
    return triton.Config(
        {"BLOCK_M1": block_m1, "BLOCK_N1": block_n1, "BLOCK_M2": block_m2, "BLOCK_N2": block_n2},
        num_warps=num_warps,
        num_stages=num_stages,
    )


def config_label(config: triton.Config) -> str:
    """A config in one line: ``"128x64 w4 s2"`` (forward blocks) or ``"32x128 128x32 w4 s3"`` (backward)."""
    kw = config.kwargs
    blocks = (
        f"{kw['BLOCK_M']}x{kw['BLOCK_N']}"
        if "BLOCK_M" in kw
        else f"{kw['BLOCK_M1']}x{kw['BLOCK_N1']} {kw['BLOCK_M2']}x{kw['BLOCK_N2']}"
    )
    return f"{blocks} w{config.num_warps} s{config.num_stages}"


# Interpreter: one small shape each, so that masks, the causal band and the tails are all exercised.
INTERPRETER_FWD = fwd_config(32, 16)
INTERPRETER_BWD = bwd_config(16, 32, 32, 16)

# GPU candidates: the best few per (d, causal, L) of a screen by ``tools/tune_flash.py`` at lesson 08's
# settings (rerun it for a new GPU or Triton; lesson 08's reference data in gpulab/data holds the rates reached).
# The autotuner times them once per key (``_tune_key``): BLOCK_M x BLOCK_N, num_warps, num_stages.
FWD_CONFIGS = [
    fwd_config(bm, bn, w, s)
    for bm, bn, w, s in [(128, 64, 4, 2), (64, 64, 4, 3), (64, 128, 4, 2), (64, 64, 4, 2), (128, 128, 8, 3)]
]
BWD_CONFIGS = {  # by launch (a key of BWD_PARTS)
    "fused": [
        bwd_config(*b, w, s)
        for b, w, s in [((32, 128, 128, 32), 4, 3), ((32, 64, 64, 32), 4, 3), ((64, 64, 64, 64), 4, 2)]
    ],
    "dkdv": [
        bwd_config(bm1, bn1, 16, 16, w, s)
        for bm1, bn1, w, s in [(64, 128, 4, 3), (64, 64, 4, 2), (32, 64, 4, 3), (64, 64, 4, 3)]
    ],
    "dq": [bwd_config(16, 16, bm2, bn2, w, s) for bm2, bn2, w, s in [(128, 64, 8, 3), (64, 64, 4, 3)]],
    "atomic": [bwd_config(bm1, bn1, 16, 16, w, s) for bm1, bn1, w, s in [(64, 64, 4, 3), (64, 128, 8, 3)]],
}
# fp32 (4-byte tiles, dot in "ieee"): small tiles and 2 stages, so that d = 128 fits in shared memory
FP32_FWD_CONFIGS = [fwd_config(64, 32, 4, 2), fwd_config(32, 32, 4, 2)]
FP32_BWD_CONFIGS = [bwd_config(16, 32, 32, 16, 4, 2), bwd_config(32, 64, 64, 32, 4, 1)]
DEFAULT_BWD_MODE = "split"  # tools/tune_flash.py's pick; lesson 08's reference data holds each mode's time
DEFAULT_FWD_TMA = True  # the forward loads through TMA by default where the plan and the GPU have it
DEFAULT_BWD_TMA = False


def l_bucket(length: int) -> int:
    """The autotuner's key for a sequence length: the power of 4 at or above it, from 256 to 16384, so that
    nearby lengths share one tuning (a new exact L does not trigger a new benchmark)."""
    b = 256
    while b < length and b < 16384:
        b *= 4
    return b


def _plan_lists(dtype: torch.dtype, p: plan.Plan) -> bool:
    """True where the fp32 lists' small tiles are taken: fp32, or a plan with ``small_tiles`` (any dtype)."""
    return dtype == torch.float32 or p.small_tiles


def fwd_candidates(
    dtype: torch.dtype, causal: bool, head_dim: int = max(HEAD_DIMS), plan_: plan.Plan | None = None
) -> list:
    """The forward's autotuning candidates on the planned GPU (``plan_``, default ``plan.current()``):
    ``FP32_FWD_CONFIGS`` for fp32 or where ``plan_.small_tiles``, else ``FWD_CONFIGS``; causal keeps those with
    BLOCK_M % BLOCK_N == 0 (the diagonal band starts on a tile edge); then those whose
    ``plan.attention_fwd_smem_bytes`` at ``head_dim`` (default the largest, 128) fits one block
    (``Plan.keep_fitting``). Pure. Raises ValueError for a head_dim outside ``HEAD_DIMS``."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim!r}")
    p = plan_ or plan.current()
    configs = FP32_FWD_CONFIGS if _plan_lists(dtype, p) else FWD_CONFIGS
    keep = [c for c in configs if not causal or c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0]
    size = dtype.itemsize
    return p.keep_fitting(
        keep or [fwd_config(32, 32, 4, 2)],
        lambda c: plan.attention_fwd_smem_bytes(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], head_dim, c.num_stages, size),
    )


def bwd_candidates(part: str, dtype: torch.dtype, plan_: plan.Plan | None = None) -> list:
    """The autotuning candidates of one backward launch (a key of ``BWD_PARTS``) on the planned GPU (``plan_``,
    default ``plan.current()``): ``FP32_BWD_CONFIGS`` for fp32 or where ``plan_.small_tiles``, else
    ``BWD_CONFIGS[part]``; kept where BLOCK_N1 % BLOCK_M1 == 0 and BLOCK_M2 % BLOCK_N2 == 0 (the causal bands
    start on tile edges). Pure. Raises ValueError for an unknown part."""
    if part not in BWD_PARTS:
        raise ValueError(f"part must be one of {tuple(BWD_PARTS)}, got {part!r}")
    configs = FP32_BWD_CONFIGS if _plan_lists(dtype, plan_ or plan.current()) else BWD_CONFIGS[part]
    keep = [
        c
        for c in configs
        if c.kwargs["BLOCK_N1"] % c.kwargs["BLOCK_M1"] == 0 and c.kwargs["BLOCK_M2"] % c.kwargs["BLOCK_N2"] == 0
    ]
    return keep or [bwd_config(16, 32, 32, 16, 4, 2)]


def _check_fwd_config(config, causal) -> None:
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    for name, b in (("BLOCK_M", bm), ("BLOCK_N", bn)):
        check_power_of_two(f"config: {name}", b, 16)
    if causal and bm % bn:
        raise ValueError(f"config: causal attention needs BLOCK_M % BLOCK_N == 0, got {bm} and {bn}")


def _check_bwd_config(config) -> None:
    kw = config.kwargs
    for name in ("BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2"):
        check_power_of_two(f"config: {name}", kw[name], 16)
    if kw["BLOCK_N1"] % kw["BLOCK_M1"] or kw["BLOCK_M2"] % kw["BLOCK_N2"]:
        raise ValueError(f"config: needs BLOCK_N1 % BLOCK_M1 == 0 and BLOCK_M2 % BLOCK_N2 == 0, got {kw}")


# ---- launchers ---------------------------------------------------------------------------------------------


def _upcast(dtype: torch.dtype) -> bool:
    return dtype == torch.bfloat16 and not bf16_dot_is_exact()


def _dot_prec(dtype) -> str:
    return "ieee" if dtype == torch.float32 else "tf32"


def check_inputs(q, k, v, causal=False, sm_scale=None, autograd: bool = False) -> float:
    """Check q: (B, H, Lq, d), k, v: (B, H, Lk, d) for the kernels; return the softmax scale (default 1/sqrt(d)).

    Raises TypeError/ValueError naming the argument: dtypes fp16/bf16/fp32, all the same; 4 dimensions; on
    gpulab.DEVICE, all on the same device; d in (16, 32, 64, 128); Lk >= 1; B * H <= 65535; ``causal`` a bool;
    ``sm_scale`` None or a real number in (0, ``MAX_SM_SCALE``] (``sm_scale * log2(e)`` must be a finite fp32).
    As in any fp32 attention, scores times ``sm_scale`` must stay inside fp32's range (about 3.4e38).
    ``autograd``: the caller stands for ``flash_attention`` (which has a backward), so inputs that require
    grad are welcome; otherwise (a kernel launched alone) they are refused under grad mode, as
    ``check_tensor`` says."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(
            name, t, dtypes=DTYPES, ndim=4, contiguous=False, autograd=autograd, torch_op="flash_attention(q, k, v)"
        )
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError(f"q and {name} must have the same dtype, got {q.dtype} and {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"q and {name} must be on the same device, got {q.device} and {t.device}")
    B, H, _, d = q.shape
    if k.shape[:2] != (B, H) or v.shape[:2] != (B, H):
        raise ValueError(f"q, k, v must share (B, H), got shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape (B, H, Lk, d), got {tuple(k.shape)} and {tuple(v.shape)}")
    if d not in HEAD_DIMS or k.shape[3] != d:
        raise ValueError(
            f"the head dimension d (last dim of q, k, v) must be one of {HEAD_DIMS} and the same for "
            f"all three, got q {tuple(q.shape)}, k {tuple(k.shape)}"
        )
    if k.shape[2] < 1:
        raise ValueError(f"k must hold at least one key (Lk >= 1), got shape {tuple(k.shape)}")
    if B * H > MAX_GRID_Y:
        raise ValueError(f"q: B * H must be at most {MAX_GRID_Y} (one grid dimension), got {B} * {H}")
    if not isinstance(causal, bool):
        raise TypeError(
            f"causal must be a bool (True or False), got {causal!r} of type "
            f"{type(causal).__module__}.{type(causal).__qualname__}"
        )
    if sm_scale is None:
        return 1.0 / math.sqrt(d)
    try:
        scale = float(sm_scale) if isinstance(sm_scale, numbers.Real) and not isinstance(sm_scale, bool) else None
    except OverflowError:  # an int past float's range
        scale = math.inf
    if scale is None or not (0 < scale <= MAX_SM_SCALE):
        raise ValueError(
            f"sm_scale must be a positive real number at most {MAX_SM_SCALE:.4g} (times log2(e) it "
            f"must be a finite fp32) or None, got {sm_scale!r}"
        )
    return scale


def tma_lengths_ok(Lq: int, Lk: int) -> bool:
    """True if no tile of at most ``TMA_ROW_MULTIPLE`` rows crosses the end of a head, so a descriptor over the
    flattened (B*H*L, d) tensor never reads another head's rows."""
    return Lq % TMA_ROW_MULTIPLE == 0 and Lk % TMA_ROW_MULTIPLE == 0


def planned_tma(default: bool, plan_: plan.Plan | None = None) -> bool:
    """Whether a launch without ``use_tma`` loads through TMA on the planned GPU: ``default`` (``DEFAULT_FWD_TMA``
    or ``DEFAULT_BWD_TMA``) where ``plan_.attention_tma`` (default ``plan.current()``). Pure (no GPU check)."""
    return bool(default) and (plan_ or plan.current()).attention_tma


def _use_tma(use_tma, default: bool, tensors, Lq: int, Lk: int) -> bool:
    """Whether a launch loads through TMA descriptors. ``use_tma=None``: ``planned_tma(default)`` on a GPU where
    ``tma_available()`` (the interpreter takes the pointer loads unless asked); ``True`` where TMA is not
    available raises ValueError. Either way only when every base is 16-byte aligned and ``tma_lengths_ok``
    (else the masked pointer loads run)."""
    if use_tma is None:
        use_tma = gpulab.ON_GPU and tma_available() and planned_tma(default)
    elif use_tma and not tma_available():
        raise ValueError(
            "use_tma=True needs TMA tensor descriptors (a GPU of compute capability >= 9.0, or the "
            f"interpreter, with Triton >= 3.4); here: compute capability {gpulab.compute_capability()}, "
            f"TensorDescriptor {'found' if TensorDescriptor else 'missing'}"
        )
    return bool(use_tma) and not any(t.data_ptr() % 16 for t in tensors) and tma_lengths_ok(Lq, Lk)


def _descriptor(t: torch.Tensor, rows: int):
    """A host TMA descriptor over contiguous ``t`` flattened to (B*H*L, d), loading tiles of ``rows`` x d."""
    d = t.shape[-1]
    flat = t.view(-1, d)
    return TensorDescriptor(flat, list(flat.shape), [d, 1], [rows, d])


def _tune_key(part: str, q, k, causal: bool, use_tma: bool) -> tuple:
    """The shared autotuner's key of one launch: ``part`` ("fwd" or a key of ``BWD_PARTS``), dtype, d, causal,
    TMA loads, and ``l_bucket`` of the longer length."""
    return ("flash_attention", part, q.dtype, q.shape[-1], causal, use_tma, l_bucket(max(q.shape[2], k.shape[2])))


def _launch(kernel, grid, args: tuple, meta: dict, cfg: triton.Config) -> None:
    """``kernel[grid](*args)`` with the constexpr flags ``meta`` and ``cfg``'s blocks, warps and stages."""
    kernel[grid](*args, **meta, **cfg.kwargs, num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def _launch_configured(launch, outputs: tuple, config, *, fallback, check, key, candidates, what: str) -> None:
    """``launch(cfg, outputs)`` once, with the config this launch takes: ``config`` where given (checked by
    ``check``); on a GPU without one, the shared autotuner's choice under ``key`` among ``candidates()``, each
    timed into scratch outputs (zeros shaped like ``outputs``: an atomic dQ adds into its buffer); in the
    interpreter, ``fallback``."""
    if config is None and gpulab.ON_GPU:
        scratch = lambda: tuple(torch.zeros_like(t) for t in outputs)  # noqa: E731  (made only when timing)
        config = _autotune.pick(key, candidates(), lambda: functools.partial(launch, outputs=scratch()), what=what)
    else:
        config = config or fallback
        check(config)
    launch(config, outputs)


def flash_attention_forward(
    q,
    k,
    v,
    causal: bool = False,
    sm_scale: float | None = None,
    *,
    config: triton.Config | None = None,
    use_tma: bool | None = None,
):
    """The forward kernel alone (no autograd). Returns ``(out, lse)``: ``out: (B, H, Lq, d)`` in q's dtype and
    ``lse: (B, H, Lq)`` float32, the natural-log logsumexp of each row of scaled scores.

    q: (B, H, Lq, d); k, v: (B, H, Lk, d); fp16, bf16 or fp32 (made contiguous if they are not). ``config``:
    a ``fwd_config`` to launch exactly (default: autotuned on a GPU over ``fwd_candidates``, ``INTERPRETER_FWD``
    in the interpreter). ``use_tma``: load through TMA descriptors (default ``planned_tma(DEFAULT_FWD_TMA)`` on a
    GPU where ``tma_available()``; only when Lq and Lk are multiples of ``TMA_ROW_MULTIPLE``, else the masked pointer
    loads run). Raises TypeError/ValueError naming the argument (see ``check_inputs``), and ValueError for
    ``use_tma=True`` where TMA is not available.
    """
    return _forward(q, k, v, causal, check_inputs(q, k, v, causal, sm_scale), config, use_tma)


def _forward(q, k, v, causal: bool, scale: float, config=None, use_tma=None):
    """``flash_attention_forward`` after its checks (``scale`` is the checked softmax scale)."""
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, H, Lq, d = q.shape
    Lk = k.shape[2]
    out = torch.empty_like(q)
    lse = torch.empty((B, H, Lq), device=q.device, dtype=torch.float32)
    if out.numel() == 0:
        return out, lse
    use_tma = _use_tma(use_tma, DEFAULT_FWD_TMA, (q, k, v), Lq, Lk)
    meta = dict(HEAD_DIM=d, CAUSAL=causal, USE_TMA=use_tma, UPCAST=_upcast(q.dtype), DOT_PREC=_dot_prec(q.dtype))

    def launch(cfg, outputs):
        bm, bn = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
        descs = (_descriptor(q, bm), _descriptor(k, bn), _descriptor(v, bn)) if use_tma else (None,) * 3
        args = (q, k, v, *outputs, *descs, scale * LOG2E, Lq, Lk)  # outputs: (out, lse)
        _launch(flash_attention_fwd_kernel, (triton.cdiv(Lq, bm), B * H), args, meta, cfg)

    _launch_configured(
        launch,
        (out, lse),
        config,
        fallback=INTERPRETER_FWD,
        check=lambda c: _check_fwd_config(c, causal),
        key=_tune_key("fwd", q, k, causal, use_tma),
        candidates=lambda: fwd_candidates(q.dtype, causal, d),
        what=f"flash forward config for q {tuple(q.shape)}",
    )
    return out, lse


def bwd_prepare(q, k, v, out, lse, do, mode: str = "fused"):
    """Check and allocate for a backward: returns the buffers ``(q, k, v, do, lse, delta, dq, dk, dv)`` with
    ``delta = rowsum(do * out)`` computed (one small kernel). ``dq`` is an fp32 zero buffer for "atomic"."""
    if mode not in BWD_MODES:
        raise ValueError(f"mode must be one of {BWD_MODES}, got {mode!r}")
    for name, t in (("out", out), ("do", do)):
        check_tensor(name, t, dtypes=(q.dtype,), ndim=4, contiguous=False)
        if t.shape != q.shape:
            raise ValueError(f"{name} must have q's shape {tuple(q.shape)}, got {tuple(t.shape)}")
    check_tensor("lse", lse, dtypes=(torch.float32,), ndim=3, contiguous=False)
    for name, t in (("out", out), ("do", do), ("lse", lse)):
        if t.device != q.device:
            raise ValueError(f"q and {name} must be on the same device, got {q.device} and {t.device}")
    if lse.shape != q.shape[:3]:
        raise ValueError(f"lse must have shape (B, H, Lq) = {tuple(q.shape[:3])}, got {tuple(lse.shape)}")
    q, k, v, out, do, lse = (t.contiguous() for t in (q, k, v, out, do, lse))
    B, H, Lq, d = q.shape
    dq = torch.zeros(q.shape, device=q.device, dtype=torch.float32) if mode == "atomic" else torch.empty_like(q)
    delta = torch.empty((B, H, Lq), device=q.device, dtype=torch.float32)
    if q.numel():
        block = 64 if gpulab.ON_GPU else 32
        flash_attention_bwd_preprocess_kernel[(triton.cdiv(B * H * Lq, block),)](
            out, do, delta, B * H * Lq, HEAD_DIM=d, BLOCK=block
        )
    return q, k, v, do, lse, delta, dq, torch.empty_like(k), torch.empty_like(v)


def bwd_launch(
    part: str, bufs, causal: bool, scale: float, config: triton.Config | None = None, use_tma: bool | None = None
):
    """Launch one part of the backward (a key of ``BWD_PARTS``) on buffers from ``bwd_prepare``. ``config``:
    a ``bwd_config`` (default: autotuned on a GPU over ``bwd_candidates``, ``INTERPRETER_BWD`` in the
    interpreter). ``use_tma``: load the loop tiles through TMA descriptors (default ``planned_tma(DEFAULT_BWD_TMA)``
    on a GPU where ``tma_available()``; ValueError for True where it is not)."""
    q, k, v, do, lse, delta, dq, dk, dv = bufs
    B, H, Lq, d = q.shape
    Lk = k.shape[2]
    flags = BWD_PARTS[part]
    use_tma = _use_tma(use_tma, DEFAULT_BWD_TMA, (q, k, v, do), Lq, Lk)
    meta = dict(
        HEAD_DIM=d, CAUSAL=causal, USE_TMA=use_tma, UPCAST=_upcast(q.dtype), DOT_PREC=_dot_prec(q.dtype), **flags
    )

    def launch(cfg, outputs):
        kw = cfg.kwargs
        rows = (kw["BLOCK_M1"], kw["BLOCK_N2"], kw["BLOCK_N2"], kw["BLOCK_M1"])  # the loop tiles of q, k, v, do
        descs = tuple(_descriptor(t, r) for t, r in zip((q, k, v, do), rows)) if use_tma else (None,) * 4
        n1 = triton.cdiv(Lk, kw["BLOCK_N1"]) if flags["DKDV"] else 0
        n2 = triton.cdiv(Lq, kw["BLOCK_M2"]) if flags["DQ_MODE"] == 1 else 0
        args = (q, k, v, do, lse, delta, *outputs, *descs, scale * LOG2E, scale, Lq, Lk)  # outputs: (dq, dk, dv)
        _launch(flash_attention_bwd_kernel, (max(n1, n2), B * H), args, meta, cfg)

    _launch_configured(
        launch,
        (dq, dk, dv),
        config,
        fallback=INTERPRETER_BWD,
        check=_check_bwd_config,
        key=_tune_key(part, q, k, causal, use_tma),
        candidates=lambda: bwd_candidates(part, q.dtype),
        what=f"flash backward {part} config for q {tuple(q.shape)}",
    )


def flash_attention_backward(
    q,
    k,
    v,
    out,
    lse,
    do,
    causal: bool = False,
    sm_scale: float | None = None,
    *,
    mode: str | None = None,
    config: triton.Config | None = None,
    dq_config: triton.Config | None = None,
    use_tma: bool | None = None,
):
    """The backward kernels alone: ``(dq, dk, dv)``, each the shape and dtype of its input.

    q, k, v, out, do as in the forward (out and do: (B, H, Lq, d)); lse: (B, H, Lq) float32 from the forward.
    ``mode``: "fused" (dK, dV and dQ in one launch), "split" (two launches) or "atomic" (dQ by fp32 atomic adds),
    default ``DEFAULT_BWD_MODE``. ``config``: a ``bwd_config`` for the (first) launch, ``dq_config`` for the dQ
    launch of "split" (default: autotuned on a GPU, ``INTERPRETER_BWD`` in the interpreter). Reads q, k, v, do,
    lse and a per-row delta; never an Lq x Lk matrix. ``use_tma``: the loop tiles through TMA descriptors
    (default ``DEFAULT_BWD_TMA`` where available). Raises TypeError/ValueError naming the argument.
    """
    scale = check_inputs(q, k, v, causal, sm_scale)
    mode = DEFAULT_BWD_MODE if mode is None else mode
    bufs = bwd_prepare(q, k, v, out, lse, do, mode)
    dq, dk, dv = bufs[6:]
    if q.numel() == 0:
        return dq.to(q.dtype), dk.zero_(), dv.zero_()
    for part, cfg in zip(MODE_PARTS[mode], (config, dq_config)):
        bwd_launch(part, bufs, causal, scale, cfg, use_tma)
    return (dq.to(q.dtype) if mode == "atomic" else dq), dk, dv


#: ``with untuned():`` launches take each candidate list's first config, untimed and uncached (a correctness check).
untuned = _autotune.untimed


def tuned_configs() -> dict:
    """What autotuning chose so far: ``{"part dtype d=.. causal=.. tma=.. L<=bucket": config_label(config)}``,
    part "fwd" or a key of ``BWD_PARTS``."""
    return {
        f"{p} {str(dt).replace('torch.', '')} d={d} causal={c} tma={t} L<={lb}": config_label(cfg)
        for (p, dt, d, c, t, lb), cfg in _autotune.chosen("flash_attention").items()
    }


def chosen_configs(q, k, v, causal: bool = False, bwd_mode: str | None = None, use_tma: bool | None = None) -> dict:
    """The configs that launches without a config take on these inputs: ``{"fwd": config, part: config, ...}``
    for the forward and each launch of ``bwd_mode`` (default ``DEFAULT_BWD_MODE``), ``use_tma`` as passed to
    them; on a GPU the autotuner's cached choices (None for a launch not tuned yet), in the interpreter
    ``INTERPRETER_FWD`` and ``INTERPRETER_BWD``. q, k, v may require grad (as ``flash_attention``'s do)."""
    check_inputs(q, k, v, causal, autograd=True)  # launches nothing: it answers for the differentiable launcher
    mode = DEFAULT_BWD_MODE if bwd_mode is None else bwd_mode
    if mode not in BWD_MODES:
        raise ValueError(f"bwd_mode must be one of {BWD_MODES} or None, got {bwd_mode!r}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    Lq, Lk = q.shape[2], k.shape[2]
    out = {}
    for part, default in [("fwd", DEFAULT_FWD_TMA)] + [(p, DEFAULT_BWD_TMA) for p in MODE_PARTS[mode]]:
        if not gpulab.ON_GPU:
            out[part] = INTERPRETER_FWD if part == "fwd" else INTERPRETER_BWD
        else:
            tma = _use_tma(use_tma, default, (q, k, v), Lq, Lk)
            out[part] = _autotune.cached(_tune_key(part, q, k, causal, tma))
    return out


# ---- autograd -----------------------------------------------------------------------------------------------


class FlashAttentionFunction(torch.autograd.Function):
    """Forward saves q, k, v, out and lse (O(L) memory); backward recomputes P tile by tile. Differentiable once:
    a second derivative (``create_graph=True`` and differentiating again) raises instead of silently dropping
    this term."""

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale):
        out, lse = _forward(q, k, v, causal, check_inputs(q, k, v, causal, sm_scale))
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)  # no zero-filled gradient for lse: it would cost 4 bytes a row
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        if dout is None:  # no gradient reached out (grads are not materialised): none flows to q, k, v
            return None, None, None, None, None
        q, k, v, out, lse = ctx.saved_tensors
        dout = dout.resolve_neg()  # autograd hands over what it has; the kernels need the values in memory
        with torch.no_grad():
            dq, dk, dv = flash_attention_backward(q, k, v, out, lse, dout, ctx.causal, ctx.sm_scale)
        dq, dk, dv = differentiable_once("flash_attention", (dq, dk, dv), (dout, q, k, v))
        return dq, dk, dv, None, None


def flash_attention(q, k, v, causal: bool = False, sm_scale: float | None = None, return_lse: bool = False):
    """Exact attention softmax(scale * q k^T [causal mask]) v by FlashAttention, differentiable in q, k, v.

    q: (B, H, Lq, d); k, v: (B, H, Lk, d); fp16, bf16 or fp32, on gpulab.DEVICE; d in (16, 32, 64, 128); any
    Lq, Lk >= 1. ``causal``: SDPA's ``is_causal`` convention, the top-left aligned mask
    ``torch.ones(Lq, Lk).tril()`` (query i sees keys 0..i), also for Lq != Lk. ``sm_scale``: default 1/sqrt(d).
    Returns ``out: (B, H, Lq, d)`` in q's dtype, and with ``return_lse=True`` also ``lse: (B, H, Lq)`` float32
    (natural-log logsumexp of each row; not differentiable). Raises TypeError/ValueError naming the argument.
    Source: Dao et al., FlashAttention (2022) and FlashAttention-2 (2023); Triton's fused-attention tutorial.
    """
    out, lse = FlashAttentionFunction.apply(q, k, v, causal, sm_scale)  # checks the inputs once, in forward
    return (out, lse) if return_lse else out


# ---- the float64 reference ---------------------------------------------------------------------------------


def causal_mask(lq: int, lk: int, device=None) -> torch.Tensor:
    """SDPA's ``is_causal`` mask: bool (lq, lk), True where query i may see key j (j <= i), top-left aligned."""
    return torch.ones(lq, lk, dtype=torch.bool, device=device).tril(diagonal=0)


def flash_attention_ref(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """The reference in float64, materialising S and P: returns ``(out, lse)`` as float64 tensors of shapes
    (B, H, Lq, d) and (B, H, Lq). Differentiable (use it with autograd for reference gradients)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    q64, k64, v64 = q.double(), k.double(), v.double()
    s = (q64 @ k64.transpose(-1, -2)) * scale  # (B, H, Lq, Lk)
    if causal:
        s = s.masked_fill(~causal_mask(q.shape[2], k.shape[2], s.device), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # (B, H, Lq)
    return torch.exp(s - lse[..., None]) @ v64, lse
