"""Exercises of lesson 05 (recomputation)."""
from __future__ import annotations

import random

import torch

from . import Report, _short, is_int, run_cases

AWKWARD = [1, 17, 1000, 1793]


def _sigmoid3_grad_solution(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx = dy * s3(1 - s3) * s2(1 - s2) * s1(1 - s1) with s1 = s(x), s2 = s(s1), s3 = s(s2)."""
    s1 = torch.sigmoid(x)
    s2 = torch.sigmoid(s1)
    s3 = torch.sigmoid(s2)
    return dy * s3 * (1 - s3) * s2 * (1 - s2) * s1 * (1 - s1)


def check_sigmoid3_grad(fn) -> Report:
    """fn(x, dy) -> dx, the gradient of y = s(s(s(x))) (s the logistic sigmoid) times dy, elementwise, by the
    chain rule written out (no autograd). x, dy: float64 tensors of the same shape; dx: float64, that shape."""
    shapes = [(n,) for n in AWKWARD] + [(3, 5), (random.randrange(2, 300),)]
    cases = [dict(x=torch.randn(*s, dtype=torch.float64) * 3, dy=torch.randn(*s, dtype=torch.float64))
             for s in shapes]

    def compare(case, got):
        x, dy = case["x"], case["dy"]
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor, got {_short(got)}"
        if got.shape != x.shape:
            return f"expected shape {tuple(x.shape)}, got {tuple(got.shape)}"
        exp = _sigmoid3_grad_solution(x, dy)
        got = got.double()
        if torch.allclose(got, exp, rtol=1e-9, atol=1e-15):
            return None
        i = int((got - exp).abs().argmax())
        msg = f"element {i} (x = {x.flatten()[i].item():.4g}): expected {exp.flatten()[i].item():.6g}, got {got.flatten()[i].item():.6g}"
        s1 = torch.sigmoid(x)
        s2 = torch.sigmoid(s1)
        s3 = torch.sigmoid(s2)
        wrong = {"only the outer factor s3(1 - s3): multiply the derivatives of all three sigmoids":
                 dy * s3 * (1 - s3),
                 "every factor evaluated at x: the outer sigmoids are differentiated at their own inputs s1 and s2":
                 dy * (s1 * (1 - s1)) ** 3,
                 "dy is missing: dx = dy * (the derivative)": s3 * (1 - s3) * s2 * (1 - s2) * s1 * (1 - s1),
                 "s(1 - s) is the derivative; s alone is not": dy * s3 * s2 * s1}
        for hint, w in wrong.items():
            if torch.allclose(got, w, rtol=1e-9, atol=1e-15):
                return f"{msg}: {hint}"
        return msg

    return run_cases("sigmoid3_grad", fn, cases, compare)


check_sigmoid3_grad.solution = _sigmoid3_grad_solution


def _bytes_saved_solution(n: int, itemsize: int) -> int:
    """HBM bytes the fused way avoids against eager autograd over forward + backward: eager moves 15n
    elements (forward 6n, backward 9n), fused 5n (forward 2n, backward 3n), so 10n elements."""
    return (15 * n - 5 * n) * itemsize


def check_bytes_saved(fn) -> Report:
    """fn(n, itemsize) -> int: the bytes that recomputing in a fused kernel saves against eager autograd for
    y = s(s(s(x))) on n elements of ``itemsize`` bytes, forward + backward, counting every array each kernel
    reads or writes (no cache reuse)."""
    rng = random.Random()
    cases = [dict(n=n, itemsize=s) for n, s in [(1, 4), (1000, 2), (1793, 4), (2**28, 4)]]
    cases += [dict(n=rng.choice(AWKWARD + [rng.randrange(1, 2**31)]), itemsize=rng.choice([1, 2, 4, 8]))
              for _ in range(16)]

    def compare(case, got):
        n, s = case["n"], case["itemsize"]
        exp = _bytes_saved_solution(n, s)
        if not is_int(got):
            return f"expected an int number of bytes, got {_short(got)}"
        if got == exp:
            return None
        hints = {10 * n: "multiply elements by itemsize to get bytes",
                 15 * n * s: "that is everything eager moves; subtract what the fused way still moves (5n elements)",
                 6 * n * s: "count every read and write of both passes, not only the saved tensors s1, s2, s3 "
                            "(eager moves 15n elements, fused 5n)",
                 3 * n * s: "count every read and write of both passes, not only the saved tensors "
                            "(eager moves 15n elements, fused 5n)",
                 4 * n * s: "count every read and write of both passes, not only the saved tensors "
                            "(eager moves 15n elements, fused 5n)"}
        hint = hints.get(got)
        return f"expected {exp}, got {got}" + (f": {hint}" if hint else "")

    return run_cases("bytes_saved", fn, cases, compare)


check_bytes_saved.solution = _bytes_saved_solution
