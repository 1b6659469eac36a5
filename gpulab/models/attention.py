"""Naive attention against FlashAttention: FLOPs, HBM bytes and memory as the sequence grows.

Attention for ``q: (B, H, Lq, d)``, ``k, v: (B, H, Lk, d)``: ``S = scale * q k^T``, ``P = softmax_row(S)``,
``O = P v``. The naive way (``naive_attention``) materialises ``S`` and ``P``, each ``B*H*Lq*Lk`` elements,
in HBM; FlashAttention (``gpulab.kernels.flash_attention``) keeps each score tile on chip and writes only
``O`` and the row logsumexp. Both do the same ``O(L^2 d)`` arithmetic; only the traffic and the memory differ
(the seed lecture, Stanford CS336 Lecture 5, "FlashAttention brings the ideas together"; Dao et al.,
FlashAttention, 2022, Section 3.2 for the IO analysis).

Counts are by hand:

- FLOPs (``attention_flops``): forward ``4*B*H*Lq*Lk*d`` (two matmuls of 2 FLOPs per multiply-add), halved
  when causal (for Lq = Lk; for Lq != Lk the pairs the top-left mask keeps), backward 2.5x the forward (five matmuls: the rebuilt S, dV, dP, dQ, dK). This is the
  convention of the FlashAttention papers' and Triton's benchmarks; softmax's exponentials are not counted.
- HBM bytes of the naive forward (``naive_bytes``): each torch op reads its inputs and writes its output.
- Bytes of the flash forward at two boundaries. What the SMs request from L2 (``flash_l2_bytes``): Q read
  once, K and V once per query block that visits them (causal blocks skip the tiles right of the diagonal), O
  and the fp32 logsumexp written once: (L / BLOCK_M) * L * d elements of K and V, Theta(L^2 d^2 / M) for an
  on-chip memory of M elements holding BLOCK_M ~ M / d rows (Dao et al. 2022, Theorem 2). What reaches DRAM
  (``flash_dram_bytes``): when one head's K and V fit in L2, the query blocks of a head re-read them from L2,
  and DRAM sees each tensor once: O(L).
- Extra memory (``memory_model``): naive holds S and P at once (``2*B*H*Lq*Lk`` elements): O(L^2); flash holds
  O and lse: O(L). For training, flash keeps O and lse for backward, which adds delta (one fp32 per row).

``gpulab.bench.lesson08.measure`` times a forward on the GPU and records its peak memory; out of memory it
returns ``oom=True`` instead of raising, so a sweep can show where naive attention stops.
"""

from __future__ import annotations

import math

from ..core import validate
from .waves import cdiv


def _ints(**kw) -> tuple[int, ...]:
    """The keywords' values as Python ints >= 0 (NumPy ints too), in order; TypeError/ValueError naming one
    that is not."""
    return tuple(validate.integer(name, v) for name, v in kw.items())


def _flag(name: str, v) -> bool:
    """``v`` if it is a bool; ValueError naming it otherwise (``causal="no"`` is not False)."""
    return validate.one_of(name, v, (False, True))


def attention_flops(B: int, H: int, Lq: int, Lk: int, d: int, causal: bool = False, backward: bool = False) -> float:
    """FLOPs of attention by the usual convention: forward 4*B*H*Lq*Lk*d, halved if causal; backward 2.5x
    the forward (2 of the 5 matmuls' worth is the recomputation of S and the extra matmul for dP).

    Causal counts the (query, key) pairs the top-left mask keeps, its diagonal counted half: Lq^2 / 2 if
    Lq <= Lk, else Lq*Lk - Lk^2 / 2. For Lq = Lk that is the convention's half; for Lq != Lk it is not (one query
    over 1000 keys sees one key, not 500). Raises TypeError/ValueError naming the argument (sizes ints >= 0;
    ``causal`` and ``backward`` bools)."""
    B, H, Lq, Lk, d = _ints(B=B, H=H, Lq=Lq, Lk=Lk, d=d)
    causal, backward = _flag("causal", causal), _flag("backward", backward)
    pairs = (Lq * Lq / 2 if Lq <= Lk else Lq * Lk - Lk * Lk / 2) if causal else Lq * Lk
    f = 4.0 * B * H * pairs * d
    return 2.5 * f if backward else f


