"""Lesson 07's checkers: the reference solutions pass, the common mistakes fail with their hint, stubs are
'not attempted', and the solutions agree with gpulab's own models."""

import random

import pytest
import torch

import gpulab
from gpulab.core import tolerances
from gpulab.exercises import ex07 as L
from gpulab.models import tiling, waves


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
        p = waves.wave_plan(M, N, tile, sms=sms)
        assert L.check_tile_count.solution(M, N, *tile) == p.tiles
        assert L.check_waves.solution(p.tiles, sms) == (p.waves, p.last_wave_tiles)
    for s in (1, 2, 4):
        for gpu in ("H200", "A100 80GB SXM", "T4"):
            for st in (1, 2, 3, 4):
                assert L.check_largest_tile.solution(
                    s, tiling.shared_memory_bytes(gpu), st
                ) == tiling.largest_square_tile(s, gpu, st)


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


# ---- the tiled-matmul kernel exercise: a right, a wrong, an unmasked kernel and a too-small grid ------------

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _matmul_variant_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    MASKED: tl.constexpr,
    ACCUMULATE: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_m, pid_n = pid // tl.cdiv(N, BN), pid % tl.cdiv(N, BN)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + tl.arange(0, BK)
        a_ptrs = a_ptr + offs_m[:, None] * sam + ks[None, :] * sak
        b_ptrs = b_ptr + ks[:, None] * sbk + offs_n[None, :] * sbn
        if MASKED:
            a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
            b = tl.load(b_ptrs, mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        else:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        if ACCUMULATE:
            acc = tl.dot(a, b, acc)
        else:  # the mistake: each K step overwrites the sum instead of adding to it
            acc = tl.dot(a, b)
    c_ptrs = c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn
    if MASKED:
        tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    else:
        tl.store(c_ptrs, acc.to(tl.float16))


def _variant(
    masked=True,
    accumulate=True,
    grid_rows=lambda M, bm: triton.cdiv(M, bm),
    bn=32,
    grid_cols=lambda N, bn: triton.cdiv(N, bn),
):
    def fn(a, b, out, bm=32, bk=32):
        M, K = a.shape
        N = b.shape[1]
        grid = (grid_rows(M, bm) * grid_cols(N, bn),)
        if grid[0] == 0:
            return
        _matmul_variant_kernel[grid](
            a,
            b,
            out,
            M,
            N,
            K,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            out.stride(0),
            out.stride(1),
            BM=bm,
            BN=bn,
            BK=bk,
            MASKED=masked,
            ACCUMULATE=accumulate,
        )

    return fn


def test_tiled_matmul_right_kernels_pass():
    rep = L.check_tiled_matmul(L.check_tiled_matmul.solution)
    assert rep.ok, str(rep)
    assert L.check_tiled_matmul(_variant()).ok  # the test's own right kernel: the variants below differ by one thing
    assert not L.check_tiled_matmul(_stub).attempted
    assert len(L.check_tiled_matmul.hints) == 2 and L.check_tiled_matmul.solution_module is not None


def test_tiled_matmul_wrong_sum_is_named_as_wrong_values():
    rep = L.check_tiled_matmul(_variant(accumulate=False))
    assert not rep.ok and "values differ" in str(rep) and "(M, N, K = (17, 33, 70))" in str(rep), str(rep)
    assert rep.failed >= 4 and len(rep.failures) == 1, str(rep)  # one line for the mistake, whatever its count
    assert "(M, N, K = (1, 1, 1))" not in str(rep)  # one K step: overwriting and adding agree there


def test_tiled_matmul_unmasked_kernel_is_named():
    rep = L.check_tiled_matmul(_variant(masked=False))
    assert not rep.ok and "mask" in str(rep), str(rep)


def test_tiled_matmul_too_small_grid_is_named():
    rep = L.check_tiled_matmul(_variant(grid_rows=lambda M, bm: M // bm))  # rounds the tile rows down
    assert not rep.ok and "never written" in str(rep) and "grid is too small" in str(rep), str(rep)


def test_tiled_matmul_solution_matches_float64_on_a_poisoned_output():
    g = torch.Generator().manual_seed(7)
    a, b = (torch.randn(*s, generator=g, dtype=torch.float64).half().to(gpulab.DEVICE) for s in ((37, 70), (70, 45)))
    out = torch.full((37, 45), float("nan"), dtype=torch.float16, device=gpulab.DEVICE)  # poisoned
    L.check_tiled_matmul.solution(a, b, out)
    assert tolerances.matmul_mismatch(out, a, b, a.double().cpu() @ b.double().cpu()) is None  # seed 7


# ---- the persistent-matmul kernel exercise (lesson 07b) -----------------------------------------------------


@triton.jit
def _persistent_variant_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    num_programs,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    LOOP: tl.constexpr,
    MASKED: tl.constexpr,
    RESET: tl.constexpr,
):
    num_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_n
    # LOOP 1 (True): the persistent loop. The mistakes: 0 (False) one tile per program; 2 every program steps by 1
    # from its pid (tile t computed and stored by t + 1 programs); 3 every program computes every tile and stores
    # only its own (each tile stored once, computed num_programs times)
    step = num_programs if LOOP == 1 else (1 if LOOP >= 2 else num_tiles)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for tile in range(tl.program_id(0) if LOOP != 3 else 0, num_tiles, step):
        offs_m = (tile // num_n) * BM + tl.arange(0, BM)
        offs_n = (tile % num_n) * BN + tl.arange(0, BN)
        if RESET:
            acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ks = k0 + tl.arange(0, BK)
            if MASKED:
                a = tl.load(
                    a_ptr + offs_m[:, None] * sam + ks[None, :] * sak,
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K),
                    other=0.0,
                )
                b = tl.load(
                    b_ptr + ks[:, None] * sbk + offs_n[None, :] * sbn,
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N),
                    other=0.0,
                )
            else:
                a = tl.load(a_ptr + offs_m[:, None] * sam + ks[None, :] * sak)
                b = tl.load(b_ptr + ks[:, None] * sbk + offs_n[None, :] * sbn)
            acc = tl.dot(a, b, acc)
        c_ptrs = c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn
        if MASKED:
            rows = M
            if LOOP == 3:  # only the program whose tile this is stores it: the others' mask holds no row
                rows = M * (tile % num_programs == tl.program_id(0)).to(tl.int32)
            tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < rows) & (offs_n[None, :] < N))
        else:
            tl.store(c_ptrs, acc.to(tl.float16))


