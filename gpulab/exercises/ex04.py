"""Exercises of lesson 04 (fusion)."""

from __future__ import annotations

import random

import torch

import gpulab

from . import MATH_FP32_ONLY, Report, _short, close, ex04_kernels, is_int, kernelcheck, run_cases
from .kernelcheck import check_kernel

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.float8_e4m3fn)
AWKWARD = [1, 17, 1000, 1793]


def _sincos_bytes_solution(n: int, dtype: torch.dtype, fused: bool) -> int:
    """HBM bytes of sin(x)^2 + cos(x)^2 on n elements: unfused, sin, cos, two squares (1 read + 1 write each)
    and an add (2 reads + 1 write) = 11n transfers; fused, read x and write y = 2n. Times itemsize."""
    return (2 if fused else 11) * n * dtype.itemsize


def check_sincos_bytes(fn) -> Report:
    """fn(n, dtype, fused) -> int: the bytes sin^2 + cos^2 moves through HBM on n elements of torch dtype
    ``dtype``, as five kernels (fused=False) or one (fused=True). Seed: 44n and 8n bytes in fp32."""
    rng = random.Random()
    cases = [
        dict(n=1, dtype=torch.float32, fused=False),
        dict(n=1, dtype=torch.float32, fused=True),
        dict(n=1000, dtype=torch.float16, fused=False),
    ]
    cases += [
        dict(n=rng.choice(AWKWARD + [rng.randrange(1, 2**31)]), dtype=rng.choice(DTYPES), fused=rng.random() < 0.5)
        for _ in range(20)
    ]

    def compare(case, got):
        n, d, fused = case["n"], case["dtype"], case["fused"]
        exp = _sincos_bytes_solution(n, d, fused)
        if not is_int(got):
            return f"expected an int number of bytes, got {_short(got)}"
        if got == exp:
            return None
        if not fused and got == 10 * n * d.itemsize:
            return f"expected {exp}, got {got}: the add reads two arrays (sin^2 and cos^2), so 11n transfers"
        if got == (11 if fused else 2) * n * d.itemsize:
            return f"expected {exp}, got {got}: fused and unfused are swapped"
        if got == (2 if fused else 11) * n or got == (2 if fused else 11) * n * 4:
            return f"expected {exp}, got {got}: multiply the transfers by dtype.itemsize ({d} has {d.itemsize})"
        if fused and got == n * d.itemsize:
            return f"expected {exp}, got {got}: fused still reads x AND writes y"
        return f"expected {exp}, got {got}"

    return run_cases("sincos_bytes", fn, cases, compare)


check_sincos_bytes.solution = _sincos_bytes_solution


def _model_time_ms_solution(
    n: int, launches: int, bytes_per_element: float, overhead_us: float, bandwidth_tbps: float
) -> float:
    """launches x overhead + bytes / bandwidth, in ms (TB/s decimal: 1e12 bytes per second)."""
    return launches * overhead_us * 1e-3 + n * bytes_per_element / (bandwidth_tbps * 1e12) * 1e3


def check_model_time_ms(fn) -> Report:
    """fn(n, launches, bytes_per_element, overhead_us, bandwidth_tbps) -> float: the model time in ms,
    launches x overhead + bytes / bandwidth (overhead in µs, bandwidth in TB/s = 1e12 bytes/s)."""
    rng = random.Random()
    cases = [
        dict(n=2**28, launches=1, bytes_per_element=8, overhead_us=5.0, bandwidth_tbps=4.0),
        dict(n=1024, launches=5, bytes_per_element=44, overhead_us=3.0, bandwidth_tbps=4.0),
    ]
    cases += [
        dict(
            n=2 ** rng.randrange(10, 29) + rng.randrange(0, 7),
            launches=rng.choice([1, 5]),
            bytes_per_element=rng.choice([8, 44, 4, 22]),
            overhead_us=round(rng.uniform(1, 20), 2),
            bandwidth_tbps=round(rng.uniform(0.5, 8), 2),
        )
        for _ in range(20)
    ]

    def compare(case, got):
        exp = _model_time_ms_solution(*case.values())
        if close(got, exp, 1e-9):
            return None
        n, L, b, o, B = case.values()
        if close(got, L * o + n * b / (B * 1e12) * 1e3, 1e-9):
            return f"expected {exp:.6g} ms, got {got!r}: the overhead is in µs; 1 µs = 1e-3 ms"
        if close(got, o * 1e-3 + n * b / (B * 1e12) * 1e3, 1e-9):
            return f"expected {exp:.6g} ms, got {got!r}: every launch pays the overhead (x {L})"
        if close(got, L * o * 1e-3 + n * b / (B * 2**40) * 1e3, 1e-9):
            return f"expected {exp:.6g} ms, got {got!r}: TB/s here is decimal, 1e12 bytes/s"
        if close(got, L * o * 1e-3 + n * b / (B * 1e12), 1e-9):
            return f"expected {exp:.6g} ms, got {got!r}: the byte time is in seconds; convert to ms"
        if close(got, max(L * o * 1e-3, n * b / (B * 1e12) * 1e3), 1e-9):
            return f"expected {exp:.6g} ms, got {got!r}: the model adds the two terms, it does not take the max"
        return f"expected {exp:.6g} ms, got {_short(got)}"

    return run_cases("model_time_ms", fn, cases, compare)