def naive_bytes(B: int, H: int, L: int, d: int, itemsize: int, causal: bool = False) -> int:
    """HBM bytes of ``naive_attention``'s forward for Lq = Lk = L, counting every tensor each op reads or
    writes (no cache reuse):

    - q * scale: read q, write q' (2 BHLd);  S = q' k^T: read q', k, write S (2 BHLd + BHL^2);
    - causal: masked_fill_ reads and writes S (2 BHL^2);  softmax: read S, write P (2 BHL^2);
    - O = P v: read P and v, write O (BHL^2 + 2 BHLd).

    In all 6 BHLd + 4 BHL^2 elements (+ 2 BHL^2 causal), times ``itemsize``."""
    B, H, L, d, itemsize = _ints(B=B, H=H, L=L, d=d, itemsize=itemsize)
    causal = _flag("causal", causal)
    bh = B * H
    return (6 * bh * L * d + (6 if causal else 4) * bh * L * L) * itemsize


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """sum_{i=0}^{n-1} floor((a*i + b) / m) for ints n >= 0, m >= 1, a, b >= 0, in O(log m) steps: the
    Euclid-like reduction of AtCoder Library's ``floor_sum`` (math.hpp, ``floor_sum_unsigned``)."""
    total = 0
    while True:
        if a >= m:
            total += n * (n - 1) // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            return total
        n, b = divmod(y_max, m)
        m, a = a, m


def tiles_visited(L: int, block_m: int, block_n: int, causal: bool) -> int:
    """(query block, key tile) pairs a forward program grid visits for Lq = Lk = L: every pair when not
    causal; when causal, query block i (rows [i*block_m, min((i+1)*block_m, L))) visits the key tiles up to
    its last row, ceil(min((i+1)*block_m, L) / block_n) of them, and skips the rest (fully masked).

    With n_m = ceil(L / block_m) blocks, the causal count is sum_{j=1}^{n_m-1} ceil(j*block_m / block_n) +
    ceil(L / block_n), summed in closed form (``_floor_sum``), so any L returns at once. Raises TypeError or
    ValueError naming the argument (ints >= 0, blocks >= 1, ``causal`` a bool)."""
    L, block_m, block_n = _ints(L=L, block_m=block_m, block_n=block_n)
    if block_m < 1 or block_n < 1:
        raise ValueError(f"block_m and block_n must be >= 1, got {block_m}, {block_n}")
    causal = _flag("causal", causal)
    n_m, n_n = cdiv(L, block_m), cdiv(L, block_n)
    if not causal or n_m == 0:
        return n_m * n_n
    # ceil(j*bm/bn) = floor((j*bm + bn - 1)/bn); j = i + 1 for i in [0, n_m - 1)
    return _floor_sum(n_m - 1, block_n, block_m, block_m + block_n - 1) + n_n


