"""Exercises of lesson 03 (precision)."""

from __future__ import annotations

import math
import random

import torch

import gpulab

from . import Report, _short, close, ex03_kernels, is_int, kernelcheck, run_cases
from .kernelcheck import check_kernel

RELU_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float64)
AWKWARD = [1, 17, 1000, 1793]


def _relu_bytes_solution(n: int, dtype: torch.dtype) -> int:
    """Bytes an out-of-place ReLU on n elements moves: read x (n * itemsize), write y (n * itemsize)."""
    return 2 * n * dtype.itemsize


def check_relu_bytes(fn) -> Report:
    """fn(n, dtype) -> int: bytes an out-of-place ReLU on n elements of torch dtype ``dtype`` must move
    (seed: 8n bytes for float32, 4n for float16)."""
    rng = random.Random()
    cases = [dict(n=n, dtype=d) for n, d in [(1, torch.float32), (10, torch.float16), (1793, torch.bfloat16)]]
    cases += [dict(n=rng.choice(AWKWARD + [rng.randrange(1, 2**31)]), dtype=rng.choice(RELU_DTYPES)) for _ in range(20)]

    def compare(case, got):
        n, d = case["n"], case["dtype"]
        exp = _relu_bytes_solution(n, d)
        if not is_int(got):
            return f"expected an int number of bytes, got {_short(got)}"
        if got == exp:
            return None
        if got == n * d.itemsize:
            return f"expected {exp}, got {got}: ReLU reads x AND writes y"
        if got == 8 * exp or got == 8 * n * d.itemsize:
            return f"expected {exp}, got {got}: itemsize is in bytes, not bits"
        if got == 8 * n or got == 4 * n:
            return f"expected {exp}, got {got}: the bytes depend on the dtype ({d} has itemsize {d.itemsize})"
        return f"expected {exp}, got {got}"

    return run_cases("relu_bytes", fn, cases, compare)


check_relu_bytes.solution = _relu_bytes_solution


def _relative_error_solution(c: torch.Tensor, c_ref: torch.Tensor) -> float:
    """||c - c_ref||_F / ||c_ref||_F, in float64, as a Python float."""
    c64, r64 = c.double(), c_ref.double()
    return float((c64 - r64).norm() / r64.norm())


def check_relative_error(fn) -> Report:
    """fn(c, c_ref) -> float: the relative error ||c - c_ref||_F / ||c_ref||_F of a product ``c`` (any float
    dtype) against a float64 reference ``c_ref`` of the same shape."""
    cases = []
    for shape in [(1, 1), (17, 33), (100, 100), (1, 1793)]:
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            ref = torch.randn(*shape, dtype=torch.float64) * 10 ** random.uniform(-2, 2)
            c = ref.to(dtype)
            c.view(-1)[random.randrange(c.numel())] += float(ref.abs().max())  # one clearly wrong element
            cases.append(dict(c=c, c_ref=ref))

    def compare(case, got):
        exp = _relative_error_solution(case["c"], case["c_ref"])
        if isinstance(got, torch.Tensor):
            return f"expected a Python float, got {_short(got)}: call .item() or float()"
        if close(got, exp, rel=1e-6):
            return None
        c64, r64 = case["c"].double(), case["c_ref"].double()
        if isinstance(got, float) and math.isfinite(got):
            if close(got, float((c64 - r64).norm()), rel=1e-6):
                return f"expected {exp:.6g}, got {got:.6g}: that is the absolute error; divide by ||c_ref||"
            if close(got, float((c64 - r64).norm() ** 2 / r64.norm() ** 2), rel=1e-6):
                return f"expected {exp:.6g}, got {got:.6g}: that is a ratio of squared norms; take the square root"
            if close(got, float(((c64 - r64).abs() / r64.abs()).max()), rel=1e-6) or close(
                got, float(((c64 - r64).abs() / r64.abs()).mean()), rel=1e-6
            ):
                return f"expected {exp:.6g}, got {got:.6g}: use the Frobenius norm of the whole matrix, not elementwise ratios"
            if close(got, float((c64 - r64).abs().max() / r64.abs().max()), rel=1e-6):
                return f"expected {exp:.6g}, got {got:.6g}: that is the max-norm; use the Frobenius norm"
        return f"expected {exp:.6g}, got {_short(got)}"

    return run_cases("relative_error", fn, cases, compare)


check_relative_error.solution = _relative_error_solution


def _fastest_within_solution(budget: float, errors: dict, rates: dict):
    """The dtype with the highest rate among those whose error is <= budget; None if none fits."""
    ok = [d for d in errors if errors[d] is not None and errors[d] <= budget and rates.get(d)]
    return max(ok, key=lambda d: rates[d]) if ok else None