def _persistent(loop=True, masked=True, reset=True):
    def fn(a, b, programs, out):
        M, K = a.shape
        N = b.shape[1]
        _persistent_variant_kernel[(programs,)](
            a,
            b,
            out,
            M,
            N,
            K,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            out.stride(0),
            out.stride(1),
            programs,
            BM=32,
            BN=32,
            BK=32,
            LOOP=loop,
            MASKED=masked,
            RESET=reset,
        )

    return fn


def test_persistent_matmul_right_kernels_pass():
    assert L.check_persistent_matmul(L.check_persistent_matmul.solution).ok
    assert L.check_persistent_matmul(_persistent()).ok  # the variants below differ from this one by one thing
    assert not L.check_persistent_matmul(_stub).attempted
    assert len(L.check_persistent_matmul.hints) == 2


def test_persistent_matmul_one_tile_per_program_is_named():
    rep = L.check_persistent_matmul(_persistent(loop=False))
    assert not rep.ok and "each program must loop over the tiles" in str(rep) and "grid is too small" not in str(rep)


def test_persistent_matmul_accumulator_kept_across_tiles_is_wrong_values():
    rep = L.check_persistent_matmul(_persistent(reset=False))
    assert not rep.ok and "values differ" in str(rep), str(rep)


@pytest.mark.parametrize(
    "loop, stored_twice",
    [(2, True), (3, False)],
    ids=["steps-by-1-from-pid", "computes-every-tile-stores-its-own"],
)
def test_persistent_matmul_tiles_computed_more_than_once_are_named(loop, stored_twice):
    """Right values on the prescribed grid in one launch, but the work is not done once: programs that step through
    the tiles by 1 from their pid compute and store tile t t + 1 times (the stores say so); programs that compute
    every tile and store only their own store each tile once, and their tl.dot calls do num_programs times the
    multiply-adds of one pass over C's tiles (the dots say so)."""
    rep = L.check_persistent_matmul(_persistent(loop=loop))
    text = str(rep)
    assert not rep.ok and "values differ" not in text and "launched" not in text, text
    if stored_twice:  # named by the work's count, or earlier by kernelcheck's two programs storing one element
        assert "computed some tiles of C more than once" in text or "both stored into out" in text, text
    else:
        assert "multiply-adds of one pass over C's tiles" in text and "tiles of 32 x 32" in text, text
    # (100, 33, 40) on one program computes each tile once, whatever the loop: that case passes
    assert 0 < rep.failed < rep.cases, text


