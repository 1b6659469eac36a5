"""Exercises of lesson 01 (roofline)."""

from __future__ import annotations

import math
import random

import torch

from ..models import roofline
from . import Report, _short, clip, close, ex01_solutions, is_int, kernelcheck, run_cases
from .cases import Draw
from .kernelcheck import check_kernel

AWKWARD = [1, 17, 1000, 1793]


def _as_returned(v) -> str:
    """``v`` as the learner's function returned it, with its type: 600.0 stays "600.0 (a float)", where a rounded
    "600" would read as the int asked for."""
    kind = type(v).__name__
    return f"{clip(repr(v), 80)} ({'an' if kind[0] in 'aeiou' else 'a'} {kind})"


def _matmul_counts_solution(M: int, N: int, K: int, itemsize: int) -> tuple[int, int]:
    """(FLOPs, bytes) of C = A @ B with A: (M, K), B: (K, N): one multiply and one add per (m, n, k); A and B
    read once and C written once, the least any implementation moves."""
    return 2 * M * N * K, (M * K + K * N + M * N) * itemsize


def check_matmul_counts(fn) -> Report:
    """fn(M, N, K, itemsize) -> (flops, bytes) for C = A @ B, A: (M, K), B: (K, N), C: (M, N)."""
    rng = random.Random()
    cases = [
        dict(M=m, N=n, K=k, itemsize=s)
        for m, n, k, s in [(8192, 8192, 8192, 2), (1, 1, 1, 4), (1000, 999, 1001, 2), (17, 1, 1793, 4)]
    ]
    cases += [
        dict(
            M=rng.choice(AWKWARD + [rng.randrange(1, 5000)]),
            N=rng.randrange(1, 5000),
            K=rng.randrange(1, 5000),
            itemsize=rng.choice([1, 2, 4]),
        )
        for _ in range(20)
    ]

    def compare(case, got):
        ef, eb = _matmul_counts_solution(**case)
        if not (isinstance(got, (tuple, list)) and len(got) == 2 and all(is_int(v) for v in got)):
            return f"expected a pair of ints (flops, bytes), got {_short(got)}"
        gf, gb = int(got[0]), int(got[1])
        msgs = []
        if gf != ef:
            hint = ": a multiply-add is 2 FLOPs" if gf * 2 == ef else ""
            msgs.append(f"FLOPs expected {ef}, got {gf}{hint}")
        if gb != eb:
            hint = ""
            if gb == (case["M"] * case["K"] + case["K"] * case["N"]) * case["itemsize"]:
                hint = ": C must be written too"
            elif gb * case["itemsize"] == eb * 1 and case["itemsize"] != 1:
                hint = ": multiply elements by itemsize to get bytes"
            msgs.append(f"bytes expected {eb}, got {gb}{hint}")
        return "; ".join(msgs) or None

    return run_cases("matmul_counts", fn, cases, compare)


check_matmul_counts.solution = _matmul_counts_solution


def _bound_solution(flops: float, bytes_moved: float, peak_tflops: float, hbm_tbps: float) -> float:
    """Roofline lower bound in ms: max(F / C, D / B)."""
    return max(flops / (peak_tflops * 1e12), bytes_moved / (hbm_tbps * 1e12)) * 1e3


def check_bound_ms(fn) -> Report:
    """fn(flops, bytes_moved, peak_tflops, hbm_tbps) -> ms, the roofline lower bound; includes the seed cases."""
    rng = random.Random()
    cases = [
        dict(flops=1e12, bytes_moved=100e9, peak_tflops=100, hbm_tbps=1),
        dict(flops=1e12, bytes_moved=10e9, peak_tflops=100, hbm_tbps=1),
    ]
    cases += [
        dict(
            flops=10 ** rng.uniform(6, 15),
            bytes_moved=10 ** rng.uniform(6, 12),
            peak_tflops=10 ** rng.uniform(0, 3.3),
            hbm_tbps=rng.uniform(0.3, 5),
        )
        for _ in range(30)
    ]

    def compare(case, got):
        exp = _bound_solution(**case)
        if close(got, exp):
            return None
        b = roofline.bound(**case)
        if close(got, min(b.compute_ms, b.memory_ms)):
            return f"expected {exp:.6g} ms, got {got!r}: that is the smaller term; the bound is the larger"
        if close(got, b.compute_ms + b.memory_ms):
            return f"expected {exp:.6g} ms, got {got!r}: the sum assumes no overlap; the bound is the max"
        return f"expected {exp:.6g} ms, got {got!r}"

    return run_cases("bound_ms", fn, cases, compare)


check_bound_ms.solution = _bound_solution


