"""Exercises of lesson 05 (recomputation): the fused sigmoid^3 forward and its recomputing backward as Triton
kernels (checked on guarded buffers against float64), and the bytes the fused way saves."""

from __future__ import annotations

import random

import torch

from . import Report, _short, ex05_solutions, is_int, kernelcheck, run_cases
from .cases import Draw
from .kernelcheck import check_kernel

AWKWARD = [1, 17, 1000, 1793]

#: Tolerances of the kernel exercise (fp32 storage and arithmetic) against float64: y within FWD_REL of |y|
#: (a few fp32 ulp: each sigmoid rounds an exp, an add and a divide; on a GPU tl.exp is an approximation);
#: dx within BWD_REL |dx| + BWD_ABS |dy|. The absolute term is the rounding of 1 - s1 in fp32 (at most 2^-24,
#: where s1 is close to 1), times s1 and the outer slopes s3(1 - s3) s2(1 - s2) <= 1/16: the plain formula
#: s1 * (1 - s1) is accepted, and a missing factor (at most 1/4) or a wrong one is still far outside.
FWD_REL = 2.0**-20
BWD_REL, BWD_ABS = 2.0**-17, 2.0**-24


def _grad64(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx in float64 with 1 - s1 taken as s(-x), which does not cancel for large |x|."""
    x, dy = x.double().cpu(), dy.double().cpu()
    s1, s2 = torch.sigmoid(x), torch.sigmoid(torch.sigmoid(x))
    s3 = torch.sigmoid(s2)
    return dy * s3 * (1 - s3) * s2 * (1 - s2) * s1 * torch.sigmoid(-x)


def _kernel_cases(draw: Draw, with_dy: bool) -> list[dict]:
    """Awkward lengths (1, 17, 1000, 1793, ``kernelcheck.LONG_N``, one in [2, 5000]), fresh x ~ N(0, 3^2) and
    dy ~ N(0, 1), fp32, drawn by ``draw``."""
    sizes = AWKWARD + [kernelcheck.LONG_N, draw.size(2, 5000)]
    cases = []
    for n in sizes:
        case = dict(x=draw.randn(n, scale=3.0))
        if with_dy:
            case["dy"] = draw.randn(n)
        cases.append(case)
    return cases


def _first_bad(bad, got, ref, what: str) -> str:
    i = int(bad.nonzero()[0])
    return (
        f"{int(bad.sum())} of {ref.numel()} elements of {what} differ; first at index {i}: expected "
        f"{ref[i].item():.7g}, got {got[i].item():.7g}"
    )


def check_sigmoid3_fwd(fn, seed: int | None = None) -> Report:
    """fn(x, out) launches ONE Triton kernel that writes out = s(s(s(x))) (s the logistic sigmoid), x and out
    1-D fp32 on gpulab.DEVICE, any length; nothing else is written. The checker owns x and out (guarded
    buffers, see ``kernelcheck``), runs awkward lengths on fresh x ~ N(0, 3^2) and compares with float64
    within ``FWD_REL`` relative; it names a missing mask, too small a grid, or the first wrong element. Cases
    drawn by ``cases.Draw`` from ``seed``, which the report prints."""
    draw = Draw(seed)

    def mismatch(got, ref, case):
        got = got.detach().double().cpu()
        bad = ~((got - ref).abs() <= FWD_REL * ref.abs())
        if not bad.any():
            return None
        msg = _first_bad(bad, got, ref, "y")
        x = case["x"].double().cpu()
        for wrong, why in (
            (torch.sigmoid(x), "that is one sigmoid; y applies it three times"),
            (torch.sigmoid(torch.sigmoid(x)), "that is two sigmoids; y applies it three times"),
        ):
            if torch.allclose(got, wrong, rtol=1e-5):
                return f"{msg}: {why}"
        return msg

    return draw.stamp(
        check_kernel(
            "sigmoid3_fwd",
            fn,
            _kernel_cases(draw, False),
            out=lambda c: (c["x"].shape, torch.float32),
            reference=lambda c: torch.sigmoid(torch.sigmoid(torch.sigmoid(c["x"].double()))),
            mismatch=mismatch,
            launches=1,
        )
    )


check_sigmoid3_fwd.solution = ex05_solutions.sigmoid3_fwd
check_sigmoid3_fwd.solution_module = ex05_solutions
check_sigmoid3_fwd.hints = [
    "one program handles BLOCK elements: load x (masked), apply s(z) = 1 / (1 + tl.exp(-z)) three times in "
    "registers, store once (masked); launch triton.cdiv(n, BLOCK) programs",
    "each sigmoid takes the previous one's output as its input (s1 from x, s2 from s1, s3 from s2), and only "
    "the last one is stored: the mask of the load is the mask of the store (the offsets below n)",
]


def check_sigmoid3_bwd(fn, seed: int | None = None) -> Report:
    """fn(x, dy, out) launches ONE Triton kernel that writes out = dx = dy * s3(1 - s3) * s2(1 - s2) * s1(1 - s1),
    rebuilding s1 = s(x), s2 = s(s1), s3 = s(s2) from x (it is given nothing else). x, dy, out: 1-D fp32 on
    gpulab.DEVICE, one length. Awkward lengths, fresh inputs, float64 reference (``BWD_REL``, ``BWD_ABS``); names
    a missing mask, too small a grid, a missing or misplaced factor of the chain rule (each of the three slopes
    left out, dy left out, every slope taken at x, s for s(1 - s)). Cases drawn by ``cases.Draw`` from ``seed``,
    which the report prints."""
    draw = Draw(seed)

    def mismatch(got, ref, case):
        got = got.detach().double().cpu()
        dy = case["dy"].double().cpu()
        bad = ~((got - ref).abs() <= BWD_REL * ref.abs() + BWD_ABS * dy.abs())
        if not bad.any():
            return None
        msg = _first_bad(bad, got, ref, "dx")
        x = case["x"].double().cpu()
        s1 = torch.sigmoid(x)
        s2 = torch.sigmoid(s1)
        s3 = torch.sigmoid(s2)
        wrong = {
            "only the outer factor s3(1 - s3): multiply the slopes of all three sigmoids": dy * s3 * (1 - s3),
            "every slope taken at x: s2 and s3 are differentiated at their own inputs, s1 and s2": dy
            * (s1 * (1 - s1)) ** 3,
            "dy is missing: dx = dy * (the slopes)": s3 * (1 - s3) * s2 * (1 - s2) * s1 * (1 - s1),
            "s(1 - s) is the slope of s; s alone is not": dy * s3 * s2 * s1,
        }
        slopes = {"s1": s1 * (1 - s1), "s2": s2 * (1 - s2), "s3": s3 * (1 - s3)}
        for s, which in (("s1", "inner"), ("s2", "middle"), ("s3", "outer")):  # one slope of the three left out
            rest = [f for k, f in slopes.items() if k != s]
            why = (
                f"the {which} sigmoid's slope {s}(1 - {s}) is missing: the chain rule multiplies dy by all three slopes"
            )
            wrong[why] = dy * rest[0] * rest[1]
        for why, w in wrong.items():
            if torch.allclose(got, w, rtol=1e-4, atol=1e-7):
                return f"{msg}: {why}"
        return msg

    return draw.stamp(
        check_kernel(
            "sigmoid3_bwd",
            fn,
            _kernel_cases(draw, True),
            out=lambda c: (c["x"].shape, torch.float32),
            reference=lambda c: _grad64(c["x"], c["dy"]),
            mismatch=mismatch,
            launches=1,
        )
    )


check_sigmoid3_bwd.solution = ex05_solutions.sigmoid3_bwd
check_sigmoid3_bwd.solution_module = ex05_solutions
check_sigmoid3_bwd.hints = [
    "load x and dy (masked), rebuild s1, s2, s3 exactly as the forward does, multiply dy by the three slopes "
    "s(1 - s), store dx (masked)",
    "the chain rule takes each sigmoid's slope at its own output: the outer one's from s3, the middle one's "
    "from s2, the inner one's from s1 (never all three from x); dy multiplies the product once",
]


def _bytes_saved_solution(n: int, itemsize: int, depth: int) -> int:
    """HBM bytes the fused pair avoids against eager autograd over forward + backward for ``depth`` stacked
    sigmoids: eager moves 5 depth n elements (each forward kernel reads 1 and writes 1; each backward kernel
    reads the upstream gradient and its saved output and writes a gradient), fused 5n (x, y; x, dy, dx)."""
    return (5 * depth - 5) * n * itemsize


def check_bytes_saved(fn) -> Report:
    """fn(n, itemsize, depth) -> int: the bytes that recomputing in a fused kernel pair saves against eager
    autograd for y = s(s(...s(x))) with ``depth`` stacked sigmoids (depth >= 1) on n elements of ``itemsize``
    bytes, forward + backward, counting every array each kernel reads or writes (no cache reuse). The lesson
    prints the answer for depth 3 only (``recompute.bytes_saved_by_recompute``)."""
    rng = random.Random()
    cases = [dict(n=n, itemsize=s, depth=d) for n, s, d in [(1, 4, 1), (1000, 2, 3), (1793, 4, 2), (2**28, 4, 5)]]
    cases += [
        dict(
            n=rng.choice(AWKWARD + [rng.randrange(1, 2**31)]),
            itemsize=rng.choice([1, 2, 4, 8]),
            depth=rng.randrange(1, 13),
        )
        for _ in range(16)
    ]

    def compare(case, got):
        n, s, d = case["n"], case["itemsize"], case["depth"]
        exp = _bytes_saved_solution(n, s, d)
        if not is_int(got):
            return f"expected an int number of bytes, got {_short(got)}"
        if got == exp:
            return None
        hints = {
            (5 * d - 5) * n: "multiply elements by itemsize to get bytes",
            5 * d * n * s: "that is everything eager moves; subtract what the fused pair still moves (5n elements, "
            "whatever the depth)",
            10 * n * s: "that is the lesson's three sigmoids; count per sigmoid: each adds a forward kernel (2n) "
            "and a backward kernel (3n) to eager, and nothing to the fused pair",
            (2 * d - 2) * n * s: "count the backward too: each eager backward kernel reads a gradient and a saved "
            "output and writes a gradient (3n)",
            (3 * d - 3) * n * s: "count the forward too: each eager forward kernel reads 1 and writes 1 (2n)",
            (d - 1) * n * s: "count every read and write of both passes, not only the saved outputs",
        }
        hint = hints.get(got) if exp else None
        if exp == 0 and got:
            hint = "with one sigmoid, eager already moves 5n elements (2n forward, 3n backward): nothing is saved"
        return f"expected {exp}, got {got}" + (f": {hint}" if hint else "")

    return run_cases("bytes_saved", fn, cases, compare)


check_bytes_saved.solution = _bytes_saved_solution