def test_tiled_matmul_reaches_past_every_tile_side_it_might_fix():
    """A drawn shape has each of M, N and K past ``cases.TILE_LIMIT``: a kernel that takes all of N in one block
    (BLOCK_N fixed at 256: the old shapes never passed N = 130) fails on the wide N."""
    shapes = L._past_tiles(L.Draw(3))
    assert [max(s) > L.TILE_LIMIT for s in shapes] == [True] * 3
    assert [s.index(max(s)) for s in shapes] == [0, 1, 2]
    rep = L.check_tiled_matmul(_variant(bn=256, grid_cols=lambda N, bn: 1))  # one block of 256 columns: N untiled
    text = str(rep)
    assert not rep.ok and rep.failed == 1 and "never written" in text, text  # the wide N alone
    assert f"(seed {rep.seed})" in text and f"seed={rep.seed}" in text, text


def test_persistent_matmul_unmasked_kernel_is_named():
    rep = L.check_persistent_matmul(_persistent(masked=False))
    assert not rep.ok and "mask" in str(rep), str(rep)


@triton.jit
def _one_wave_kernel(a_ptr, b_ptr, c_ptr, M, N, K, first, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    num_n = tl.cdiv(N, BN)
    tile = first + tl.program_id(0)  # one tile per program: the launcher covers the tiles wave by wave
    if tile < tl.cdiv(M, BM) * num_n:
        offs_m = (tile // num_n) * BM + tl.arange(0, BM)
        offs_n = (tile % num_n) * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ks = k0 + tl.arange(0, BK)
            a = tl.load(a_ptr + offs_m[:, None] * K + ks[None, :], mask=(offs_m[:, None] < M) & (ks[None, :] < K))
            b = tl.load(b_ptr + ks[:, None] * N + offs_n[None, :], mask=(ks[:, None] < K) & (offs_n[None, :] < N))
            acc = tl.dot(a, b, acc)
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16), mask=mask)


def _wave_by_wave(a, b, programs, out):
    """Not persistent: right values, each launch on grid (programs,), but one launch per wave of tiles."""
    M, K = a.shape
    N = b.shape[1]
    tiles = -(-M // 32) * -(-N // 32)
    for first in range(0, tiles, programs):
        _one_wave_kernel[(programs,)](a, b, out, M, N, K, first, BM=32, BN=32, BK=32)


def test_persistent_matmul_a_non_persistent_launcher_is_named():
    """Every grid is the prescribed (programs,) and every value right, yet the tiles are covered in several
    launches: the checker counts the launches and names the non-persistent launcher."""
    rep = L.check_persistent_matmul(_wave_by_wave)
    assert not rep.ok and "launched" in str(rep) and "one launch per wave" in str(rep), str(rep)
    assert "values differ" not in str(rep) and "grid" not in str(rep).split("persistent kernel is")[0]


def test_persistent_matmul_never_advises_a_larger_grid(monkeypatch):
    """Two programs on 56 x 41 (two tiles a row): one tile each leaves the tail of out unwritten, which kernelcheck
    reads as too small a grid; the grid is prescribed here, so the loop is named instead."""
    monkeypatch.setattr(L, "PERSISTENT_CASES", [(56, 41, 16, 2)])
    rep = L.check_persistent_matmul(_persistent(loop=False))
    text = str(rep)
    assert not rep.ok and "each program must loop over the tiles" in text and "grid is too small" not in text, text
    assert "were never written" in text