def _crossing_n_solution(peak_tflops: float, hbm_tbps: float, itemsize: int) -> int:
    """The smallest N at which an N x N x N matmul (2N^3 FLOPs, 3N^2 elements of ``itemsize`` bytes moved)
    reaches the ridge: 2N^3 / (3 N^2 itemsize) = 2N / (3 itemsize) >= C / B."""
    n = max(1, math.ceil(1.5 * itemsize * peak_tflops / hbm_tbps))
    while n > 1 and 2 * (n - 1) * hbm_tbps >= 3 * itemsize * peak_tflops:  # guard against float rounding
        n -= 1
    while 2 * n * hbm_tbps < 3 * itemsize * peak_tflops:
        n += 1
    return n


def check_crossing_n(fn) -> Report:
    """fn(peak_tflops, hbm_tbps, itemsize) -> the smallest int N at which an N x N x N matmul is no longer
    memory-bound (its intensity reaches the ridge C / B), counting the least traffic: A and B read once, C
    written once. Cases: the seed accelerator, the H200's datasheet and recorded ceilings, random machines."""
    rng = random.Random()
    cases = [
        dict(peak_tflops=100.0, hbm_tbps=1.0, itemsize=4),
        dict(peak_tflops=989.5, hbm_tbps=4.8, itemsize=2),
        dict(peak_tflops=671.4296015826824, hbm_tbps=4.281164755600542, itemsize=2),
    ]
    cases += [
        dict(peak_tflops=10 ** rng.uniform(0.5, 3.5), hbm_tbps=rng.uniform(0.3, 8), itemsize=rng.choice([1, 2, 4]))
        for _ in range(20)
    ]

    def compare(case, got):
        exp = _crossing_n_solution(**case)
        if not is_int(got):
            return f"expected an int N, got {_as_returned(got)}: N counts elements, a whole number; return an int"
        if got == exp:
            return None
        c, b, s = case["peak_tflops"], case["hbm_tbps"], case["itemsize"]
        head = f"expected N = {exp}, got {got}"
        if got == exp - 1:
            return head + ": at N - 1 the intensity is still below the ridge; round up, not down"
        if got == _crossing_n_solution(c, b, 1) and s != 1:
            return head + ": the bytes are elements x itemsize"
        if got == max(1, math.ceil(s * c / b)):
            return head + ": C is written too: 3N^2 elements move, not 2N^2"
        if got == max(1, math.ceil(3 * s * c / b)):
            return head + ": a multiply-add is 2 FLOPs: 2N^3"
        return head

    return run_cases("crossing_n", fn, cases, compare)


check_crossing_n.solution = _crossing_n_solution
check_crossing_n.hints = [
    "write the intensity of an N x N x N matmul as a function of N (FLOPs over least bytes), then ask when it "
    "reaches C / B",
    "the intensity grows in proportion to N: solve for N, and remember that N is a whole number and that the "
    "matmul must reach the ridge, not stop just short of it",
]


def check_scale_add(fn, seed: int | None = None) -> Report:
    """fn(x, a, b, out) launches a Triton kernel that writes out = a * x + b; x and out: 1-D fp32 on
    gpulab.DEVICE, any length. The checker owns x and out (guarded buffers, see ``kernelcheck``), runs awkward
    lengths (1, 17, 1000, 1793, ``kernelcheck.LONG_N``, and random ones) on fresh random inputs, and names the
    mistake (``kernelcheck``): a missing mask, too small a grid, an input written, no Triton launch, wrong
    values (against float64, one fp32 ulp plus the rounding of a * x). Cases drawn by ``cases.Draw`` from
    ``seed``, which the report prints."""
    draw = Draw(seed)
    sizes = AWKWARD + [kernelcheck.LONG_N] + [draw.size(2, 5000) for _ in range(2)]
    cases = [dict(x=draw.randn(n), a=draw.rng.uniform(-3, 3), b=draw.rng.uniform(-3, 3)) for n in sizes]

    def mismatch(got, ref, case):
        # a * x + b in fp32: a and b are rounded to fp32 when launched, then one rounding (an FMA on a GPU) or two
        # (multiply, then add, in the interpreter); each is at most 2^-24 relative to its value, so the result is
        # within 2^-22 (|a x| + |b|) of the exact value, even where a x and b cancel
        x, a, b = case["x"].double().cpu(), case["a"], case["b"]
        g = got.double().cpu()

        def within(want, scale):
            return (g - want).abs() <= 2.0**-22 * scale

        bad = ~within(ref, (a * x).abs() + abs(b))
        if not bad.any():
            return None
        i = int(bad.nonzero()[0])
        head = (
            f"{int(bad.sum())} of {ref.numel()} elements differ; first at index {i}: expected "
            f"{ref[i].item():.7g}, got {got[i].item():.7g}"
        )
        if within(b * x + a, (b * x).abs() + abs(a)).all():
            return f"{head}: out = b * x + a, a and b swapped (the order the launcher passes them, or the formula)"
        return head

    return draw.stamp(
        check_kernel(
            "scale_add",
            fn,
            cases,
            out=lambda c: (c["x"].shape, torch.float32),
            reference=lambda c: c["a"] * c["x"].double() + c["b"],
            mismatch=mismatch,
        )
    )


