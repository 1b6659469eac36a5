"""Exercises of lesson 08 (FlashAttention)."""

from __future__ import annotations

import math
import random

import torch

import gpulab

from .. import tolerances
from ..kernels.flash_attention import flash_attention_ref
from . import Report, _short, close, ex08_kernels, is_int, run_cases
from .kernelcheck import check_kernel

NEG_INF = float("-inf")


def _merge_solution(m_a: float, l_a: float, u_a: float, m_b: float, l_b: float, u_b: float):
    """Merge two online-softmax states of one row (scalar values): m' = max(m_a, m_b), alpha = exp(m_a - m'),
    beta = exp(m_b - m'), l' = alpha l_a + beta l_b, u' = alpha u_a + beta u_b. An empty state (m = -inf,
    l = u = 0) contributes nothing; two empty states give the empty state, not NaN."""
    m = max(m_a, m_b)
    if m == NEG_INF:
        return NEG_INF, 0.0, 0.0
    alpha = 0.0 if m_a == NEG_INF else math.exp(m_a - m)
    beta = 0.0 if m_b == NEG_INF else math.exp(m_b - m)
    return m, alpha * l_a + beta * l_b, alpha * u_a + beta * u_b


def _state(rng: random.Random):
    """A random nonempty state of k keys with scores around 0 (spread 3) and values in [-5, 5]."""
    s = [rng.gauss(0, 3) for _ in range(rng.randint(1, 6))]
    v = [rng.uniform(-5, 5) for _ in s]
    m = max(s)
    w = [math.exp(x - m) for x in s]
    return m, sum(w), sum(a * b for a, b in zip(w, v))


def check_merge(fn) -> Report:
    """fn(m_a, l_a, u_a, m_b, l_b, u_b) -> (m, l, u): the state of the union of two sets of keys of one query
    row, each given by its running max m, sum l = sum exp(s - m) and weighted sum u = sum exp(s - m) v
    (scalar values). The empty state is (-inf, 0.0, 0.0)."""
    rng = random.Random()
    ln2, ln3 = math.log(2), math.log(3)
    cases = [dict(m_a=ln2, l_a=1.5, u_a=4.5, m_b=ln3, l_b=1.0, u_b=2.0)]  # the seed's tiles A and B
    for _ in range(10):
        a, b = _state(rng), _state(rng)
        cases.append(dict(m_a=a[0], l_a=a[1], u_a=a[2], m_b=b[0], l_b=b[1], u_b=b[2]))
    a = _state(rng)
    cases += [
        dict(m_a=NEG_INF, l_a=0.0, u_a=0.0, m_b=a[0], l_b=a[1], u_b=a[2], _empty=True),
        dict(m_a=a[0], l_a=a[1], u_a=a[2], m_b=NEG_INF, l_b=0.0, u_b=0.0, _empty=True),
        dict(m_a=NEG_INF, l_a=0.0, u_a=0.0, m_b=NEG_INF, l_b=0.0, u_b=0.0, _empty=True),
    ]

    def compare(case, got):
        args = [case[k] for k in ("m_a", "l_a", "u_a", "m_b", "l_b", "u_b")]
        exp = _merge_solution(*args)
        try:
            m, l, u = got
        except (TypeError, ValueError):
            return f"expected a tuple (m, l, u), got {_short(got)}"
        vals = [float(x) for x in (m, l, u)]
        if any(math.isnan(x) for x in vals):
            return (
                "NaN: an empty state (m = -inf) gives exp(-inf - (-inf)); give it factor 0 (skip it)"
                if case.get("_empty")
                else "NaN in the result"
            )
        ok = (vals[0] == exp[0] if exp[0] == NEG_INF else close(vals[0], exp[0], 1e-9)) and all(
            abs(g - e) <= 1e-9 * max(1.0, abs(e)) for g, e in zip(vals[1:], exp[1:])
        )
        if ok:
            return None
        msg = f"expected (m, l, u) = ({exp[0]:.6g}, {exp[1]:.6g}, {exp[2]:.6g}), got ({vals[0]:.6g}, {vals[1]:.6g}, {vals[2]:.6g})"
        m_a, l_a, u_a, m_b, l_b, u_b = args
        if abs(vals[1] - (l_a + l_b)) < 1e-9 * max(1, l_a + l_b) and abs(exp[1] - (l_a + l_b)) > 1e-9:
            return (
                msg + ": rescale each state to the shared maximum first (alpha = exp(m_a - m'), beta = exp(m_b - m'))"
            )
        if close(vals[2], exp[2] / exp[1] if exp[1] else 0.0):
            return msg + ": u is the unnormalised weighted sum; do not divide by l inside the merge"
        return msg

    return run_cases("merge", fn, cases, compare)