def flash_bytes(B: int, H: int, L: int, d: int, itemsize: int, causal: bool = False, block_m: int = 128) -> int:
    """HBM bytes of the FlashAttention forward for Lq = Lk = L: Q read once and O written once (2 BHLd); K and
    V read once per query block, L keys each (causal: query block i reads only keys below min((i+1)*block_m,
    L): block_m * (n_m - 1) * n_m / 2 + L keys in all for n_m = ceil(L / block_m) blocks, in closed form); the
    fp32 logsumexp (4 bytes a row). The K/V re-reads are what a larger ``block_m`` buys down (Dao et al. 2022,
    Theorem 2: Theta(L^2 d^2 / M) HBM accesses for on-chip memory M). Raises TypeError/ValueError naming the
    argument (sizes ints >= 0, block_m >= 1, ``causal`` a bool)."""
    B, H, L, d, itemsize, block_m = _ints(B=B, H=H, L=L, d=d, itemsize=itemsize, block_m=block_m)
    if block_m < 1:
        raise ValueError(f"block_m must be >= 1, got {block_m}")
    causal = _flag("causal", causal)
    n_m = cdiv(L, block_m)
    # causal: blocks 0..n_m-2 read (i+1)*block_m keys, the last one L: block_m * (n_m-1) n_m / 2 + L
    keys = (block_m * (n_m - 1) * n_m // 2 + L if n_m else 0) if causal else n_m * L
    return B * H * ((2 * L * d + 2 * keys * d) * itemsize + 4 * L)


def flash_l2_bytes(B: int, H: int, L: int, d: int, itemsize: int, causal: bool = False, block_m: int = 128) -> int:
    """Bytes the SMs request from L2 in the FlashAttention forward (``flash_bytes`` with ``block_m``): K and V
    once per query block, so they grow as L^2 / block_m (Dao et al. 2022, Theorem 2: Theta(L^2 d^2 / M) for
    block_m ~ M / d). Raises as ``flash_bytes``."""
    return flash_bytes(B, H, L, d, itemsize, causal, block_m)


def flash_dram_bytes(
    B: int, H: int, L: int, d: int, itemsize: int, causal: bool = False, l2_bytes: int | None = None
) -> int:
    """Bytes that reach DRAM in the FlashAttention forward: each of Q, K, V, O once and the fp32 logsumexp
    (``flash_bytes`` with one query block), O(L), when one head's K and V (2 L d itemsize bytes) fit in
    ``l2_bytes`` (the L2 size, ``hardware`` or lesson 00's profile; None: assume they fit). When they do not,
    nothing of them survives in L2 between query blocks and DRAM sees the L2 requests (``flash_l2_bytes`` at
    128-row blocks). Raises TypeError/ValueError naming the argument (``l2_bytes`` an int >= 0 or None)."""
    if l2_bytes is not None:
        l2_bytes = validate.integer("l2_bytes", l2_bytes)
    fits = l2_bytes is None or 2 * L * d * itemsize <= l2_bytes
    return (
        flash_bytes(B, H, L, d, itemsize, causal, block_m=max(L, 1))
        if fits
        else flash_l2_bytes(B, H, L, d, itemsize, causal)
    )


def memory_model(B: int, H: int, L: int, d: int, itemsize: int, method: str) -> dict:
    """Extra memory of one forward above the inputs q, k, v (bytes), for Lq = Lk = L:

    - ``"naive"``: at the softmax, S and P are both alive (2 BHL^2 elements); at the end O (BHLd) is kept;
      the peak is max(S + P, P + O) and O remains: ``peak_bytes``, ``kept_bytes``.
    - ``"flash"``: O and the fp32 logsumexp (BHL(d*itemsize + 4)), peak and kept alike.

    Also ``order``: "L^2" or "L". Raises ValueError for another method."""
    B, H, L, d, itemsize = _ints(B=B, H=H, L=L, d=d, itemsize=itemsize)
    bh = B * H
    out = bh * L * d * itemsize
    if method == "naive":
        sp = bh * L * L * itemsize
        return dict(method=method, peak_bytes=max(2 * sp, sp + out), kept_bytes=out, order="L^2")
    if method == "flash":
        return dict(method=method, peak_bytes=out + 4 * bh * L, kept_bytes=out + 4 * bh * L, order="L")
    raise ValueError(f"method must be 'naive' or 'flash', got {method!r}")


def flash_training_memory(B: int, H: int, L: int, d: int, itemsize: int, mode: str = "fused") -> dict:
    """Memory of FlashAttention through autograd above q, k, v and dO (bytes), Lq = Lk = L: ``held_bytes``
    between forward and backward (O and the fp32 lse) and ``peak_bytes`` over the backward, which adds the
    fp32 delta and dq, dk, dv; with ``mode="atomic"`` also the fp32 dQ buffer (alive while dq is cast from it).
    All O(L)."""
    B, H, L, d, itemsize = _ints(B=B, H=H, L=L, d=d, itemsize=itemsize)
    if mode not in ("fused", "split", "atomic"):  # gpulab.kernels.flash_attention.BWD_MODES (no Triton import here)
        raise ValueError(f"mode must be one of ('fused', 'split', 'atomic'), got {mode!r}")
    rows, elems = B * H * L, B * H * L * d
    held = elems * itemsize + 4 * rows
    peak = held + 4 * rows + 3 * elems * itemsize + (4 * elems if mode == "atomic" else 0)
    return dict(held_bytes=held, peak_bytes=peak, mode=mode)


def naive_attention(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """softmax(scale * q k^T [causal]) v in plain torch, materialising S and P (each (B, H, Lq, Lk) in q's
    dtype). q: (B, H, Lq, d), k, v: (B, H, Lk, d); causal: the top-left mask (SDPA's ``is_causal``)."""
    import torch

    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = (q * scale) @ k.transpose(-1, -2)  # S: (B, H, Lq, Lk)
    if causal:
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril()
        s.masked_fill_(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1)  # P: (B, H, Lq, Lk)
    del s
    return p @ v
