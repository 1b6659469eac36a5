"""Exercises of lesson 06 (coalescing): counting the sectors of a tile load, the sector model of a tiled
transpose, and two kernels on kernelcheck's guarded buffers: a strided read and a transpose coalesced on both
sides."""

from __future__ import annotations

import math
import random

import torch

from ..models.waves import cdiv
from . import Report, _short, close, ex06_solutions, is_int, kernelcheck, mistakes, run_cases
from .cases import TILE_LIMIT, Draw
from .kernelcheck import check_kernel


def _tile_sectors_solution(rows: int, cols: int, itemsize: int, row_bytes: int) -> int:
    """Distinct 32-byte sectors holding a byte of a rows x cols tile whose element (r, c) is at byte
    r * row_bytes + c * itemsize from a 128-byte-aligned base."""
    return len(
        {(r * row_bytes + c * itemsize + b) // 32 for r in range(rows) for c in range(cols) for b in range(itemsize)}
    )


def check_tile_sectors(fn) -> Report:
    """fn(rows, cols, itemsize, row_bytes) -> int: how many 32-byte sectors one load of a rows x cols tile
    touches, the tile taken from a row-major matrix whose rows are ``row_bytes`` apart (element (r, c) at byte
    ``r * row_bytes + c * itemsize`` from a 128-byte-aligned base). The lesson's ``sectors.warp_request`` counts
    one lane per element along a line; a tile is how a Triton program loads (lessons 06 and 07). Seed: a
    1 x 32 fp32 tile is the four 32-byte transactions; a 32 x 1 tile (a column) is 32."""
    rng = random.Random()
    cases = [
        dict(rows=1, cols=32, itemsize=4, row_bytes=65536),
        dict(rows=32, cols=1, itemsize=4, row_bytes=65536),
        dict(rows=4, cols=8, itemsize=4, row_bytes=65536),
        dict(rows=8, cols=4, itemsize=4, row_bytes=65536),
        dict(rows=4, cols=8, itemsize=4, row_bytes=32),  # rows back to back: one contiguous run
        dict(rows=4, cols=8, itemsize=4, row_bytes=36),  # rows start mid-sector
        dict(rows=16, cols=16, itemsize=2, row_bytes=4096),
    ]
    for _ in range(16):
        s = rng.choice([1, 2, 4, 8])
        cases.append(
            dict(
                rows=rng.choice([1, 2, 4, 8, 16, 32]),
                cols=rng.choice([1, 2, 4, 8, 16, 32, 64]),
                itemsize=s,
                row_bytes=rng.choice([s * rng.randrange(64, 4096), 32 * rng.randrange(1, 8), 4 * rng.randrange(9, 40)]),
            )
        )

    def compare(case, got):
        rows, cols, s, rb = case.values()
        exp = _tile_sectors_solution(rows, cols, s, rb)
        if not is_int(got):
            return f"expected an int number of sectors, got {_short(got)}"
        if got == exp:
            return None
        msg = f"expected {exp}, got {got}"
        if got == rows * cols and exp < got:
            return msg + ": elements that share a sector share its transaction; count distinct sectors"
        if got == rows * math.ceil(cols * s / 32) and rb % 32:
            return msg + ": count each row at its own address: a row that starts mid-sector spills into one more"
        if got == math.ceil(rows * cols * s / 32):
            return msg + ": the tile's rows are row_bytes apart, not back to back; each row touches its own sectors"
        if got == cols * math.ceil(rows * s / 32):
            return msg + ": the tile has `rows` rows of `cols` contiguous elements, not the other way round"
        return msg

    return run_cases("tile_sectors", fn, cases, compare)


check_tile_sectors.solution = _tile_sectors_solution


def _row_efficiency(width: int, itemsize: int) -> float:
    """Useful / moved bytes of one aligned row segment of ``width`` elements: whole 32-byte sectors are moved."""
    return width * itemsize / (32 * math.ceil(width * itemsize / 32))


def _tile_transpose_tbps_solution(block_m: int, block_n: int, itemsize: int, copy_tbps: float) -> float:
    """The sector model of a tiled transpose: A's tile is block_m rows of block_n contiguous elements, B's is
    block_n rows of block_m; each row segment is aligned and moves whole sectors. Time = (n s / e_read + n s /
    e_write) / B for 2 n s useful bytes."""
    e_r, e_w = _row_efficiency(block_n, itemsize), _row_efficiency(block_m, itemsize)
    return copy_tbps * 2 / (1 / e_r + 1 / e_w)


def check_tile_transpose_tbps(fn) -> Report:
    """fn(block_m, block_n, itemsize, copy_tbps) -> float: the sector model's effective bandwidth in TB/s
    (useful bytes: n read + n written, over the time) of a tiled transpose B = A^T whose programs load a
    block_m x block_n tile of A (block_m rows of block_n contiguous elements) and store its transpose as
    block_n rows of block_m contiguous elements of B; every row segment starts on a 32-byte boundary and the
    matrices' rows are far apart, so each segment moves whole sectors of its own. copy_tbps: the copy
    bandwidth (every byte useful). No printed function answers it: the lesson's model is the strided copy."""
    rng = random.Random()
    cases = [
        dict(block_m=32, block_n=32, itemsize=4, copy_tbps=4.0),
        dict(block_m=4, block_n=64, itemsize=4, copy_tbps=4.0),
        dict(block_m=64, block_n=2, itemsize=4, copy_tbps=4.0),
        dict(block_m=8, block_n=8, itemsize=2, copy_tbps=3.0),
        dict(block_m=1, block_n=1, itemsize=4, copy_tbps=4.0),
    ]
    cases += [
        dict(
            block_m=2 ** rng.randrange(0, 8),
            block_n=2 ** rng.randrange(0, 8),
            itemsize=rng.choice([1, 2, 4, 8]),
            copy_tbps=round(rng.uniform(0.5, 8), 2),
        )
        for _ in range(16)
    ]

    def compare(case, got):
        bm, bn, s, B = case.values()
        exp = _tile_transpose_tbps_solution(bm, bn, s, B)
        if close(got, exp, 1e-9):
            return None
        msg = f"expected {exp:.6g} TB/s, got {_short(got)}"
        e_r, e_w = _row_efficiency(bn, s), _row_efficiency(bm, s)
        if close(got, B, 1e-9):
            return msg + ": a tile row narrower than a sector still moves the whole 32-byte sector"
        if close(got, B * 2 / (1 / e_r + 1), 1e-9) or close(got, B * 2 / (1 + 1 / e_w), 1e-9):
            return msg + ": both sides count: the load's rows are block_n wide, the store's block_m wide"
        if close(got, B * min(e_r, e_w), 1e-9) or close(got, B * e_r * e_w, 1e-9):
            return msg + ": the read's bytes and the write's bytes add up in the time: B * 2 / (1/e_read + 1/e_write)"
        if close(got, B * 2 / (32 / (bn * s) + 32 / (bm * s)), 1e-9):
            return msg + ": whole sectors are moved: a row of 48 bytes moves 64, so e = useful / (32 ceil(bytes / 32))"
        return msg

    return run_cases("tile_transpose_tbps", fn, cases, compare)


check_tile_transpose_tbps.solution = _tile_transpose_tbps_solution


def _exact(what: str):
    """A mismatch that allows no difference (a copy moves bits): None, or the count and the first element."""

    def mismatch(got, ref, case):
        got = got.detach().double().cpu()
        bad = ~((got == ref) | (got.isnan() & ref.isnan()))
        if not bad.any():
            return None
        first = tuple(int(v) for v in bad.nonzero()[0])
        idx = ", ".join(map(str, first))
        msg = (
            f"{int(bad.sum())} of {ref.numel()} elements differ; first {what}[{idx}]: expected "
            f"{ref[first].item():.6g}, got {got[first].item():.6g}"
        )
        a = case.get("a")
        if a is not None and min(a.shape) > 1 and torch.equal(got, a.double().cpu().reshape(got.shape)):
            msg += " (out holds a's elements in a's own order, as a copy would; a transpose moves a[i, j] to b[j, i])"
        x, stride = case.get("x"), case.get("stride")
        if x is not None and stride and stride > 1 and torch.equal(got, x.double().cpu()[: got.numel()]):
            msg += ": out holds x[0], x[1], x[2], ... in order: the stride is not applied; the load reads x[k * stride]"
        return msg

    return mismatch


def check_strided_copy(fn, seed: int | None = None) -> Report:
    """fn(x, stride, out) launches a Triton kernel that writes out[k] = x[k * stride] for every k of out, which
    has cdiv(n, stride) elements (x[::stride]); x and out 1-D fp32 on gpulab.DEVICE. The checker owns x and
    out (guarded buffers, see ``kernelcheck``): awkward lengths, strides from 1 to larger than n; a copy moves
    bits, so the comparison is exact. Names a missing mask, too small a grid, a wrong element. The random case and
    the inputs are drawn by ``cases.Draw`` from ``seed``, which the report prints."""
    draw = Draw(seed)
    pairs = [
        (1, 1),
        (17, 1),
        (1000, 2),
        (1793, 3),
        (1000, 64),
        (17, 2000),
        (2 * kernelcheck.LONG_N, 2),
        (draw.size(2, 5000), draw.choice([2, 4, 8, 16, 33])),
    ]
    cases = [dict(x=draw.randn(n), stride=st) for n, st in pairs]
    return draw.stamp(
        check_kernel(
            "strided_copy",
            fn,
            cases,
            out=lambda c: ((cdiv(c["x"].numel(), c["stride"]),), torch.float32),
            reference=lambda c: c["x"].double()[:: c["stride"]],
            mismatch=_exact("out"),
            must_read=(),  # a strided read skips elements by design
        )
    )


check_strided_copy.solution = ex06_solutions.strided_copy
check_strided_copy.solution_module = ex06_solutions
check_strided_copy.hints = [
    "one program per BLOCK outputs, its offsets the program's id times BLOCK plus 0 .. BLOCK - 1, as in lesson "
    "01; the mask compares them with the number of outputs, not with n",
    "the output index k is where the store goes; the input index is k times the stride, so only the load's "
    "address is scaled, and the same mask guards both; the grid counts outputs, not inputs",
]


#: The probe's shape for a store with the wrong row stride: taller than wide, so that out[j, i] stored at
#: j * N + i (a's row stride, N, for out's, M) stays inside out and a kernel's stores land where they can be read.
PROBE_SHAPE = (40, 5)
#: The probe's shape for a load with the wrong row stride: wider than tall, so that a[i, j] loaded from i * M + j
#: (out's row stride, M, for a's, N) stays inside a and every element of out holds what that load read.
LOAD_PROBE_SHAPE = (5, 40)
_STRIDE_EFFECTS = ("past the end of out", "never written", "values differ")
_LOAD_STRIDE_EFFECTS = ("loaded past the end of a", "elements of a were never loaded", "values differ")


def _probe(fn, shape):
    """Run ``fn`` once in kernelcheck's pre-flight (a forked child, guarded buffers) on an a of ``shape`` whose
    values name their places (a[i, j] = i N + j, exact in fp32); returns (what was seen, out's Guarded), or None
    when the run timed out, died or raised."""
    M, N = shape
    a = torch.arange(M * N, dtype=torch.float32).reshape(M, N)
    host = dict(device="cpu", shared=True, guard_bytes=kernelcheck.PREFLIGHT_GUARD_BYTES)
    g_in, g_out = kernelcheck.Guarded(a.shape, a.dtype, fill=a, **host), kernelcheck.Guarded((N, M), a.dtype, **host)
    seen = kernelcheck.preflight_once(fn, {"a": g_in}, g_out)
    if seen.timeout or seen.died is not None or seen.raised:
        return None
    return seen, g_out


def _wrong_row_stride(fn) -> bool:
    """Whether ``fn`` stores out[j, i] at j * N + i, on a ``PROBE_SHAPE`` probe (``_probe``): True when something
    landed, every landed element is an a[i, j] whose (i, j) the wrong stride maps there, and one at least is not
    where it belongs."""
    M, N = PROBE_SHAPE
    probed = _probe(fn, PROBE_SHAPE)
    if probed is None:
        return False
    _, g_out = probed
    landed = ~g_out.unwritten()
    if not landed.any():
        return False
    i, j = torch.meshgrid(torch.arange(M), torch.arange(N), indexing="ij")
    wrong_at = (j * N + i).flatten()  # where the wrong stride puts a[i, j]
    value = (i * N + j).flatten().double()
    got = g_out.view.flatten().double()
    pos = landed.nonzero().flatten()
    fits = [bool(((wrong_at == p) & (value == got[p])).any()) for p in pos.tolist()]
    misplaced = (got[pos] != ((pos % M) * N + pos // M).double()).any()
    return all(fits) and bool(misplaced)


def _load_with_out_stride(fn) -> bool:
    """Whether ``fn`` loads a[i, j] from i * M + j (out's row stride for a's), on a ``LOAD_PROBE_SHAPE`` probe
    (``_probe``): True when every load stayed inside a, every element of out was written, and out[j, i] holds
    the value at flat index i * M + j of a for every (i, j), which differs from a transpose since M != N."""
    M, N = LOAD_PROBE_SHAPE
    probed = _probe(fn, LOAD_PROBE_SHAPE)
    if probed is None:
        return False
    seen, g_out = probed
    if seen.violations or g_out.unwritten().any():
        return False
    i, j = torch.meshgrid(torch.arange(M), torch.arange(N), indexing="ij")
    signature = torch.zeros(N, M, dtype=torch.float64)
    signature[j, i] = (i * M + j).double()  # out[j, i] = a.flatten()[i * M + j], and a's values are their indices
    return torch.equal(g_out.view.double(), signature)


def check_transpose(fn, seed: int | None = None) -> Report:
    """fn(a, out) launches a Triton kernel that writes out[j, i] = a[i, j]. a: (M, N) row-major fp32, fp16 or
    bf16 on gpulab.DEVICE; out: (N, M) row-major, same dtype. The checker owns a and out (guarded buffers, see
    ``kernelcheck``): shapes 1 x 1, thin ones, non-multiples of any tile, one drawn in [2, 129]^2, and a thin one
    wider and one taller than any tile a learner might fix (past ``cases.TILE_LIMIT``), all drawn by ``cases.Draw``
    from ``seed`` (which the report prints) with their inputs; a transpose moves bits, so the comparison is exact.
    Names a missing mask (a store past the end of out gets a message, not a crash), a
    grid that misses tiles, a store with a's row stride (found by a probe on a ``PROBE_SHAPE`` input, whose
    line replaces the stores past the end and the elements missed that the stride explains), a load with out's
    row stride (a probe on a ``LOAD_PROBE_SHAPE`` input; its line replaces the loads past the end of a and the
    elements never loaded), a wrong element."""
    draw = Draw(seed)
    shapes = [(1, 1), (1, 17), (17, 1), (33, 65), (64, 64), (draw.size(2, 5), draw.past(TILE_LIMIT))]
    shapes += [(draw.past(TILE_LIMIT), draw.size(2, 5)), (draw.size(2, 129), draw.size(2, 129))]
    dtypes = [torch.float32, torch.float32, torch.float32, torch.float16, torch.bfloat16, torch.float32]
    dtypes += [torch.float32, draw.choice([torch.float16, torch.bfloat16, torch.float32])]
    cases = [dict(a=draw.randn(*s, dtype=d)) for s, d in zip(shapes, dtypes)]
    edges = ": does the grid cover the partial tiles at the edges? (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))"
    rep = draw.stamp(
        check_kernel(
            "transpose",
            fn,
            cases,
            out=lambda c: ((c["a"].shape[1], c["a"].shape[0]), c["a"].dtype),
            reference=lambda c: c["a"].double().t(),
            mismatch=_exact("out"),
            notes={"partial": edges, "grid_small": edges},
            unwritten=lambda c, mask, stores, launches: mistakes.swapped_grid(
                mask, (c["a"].shape[1], c["a"].shape[0]), launches
            ),
        )
    )
    hit = [f for f in rep.failures if any(e in f for e in _STRIDE_EFFECTS)]
    if hit and _wrong_row_stride(fn):  # one mistake behind the stores past the end and the elements missed
        rest = [f for f in rep.failures if f not in hit]
        rep.failures = [
            "the store uses a's row stride: out is (N, M), so out[j, i] lives at j * M + i, not j * N + i; "
            f"a store at j * N + i lands past the end of out when N > M and on the wrong elements when N < M (a "
            f"mask hides the first, it fixes neither) [seen in {len(hit)} kind(s) of failure, and on a "
            f"{PROBE_SHAPE[0]} x {PROBE_SHAPE[1]} probe]"
        ] + rest
        return rep
    hit = [f for f in rep.failures if any(e in f for e in _LOAD_STRIDE_EFFECTS)]
    if hit and _load_with_out_stride(fn):  # one mistake behind the loads past the end and the elements never loaded
        rest = [f for f in rep.failures if f not in hit]
        rep.failures = [
            "the load steps from one row of a to the next by M, out's row length: a is (M, N), so how many "
            "elements lie between a[i, j] and a[i + 1, j]? With M the load runs past the end of a when M > N, and "
            "when M < N it reads the wrong elements and never loads some (a mask hides the first, it fixes "
            f"neither) [seen in {len(hit)} kind(s) of failure, and on a {LOAD_PROBE_SHAPE[0]} x "
            f"{LOAD_PROBE_SHAPE[1]} probe]"
        ] + rest
    return rep


check_transpose.solution = ex06_solutions.transpose
check_transpose.solution_module = ex06_solutions
check_transpose.hints = [
    "a 2-D grid of BLOCK x BLOCK tiles: load a tile of a along its rows (row i of a starts at i * N), "
    "store tl.trans(tile) along the rows of out; mask both with the row and column bounds",
    "out is (N, M): its row j starts at j * M, so the store's row stride is M, a's is N; the grid needs "
    "enough tiles for the partial ones at both edges, and the store's mask is the load's with the roles of "
    "the two index vectors swapped",
]
