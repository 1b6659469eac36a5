"""Exercises of lesson 00 (the machine and your first kernel): the first Triton kernel (a vector add, checked
on guarded buffers by ``kernelcheck``), the time of a copy at a given bandwidth, and the ridge point of a GPU."""

from __future__ import annotations

import math
import numbers
import random

import torch

from ..core import hardware
from ..models import roofline
from . import Report, _short, close, ex00_solutions, is_int, kernelcheck, run_cases
from .cases import Draw
from .kernelcheck import check_kernel
from .kerneldiagnosis import Mistake

AWKWARD = [1, 17, 128, 1000, 1793]  # one element, less than a block, exactly one block, partial last blocks


def check_add(fn, seed: int | None = None) -> Report:
    """fn(x, y, out) launches a Triton kernel that writes out = x + y; x, y and out: 1-D float32 of one length
    on gpulab.DEVICE, any length. The checker owns x, y and out (guarded buffers, see ``kernelcheck``), runs
    lengths 1, 17, 128, 1000, 1793, ``kernelcheck.LONG_N`` (more than one program of any block) and two
    random ones in [2, 5000] on fresh random inputs (``cases.Draw`` from ``seed``, which the report prints), and
    names the mistake (``kernelcheck``): a missing mask, too small a grid, an input written, no Triton launch,
    wrong values (against float64: an fp32 add is within one ulp)."""
    draw = Draw(seed)
    sizes = AWKWARD + [kernelcheck.LONG_N] + [draw.size(2, 5000) for _ in range(2)]
    cases = [dict(x=draw.randn(n), y=draw.randn(n)) for n in sizes]
    return draw.stamp(
        check_kernel(
            "add",
            fn,
            cases,
            out=lambda c: (c["x"].shape, torch.float32),
            reference=lambda c: c["x"].double() + c["y"].double(),
        )
    )


