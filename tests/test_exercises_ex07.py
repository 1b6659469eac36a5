"""Lesson 07's checkers: the reference solutions pass, the common mistakes fail with their hint, stubs are
'not attempted', and the solutions agree with gpulab's own models."""
import random

from gpulab import tiling, waves
from gpulab.exercises import ex07 as L


def _stub(*args):
    raise NotImplementedError


def test_solutions_pass_and_stubs_are_not_attempted():
    for check in (L.check_tile_count, L.check_waves, L.check_largest_tile):
        assert check(check.solution).ok, check(check.solution)
        rep = check(_stub)
        assert not rep.attempted and not rep.ok


def test_solutions_agree_with_the_models(seed):
    rng = random.Random(seed)
    for _ in range(200):
        M, N = rng.randrange(1, 9000), rng.randrange(1, 9000)
        tile, sms = (2 ** rng.randrange(4, 9), 2 ** rng.randrange(4, 9)), rng.randrange(1, 200)
        p = waves.plan(M, N, tile, sms=sms)
        assert L.check_tile_count.solution(M, N, *tile) == p.tiles
        assert L.check_waves.solution(p.tiles, sms) == (p.waves, p.last_wave_tiles)
    for s in (1, 2, 4):
        for gpu in ("H200", "A100 80GB SXM", "T4"):
            for st in (1, 2, 3, 4):
                assert L.check_largest_tile.solution(s, tiling.shared_memory_bytes(gpu), st) == \
                    tiling.largest_square_tile(s, gpu, st)


def test_tile_count_mistakes():
    rep = L.check_tile_count(lambda M, N, tm, tn: (M // tm) * (N // tn))
    assert not rep.ok and "round up" in str(rep)
    rep = L.check_tile_count(lambda M, N, tm, tn: -(-M // tn) * -(-N // tm))
    assert not rep.ok and "tile_m splits" in str(rep)
    assert not L.check_tile_count(lambda M, N, tm, tn: float(L.check_tile_count.solution(M, N, tm, tn))).ok


def test_waves_mistakes():
    rep = L.check_waves(lambda t, s: (-(-t // s), t % s))
    assert not rep.ok and "fill the last wave exactly" in str(rep)
    rep = L.check_waves(lambda t, s: (t // s, t % s))
    assert not rep.ok and "round the waves up" in str(rep)
    rep = L.check_waves(lambda t, s: L.check_waves.solution(t, s)[::-1])
    assert not rep.ok
    assert L.check_waves(lambda t, s: list(L.check_waves.solution(t, s))).ok  # a list is a pair too


def test_largest_tile_mistakes():
    rep = L.check_largest_tile(lambda s, m, st: L.check_largest_tile.solution(s, m, 1))
    assert not rep.ok and "pipeline stage" in str(rep)
    rep = L.check_largest_tile(lambda s, m, st: L.check_largest_tile.solution(s, 2 * m, st))
    assert not rep.ok and "TWO input tiles" in str(rep)
    rep = L.check_largest_tile(lambda s, m, st: int((m / (2 * s * st)) ** 0.5))  # not rounded to a power of two
    assert not rep.ok


def test_largest_tile_rejects_a_strict_inequality_on_an_exact_fit():
    # tiles that fill shared memory to the byte fit: a '<' instead of '<=' must fail every time, not by chance
    def strict(itemsize, smem_bytes, stages):
        t = 1
        while 2 * (2 * t) ** 2 * itemsize * stages < smem_bytes:
            t *= 2
        return t

    for _ in range(5):
        rep = L.check_largest_tile(strict)
        assert not rep.ok and "fill shared memory exactly" in str(rep)
