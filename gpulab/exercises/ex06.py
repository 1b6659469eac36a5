"""Exercises of lesson 06 (coalescing)."""
from __future__ import annotations

import math
import random

import torch

import gpulab

from . import Report, _short, close, ex06_kernels, is_int, run_cases


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
    cases = [dict(itemsize=4, stride=1, offset=0), dict(itemsize=4, stride=1, offset=4),
             dict(itemsize=4, stride=2, offset=0), dict(itemsize=4, stride=64, offset=0),
             dict(itemsize=2, stride=3, offset=6), dict(itemsize=16, stride=1, offset=16)]
    for _ in range(16):
        s = rng.choice([1, 2, 4, 8, 16])
        cases.append(dict(itemsize=s, stride=rng.choice([1, 2, 3, 4, 5, 8, 16, 33, 64]), offset=s * rng.randrange(0, 32)))

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
            return msg + ": the offset shifts every lane's address; a warp that starts mid-sector can spill into one more"
        if got == len({(o + k * st * s) // 128 for k in range(32)}):
            return msg + ": a sector is 32 bytes; that is the count of 128-byte lines"
        if got == math.ceil((31 * st * s + s) / 32):
            return msg + ": count only the sectors that hold a byte some lane reads, not the span between the first and last"
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
    cases = [dict(stride=1, itemsize=4, copy_tbps=4.0), dict(stride=2, itemsize=4, copy_tbps=4.0),
             dict(stride=64, itemsize=4, copy_tbps=4.0), dict(stride=3, itemsize=2, copy_tbps=3.0)]
    cases += [dict(stride=rng.choice([1, 2, 3, 4, 8, 16, 32, 64, 100]), itemsize=rng.choice([1, 2, 4, 8]),
                   copy_tbps=round(rng.uniform(0.5, 8), 2)) for _ in range(16)]

    def compare(case, got):
        st, s, B = case["stride"], case["itemsize"], case["copy_tbps"]
        exp = _strided_copy_tbps_solution(st, s, B)
        if close(got, exp, 1e-9):
            return None
        msg = f"expected {exp:.6g} TB/s, got {_short(got)}"
        e = 32 * s / (_sectors_touched_solution(s, st, 0) * 32)
        if close(got, B * e, 1e-9):
            return msg + ": only the read is strided; the dense write moves exactly its useful bytes (time = n*s/e + n*s over B)"
        if close(got, B / st, 1e-9) or close(got, B * 2 / (st + 1), 1e-9):
            return msg + (": once stride * itemsize >= 32 each element already costs a whole sector; it cannot get "
                          "worse than itemsize / 32")
        if close(got, B * e / 2, 1e-9) or close(got, B / (1 / e + 1), 1e-9):
            return msg + ": count useful bytes of both the read and the write (2 n itemsize)"
        return msg

    return run_cases("strided_copy_tbps", fn, cases, compare)


check_strided_copy_tbps.solution = _strided_copy_tbps_solution


def check_transpose(fn) -> Report:
    """fn(a) -> b, a new row-major (N, M) tensor with b[j, i] = a[i, j], computed by a Triton kernel. a: (M, N)
    contiguous fp32/fp16/bf16 on gpulab.DEVICE; shapes include 1 x 1, thin ones and non-multiples of any tile.
    A transpose moves bits, so the comparison is exact."""
    rng = random.Random()
    shapes = [(1, 1), (1, 17), (17, 1), (33, 65), (64, 64), (rng.randrange(2, 130), rng.randrange(2, 130))]
    dtypes = [torch.float32, torch.float32, torch.float16, torch.bfloat16, torch.float32, rng.choice(
        [torch.float16, torch.bfloat16, torch.float32])]
    cases = [dict(a=torch.randn(*s, device=gpulab.DEVICE).to(d)) for s, d in zip(shapes, dtypes)]

    def compare(case, got):
        a = case["a"]
        M, N = a.shape
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor, got {type(got).__name__}"
        if got.dtype != a.dtype:
            return f"expected dtype {a.dtype}, got {got.dtype}: a transpose moves elements, it does not convert them"
        if tuple(got.shape) != (N, M):
            hint = ": that is a's shape; b = a^T is (N, M)" if tuple(got.shape) == (M, N) else ""
            return f"expected shape {(N, M)}, got {tuple(got.shape)}{hint}"
        if not got.is_contiguous():
            return "got a non-contiguous view (a.t()?): the exercise is to move the bytes into a new row-major tensor"
        exp = a.t()
        bad = (got.float().cpu() != exp.float().cpu()) & ~(got.float().cpu().isnan() & exp.float().cpu().isnan())
        if not bad.any():
            return None
        j, i = (int(v) for v in bad.nonzero()[0])
        msg = (f"a of shape {(M, N)}, {a.dtype}: {int(bad.sum())} of {a.numel()} elements wrong, first b[{j}, {i}]: "
               f"expected {exp[j, i].item():.6g}, got {got[j, i].item():.6g}")
        if got.float().isnan().any():
            msg += " (NaN: elements left unwritten; does the grid cover every tile, including the partial ones at the edges?)"
        elif M > 1 and N > 1 and torch.equal(got.cpu(), a.cpu().reshape(N, M)):
            msg += (" (b holds a's elements in a's own order, as a reshape or a copy would; a transpose moves "
                    "a[i, j] to b[j, i])")
        return msg

    return run_cases("transpose", fn, cases, compare)


check_transpose.solution = ex06_kernels.transpose
check_transpose.solution_module = ex06_kernels
