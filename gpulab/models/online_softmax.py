"""Online softmax: the running state (m, l, u) of one query row, and how two states merge.

For one query row with scores ``s_j`` and values ``v_j``, after a set A of valid keys keep

    m_A = max_{j in A} s_j,   l_A = sum_{j in A} exp(s_j - m_A),   u_A = sum_{j in A} exp(s_j - m_A) v_j.

The normalised output so far is ``u_A / l_A``. A new tile B has its own state (m_B, l_B, u_B); with a shared
maximum ``m' = max(m_A, m_B)``, ``alpha = exp(m_A - m')`` and ``beta = exp(m_B - m')``:

    l' = alpha l_A + beta l_B,   u' = alpha u_A + beta u_B.

Multiplying by alpha moves every old exponential from reference m_A to m'; beta does the same for the tile.
So a row can be walked tile by tile, in any tile width, and give exactly the softmax-weighted sum (in real
arithmetic; floating point evaluation order may differ in the last bits). Masked scores are ``-inf``: a tile
whose scores are all masked has the empty state (m = -inf, l = 0, u = 0) and is skipped, so ``-inf - (-inf)``
(NaN) is never formed. Sources: Milakov and Gimelshein, "Online normalizer calculation for softmax" (2018);
Dao et al., FlashAttention (2022), Section 3.1; the seed lecture (Stanford CS336 Lecture 5, "Keep a running
maximum, denominator, and weighted sum"), whose worked example ``seed_example`` reproduces.

Everything here is NumPy float64, one row at a time: the model that ``gpulab.kernels.flash_attention`` runs
on tiles of rows (in log2 units, with exp2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core import validate

NEG_INF = float("-inf")


@dataclass(frozen=True)
class State:
    """The running state of one row: ``m`` the maximum score seen (-inf before any valid score), ``l`` the sum
    of exp(s_j - m), ``u`` the sum of exp(s_j - m) v_j (float64 array of shape (dv,))."""

    m: float
    l: float
    u: np.ndarray = field(compare=False)

    @property
    def empty(self) -> bool:
        """True before any valid (finite) score: m = -inf, l = 0, u = 0."""
        return self.m == NEG_INF

    def output(self) -> np.ndarray:
        """u / l, the softmax-weighted sum of the values seen. Raises ValueError for the empty state (a row
        needs at least one valid score for softmax to be defined)."""
        if self.empty:
            raise ValueError("the empty state has no output: softmax needs at least one valid (finite) score")
        return self.u / self.l


def empty_state(dv: int = 1) -> State:
    """The state of no keys: m = -inf, l = 0, u = zeros(dv)."""
    return State(NEG_INF, 0.0, np.zeros(dv))


def _as_row(scores, values):
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    v = np.asarray(values, dtype=np.float64)
    if (v.shape[0] if v.ndim else 1) != len(s):
        raise ValueError(f"values must have one row per score: {len(s)} scores, values shape {v.shape}")
    v = v.reshape(len(s), 1) if v.ndim <= 1 else v.reshape(len(s), int(np.prod(v.shape[1:])))
    if np.isnan(s).any() or np.isposinf(s).any():
        raise ValueError("scores must be finite or -inf (masked); got NaN or +inf")
    return s, v


def tile_state(scores, values) -> State:
    """The state of one tile on its own: scores (n,) with -inf for masked keys, values (n,) or (n, dv).
    A tile with no valid score gives the empty state."""
    s, v = _as_row(scores, values)
    valid = s > NEG_INF
    if not valid.any():
        return empty_state(v.shape[1])
    m = float(s[valid].max())
    w = np.exp(s[valid] - m)  # only valid scores: never -inf - (-inf)
    return State(m, float(w.sum()), w @ v[valid])


def rescale(a: State, b: State) -> tuple[float, float, float]:
    """(m', alpha, beta) for merging a and b: m' = max(m_a, m_b), alpha = exp(m_a - m'), beta = exp(m_b - m').
    An empty state gets factor 0 (it holds nothing); two empty states give (-inf, 0, 0), never NaN."""
    m = max(a.m, b.m)
    if m == NEG_INF:
        return m, 0.0, 0.0
    return m, (0.0 if a.empty else math.exp(a.m - m)), (0.0 if b.empty else math.exp(b.m - m))


def merge(a: State, b: State) -> State:
    """The state of the union of a's keys and b's keys: l' = alpha l_a + beta l_b, u' = alpha u_a + beta u_b.
    Raises ValueError if both hold keys and their u differ in width (values per key); an empty state merges
    with any width."""
    if not (a.empty or b.empty) and np.shape(a.u) != np.shape(b.u):
        raise ValueError(f"states of different value width cannot merge: u shapes {np.shape(a.u)} and {np.shape(b.u)}")
    m, alpha, beta = rescale(a, b)
    if m == NEG_INF:
        return empty_state(len(a.u))
    if a.empty or b.empty:  # the other one as it is (alpha or beta is 1), in its own width
        return b if a.empty else a
    return State(m, alpha * a.l + beta * b.l, alpha * a.u + beta * b.u)


def update(state: State, scores, values) -> State:
    """Fold one tile (scores (n,), values (n,) or (n, dv)) into a running state."""
    return merge(state, tile_state(scores, values))


@dataclass(frozen=True)
class Step:
    """One tile of a row walk: keys [start, stop), the tile's own state, the running state after it, the
    rescale factors alpha (old state) and beta (tile), and whether the tile was skipped (all masked)."""

    start: int
    stop: int
    tile: State
    state: State
    alpha: float
    beta: float
    skipped: bool


def walk_row(scores, values, tile: int) -> list[Step]:
    """Walk a row ``tile`` keys at a time, as a FlashAttention program does, and record every step.

    scores: (n,) with -inf for masked keys; values: (n,) or (n, dv); tile: int >= 1. A fully masked tile is
    skipped (state unchanged, alpha = 1, beta = 0). Raises TypeError/ValueError naming ``tile`` for a bad tile
    width."""
    s, v = _as_row(scores, values)
    tile = validate.positive_int("tile", tile)
    state, steps = empty_state(v.shape[1]), []
    for start in range(0, len(s), tile):
        stop = min(start + tile, len(s))
        t = tile_state(s[start:stop], v[start:stop])
        if t.empty:
            steps.append(Step(start, stop, t, state, 1.0, 0.0, True))
            continue
        _, alpha, beta = rescale(state, t)
        state = merge(state, t)
        steps.append(Step(start, stop, t, state, alpha, beta, False))
    return steps


def attention_row(scores, values, tile: int) -> np.ndarray:
    """softmax(scores) @ values for one row, walked ``tile`` keys at a time: the last state's u / l."""
    steps = walk_row(scores, values, tile)
    if not steps:
        raise ValueError("the row has no keys")
    return steps[-1].state.output()


def softmax_online(scores, tile: int) -> np.ndarray:
    """Softmax probabilities of one row from the online normaliser: walk the row ``tile`` keys at a time for
    (m, l), then p_j = exp(s_j - m) / l (0 for masked keys). Raises ValueError if every score is masked."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    final = walk_row(s, np.zeros(len(s)), tile)[-1].state if len(s) else empty_state()
    if final.empty:
        raise ValueError("every score is masked: softmax is undefined for this row")
    p = np.zeros(len(s))
    ok = s > NEG_INF
    p[ok] = np.exp(s[ok] - final.m) / final.l
    return p


# ---- the seed lecture's worked example ------------------------------------------------------------------------

SEED_SCORES = (0.0, math.log(2.0), math.log(3.0))
SEED_VALUES = (1.0, 4.0, 2.0)


def seed_example() -> dict:
    """The seed lecture's example: scores (0, ln 2, ln 3), values (1, 4, 2); tile A = the first two keys,
    tile B = the last. Returns every quantity of the worked example as floats: m_A, l_A, u_A, m_B, l_B, u_B,
    alpha, beta, l, u, out (the merged output) and exact (the full softmax-weighted sum)."""
    a = tile_state(SEED_SCORES[:2], SEED_VALUES[:2])
    b = tile_state(SEED_SCORES[2:], SEED_VALUES[2:])
    _, alpha, beta = rescale(a, b)
    ab = merge(a, b)
    w = np.exp(np.array(SEED_SCORES))
    return dict(
        m_A=a.m,
        l_A=a.l,
        u_A=float(a.u[0]),
        m_B=b.m,
        l_B=b.l,
        u_B=float(b.u[0]),
        alpha=alpha,
        beta=beta,
        l=ab.l,
        u=float(ab.u[0]),
        out=float(ab.output()[0]),
        exact=float(w @ np.array(SEED_VALUES) / w.sum()),
    )


def check_seed_example(rel: float = 1e-12) -> dict:
    """Assert the seed's numbers: O = 2.5; m_A = ln 2, l_A = 1.5, u_A = 4.5; m_B = ln 3, l_B = 1, u_B = 2;
    alpha = 2/3, beta = 1; l' = 2, u' = 5. Returns ``seed_example()``; raises AssertionError naming the
    first quantity that differs."""
    got = seed_example()
    want = dict(
        m_A=math.log(2),
        l_A=1.5,
        u_A=4.5,
        m_B=math.log(3),
        l_B=1.0,
        u_B=2.0,
        alpha=2 / 3,
        beta=1.0,
        l=2.0,
        u=5.0,
        out=2.5,
        exact=2.5,
    )
    for k, w in want.items():
        assert math.isclose(got[k], w, rel_tol=rel), f"{k}: got {got[k]!r}, the seed says {w!r}"
    return got


# ---- a row for the explorer (gpulab.figures.lesson08) -------------------------------------------------------


def default_row(n: int = 16, masked: int = 4, seed: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """A row for the explorer: n scores whose maximum rises along the row (so alpha < 1 shows up), the first
    ``masked`` of them masked (-inf), and n scalar values."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(0.0, 1.0, n) + np.linspace(0.0, 3.0, n)
    scores[:masked] = NEG_INF
    return scores, rng.integers(-4, 6, n).astype(np.float64)