def check_fastest_within(fn) -> Report:
    """fn(budget, errors, rates) -> dtype name or None: the fastest dtype (highest ``rates[d]``, TFLOP/s) whose
    relative error ``errors[d]`` is at most ``budget``; errors or rates of None mean the GPU lacks the dtype."""
    rng = random.Random()
    names = ["fp32", "tf32", "bf16", "fp16", "fp8"]
    cases = [
        dict(
            budget=b,
            errors=dict(fp32=2e-7, tf32=3e-4, bf16=3e-3, fp16=4e-4, fp8=4e-2),
            rates=dict(fp32=51.0, tf32=339.0, bf16=671.0, fp16=649.0, fp8=1204.0),
        )
        for b in (1e-6, 1e-3, 5e-3, 0.1, 1e-6)
    ]
    cases.append(
        dict(
            budget=1e-2,
            errors=dict(fp32=2e-7, tf32=None, bf16=None, fp16=4e-4, fp8=None),
            rates=dict(fp32=8.1, tf32=None, bf16=None, fp16=65.0, fp8=None),
        )
    )  # a T4
    for _ in range(20):
        errs = {d: 10 ** rng.uniform(-8, -1) for d in names}
        rates = {d: rng.uniform(10, 2000) for d in names}
        cases.append(dict(budget=10 ** rng.uniform(-8, -1), errors=errs, rates=rates))

    def compare(case, got):
        exp = _fastest_within_solution(**case)
        if got == exp:
            return None
        errs, budget = case["errors"], case["budget"]
        fits = [d for d in errs if errs[d] is not None and errs[d] <= budget]
        if exp is None:
            return f"expected None (no dtype has error <= {budget:.3g}), got {got!r}"
        if got in errs and got not in fits:
            return f"expected {exp!r}, got {got!r}: its error {errs[got]:.3g} is over the budget {budget:.3g}"
        if got == min(fits, key=lambda d: errs[d]):
            return (
                f"expected {exp!r}, got {got!r}: that is the most accurate; the question asks for the fastest that fits"
            )
        return f"expected {exp!r}, got {got!r}"

    return run_cases("fastest_within", fn, cases, compare)


check_fastest_within.solution = _fastest_within_solution


# (input dtype, output dtype) pairs of the kernel exercise: the same dtype, and fp32 in with a 16-bit result out
RELU_CAST_PAIRS = (
    (torch.float32, torch.float32),
    (torch.float16, torch.float16),
    (torch.bfloat16, torch.bfloat16),
    (torch.float32, torch.float16),
    (torch.float32, torch.bfloat16),
)
_SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
_BF16_NOTE = (
    "only cases with bf16 fail: compute in fp32 (x.to(tl.float32)) and cast on the store "
    "(y.to(out_ptr.dtype.element_ty)); Triton's interpreter mishandles bf16 values otherwise"
)


def check_relu_cast(fn) -> Report:
    """fn(x, out) launches a Triton kernel that writes out = max(x, 0) in out's dtype; x: 1-D fp32, fp16 or
    bf16 on gpulab.DEVICE, any length; out: x's shape, in x's dtype or (for fp32 x) fp16 or bf16. The checker
    owns x and out (guarded buffers, see ``kernelcheck``), runs each (x dtype, out dtype) pair of
    ``RELU_CAST_PAIRS`` on awkward lengths (1, 17, 1000, 1793, and random ones; the fp32 pair also
    ``kernelcheck.LONG_N``) with fresh normal inputs, and names the mistake (``kernelcheck``): a missing mask,
    too small a grid, an input written, no Triton launch, wrong values (against float64: within one ulp of
    out's dtype, i.e. one rounding)."""
    rng = random.Random()
    sizes = AWKWARD + [rng.randrange(2, 5000)]
    total = Report("relu_cast")
    for din, dout in RELU_CAST_PAIRS:
        lengths = sizes + [kernelcheck.LONG_N] * (din == dout == torch.float32)
        cases = [dict(x=(torch.randn(n, dtype=torch.float64) * 3).to(din).to(gpulab.DEVICE)) for n in lengths]
        rep = check_kernel(
            f"relu_cast {_SHORT[din]}->{_SHORT[dout]}",
            fn,
            cases,
            out=lambda c, dout=dout: (c["x"].shape, dout),
            reference=lambda c: torch.relu(c["x"].double()),
        )
        if not rep.attempted:
            return Report("relu_cast", attempted=False)
        total.extend(rep)
    if total.failures and all("bf16" in f.split("(")[0] for f in total.failures):
        total.failures[0] += "\n    -> " + _BF16_NOTE  # the first failure shown carries the note
    return total


check_relu_cast.solution = ex03_kernels.relu_cast
check_relu_cast.solution_module = ex03_kernels
check_relu_cast.hints = [
    "one program handles BLOCK elements: offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), mask = offs < n on "
    "the load and the store; launch triton.cdiv(n, BLOCK) programs",
    "x = tl.load(x_ptr + offs, mask=mask).to(tl.float32); y = tl.where(x < 0.0, 0.0, x); "
    "tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)",
]