check_model_time_ms.solution = _model_time_ms_solution


#: Largest |error| against float64 the fused kernel may have, per dtype: computed in fp32 and rounded once into
#: the output's dtype, about one unit of the dtype at 1 (fp32: a few ulp of the fp32 sin, cos and squares).
SINCOS_TOL = {torch.float32: 1e-6, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
_SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
_BF16_NOTE = (
    "only bf16 cases fail: compute in fp32 (x.to(tl.float32)) and cast on the store "
    "(y.to(out_ptr.dtype.element_ty)); Triton's interpreter mishandles bf16 values otherwise"
)
_FP32_NOTE = (
    "tl.sin and tl.cos take fp32 or fp64 only: load, then x.to(tl.float32); cast on the store "
    "(y.to(out_ptr.dtype.element_ty))"
)


def _abs_mismatch(tol: float):
    def mismatch(got, ref, case):
        err = (got.detach().double().cpu() - ref).abs()
        bad = ~(err <= tol)  # NaN counts as bad
        if not bad.any():
            return None
        i = int(bad.nonzero()[0])
        return (
            f"{int(bad.sum())} of {ref.numel()} elements differ by more than {tol:.2g}; first at index {i}: "
            f"expected {ref[i].item():.7g}, got {got[i].item():.7g}"
        )

    return mismatch


def _sincos_mismatch(tol: float):
    """``_abs_mismatch(tol)``, and in fp32 a result that is exactly 1.0 in every element of a long case: an
    fp32 kernel that computes sin(x)^2 + cos(x)^2 rounds to 1 - 2^-24 or 1 + 2^-23 for about a quarter of
    x ~ N(0, 3^2), so only a kernel that stores the constant gives exactly 1.0 at every one of 1000 elements."""
    within = _abs_mismatch(tol)

    def mismatch(got, ref, case):
        msg = within(got, ref, case)
        if msg is None and got.dtype == torch.float32 and got.numel() >= 1000 and bool((got == 1.0).all()):
            return (
                f"out is exactly 1.0 in all {got.numel()} elements, which a kernel that computes "
                "sin(x)^2 + cos(x)^2 in fp32 never gives: compute it from x (storing the identity's value is "
                "not fusing the five steps)"
            )
        return msg

    return mismatch


def check_sincos_fused(fn) -> Report:
    """fn(x, out) launches ONE Triton kernel that writes out = sin(x)^2 + cos(x)^2, x and out 1-D of the same
    dtype (fp32, fp16 or bf16) on gpulab.DEVICE, any length. The checker owns x and out (guarded buffers, see
    ``kernelcheck``), runs awkward lengths (1, 17, 1000, 1793, and random ones) of fresh inputs N(0, 3^2) in
    each dtype (fp32 also ``kernelcheck.LONG_N``), and names the mistake (``kernelcheck``): a missing mask, too
    small a grid, an input written or never loaded, more than one launch or none, values further than
    ``SINCOS_TOL[dtype]`` from the float64 answer, or (fp32) exactly 1.0 everywhere: the constant stored, not
    computed (``_sincos_mismatch``)."""
    rng = random.Random()
    sizes = AWKWARD + [rng.randrange(2, 5000)]
    total = Report("sincos_fused")
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        lengths = sizes + [kernelcheck.LONG_N] * (dt == torch.float32)
        cases = [dict(x=(torch.randn(n, dtype=torch.float64) * 3).to(dt).to(gpulab.DEVICE)) for n in lengths]
        rep = check_kernel(
            f"sincos_fused {_SHORT[dt]}",
            fn,
            cases,
            out=lambda c: (c["x"].shape, c["x"].dtype),
            reference=lambda c: torch.sin(c["x"].double()) ** 2 + torch.cos(c["x"].double()) ** 2,
            mismatch=_sincos_mismatch(SINCOS_TOL[dt]),
            launches=1,
        )
        if not rep.attempted:
            return Report("sincos_fused", attempted=False)
        total.extend(rep)
    if any(MATH_FP32_ONLY in f for f in total.failures):  # describe_error's note, compiled or interpreted
        total.failures[0] += "\n    -> " + _FP32_NOTE  # the first failure shown carries the note
    elif total.failures and all(f.startswith("sincos_fused bf16") for f in total.failures):
        total.failures[0] += "\n    -> " + _BF16_NOTE  # the first failure shown carries the note
    return total


check_sincos_fused.solution = ex04_kernels.sincos_fused
check_sincos_fused.solution_module = ex04_kernels
check_sincos_fused.hints = [
    "one kernel does all five operations: load x once (masked), keep sin, cos and the squares in local variables, "
    "store y once (masked); launch triton.cdiv(n, BLOCK) programs",
    "x = tl.load(x_ptr + offs, mask=mask).to(tl.float32); s = tl.sin(x); c = tl.cos(x); "
    "tl.store(out_ptr + offs, (s * s + c * c).to(out_ptr.dtype.element_ty), mask=mask)",
]
