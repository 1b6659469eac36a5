"""Exercises of lesson 00 (the machine and your first kernel): the first Triton kernel (a vector add, checked
on guarded buffers by ``kernelcheck``), the time of a copy at a given bandwidth, and the ridge point of a GPU."""

from __future__ import annotations

import numbers
import random

import torch

import gpulab

from .. import hardware, roofline
from . import Report, _short, close, ex00_kernels, kernelcheck, run_cases
from .kernelcheck import check_kernel

AWKWARD = [1, 17, 128, 1000, 1793]  # one element, less than a block, exactly one block, partial last blocks


def check_add(fn) -> Report:
    """fn(x, y, out) launches a Triton kernel that writes out = x + y; x, y and out: 1-D float32 of one length
    on gpulab.DEVICE, any length. The checker owns x, y and out (guarded buffers, see ``kernelcheck``), runs
    lengths 1, 17, 128, 1000, 1793, ``kernelcheck.LONG_N`` (more than one program of any block) and two
    random ones on fresh random inputs, and names the mistake (``kernelcheck``): a missing mask, too small a
    grid, an input written, no Triton launch, wrong values (against float64: an fp32 add is within one ulp)."""
    rng = random.Random()
    sizes = AWKWARD + [kernelcheck.LONG_N] + [rng.randrange(2, 5000) for _ in range(2)]
    cases = [dict(x=torch.randn(n, device=gpulab.DEVICE), y=torch.randn(n, device=gpulab.DEVICE)) for n in sizes]
    return check_kernel(
        "add",
        fn,
        cases,
        out=lambda c: (c["x"].shape, torch.float32),
        reference=lambda c: c["x"].double() + c["y"].double(),
    )


check_add.solution = ex00_kernels.add
check_add.solution_module = ex00_kernels
check_add.hints = [
    "start from the copy kernel above: one more pointer argument (y_ptr) and one more tl.load, then store x + y",
    "every load and the store take mask=offs < n, and the launcher runs triton.cdiv(n, BLOCK) programs: "
    "add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)",
]


def _copy_time_solution(n_bytes: float, tbps: float) -> float:
    """Time in ms to copy a buffer of n_bytes at tbps TB/s: the copy reads n_bytes and writes n_bytes."""
    return 2 * n_bytes / (tbps * 1e12) * 1e3


def check_copy_time(fn) -> Report:
    """fn(n_bytes, tbps) -> ms: the lower bound on the time to copy an n_bytes buffer to another at tbps TB/s."""
    rng = random.Random()
    cases = [dict(n_bytes=4 * 2**30, tbps=4.28), dict(n_bytes=1, tbps=1.0)] + [
        dict(n_bytes=rng.randrange(1, 10**11), tbps=round(rng.uniform(0.2, 5), 3)) for _ in range(20)
    ]

    def compare(case, got):
        exp = _copy_time_solution(**case)
        if isinstance(got, bool) or not isinstance(got, numbers.Real):
            return f"expected a number of ms, got {_short(got)}"
        if close(got, exp):
            return None
        if close(got, exp / 2):
            return f"expected {exp:.6g} ms, got {got!r}: half the answer; a copy reads AND writes every byte"
        if close(got, exp * 1e3) or close(got, exp / 1e3):
            return f"expected {exp:.6g} ms, got {got!r}: off by 1000; the answer is in milliseconds"
        return f"expected {exp:.6g} ms, got {got!r}"

    return run_cases("copy_time_ms", fn, cases, compare)


check_copy_time.solution = _copy_time_solution


def _ridge_solution(gpu: str, dtype: str) -> float | None:
    """Ridge point (FLOP/byte) of a dtype matmul on a GPU of the table; None where it has no such unit."""
    spec = hardware.get(gpu)
    try:
        return roofline.ridge_point(roofline.peak_for(spec, "matmul", dtype), spec.hbm_tbps)
    except LookupError:
        return None


def check_ridge(fn) -> Report:
    """fn(gpu, dtype) -> FLOP/byte (or None where the GPU lacks that dtype), for every GPU and dtype."""
    cases = [dict(gpu=g, dtype=d) for g in hardware.GPUS for d in hardware.DTYPES]
    random.shuffle(cases)

    def compare(case, got):
        exp = _ridge_solution(**case)
        if exp is None:
            return None if got is None else f"expected None ({case['gpu']} has no {case['dtype']} unit), got {got!r}"
        if got is None:
            return f"expected {exp:.4g} FLOP/B, got None"
        if close(got, exp * 1000) or close(got, exp / 1000):
            return f"expected {exp:.4g} FLOP/B, got {got!r}: off by 1000; TFLOP/s over TB/s is FLOP/B directly"
        return None if close(got, exp) else f"expected {exp:.4g} FLOP/B, got {got!r}"

    return run_cases("ridge", fn, cases, compare)


check_ridge.solution = _ridge_solution
