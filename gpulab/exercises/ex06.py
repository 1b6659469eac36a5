"""Exercises of lesson 06 (coalescing): counting sectors, the strided-copy model, and two kernels on
kernelcheck's guarded buffers: a strided read and a transpose coalesced on both sides."""

from __future__ import annotations

import math
import random

import torch

import gpulab

from . import Report, _short, close, ex06_kernels, is_int, kernelcheck, run_cases
from .kernelcheck import check_kernel


def _sectors_touched_solution(itemsize: int, stride: int, offset: int) -> int:
    """Distinct 32-byte sectors that hold a byte some lane reads; lane k reads at offset + k * stride * itemsize."""
    sectors = set()
    for k in range(32):
        start = offset + k * stride * itemsize
        for byte in range(start, start + itemsize):
            sectors.add(byte // 32)
    return len(sectors)


def check_sectors_touched(fn) -> Report:
    """fn(itemsize, stride, offset) -> int: how many 32-byte sectors a warp's 32 lanes touch when lane k reads
    ``itemsize`` bytes at byte address ``offset + k * stride * itemsize`` (offset a multiple of itemsize, from
    a 128-byte-aligned base). Seed: (4, 1, 0) -> 4, the CUDA Best Practices Guide's four 32-byte transactions."""
    rng = random.Random()
    cases = [
        dict(itemsize=4, stride=1, offset=0),
        dict(itemsize=4, stride=1, offset=4),
        dict(itemsize=4, stride=2, offset=0),
        dict(itemsize=4, stride=64, offset=0),
        dict(itemsize=2, stride=3, offset=6),
        dict(itemsize=16, stride=1, offset=16),
    ]
    for _ in range(16):
        s = rng.choice([1, 2, 4, 8, 16])
        cases.append(
            dict(itemsize=s, stride=rng.choice([1, 2, 3, 4, 5, 8, 16, 33, 64]), offset=s * rng.randrange(0, 32))
        )

    def compare(case, got):
        s, st, o = case["itemsize"], case["stride"], case["offset"]
        exp = _sectors_touched_solution(s, st, o)
        if not is_int(got):
            return f"expected an int number of sectors, got {_short(got)}"
        if got == exp:
            return None
        msg = f"expected {exp}, got {got}"
        if got == 32 and exp < 32:
            return msg + ": lanes whose bytes share a sector share its transaction; count distinct sectors, not lanes"
        if got == _sectors_touched_solution(s, st, 0) and o:
            return (
                msg + ": the offset shifts every lane's address; a warp that starts mid-sector can spill into one more"
            )
        if got == len({(o + k * st * s) // 128 for k in range(32)}):
            return msg + ": a sector is 32 bytes; that is the count of 128-byte lines"
        if got == math.ceil((31 * st * s + s) / 32):
            return (
                msg
                + ": count only the sectors that hold a byte some lane reads, not the span between the first and last"
            )
        if got == _sectors_touched_solution(s, 1, o):
            return msg + ": lane k reads at offset + k * stride * itemsize; the stride spreads the lanes out"
        return msg

    return run_cases("sectors_touched", fn, cases, compare)


check_sectors_touched.solution = _sectors_touched_solution


def _strided_copy_tbps_solution(stride: int, itemsize: int, copy_tbps: float) -> float:
    """y[k] = x[k * stride]: a warp's read moves (distinct sectors) x 32 bytes for 32 * itemsize useful ones; the
    write is dense. Per element, itemsize / e_read bytes are read and itemsize written, for 2 * itemsize useful."""
    sectors = len({(k * stride * itemsize + b) // 32 for k in range(32) for b in range(itemsize)})
    e_read = 32 * itemsize / (32 * sectors)  # useful bytes / bytes moved, one warp's read
    return copy_tbps * 2 * itemsize / (itemsize / e_read + itemsize)


def check_strided_copy_tbps(fn) -> Report:
    """fn(stride, itemsize, copy_tbps) -> float: the sector model's effective bandwidth in TB/s (useful bytes:
    n read + n written, over the time) of y[k] = x[k * stride], aligned, for a GPU that copies at copy_tbps.
    The read is strided; the write is dense."""
    rng = random.Random()
    cases = [
        dict(stride=1, itemsize=4, copy_tbps=4.0),
        dict(stride=2, itemsize=4, copy_tbps=4.0),
        dict(stride=64, itemsize=4, copy_tbps=4.0),
        dict(stride=3, itemsize=2, copy_tbps=3.0),
    ]
    cases += [
        dict(
            stride=rng.choice([1, 2, 3, 4, 8, 16, 32, 64, 100]),
            itemsize=rng.choice([1, 2, 4, 8]),
            copy_tbps=round(rng.uniform(0.5, 8), 2),
        )
        for _ in range(16)
    ]

    def compare(case, got):
        st, s, B = case["stride"], case["itemsize"], case["copy_tbps"]
        exp = _strided_copy_tbps_solution(st, s, B)
        if close(got, exp, 1e-9):
            return None
        msg = f"expected {exp:.6g} TB/s, got {_short(got)}"
        e = 32 * s / (_sectors_touched_solution(s, st, 0) * 32)
        if close(got, B * e, 1e-9):
            return (
                msg
                + ": only the read is strided; the dense write moves exactly its useful bytes (time = n*s/e + n*s over B)"
            )
        if close(got, B / st, 1e-9) or close(got, B * 2 / (st + 1), 1e-9):
            return msg + (
                ": once stride * itemsize >= 32 each element already costs a whole sector; it cannot get "
                "worse than itemsize / 32"
            )
        if close(got, B * e / 2, 1e-9) or close(got, B / (1 / e + 1), 1e-9):
            return msg + ": count useful bytes of both the read and the write (2 n itemsize)"
        return msg

    return run_cases("strided_copy_tbps", fn, cases, compare)


check_strided_copy_tbps.solution = _strided_copy_tbps_solution


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
        return msg

    return mismatch


def check_strided_copy(fn) -> Report:
    """fn(x, stride, out) launches a Triton kernel that writes out[k] = x[k * stride] for every k of out, which
    has cdiv(n, stride) elements (x[::stride]); x and out 1-D fp32 on gpulab.DEVICE. The checker owns x and
    out (guarded buffers, see ``kernelcheck``): awkward lengths, strides from 1 to larger than n; a copy moves
    bits, so the comparison is exact. Names a missing mask, too small a grid, a wrong element."""
    rng = random.Random()
    pairs = [
        (1, 1),
        (17, 1),
        (1000, 2),
        (1793, 3),
        (1000, 64),
        (17, 2000),
        (2 * kernelcheck.LONG_N, 2),
        (rng.randrange(2, 5000), rng.choice([2, 4, 8, 16, 33])),
    ]
    cases = [dict(x=torch.randn(n, device=gpulab.DEVICE), stride=st) for n, st in pairs]
    return check_kernel(
        "strided_copy",
        fn,
        cases,
        out=lambda c: ((-(-c["x"].numel() // c["stride"]),), torch.float32),
        reference=lambda c: c["x"].double()[:: c["stride"]],
        mismatch=_exact("out"),
        must_read=(),  # a strided read skips elements by design
    )


check_strided_copy.solution = ex06_kernels.strided_copy
check_strided_copy.solution_module = ex06_kernels
check_strided_copy.hints = [
    "one program per BLOCK outputs, its offsets the program's id times BLOCK plus 0 .. BLOCK - 1, as in lesson "
    "01; the mask compares them with the number of outputs, not with n",
    "the output index k is where the store goes; the input index is k times the stride, so only the load's "
    "address is scaled, and the same mask guards both; the grid counts outputs, not inputs",
]


def check_transpose(fn) -> Report:
    """fn(a, out) launches a Triton kernel that writes out[j, i] = a[i, j]. a: (M, N) row-major fp32, fp16 or
    bf16 on gpulab.DEVICE; out: (N, M) row-major, same dtype. The checker owns a and out (guarded buffers, see
    ``kernelcheck``): shapes 1 x 1, thin ones, one wider than any tile (3 x 1100) and non-multiples of any tile; a transpose moves bits, so the
    comparison is exact. Names a missing mask (a store past the end of out gets a message, not a crash), a
    grid that misses tiles, a wrong element."""
    rng = random.Random()
    shapes = [(1, 1), (1, 17), (17, 1), (33, 65), (64, 64), (3, 1100), (rng.randrange(2, 130), rng.randrange(2, 130))]
    dtypes = [
        torch.float32,
        torch.float32,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        rng.choice([torch.float16, torch.bfloat16, torch.float32]),
    ]
    cases = [dict(a=torch.randn(*s, device=gpulab.DEVICE).to(d)) for s, d in zip(shapes, dtypes)]
    edges = ": does the grid cover the partial tiles at the edges? (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))"
    return check_kernel(
        "transpose",
        fn,
        cases,
        out=lambda c: ((c["a"].shape[1], c["a"].shape[0]), c["a"].dtype),
        reference=lambda c: c["a"].double().t(),
        mismatch=_exact("out"),
        notes={"partial": edges, "grid_small": edges},
    )


check_transpose.solution = ex06_kernels.transpose
check_transpose.solution_module = ex06_kernels
check_transpose.hints = [
    "a 2-D grid of BLOCK x BLOCK tiles: load a tile of a along its rows (row i of a starts at i * N), "
    "store tl.trans(tile) along the rows of out; mask both with the row and column bounds",
    "out is (N, M): its row j starts at j * M, so the store's row stride is M, a's is N; the grid needs "
    "enough tiles for the partial ones at both edges, and the store's mask is the load's with the roles of "
    "the two index vectors swapped",
]
