"""Exercises of lesson 07 (tiling, tile and wave quantization): the tiled-matmul kernel, tile counts, waves and the
largest tile that fits."""

from __future__ import annotations

import random
import re

import torch

from ..core.tolerances import matmul_mismatch
from ..models.waves import cdiv
from . import Report, _short, ex07_solutions, ex07b_solutions, is_int, mistakes, run_cases, work
from .cases import TILE_LIMIT, Draw
from .kernelcheck import check_kernel


def _tile_count_solution(M: int, N: int, tile_m: int, tile_n: int) -> int:
    """Output tiles of tile_m x tile_n that cover an M x N output: ceil(M / tile_m) * ceil(N / tile_n)."""
    return cdiv(M, tile_m) * cdiv(N, tile_n)


def check_tile_count(fn) -> Report:
    """fn(M, N, tile_m, tile_n) -> int: how many tile_m x tile_n tiles cover an M x N output (a partial tile
    at an edge still counts). Seed: 1792^2 in 256 x 128 tiles -> 98; 1793^2 -> 120."""
    rng = random.Random()
    cases = [
        dict(M=1792, N=1792, tile_m=256, tile_n=128),
        dict(M=1793, N=1793, tile_m=256, tile_n=128),
        dict(M=1, N=1, tile_m=128, tile_n=256),
        dict(M=1000, N=17, tile_m=64, tile_n=16),
    ]
    cases += [
        dict(
            M=rng.randrange(1, 10000),
            N=rng.randrange(1, 10000),
            tile_m=2 ** rng.randrange(4, 9),
            tile_n=2 ** rng.randrange(4, 9),
        )
        for _ in range(20)
    ]

    def compare(case, got):
        M, N, tm, tn = case.values()
        exp = _tile_count_solution(M, N, tm, tn)
        if not is_int(got):
            return f"expected an int number of tiles, got {_short(got)}"
        if got == exp:
            return None
        if got == (M // tm) * (N // tn):
            return f"expected {exp}, got {got}: round up (ceil), the partial tile at the edge is a tile too"
        if got == cdiv(M, tn) * cdiv(N, tm):
            return f"expected {exp}, got {got}: tile_m splits the M rows and tile_n the N columns"
        if got in (cdiv(M, tm), cdiv(N, tn)):
            return f"expected {exp}, got {got}: the tiles form a grid, count both directions and multiply"
        return f"expected {exp}, got {got}"

    return run_cases("tile_count", fn, cases, compare)


check_tile_count.solution = _tile_count_solution


def _waves_solution(tiles: int, sms: int) -> tuple[int, int]:
    """(waves, busy SMs in the last wave) for `tiles` equal tiles, one tile per SM at a time."""
    waves = cdiv(tiles, sms)
    return waves, tiles - (waves - 1) * sms


def check_waves(fn) -> Report:
    """fn(tiles, sms) -> (waves, busy SMs in the last wave), one tile per SM at a time and every tile taking
    the same time. Seed: 98 tiles on 108 SMs -> (1, 98); 120 tiles -> (2, 12)."""
    rng = random.Random()
    cases = [
        dict(tiles=98, sms=108),
        dict(tiles=120, sms=108),
        dict(tiles=264, sms=132),
        dict(tiles=1, sms=132),
        dict(tiles=133, sms=132),
    ]
    cases += [dict(tiles=rng.randrange(1, 5000), sms=rng.choice([40, 58, 72, 108, 114, 132, 170])) for _ in range(20)]

    def compare(case, got):
        tiles, sms = case.values()
        exp = _waves_solution(tiles, sms)
        if not (isinstance(got, (tuple, list)) and len(got) == 2 and all(is_int(v) for v in got)):
            return f"expected a pair of ints (waves, busy in the last wave), got {_short(got)}"
        got = tuple(got)
        if got == exp:
            return None
        if got[0] == tiles // sms and got[0] != exp[0]:
            return f"expected {exp}, got {got}: round the waves up; a few leftover tiles still need a whole wave"
        if got[1] == tiles % sms and got[1] != exp[1]:
            return (
                f"expected {exp}, got {got}: when the tiles fill the last wave exactly, tiles % sms is 0 "
                f"but all {sms} SMs are busy"
            )
        if got == exp[::-1]:
            return f"expected {exp}, got {got}: the order is (waves, busy SMs in the last wave)"
        return f"expected {exp}, got {got}"

    return run_cases("waves", fn, cases, compare)


check_waves.solution = _waves_solution


def _largest_one_wave_solution(tile_m: int, tile_n: int, sms: int) -> int:
    """The largest square size N whose ceil(N / tile_m) x ceil(N / tile_n) tiles fit in one wave on ``sms`` SMs
    (at most ``sms`` tiles): the tile counts grow with N, so walk N up until one more row would not fit."""
    n = 1
    while (-(-(n + 1) // tile_m)) * (-(-(n + 1) // tile_n)) <= sms:
        n += 1
    return n


def check_largest_one_wave(fn) -> Report:
    """fn(tile_m, tile_n, sms) -> the largest square size N whose output tiles, ceil(N/tile_m) x ceil(N/tile_n),
    all run in one wave (at most ``sms`` of them). Seed: 256 x 128 tiles on 108 SMs -> 1792 (1793 needs 120);
    gpulab's 128 x 256 tile on the H200's 132 SMs -> 2048 (lesson 07b's wave step). Random tiles of 16 to 256
    and GPUs of 40 to 170 SMs."""
    rng = random.Random()
    cases = [
        dict(tile_m=256, tile_n=128, sms=108),
        dict(tile_m=128, tile_n=256, sms=132),
        dict(tile_m=64, tile_n=64, sms=1),
    ]
    cases += [
        dict(tile_m=rng.choice([16, 32, 64, 128, 256]), tile_n=rng.choice([16, 32, 64, 128, 256]),
             sms=rng.choice([40, 58, 72, 108, 114, 132, 170]))
        for _ in range(20)
    ]  # fmt: skip

    def compare(case, got):
        tm, tn, sms = case.values()
        exp = _largest_one_wave_solution(tm, tn, sms)
        if not is_int(got):
            return f"expected an int N, got {_short(got)}"
        if got == exp:
            return None
        tiles = (-(-got // tm)) * (-(-got // tn))
        head = f"expected N = {exp}, got {got} ({tiles} tiles on {sms} SMs)"
        if tiles > sms and (got // tm) * (got // tn) <= sms:
            return head + ": that needs a second wave; a partial tile at an edge is a whole tile (round up)"
        if tiles > sms:
            return head + ": that needs a second wave; the answer is the last N whose tiles fit"
        if got < exp and (-(-(got + 1) // tm)) * (-(-(got + 1) // tn)) == sms:
            return head + ": N + 1 fills the wave exactly, and a full wave is still one wave (at most sms tiles)"
        return head + f": N = {exp} still fits one wave"

    return run_cases("largest_one_wave", fn, cases, compare)


check_largest_one_wave.solution = _largest_one_wave_solution
check_largest_one_wave.hints = [
    "write the number of tiles of an N x N output as a function of N; it only grows with N, so the answer is "
    "the last N before it passes the number of SMs",
    "the tile count jumps where N passes a multiple of a tile side: try the multiples, and the size just "
    "under the next jump",
]


def _largest_tile_solution(itemsize: int, smem_bytes: int, stages: int) -> int:
    """The largest power of two T whose two T x T input tiles, one copy per pipeline stage
    (2 T^2 itemsize stages bytes), fit in smem_bytes; 0 if not even T = 1 fits."""
    T = 0
    while 2 * (2 * T or 1) ** 2 * itemsize * stages <= smem_bytes:
        T = 2 * T or 1
    return T


def check_largest_tile(fn) -> Report:
    """fn(itemsize, smem_bytes, stages) -> int: the largest power-of-two T whose two T x T input tiles fit in
    smem_bytes of shared memory, with one copy of each per pipeline stage (2 T^2 s bytes per stage).
    Example: fp32 (4 bytes), 228 KiB (Hopper), 1 stage -> 128 (128 KiB; 256 would need 512 KiB)."""
    rng = random.Random()
    cases = [
        dict(itemsize=4, smem_bytes=228 * 1024, stages=1),
        dict(itemsize=4, smem_bytes=100 * 1024, stages=1),
        dict(itemsize=2, smem_bytes=228 * 1024, stages=3),
        dict(itemsize=2, smem_bytes=64 * 1024, stages=2),
        dict(itemsize=1, smem_bytes=164 * 1024, stages=4),
        # exact fits: the tiles fill shared memory to the byte (a strict < instead of <= gets these wrong)
        dict(itemsize=4, smem_bytes=128 * 1024, stages=1),
        dict(itemsize=2, smem_bytes=192 * 1024, stages=3),
    ]
    cases += [
        dict(
            itemsize=rng.choice([1, 2, 4]),
            smem_bytes=rng.choice([48, 64, 100, 164, 228]) * 1024,
            stages=rng.randrange(1, 6),
        )
        for _ in range(20)
    ]

    def compare(case, got):
        s, smem, st = case.values()
        exp = _largest_tile_solution(s, smem, st)
        if not is_int(got):
            return f"expected an int T, got {_short(got)}"
        if got == exp:
            return None
        hints = []
        if got == _largest_tile_solution(s, smem, 1) and st > 1:
            hints.append(f"each of the {st} pipeline stages holds its own copy of both tiles")
        if got == _largest_tile_solution(s, 2 * smem, st):
            hints.append("there are TWO input tiles (one of A, one of B): 2 T^2 s bytes")
        if hints:
            return f"expected {exp}, got {got}: " + "; or ".join(hints)
        if got == _largest_tile_solution(s, smem // 1024, st) or got == _largest_tile_solution(s, smem * 1024, st):
            return f"expected {exp}, got {got}: smem_bytes is already in bytes"
        if got and got & (got - 1):
            return f"expected {exp}, got {got}: T must be a power of two"
        if got * 2 == exp and 2 * exp * exp * s * st == smem:
            return f"expected {exp}, got {got}: at T = {exp} the tiles fill shared memory exactly, and that fits (<=, not <)"
        return f"expected {exp}, got {got}"

    return run_cases("largest_tile", fn, cases, compare)


check_largest_tile.solution = _largest_tile_solution


#: (M, N, K) of the tiled-matmul exercise: none a multiple of a tile side, a single element, thin shapes. The
#: checker adds shapes drawn from [2, 129] and, in each of M, N and K, one past any tile side a learner may fix
#: (``_past_tiles``).
MATMUL_SHAPES = [(1, 1, 1), (17, 33, 70), (65, 47, 129), (100, 3, 37), (3, 100, 16)]


def _past_tiles(draw: Draw) -> list[tuple[int, int, int]]:
    """(M, N, K) thin shapes, one with each of M, N and K past ``cases.TILE_LIMIT`` (the others small, so that the
    interpreter runs few programs): a kernel that never tiles one of them (a whole row or column in one block, a
    fixed BLOCK_N of 1024) fails."""
    big, small = draw.past(TILE_LIMIT), [draw.size(2, 5), draw.size(2, 40)]
    return [(big, small[0], small[1]), (small[0], big, small[1]), (small[0], small[1], big)]


def k_tile_only(got: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> str:
    """Why ``got`` (M, N) differs from a @ b where it is the product over only the first or only the last tile of
    K (a tile side of 16 to 128, K longer than one tile): a loop over K that keeps one tile's dot (acc = tl.dot(a,
    b) each step), or stops after one step; "" where neither explains every element (within fp16's rounding)."""
    a64, b64, got = a.detach().double().cpu(), b.detach().double().cpu(), got.detach().double().cpu()
    K = a64.shape[1]
    for bk in (16, 32, 64, 128):
        if K <= bk:
            break
        last = (K - 1) // bk * bk
        for lo, hi, which in ((0, bk, "first"), (last, K, "last")):
            want, mag = a64[:, lo:hi] @ b64[lo:hi], a64[:, lo:hi].abs() @ b64[lo:hi].abs()
            if bool(((got - want).abs() <= 2.0**-10 * want.abs() + 2.0**-16 * mag + 1e-6).all()):
                return (
                    f": out is the product over the {which} K tile alone (k = {lo} to {hi - 1}): the loop over K must "
                    "add each tile's dot into acc (acc = tl.dot(a, b, acc)), not keep one"
                )
    return ""


def _check_matmul(name: str, fn, draw: Draw, shapes: list[tuple], explain=None, **check) -> Report:
    """The case loop of both matmul checkers: for each (M, N, K, more) of ``shapes`` (``more``: the case's other
    arguments), fresh fp16 a: (M, K) and b: (K, N) drawn by ``draw``; ``fn`` run on them by ``check_kernel`` (its
    options ``check``) into an fp16 out: (M, N), held to the float64 product within ``tolerances.matmul_bound``
    and, where the values are right, to computing each tile of C once (``work.matmul_redone`` on the record of
    ``work.watched``). ``explain(got, case)``: a reason added to a mismatch ("" for none). Every message names
    the shape; the report carries the draw's seed."""
    cases = [
        dict(a=draw.randn(M, K, dtype=torch.float16), b=draw.randn(K, N, dtype=torch.float16), **more)
        for M, N, K, more in shapes
    ]
    tally = work.Tally()

    def mismatch(got, ref, case):
        (M, K), N = case["a"].shape, case["b"].shape[1]
        msg = matmul_mismatch(got, case["a"], case["b"], ref)
        if msg is not None:
            why = (explain(got, case) if explain else "") or k_tile_only(got, case["a"], case["b"])
            return f"{msg}{why} (M, N, K = {M, N, K})"
        redone = work.matmul_redone(tally, M, N, K)
        return None if redone is None else redone + f" (M, N, K = {M, N, K})"  # a Mistake: its kind kept

    report = check_kernel(
        name,
        work.watched(fn, tally, kernels=True),
        cases,
        out=lambda c: ((c["a"].shape[0], c["b"].shape[1]), torch.float16),
        reference=lambda c: c["a"].double() @ c["b"].double(),
        mismatch=mismatch,
        **check,
    )
    return draw.stamp(report)


def check_tiled_matmul(fn, seed: int | None = None) -> Report:
    """fn(a, b, out) launches a Triton kernel that writes out = a @ b; a: (M, K), b: (K, N), out: (M, N), all fp16
    on gpulab.DEVICE, contiguous, any M, N, K. The checker owns a, b and out (guarded buffers, see
    ``kernelcheck``), runs awkward shapes (``MATMUL_SHAPES``, two drawn from [2, 129], three past any tile side,
    ``_past_tiles``) on fresh random inputs, all drawn by ``cases.Draw`` from ``seed`` (which the report prints),
    compares with the float64 product within ``tolerances.matmul_bound`` (fp16 rounding of C, fp32 accumulation),
    and names the mistake: a store or load past the edge (mask), too small a grid, wrong values, tiles computed
    more than once (``work.matmul_redone``)."""
    draw = Draw(seed)
    shapes = MATMUL_SHAPES + [(draw.size(2, 129), draw.size(2, 129), draw.size(2, 129)) for _ in range(2)]
    shapes += _past_tiles(draw)
    return _check_matmul(
        "tiled_matmul",
        fn,
        draw,
        [(M, N, K, {}) for M, N, K in shapes],
        unwritten=lambda c, mask, stores, launches: mistakes.swapped_grid(
            mask, (c["a"].shape[0], c["b"].shape[1]), launches
        ),
    )


check_tiled_matmul.solution = ex07_solutions.tiled_matmul
check_tiled_matmul.solution_module = ex07_solutions
check_tiled_matmul.hints = [
    "one program per BLOCK_M x BLOCK_N tile of C, the tiles numbered row by row: the program id, divided by the "
    "number of tile columns, gives the tile's row of tiles, and the remainder its column; launch one program a tile",
    "walk K in steps of BLOCK_K: each step loads a (BLOCK_M, BLOCK_K) tile of A and a (BLOCK_K, BLOCK_N) tile of "
    "B, masked on every edge they cross with 0 for what lies outside (a 0 adds nothing to a dot), and adds their "
    "tl.dot into an fp32 accumulator; the store is masked on M and N only",
]


#: (M, N, K, programs) of the persistent-matmul exercise: more tiles than programs (32 x 32 tiles), and one
#: program for everything.
PERSISTENT_CASES = [(65, 47, 129, 3), (100, 33, 40, 1), (17, 100, 70, 2), (96, 96, 16, 4)]


def accumulator_carried(got: torch.Tensor, a: torch.Tensor, b: torch.Tensor, programs: int) -> bool:
    """Whether ``got`` (M, N) is what a persistent matmul writes when each program's accumulator runs on from
    one tile to the next: its t-th tile the sum of the products of its tiles so far. Tried for square and
    rectangular tiles of 16 to 128 and tiles numbered by rows or by columns; True only where one explains every
    element (within fp16's rounding of the sum)."""
    a64, b64 = a.detach().double().cpu(), b.detach().double().cpu()
    c, mag = a64 @ b64, a64.abs() @ b64.abs()
    got = got.detach().double().cpu()
    M, N = c.shape
    for bm in (16, 32, 64, 128):
        for bn in (16, 32, 64, 128):
            tm, tn = -(-M // bm), -(-N // bn)
            if tm * tn <= programs:
                continue  # one tile a program: nothing carries
            for by_rows in (True, False):
                want, bound = torch.zeros(M, N, dtype=torch.float64), torch.zeros(M, N, dtype=torch.float64)
                for p in range(programs):
                    acc = torch.zeros(bm, bn, dtype=torch.float64)
                    acc_mag = torch.zeros(bm, bn, dtype=torch.float64)
                    for t in range(p, tm * tn, programs):
                        i, j = (t // tn, t % tn) if by_rows else (t % tm, t // tm)
                        rows, cols = slice(i * bm, min((i + 1) * bm, M)), slice(j * bn, min((j + 1) * bn, N))
                        h, w = rows.stop - rows.start, cols.stop - cols.start
                        acc[:h, :w] += c[rows, cols]
                        acc_mag[:h, :w] += mag[rows, cols]
                        want[rows, cols], bound[rows, cols] = acc[:h, :w], acc_mag[:h, :w]
                tol = 2.0**-10 * want.abs() + 2.0**-16 * bound + 1e-6
                if bool(((got - want).abs() <= tol).all()) and not torch.equal(want, c):
                    return True
    return False


def check_persistent_matmul(fn, seed: int | None = None) -> Report:
    """fn(a, b, programs, out) launches exactly ``programs`` programs of a Triton kernel that writes out = a @ b,
    each program looping over the output tiles ``pid, pid + programs, ...`` (a persistent kernel); a: (M, K),
    b: (K, N), out: (M, N), fp16 on gpulab.DEVICE. Shapes and programs in ``PERSISTENT_CASES`` (fewer programs
    than tiles, so a kernel that computes one tile per program leaves tiles unwritten), one drawn case and three past
    any tile side (``_past_tiles``; ``cases.Draw`` from ``seed``, which the report prints); guarded buffers and the
    float64 product as in ``check_tiled_matmul``. The launch shape is checked: one launch (``launches=1``: a launcher that
    covers the tiles in several launches of ``programs`` programs is not persistent) on grid ``(programs,)``; and
    the work: each tile computed once (``work.matmul_redone``: programs that step through the tiles by 1 from
    their pid compute and store tiles several times)."""
    draw = Draw(seed)
    shapes = PERSISTENT_CASES + [(draw.size(40, 129), draw.size(40, 129), draw.size(2, 129), draw.size(1, 4))]
    shapes += [(M, N, K, draw.size(2, 4)) for M, N, K in _past_tiles(draw)]

    def carried(got, case):
        if not accumulator_carried(got, case["a"], case["b"], case["programs"]):
            return ""
        return (
            ": each program's later tiles hold its earlier tiles' sums too, the accumulator is not zeroed per "
            "tile (acc = tl.zeros(...) inside the loop over tiles, before the loop over K)"
        )

    # a tile never written here means a program stopped after its first tile (the grid is prescribed)
    loop = (
        "; each program must loop over the tiles pid, pid + programs, pid + 2 programs, ... (only `programs` "
        "programs are launched)"
    )
    rep = _check_matmul(
        "persistent_matmul",
        fn,
        draw,
        [(M, N, K, {"programs": p}) for M, N, K, p in shapes],
        explain=carried,
        grid=lambda c: (c["programs"],),
        launches=1,
        notes={
            "grid_small": loop,
            "partial": loop,
            "launch_count": (
                ". A persistent kernel is one launch of `programs` programs that loop over the tiles; one launch "
                "per wave of `programs` tiles is the non-persistent kernel, each wave paying a launch and a tail"
            ),
        },
    )
    # the grid is prescribed, so kernelcheck's "launch more programs" does not apply: the loop is the fix
    rep.failures = [_GRID_ADVICE.sub(":", f) for f in rep.failures]
    return rep


_GRID_ADVICE = re.compile(
    r": the grid is too small(?: \(the grid was \([^)]*\)\))?; launch triton\.cdiv\(n, BLOCK\) programs"
)

check_persistent_matmul.solution = ex07b_solutions.persistent_matmul
check_persistent_matmul.solution_module = ex07b_solutions
check_persistent_matmul.hints = [
    "launch grid (programs,); in the kernel, num_tiles = cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), and each program "
    "computes tiles tl.program_id(0), + num_programs, + 2 num_programs, ...",
    "an outer loop over this program's tiles, stepping by the number of programs, around the body of your tiled "
    "kernel: the tile's row and column of tiles come from the tile number as pid_m and pid_n did, and the "
    "accumulator starts from zero for every tile",
]