check_scale_add.solution = ex01_solutions.scale_add
check_scale_add.solution_module = ex01_solutions
check_scale_add.hints = [
    "a and b are plain Python floats: pass them to the kernel as scalar arguments, beside the pointers and n; "
    "each program reads its block of x and writes the same block of out",
    "the last program runs past n: both its load and its store need the guard; count the programs so that they cover n",
]


def _batch_to_ridge_solution(K: int, N: int, itemsize: int, peak_tflops: float, hbm_tbps: float) -> int | None:
    """The smallest batch B at which a linear layer y = x @ W, x: (B, K), W: (K, N), reaches the ridge C / B_hbm,
    counting the least traffic ((B K + K N + B N) itemsize bytes for 2 B K N FLOPs); None where no batch does:
    the intensity rises with B towards 2 K N / ((K + N) itemsize), the weights' intensity when x and y are free.
    2 B K N >= r s (B K + K N + B N), r = C / B_hbm, gives B (2 K N - r s (K + N)) >= r s K N."""
    r = peak_tflops / hbm_tbps
    s = itemsize
    denom = 2 * K * N - r * s * (K + N)
    if denom <= 0:
        return None

    def reaches(b):
        return 2 * b * K * N >= r * s * (b * K + K * N + b * N)

    b = max(1, math.ceil(r * s * K * N / denom))
    while b > 1 and reaches(b - 1):  # guard against float rounding
        b -= 1
    while not reaches(b):
        b += 1
    return b


def check_batch_to_ridge(fn) -> Report:
    """fn(K, N, itemsize, peak_tflops, hbm_tbps) -> int or None: the smallest batch B at which y = x @ W (x: (B,
    K), W: (K, N), y: (B, N), each read or written once) is no longer memory-bound, its intensity reaching the
    ridge peak_tflops / hbm_tbps; None where no batch reaches it. Transformer-sized layers on the seed
    accelerator, the H200's datasheet, and random machines, some so narrow that no batch suffices."""
    rng = random.Random()
    cases = [
        dict(K=4096, N=4096, itemsize=2, peak_tflops=989.5, hbm_tbps=4.8),
        dict(K=8192, N=28672, itemsize=1, peak_tflops=1979.0, hbm_tbps=4.8),
        dict(K=64, N=64, itemsize=2, peak_tflops=989.5, hbm_tbps=4.8),  # no batch: at most 32 FLOP/B
        dict(K=1000, N=1, itemsize=4, peak_tflops=100.0, hbm_tbps=1.0),
    ]
    cases += [
        dict(
            K=rng.choice([64, 256, 768, 1024, 4096, 8192, rng.randrange(1, 20000)]),
            N=rng.choice([64, 768, 3072, 4096, 14336, rng.randrange(1, 20000)]),
            itemsize=rng.choice([1, 2, 4]),
            peak_tflops=10 ** rng.uniform(1, 3.5),
            hbm_tbps=rng.uniform(0.3, 8),
        )
        for _ in range(25)
    ]

    def compare(case, got):
        exp = _batch_to_ridge_solution(**case)
        K, N, s, C, B = case.values()
        if exp is None:
            if got is None:
                return None
            return (
                f"expected None, got {_short(got)}: as B grows the intensity tends to 2KN / ((K + N) itemsize) = "
                f"{2 * K * N / ((K + N) * s):.4g} FLOP/B, below the ridge {C / B:.4g}: no batch reaches it"
            )
        if got is None:
            return f"expected B = {exp}, got None"
        if not is_int(got):
            return f"expected an int batch (or None), got {_as_returned(got)}"
        if got == exp:
            return None
        head = f"expected B = {exp}, got {got}"
        if got == exp - 1:
            return head + ": at B - 1 the intensity is still below the ridge; round up"
        if got == max(1, math.ceil(s * C / B / 2)):
            return head + ": that counts only the weights' bytes; x and y move too (B K + B N elements)"
        if got == _batch_to_ridge_solution(K, N, 1, C, B) and s != 1:
            return head + ": the bytes are elements x itemsize"
        return head

    return run_cases("batch_to_ridge", fn, cases, compare)


check_batch_to_ridge.solution = _batch_to_ridge_solution
check_batch_to_ridge.hints = [
    "write the intensity of the layer as a function of B, FLOPs over the least bytes; it grows with B, but "
    "towards a limit: what is it as B becomes very large, and what if the ridge lies above it?",
    "the condition intensity(B) >= C / B_hbm is linear in B once you multiply out the denominator: collect the "
    "terms in B and the answer is a ceiling, or there is none",
]
