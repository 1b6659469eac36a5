"""Exercises of lesson 04 (fusion)."""

from __future__ import annotations

import numbers
import random

import torch

from ..core import dtypes
from . import Report, _short, close, ex04_solutions, is_int, kernelcheck, run_cases, say_once
from .cases import Draw
from .kernelcheck import check_kernel
from .kerneldiagnosis import Mistake

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


#: Largest |error| against float64 the fused kernel may have, per dtype: the answer sin(x)^2 - cos(x)^2 lies in
#: [-1, 1], computed in fp32 and rounded once into the output's dtype, about one unit of the dtype at 1 (fp32: a
#: few ulp of the fp32 sin, cos and squares).
SINCOS_TOL = {torch.float32: 1e-6, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
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


#: The usual wrong formulas of the sincos exercise: (kind, what the learner is told, the float64 answer of the wrong
#: formula on x). Said without the case's numbers, so that every dtype's run shares one line (``say_once``).
_SINCOS_SIGNATURES = (
    (
        "values:sum",
        "out is 1 at every index, whatever x holds: out does not depend on x. sin(x)^2 + cos(x)^2, the lesson's "
        "example, is 1 for every x; the exercise asks for sin(x)^2 - cos(x)^2",
        lambda x: torch.sin(x) ** 2 + torch.cos(x) ** 2,
    ),
    (
        "values:sign",
        "out is the answer with its sign flipped, cos(x)^2 - sin(x)^2; the exercise subtracts the other way, "
        "sin(x)^2 - cos(x)^2",
        lambda x: torch.cos(x) ** 2 - torch.sin(x) ** 2,
    ),
)


def _sincos_mismatch(tol: float):
    """``_abs_mismatch(tol)`` that names a wrong formula of ``_SINCOS_SIGNATURES`` where out holds its answer to
    within ``tol`` at every index (a ``Mistake`` of its kind)."""
    plain = _abs_mismatch(tol)

    def mismatch(got, ref, case):
        msg = plain(got, ref, case)
        if msg is None:
            return None
        g, x = got.detach().double().cpu(), case["x"].detach().double().cpu()
        for kind, why, wrong in _SINCOS_SIGNATURES:
            if bool(((g - wrong(x)).abs() <= tol).all()):
                return Mistake(kind, f"values differ: {why}")
        return msg

    return mismatch


def check_sincos_fused(fn, seed: int | None = None) -> Report:
    """fn(x, out) launches ONE Triton kernel that writes out = sin(x)^2 - cos(x)^2, x and out 1-D of the same
    dtype (fp32, fp16 or bf16) on gpulab.DEVICE, any length. The checker owns x and out (guarded buffers, see
    ``kernelcheck``), runs awkward lengths (1, 17, 1000, 1793, and one drawn in [2, 5000]) of fresh inputs
    N(0, 3^2) in each dtype (fp32 also ``kernelcheck.LONG_N``), drawn by ``cases.Draw`` from ``seed`` (which the
    report prints), and names the mistake (``kernelcheck``): a missing mask, too
    small a grid, an input written or never loaded, more than one launch or none, values further than
    ``SINCOS_TOL[dtype]`` from the float64 answer, a wrong formula of ``_SINCOS_SIGNATURES`` named. The lesson's
    dataflow example is sin(x)^2 + cos(x)^2, which is 1 for every x, so a kernel that stores 1 would pass a check
    of its values; the exercise's
    sin(x)^2 - cos(x)^2 = -cos(2x) keeps the five operations (11n transfers unfused, 2n fused) and depends on x."""
    draw = Draw(seed)
    sizes = AWKWARD + [draw.size(2, 5000)]
    total = draw.stamp(Report("sincos_fused"))
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        lengths = sizes + [kernelcheck.LONG_N] * (dt == torch.float32)
        cases = [dict(x=draw.randn(n, dtype=dt, scale=3.0)) for n in lengths]
        rep = check_kernel(
            f"sincos_fused {dtypes.name_of(dt)}",
            fn,
            cases,
            out=lambda c: (c["x"].shape, c["x"].dtype),
            reference=lambda c: torch.sin(c["x"].double()) ** 2 - torch.cos(c["x"].double()) ** 2,
            mismatch=_sincos_mismatch(SINCOS_TOL[dt]),
            launches=1,
            advice={"math_fp32": _FP32_NOTE},
        )
        if not rep.attempted:
            return Report("sincos_fused", attempted=False)
        total.extend(rep)
    if total.failures and all(f.startswith("sincos_fused bf16") for f in total.failures):
        total.failures[0] += "\n    -> " + _BF16_NOTE  # the first failure shown carries the note
    return say_once(total)


check_sincos_fused.solution = ex04_solutions.sincos_fused
check_sincos_fused.solution_module = ex04_solutions
check_sincos_fused.hints = [
    "one kernel does all five operations (sin, cos, two squares, a subtraction): load x once (masked), keep sin, "
    "cos and the squares in local variables, store the result once (masked)",
    "Triton's sin and cos take fp32 or fp64 only: convert after the load, and convert back to out's dtype on the store",
]


# ---- LayerNorm, counted -------------------------------------------------------------------------------------

#: The unfused LayerNorm of the exercise, one kernel a line: (what it computes, arrays read, array written);
#: x, xc, y, out: (rows, d); mean, var: (rows,); w, b: (d,). Every array in the one dtype.
LAYERNORM_OPS = (
    ("mean = x.mean(-1)", ("x",), "mean"),
    ("xc = x - mean", ("x", "mean"), "xc"),
    ("var = (xc * xc).mean(-1)", ("xc",), "var"),
    ("y = xc * rsqrt(var + eps)", ("xc", "var"), "y"),
    ("out = y * w + b", ("y", "w", "b"), "out"),
)


def _layernorm_bytes_solution(rows: int, d: int, dtype: torch.dtype, fused: bool) -> int:
    """HBM bytes of LayerNorm over the last dim of x: (rows, d) with weight w and bias b: (d,). Unfused
    (``LAYERNORM_OPS``, five kernels): the (rows, d) arrays cross HBM 8 times (x read twice; xc written once and
    read twice; y written and read; out written), the statistics mean and var 4 times (each written and read),
    w and b once: 8 rows d + 4 rows + 2 d elements. Fused: x, w and b read once, out written once: 2 rows d +
    2 d. Times itemsize."""
    elements = 2 * rows * d + 2 * d if fused else 8 * rows * d + 4 * rows + 2 * d
    return elements * dtype.itemsize


def check_layernorm_bytes(fn) -> Report:
    """fn(rows, d, dtype, fused) -> int: the HBM bytes of LayerNorm of x: (rows, d) in torch dtype ``dtype``
    with w and b: (d,), as the five kernels of ``LAYERNORM_OPS`` (fused=False) or one (fused=True)."""
    rng = random.Random()
    cases = [
        dict(rows=1, d=1, dtype=torch.float32, fused=False),
        dict(rows=1, d=1, dtype=torch.float32, fused=True),
        dict(rows=4096, d=768, dtype=torch.bfloat16, fused=False),
    ]
    cases += [
        dict(rows=rng.randrange(1, 70000), d=rng.randrange(1, 9000), dtype=rng.choice(DTYPES), fused=rng.random() < 0.5)
        for _ in range(20)
    ]

    def compare(case, got):
        rows, d, dt, fused = case["rows"], case["d"], case["dtype"], case["fused"]
        exp = _layernorm_bytes_solution(rows, d, dt, fused)
        if not is_int(got):
            return f"expected an int number of bytes, got {_short(got)}"
        if got == exp:
            return None
        s, head = dt.itemsize, f"expected {exp}, got {got}"
        if got == _layernorm_bytes_solution(rows, d, dt, not fused):
            return head + ": fused and unfused are swapped"
        if got * s == exp:
            return head + f": multiply the elements by dtype.itemsize ({dt} has {s})"
        if fused and got == 2 * rows * d * s:
            return head + ": the fused kernel still reads w and b"
        if fused and got > exp:
            return head + ": in the fused kernel mean, var, xc and y stay in registers: they never reach HBM"
        if not fused and got == (8 * rows * d + 4 * rows) * s:
            return head + ": the last kernel reads w and b too"
        if not fused and got == (8 * rows * d + 2 * d) * s:
            return head + ": mean and var are arrays too: each is written once and read once"
        if not fused and got < exp:
            return head + ": count each kernel's reads and writes, and x is read by two of them"
        return head

    return run_cases("layernorm_bytes", fn, cases, compare)


check_layernorm_bytes.solution = _layernorm_bytes_solution
check_layernorm_bytes.hints = [
    "go down the five kernels one by one: every array a kernel reads or writes crosses HBM once; note its "
    "shape, (rows, d), (rows,) or (d,)",
    "fused, only what comes from outside the kernel and what leaves it is counted; the statistics stay on chip",
]


def _layernorm_speedup_solution(rows: int, d: int, dtype: torch.dtype, overhead_us: float, tbps: float) -> float:
    """The model time of the five LayerNorm kernels over that of one fused kernel: each time is launches x
    overhead + bytes / bandwidth (``_layernorm_bytes_solution``; overhead in µs, bandwidth in TB/s)."""

    def ms(fused):
        launches = 1 if fused else len(LAYERNORM_OPS)
        return launches * overhead_us * 1e-3 + _layernorm_bytes_solution(rows, d, dtype, fused) / (tbps * 1e12) * 1e3

    return ms(False) / ms(True)


def check_layernorm_speedup(fn) -> Report:
    """fn(rows, d, dtype, overhead_us, tbps) -> float: how many times faster the fused LayerNorm is than the five
    kernels, in the model launches x overhead + bytes / bandwidth. Small and large shapes: where launches
    dominate the answer tends to 5, where bytes do to the ratio of the bytes."""
    rng = random.Random()
    cases = [
        dict(rows=8, d=768, dtype=torch.float32, overhead_us=5.0, tbps=4.0),
        dict(rows=65536, d=8192, dtype=torch.bfloat16, overhead_us=5.0, tbps=4.0),
    ]
    cases += [
        dict(
            rows=2 ** rng.randrange(0, 17),
            d=rng.choice([128, 768, 1024, 4096, 8192, 12288]),
            dtype=rng.choice(DTYPES[:3]),
            overhead_us=round(rng.uniform(1, 20), 2),
            tbps=round(rng.uniform(0.5, 8), 2),
        )
        for _ in range(20)
    ]

    def compare(case, got):
        exp = _layernorm_speedup_solution(**case)
        if isinstance(got, bool) or not isinstance(got, numbers.Real):
            return f"expected a number (a ratio), got {_short(got)}"
        if close(got, exp, 1e-6):
            return None
        rows, d, dt, o, B = case.values()
        unf, fus = _layernorm_bytes_solution(rows, d, dt, False), _layernorm_bytes_solution(rows, d, dt, True)
        head = f"expected {exp:.6g}, got {float(got):.6g}"
        if close(got, 1 / exp, 1e-6):
            return head + ": inverted; unfused time over fused time is above 1"
        if close(got, unf / fus, 1e-6):
            return head + ": that is the ratio of the bytes alone; each kernel launch costs the overhead too"
        if close(got, (o * 1e-3 + unf / (B * 1e12) * 1e3) / (o * 1e-3 + fus / (B * 1e12) * 1e3), 1e-6):
            return head + ": the unfused path pays the overhead five times, once per kernel"
        if close(got, (5 * o + unf / (B * 1e12) * 1e3) / (o + fus / (B * 1e12) * 1e3), 1e-6):
            return head + ": the overhead is in µs; 1 µs = 1e-3 ms"
        return head

    return run_cases("layernorm_speedup", fn, cases, compare)


check_layernorm_speedup.solution = _layernorm_speedup_solution
check_layernorm_speedup.hints = [
    "time each path with the model of section 6, launches x overhead + bytes / bandwidth, with your "
    "layernorm_bytes for the bytes; keep every term in one unit",
]


# ---- a fused chain of three inputs ----------------------------------------------------------------------------

#: Largest error against float64 of the fused chain, per dtype: relative to |ref| one ulp of out's dtype (the
#: rounding on the store; Triton 3.9's interpreter truncates to bf16, a full ulp), and relative to |r| + |x| a
#: few fp32 roundings of the exp, the reciprocal, the product and the sum.
CHAIN_TOL = {torch.float32: 2.0**-22, torch.bfloat16: 2.0**-7}


def _chain_mismatch(got, ref, case):
    g64 = got.detach().double().cpu()
    scale = case["r"].double().abs().cpu() + case["x"].double().abs().cpu()
    tol = CHAIN_TOL[got.dtype] * ref.abs() + 2.0**-20 * scale + 1e-30
    bad = ~((g64 - ref).abs() <= tol)  # NaN counts as bad
    if not bad.any():
        return None
    i = int(bad.nonzero()[0])
    x, g, r = (case[k].double().cpu()[i].item() for k in ("x", "g", "r"))
    head = (
        f"{int(bad.sum())} of {ref.numel()} elements differ; first at index {i} (x = {x:.4g}, g = {g:.4g}, "
        f"r = {r:.4g}): expected {ref[i].item():.7g}, got {g64[i].item():.7g}"
    )
    sig = 1 / (1 + torch.exp(-case["g"].double().cpu()))
    for wrong, why in (
        (case["x"].double().cpu() * sig, "r is not added"),
        (case["r"].double().cpu() + sig, "x does not multiply the gate"),
        (
            case["r"].double().cpu() + case["x"].double().cpu() * case["g"].double().cpu(),
            "the gate is g, not sigmoid(g)",
        ),
    ):
        if bool(((g64 - wrong).abs() <= tol + 1e-6 * wrong.abs())[bad].all()):
            return head + f": {why}"
    return head


def check_gated_residual(fn, seed: int | None = None) -> Report:
    """fn(x, g, r, out) launches ONE Triton kernel that writes out = r + x * sigmoid(g); x, g, r and out: 1-D of one
    length and one dtype (fp32 or bf16) on gpulab.DEVICE. The result depends on every element of all three inputs:
    a kernel that skips a load is named ("never loaded"); the inputs are independent N(0, 1) draws, so that no
    input stands in for another. The checker owns every buffer (guarded, see ``kernelcheck``), runs awkward
    lengths (1, 17, 1000, 1793, random; fp32 also ``kernelcheck.LONG_N``), and names the mistake: a missing
    mask, too small a grid, an input written or never loaded, more than one launch, values further than
    ``CHAIN_TOL`` from float64 (and which part of the chain is missing). The random length (in [2, 5000]) and the
    inputs are drawn by ``cases.Draw`` from ``seed``, which the report prints."""
    draw = Draw(seed)
    sizes = AWKWARD + [draw.size(2, 5000)]
    total = draw.stamp(Report("gated_residual"))
    for dt in (torch.float32, torch.bfloat16):
        lengths = sizes + [kernelcheck.LONG_N] * (dt == torch.float32)
        cases = [{k: draw.randn(n, dtype=dt) for k in ("x", "g", "r")} for n in lengths]
        rep = check_kernel(
            f"gated_residual {dtypes.name_of(dt)}",
            fn,
            cases,
            out=lambda c: (c["x"].shape, c["x"].dtype),
            reference=lambda c: c["r"].double() + c["x"].double() * torch.sigmoid(c["g"].double()),
            mismatch=_chain_mismatch,
            launches=1,
        )
        if not rep.attempted:
            return Report("gated_residual", attempted=False)
        total.extend(rep)
    if total.failures and all(f.startswith("gated_residual bf16") for f in total.failures):
        total.failures[0] += "\n    -> " + _BF16_NOTE
    return say_once(total)


check_gated_residual.solution = ex04_solutions.gated_residual
check_gated_residual.solution_module = ex04_solutions
check_gated_residual.hints = [
    "count first: torch runs sigmoid, the product and the sum as three kernels; fused, each input crosses HBM "
    "once and the output once, and the gate never leaves the registers",
    "Triton has tl.exp but no sigmoid: write the sigmoid from its definition; work in fp32 whatever the inputs' "
    "dtype, and round once, when storing into out's dtype",
]