check_add.solution = ex00_solutions.add
check_add.solution_module = ex00_solutions
check_add.hints = [
    "start from the copy kernel above: what does a second input need, in the kernel's arguments and in its body?",
    "the last block runs past n for every array the kernel touches, not only for out; and the grid must "
    "cover n with programs of BLOCK elements, rounding up",
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
check_ridge.hints = [
    "the ridge divides a peak by a bandwidth: which of the GPU's peaks does a matmul in this dtype run at, and in "
    "which units are the two numbers given?",
    "gpulab.core.hardware.get(gpu) gives the datasheet entry; look at what it holds for a dtype the GPU lacks, and "
    "return None there instead of raising",
]


def check_reverse(fn, seed: int | None = None) -> Report:
    """fn(x, out) launches a Triton kernel that writes out[i] = x[n - 1 - i]; x and out: 1-D float32 of one length
    n on gpulab.DEVICE, any length. The checker owns x and out (guarded buffers, see ``kernelcheck``), runs the
    lengths of ``check_add`` on fresh random inputs (distinct values, so that a shifted index cannot match), and
    names the mistake (``kernelcheck``): a load before the start of x or past its end (an index off by one), a
    missing mask, too small a grid, out not reversed, or reversed within each block only (``_reversed_by_block``;
    values compared exactly: a copy does no arithmetic). Cases drawn by ``cases.Draw`` from ``seed``, which the
    report prints."""
    draw = Draw(seed)
    sizes = AWKWARD + [kernelcheck.LONG_N] + [draw.size(2, 5000) for _ in range(2)]
    cases = [dict(x=draw.randn(n)) for n in sizes]

    def mismatch(got, ref, case):
        g = got.detach().double().cpu()
        bad = g != ref
        if not bad.any():
            return None
        i, x = int(bad.nonzero()[0]), case["x"].double().cpu()
        head = (
            f"{int(bad.sum())} of {ref.numel()} elements differ; first at index {i}: expected x[{x.numel() - 1 - i}] "
            f"= {ref[i].item():.7g}, got {g[i].item():.7g}"
        )
        if torch.equal(g, x):
            return head + ": out is a copy of x, not reversed"
        block = _reversed_by_block(g, x)
        if block:
            return Mistake(
                "values:by_block",
                f"values differ: out reverses x within each block of {block} elements, not across the whole of x: "
                f"out[0] must hold x's last element: count each index from x's end, not from its block's ({head})",
            )
        return head

    return draw.stamp(
        check_kernel(
            "reverse",
            fn,
            cases,
            out=lambda c: (c["x"].shape, torch.float32),
            reference=lambda c: c["x"].double().flip(0),
            mismatch=mismatch,
        )
    )


def _reversed_by_block(got: torch.Tensor, x: torch.Tensor) -> int | None:
    """The block (a power of two below n) within each whole one of which ``got`` holds x reversed, as a kernel
    does that reverses its own block (out[b B + j] = x[b B + B - 1 - j]); None where no block fits. got, x:
    float64, (n,). Only whole blocks are compared: the last, partial one reads past x's end and is masked."""
    n = x.numel()
    for k in range(1, 18):
        block = 2**k
        whole = n // block * block
        if block >= n or whole == 0:
            break
        if torch.equal(got[:whole].view(-1, block), x[:whole].view(-1, block).flip(1)):
            return block
    return None


check_reverse.solution = ex00_solutions.reverse
check_reverse.solution_module = ex00_solutions
check_reverse.hints = [
    "keep the copy kernel's offsets for the store: program pid writes out's block pid; only the address the "
    "value comes from changes. Which index of x lands in out[0], and which in out[n - 1]?",
    "the mask says which lanes are real elements of out; a real lane's source index is inside x too, so the same "
    "mask guards the load. Try your formula on n = 1 and on the last lane of a partial block",
]


def _loads_in_flight_solution(gpu: str, latency_ns: float, warps_per_sm: int, load_bytes: int) -> int:
    """The fewest loads each thread must keep in flight for a GPU of ``hardware.GPUS`` to reach its datasheet HBM
    bandwidth: by Little's law bandwidth x latency bytes in flight, shared by SMs x warps_per_sm x 32 threads,
    each load ``load_bytes`` bytes; rounded up to an int."""
    spec = hardware.get(gpu)
    need = spec.hbm_tbps * latency_ns * 1e3  # bytes in flight (TB/s x ns = 1e3 bytes)
    per_load = spec.sms * warps_per_sm * 32 * load_bytes  # bytes one load per thread puts in flight
    k = max(1, math.ceil(need / per_load))
    while k > 1 and (k - 1) * per_load >= need:  # guard against float rounding
        k -= 1
    return k


def check_loads_in_flight(fn) -> Report:
    """fn(gpu, latency_ns, warps_per_sm, load_bytes) -> int: the fewest loads of ``load_bytes`` bytes each thread
    must keep in flight for the whole GPU (``hardware.GPUS[gpu]``: its SMs and datasheet HBM bandwidth) to reach its
    HBM bandwidth, when each SM holds ``warps_per_sm`` warps of 32 threads and a load takes ``latency_ns`` ns
    (Little's law, section 6). At least 1. Every GPU of the table with its SM count, random latencies, occupancies
    and load widths (4-byte floats to 16-byte vectors)."""
    rng = random.Random()
    gpus = [g for g, s in hardware.GPUS.items() if s.sms]
    cases = [dict(gpu="H200", latency_ns=600.0, warps_per_sm=64, load_bytes=4)]
    cases += [
        dict(
            gpu=rng.choice(gpus),
            latency_ns=round(rng.uniform(300, 1000), 1),
            warps_per_sm=rng.choice([4, 8, 16, 32, 48, 64]),
            load_bytes=rng.choice([2, 4, 8, 16]),
        )
        for _ in range(25)
    ]

    def compare(case, got):
        exp = _loads_in_flight_solution(**case)
        if not is_int(got):
            return f"expected an int number of loads, got {_short(got)}"
        if got == exp:
            return None
        spec, lat, w, s = hardware.get(case["gpu"]), case["latency_ns"], case["warps_per_sm"], case["load_bytes"]
        need = spec.hbm_tbps * lat * 1e3
        head = f"expected {exp} loads per thread, got {got}"
        if got == exp - 1 and exp > 1:
            return head + ": with one fewer the bytes in flight fall short; round up"
        if got == max(1, math.ceil(need / (spec.sms * w * s))):
            return head + ": a warp is 32 threads, each with its own loads in flight"
        if got == max(1, math.ceil(need / (w * 32 * s))):
            return head + f": the bytes in flight are shared by all {spec.sms} SMs"
        if got == max(1, math.ceil(need / 1e3 / (spec.sms * w * 32 * s))) or got == math.ceil(
            need * 1e3 / (spec.sms * w * 32 * s)
        ):
            return head + ": check the units: TB/s x ns = 1e3 bytes"
        return head

    return run_cases("loads_in_flight", fn, cases, compare)


check_loads_in_flight.solution = _loads_in_flight_solution
check_loads_in_flight.hints = [
    "Little's law gives the bytes the whole GPU must have in flight; then ask who holds them: how many threads "
    "are resident on the GPU at this occupancy?",
    "one load in flight per thread is load_bytes bytes per thread; the answer is a count of loads, so round up",
]
