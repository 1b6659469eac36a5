"""The models at the edges of their inputs: huge sizes return at once and exactly, sizes that fit nothing say so,
and bad arguments are named (the hostile sweep of issue 22)."""

from __future__ import annotations

import random

import pytest

from gpulab import attention as A


# ------------------------------------------------------------------------------------------ attention tiles
def _tiles_by_rows(L, bm, bn, causal):
    """The definition, one query block at a time (the reference for small L)."""
    n_m, n_n = -(-L // bm), -(-L // bn)
    return sum(-(-min((i + 1) * bm, L) // bn) if causal else n_n for i in range(n_m))


def _keys_by_rows(L, bm):
    return sum(min((i + 1) * bm, L) for i in range(-(-L // bm)))


def test_causal_tiles_and_bytes_agree_with_the_row_by_row_definition():
    rng = random.Random(22)
    cases = [(0, 1, 1), (1, 1, 1), (1, 128, 64), (300, 32, 16), (1000, 128, 128)]
    cases += [(rng.randint(0, 3000), rng.randint(1, 300), rng.randint(1, 300)) for _ in range(300)]
    for L, bm, bn in cases:
        for causal in (False, True):
            assert A.tiles_visited(L, bm, bn, causal) == _tiles_by_rows(L, bm, bn, causal), (L, bm, bn, causal)
        d, item = 64, 2
        want = (2 * L * d + 2 * _keys_by_rows(L, bm) * d) * item + 4 * L
        assert A.flash_bytes(1, 1, L, d, item, causal=True, block_m=bm) == want, (L, bm)


@pytest.mark.parametrize("L", [10**12 + 7, 2**62 + 3])
def test_causal_counts_at_a_huge_length_are_exact(L):
    # the row-by-row sum would take 10^10 steps and more; the closed form agrees with the formulas a row block
    # reveals: tiles of the block's size: row block i visits i + 1 of the n tiles, n(n - 1)/2 + n in all
    bm = 128
    n = -(-L // bm)
    assert A.tiles_visited(L, bm, bm, True) == n * (n - 1) // 2 + n
    # tiles half the block: row block i < n - 1 visits 2(i + 1); the last one ceil(L / 64)
    assert A.tiles_visited(L, bm, bm // 2, True) == (n - 1) * n + -(-L // (bm // 2))
    keys = bm * (n - 1) * n // 2 + L
    assert A.flash_bytes(1, 1, L, 64, 2, causal=True, block_m=bm) == (2 * L * 64 + 2 * keys * 64) * 2 + 4 * L


# ------------------------------------------------------------------------------------------ tiling
def test_largest_square_tile_is_0_when_no_tile_fits_as_lesson_07s_exercise_says():
    from dataclasses import replace

    from gpulab import hardware, tiling
    from gpulab.exercises import ex07

    tiny = replace(hardware.get("T4"), smem_per_sm_kib=1)  # 1024 bytes of shared memory
    got = {}
    for s, stages in [(4, 128), (4, 129), (1, 512), (1, 513), (2, 3), (4, 1)]:
        got[s, stages] = tiling.largest_square_tile(s, tiny, stages)
        assert got[s, stages] == ex07.check_largest_tile.solution(s, 1024, stages), (s, stages)
    # 2 * 1^2 * 4 * 128 = 1024 bytes fit exactly; one more stage and not even T = 1 fits
    assert got[4, 128] == 1 and got[4, 129] == 0 and got[1, 513] == 0
