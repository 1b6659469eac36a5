"""Exercises of lesson 08 (FlashAttention)."""
from __future__ import annotations

import math
import random

from . import Report, _short, close, is_int, run_cases

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
    cases += [dict(m_a=NEG_INF, l_a=0.0, u_a=0.0, m_b=a[0], l_b=a[1], u_b=a[2], _empty=True),
              dict(m_a=a[0], l_a=a[1], u_a=a[2], m_b=NEG_INF, l_b=0.0, u_b=0.0, _empty=True),
              dict(m_a=NEG_INF, l_a=0.0, u_a=0.0, m_b=NEG_INF, l_b=0.0, u_b=0.0, _empty=True)]

    def compare(case, got):
        args = [case[k] for k in ("m_a", "l_a", "u_a", "m_b", "l_b", "u_b")]
        exp = _merge_solution(*args)
        try:
            m, l, u = got
        except (TypeError, ValueError):
            return f"expected a tuple (m, l, u), got {_short(got)}"
        vals = [float(x) for x in (m, l, u)]
        if any(math.isnan(x) for x in vals):
            return ("NaN: an empty state (m = -inf) gives exp(-inf - (-inf)); give it factor 0 (skip it)"
                    if case.get("_empty") else "NaN in the result")
        ok = (vals[0] == exp[0] if exp[0] == NEG_INF else close(vals[0], exp[0], 1e-9)) and \
            all(abs(g - e) <= 1e-9 * max(1.0, abs(e)) for g, e in zip(vals[1:], exp[1:]))
        if ok:
            return None
        msg = f"expected (m, l, u) = ({exp[0]:.6g}, {exp[1]:.6g}, {exp[2]:.6g}), got ({vals[0]:.6g}, {vals[1]:.6g}, {vals[2]:.6g})"
        m_a, l_a, u_a, m_b, l_b, u_b = args
        if abs(vals[1] - (l_a + l_b)) < 1e-9 * max(1, l_a + l_b) and abs(exp[1] - (l_a + l_b)) > 1e-9:
            return msg + ": rescale each state to the shared maximum first (alpha = exp(m_a - m'), beta = exp(m_b - m'))"
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
    cases += [dict(L=rng.randint(1, 20000), block_m=bm, block_n=bn) for bm, bn in (rng.choice(shapes) for _ in range(8))]

    def compare(case, got):
        L, bm, bn = case["L"], case["block_m"], case["block_n"]
        exp = _causal_tiles_solution(L, bm, bn)
        if not is_int(got):
            return f"expected an int count of tiles, got {_short(got)}"
        if got == exp:
            return None
        n_m, n_n = -(-L // bm), -(-L // bn)
        hints = {n_m * n_n: "that is every tile: skip the tiles right of the diagonal (fully masked)",
                 sum(-(-(i + 1) * bm // bn) for i in range(n_m)):
                     "the last query block ends at row L, not at (i+1)*block_m: it visits fewer tiles",
                 (n_m * n_n) // 2: "not exactly half: the diagonal band's tiles are visited too"}
        hint = hints.get(got)
        return f"L={L}, block_m={bm}, block_n={bn}: expected {exp}, got {got}" + (f": {hint}" if hint else "")

    return run_cases("causal_tiles", fn, cases, compare)


check_causal_tiles.solution = _causal_tiles_solution