check_merge.solution = _merge_solution


def _causal_tiles_solution(L: int, block_m: int, block_n: int) -> int:
    """(query block, key tile) pairs a causal forward visits for Lq = Lk = L: query block i holds rows
    [i*block_m, min((i+1)*block_m, L)); its last row sees keys up to that bound, so it visits
    ceil(min((i+1)*block_m, L) / block_n) tiles and skips the rest (fully masked)."""
    return sum(-(-min((i + 1) * block_m, L) // block_n) for i in range(-(-L // block_m)))


def check_causal_tiles(fn) -> Report:
    """fn(L, block_m, block_n) -> int: how many (query block, key tile) pairs a causal FlashAttention forward
    visits for a sequence of L tokens (Lq = Lk = L, top-left mask), query blocks of block_m rows, key tiles of
    block_n keys, skipping every tile with no valid score. block_m is a multiple of block_n."""
    rng = random.Random()
    shapes = [(128, 64), (64, 64), (128, 128), (64, 32), (128, 32)]
    cases = [dict(L=L, block_m=bm, block_n=bn) for L in (1, 17, 1000, 1793, 4096, 4097) for bm, bn in shapes[:2]]
    cases += [
        dict(L=rng.randint(1, 20000), block_m=bm, block_n=bn) for bm, bn in (rng.choice(shapes) for _ in range(8))
    ]

    def compare(case, got):
        L, bm, bn = case["L"], case["block_m"], case["block_n"]
        exp = _causal_tiles_solution(L, bm, bn)
        if not is_int(got):
            return f"expected an int count of tiles, got {_short(got)}"
        if got == exp:
            return None
        n_m, n_n = -(-L // bm), -(-L // bn)
        hints = {
            n_m * n_n: "that is every tile: skip the tiles right of the diagonal (fully masked)",
            sum(
                -(-(i + 1) * bm // bn) for i in range(n_m)
            ): "the last query block ends at row L, not at (i+1)*block_m: it visits fewer tiles",
            (n_m * n_n) // 2: "not exactly half: the diagonal band's tiles are visited too",
        }
        hint = hints.get(got)
        return f"L={L}, block_m={bm}, block_n={bn}: expected {exp}, got {got}" + (f": {hint}" if hint else "")

    return run_cases("causal_tiles", fn, cases, compare)


check_causal_tiles.solution = _causal_tiles_solution


# ---- the kernel exercise: the FlashAttention forward -------------------------------------------------------------

#: Lengths that are multiples of no tile of 16 or more, one that is, and L = 1.
FLASH_LENGTHS = (1, 17, 45, 64)
FLASH_SHAPE = dict(B=1, H=2, d=16)


def _flash_mismatch(got, ref, case):
    """None if got is within ``tolerances.ATTENTION_REL`` of the float64 reference (max |error| / max |ref|),
    else a message; when the result is the other causal flag's answer, says which mask is wrong."""
    rel = tolerances.ATTENTION_REL[case["q"].dtype]
    g = got.double().cpu()
    err = tolerances.max_rel_error(g, ref)
    if err <= rel:
        return None
    if not torch.isfinite(g).all():
        i = int((~torch.isfinite(g)).flatten().nonzero()[0])
        return (
            f"out[{i}] (flat) is {g.flatten()[i].item()} where the reference is {ref.flatten()[i].item():.6g}: "
            "a row whose scores are all -inf gives exp(-inf - (-inf)) = NaN; start every row's loop at key 0 "
            "and divide by l only after the loop"
        )
    i = int((g - ref).abs().flatten().argmax())
    msg = (
        f"max |error| / max |reference| = {err:.2e} > {rel:.1e}; worst at flat index {i}: expected "
        f"{ref.flatten()[i].item():.6g}, got {g.flatten()[i].item():.6g}"
    )
    other, _ = flash_attention_ref(case["q"], case["k"], case["v"], not case["causal"])
    if case["q"].shape[2] > 1 and tolerances.max_rel_error(g, other.cpu()) <= rel:
        return msg + (
            ": this is the non-causal answer; mask keys n > m (and skip the tiles right of the diagonal)"
            if case["causal"]
            else ": this is the causal answer; mask only when CAUSAL"
        )
    return msg


def check_flash_forward(fn) -> Report:
    """fn(q, k, v, causal, out) launches a Triton kernel that writes out = softmax(q k^T / sqrt(d) [causal]) v.
    q, k, v, out: contiguous (B, H, L, d), fp32 in the interpreter and fp16 on a GPU, on gpulab.DEVICE;
    ``causal``: query i sees keys 0..i. The checker owns every buffer (guard regions, ``kernelcheck``), runs
    L in ``FLASH_LENGTHS`` and a random L with both causal flags on fresh random inputs, and compares with
    float64 (``flash_attention_ref``) within ``tolerances.ATTENTION_REL``; it names a missing mask, too small a
    grid, or the other causal flag's answer."""
    rng = random.Random()
    dtype = torch.float16 if gpulab.ON_GPU else torch.float32
    B, H, d = FLASH_SHAPE["B"], FLASH_SHAPE["H"], FLASH_SHAPE["d"]
    lengths = [*FLASH_LENGTHS, rng.randrange(2, 80)]

    def qkv(L):
        return [torch.randn(B, H, L, d, dtype=torch.float64).to(dtype).to(gpulab.DEVICE) for _ in range(3)]

    cases = [dict(zip("qkv", qkv(L)), causal=c) for L in lengths for c in (False, True)]
    grid = (
        "; either the grid is too small (launch triton.cdiv(L, BLOCK_M) programs on axis 0 and B * H on axis 1) "
        "or the store mask is too strict"
    )
    return check_kernel(
        "flash_forward",
        fn,
        cases,
        out=lambda c: (c["q"].shape, c["q"].dtype),
        reference=lambda c: flash_attention_ref(c["q"], c["k"], c["v"], c["causal"])[0].cpu(),
        mismatch=_flash_mismatch,
        notes={"grid_small": grid, "partial": grid},
    )


check_flash_forward.solution = ex08_kernels.flash_forward
check_flash_forward.solution_module = ex08_kernels
check_flash_forward.hints = [
    "one program per (block of BLOCK_M queries, batch*head): grid (triton.cdiv(L, BLOCK_M), B * H); keep q, m, l "
    "and acc for the block, loop over keys BLOCK_N at a time (causal: stop at min((pid_m + 1) * BLOCK_M, L)); "
    "mask every load with row < L (other=0.0) and the store too",
    "in the loop: s = tl.where(valid, tl.dot(q, tl.trans(k)) * scale, -inf); m_new = tl.maximum(m, tl.max(s, 1)); "
    "alpha = tl.exp(m - m_new); p = tl.exp(s - m_new[:, None]); l = alpha * l + tl.sum(p, 1); "
    "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v); m = m_new; after it store acc / l[:, None]",
]
