"""Exercises of lesson 09 (the builder test).

- ``check_builder_test``: the lecture's Builder Test on operations of the GPT-2-small step: divide FLOPs by
  bytes, name the habit that moves the bound most ("precision", "fusion", "flash" or "none") and by what
  factor; the checker compares with the counted bound (``gpulab.capstone.placement``), each kernel at least
  the measured launch cost ``op["launch_us"]`` (``LAUNCH_US``).
- ``check_named_habit``: the Builder Test's first step, before any code: name the habit a kernel applies.
- ``check_bias_gelu``: a fused bias + GELU Triton kernel, run on awkward shapes inside guarded buffers against
  a float64 reference; ``swap_in`` then trains the model one rung with your kernel in the MLP.
"""

from __future__ import annotations

import math
import sys

import torch

import gpulab

from ..capstone import explain, placement
from ..core import hardware
from ..models import attention
from . import Report, _call_on_copies, _short, close, ex09_solutions, run_cases
from .cases import ROW_LIMIT, Draw
from .kernelcheck import check_kernel
from .kerneldiagnosis import Mistake

HABITS = ("precision", "fusion", "flash", "none")
GPU = "H200"
T, D, B, H, L = 8192, 768, 8, 12, 1024  # GPT-2 small: tokens, d_model, batch, heads, sequence
#: µs: the least time of one eager kernel, lesson 04's measured launch cost (``explain.launch_us``); each op
#: carries it as ``op["launch_us"]``.
LAUNCH_US = explain.launch_us().data


def builder_ops() -> list[dict]:
    """Operations of the GPT-2-small step (fp32 eager unless named), counted by hand: FLOPs, bytes, dtype,
    whether they are matrix products, and the bytes after fusion (``fused_bytes``) or FlashAttention
    (``flash_bytes``) where that habit applies (None where it does not); ``fp32_only``: precision does not
    apply (AdamW's state stays fp32; autocast runs layer norm in fp32 on the fp32 residual stream, as the
    ladder's bf16 rung keeps it); ``launch_us``: ``LAUNCH_US``, the least time of one eager kernel."""
    d = D // H
    naive = attention.naive_bytes(B, H, L, d, 4, causal=True)
    flash = attention.flash_bytes(B, H, L, d, 4, causal=True)
    ops = [
        dict(
            name="qkv projection forward: (8192, 768) @ (768, 2304)",
            flops=2 * T * D * 3 * D,
            bytes=4 * (T * D + D * 3 * D + T * 3 * D),
            dtype="fp32",
            matmul=True,
        ),
        dict(
            name="qkv projection forward in bf16",
            flops=2 * T * D * 3 * D,
            bytes=2 * (T * D + D * 3 * D + T * 3 * D),
            dtype="bf16",
            matmul=True,
        ),
        dict(
            name="output layer: (8192, 768) @ (768, 50257)",
            flops=2 * T * D * 50257,
            bytes=4 * (T * D + D * 50257 + T * 50257),
            dtype="fp32",
            matmul=True,
        ),
        dict(
            name="residual add + layer norm as two kernels",
            flops=0,
            bytes=4 * (3 * T * D + 2 * T * D + 2 * D) + 8 * T,
            fused_bytes=4 * (3 * T * D + 2 * D) + 8 * T,
            dtype="fp32",
            matmul=False,
            fp32_only=True,
        ),
        dict(
            name="bias add + GELU as two kernels, (8192, 3072)",
            flops=0,
            bytes=4 * (4 * T * 4 * D + 4 * D),
            fused_bytes=4 * (2 * T * 4 * D + 4 * D),
            dtype="fp32",
            matmul=False,
        ),
        dict(
            name="naive causal attention forward (S and P in memory)",
            flops=attention.attention_flops(B, H, L, L, d, causal=False),
            bytes=naive,
            flash_bytes=flash,
            dtype="fp32",
            matmul=True,
        ),
        dict(
            name="AdamW as 12 kernels a parameter, 124M parameters",
            flops=0,
            bytes=124_439_808 * 4 * 20,
            fused_bytes=124_439_808 * 4 * 7,
            dtype="fp32",
            matmul=False,
            fp32_only=True,
        ),
        dict(
            name="bias gradient of one projection: sum over 8192 rows of 768",
            flops=0,
            bytes=4 * (T * D + D),
            dtype="fp32",
            matmul=False,
        ),
        dict(
            name="bias gradient of a 64-wide head, one sequence",
            flops=0,
            bytes=4 * (1024 * 64 + 64),
            dtype="fp32",
            matmul=False,
        ),
    ]
    for op in ops:
        op.setdefault("fused_bytes", None)
        op.setdefault("flash_bytes", None)
        op.setdefault("fp32_only", False)
        op["gpu"] = GPU
        op["launch_us"] = LAUNCH_US
    return ops


def _time_ms(op: dict, flops: float, nbytes: float, dtype: str) -> float:
    """Eager time of one kernel: its bound, and at least the launch cost ``op["launch_us"]``."""
    p = placement.place_one(op["name"], "", flops, nbytes, dtype, hardware.get(op["gpu"]), overhead_us=op["launch_us"])
    return max(p.time_ms, op["launch_us"] * 1e-3)


def _habit_factors(op: dict) -> dict:
    """The counted speed-up of each habit on ``op`` (a ``builder_ops`` dict): t(before) / t(after), with
    t = max(bound on ``hardware.get(op["gpu"])``, ``op["launch_us"]``)."""
    t0 = _time_ms(op, op["flops"], op["bytes"], op["dtype"])
    out = {"none": 1.0, "precision": 1.0, "fusion": 1.0, "flash": 1.0}
    if op["dtype"] == "fp32" and not op["fp32_only"]:
        out["precision"] = t0 / _time_ms(op, op["flops"], op["bytes"] / 2, "bf16" if op["matmul"] else "fp32")
    if op["fused_bytes"]:
        out["fusion"] = t0 / _time_ms(op, op["flops"], op["fused_bytes"], op["dtype"])
    if op["flash_bytes"]:
        out["flash"] = t0 / _time_ms(op, op["flops"] / 2, op["flash_bytes"], op["dtype"])  # causal tiles skipped
    return out


def _reference(op: dict):
    """The checker's answer: the habit with the largest counted factor (``_habit_factors``), and that factor;
    "none" (1.0) when no habit gains 10%."""
    f = _habit_factors(op)
    best = max(HABITS, key=lambda h: f[h])
    return ("none", 1.0) if f[best] < 1.1 else (best, f[best])


def _builder_solution(op: dict):
    """The Builder Test of ``op`` by the counts (the reveal): each habit's factor t_before / t_after with
    t = max(bound, launch cost), the largest one, or ("none", 1.0) when none gains 10%."""

    def t(flops, nbytes, dtype):  # ms: the bound on op's GPU, and at least one launch
        p = placement.place_one(
            op["name"], "", flops, nbytes, dtype, hardware.get(op["gpu"]), overhead_us=op["launch_us"]
        )
        return max(p.time_ms, op["launch_us"] * 1e-3)

    before = t(op["flops"], op["bytes"], op["dtype"])
    factors = {"none": 1.0}
    if op["dtype"] == "fp32" and not op["fp32_only"]:
        factors["precision"] = before / t(op["flops"], op["bytes"] / 2, "bf16" if op["matmul"] else "fp32")
    if op["fused_bytes"]:
        factors["fusion"] = before / t(op["flops"], op["fused_bytes"], op["dtype"])
    if op["flash_bytes"]:
        factors["flash"] = before / t(op["flops"] / 2, op["flash_bytes"], op["dtype"])  # causal tiles skipped
    best = max(factors, key=factors.get)
    return ("none", 1.0) if factors[best] < 1.1 else (best, factors[best])


#: The checker's own answer: a function that reaches it (however it was named or kept) is refused.
_REFERENCE = ("_time_ms", "_habit_factors", "_reference")
_USED_REFERENCE = object()


def _call_refusing_the_reference(fn, case: dict):
    """``fn(op)`` on a copy of the case, watched by ``sys.setprofile``: where it calls one of ``_REFERENCE``'s
    functions, or the solution from inside another function (seen by code object, so an alias or a kept
    reference counts too), (``_USED_REFERENCE``, its name) instead of the result."""
    codes = {globals()[name].__code__ for name in _REFERENCE}
    if getattr(fn, "__code__", None) is not _builder_solution.__code__:
        codes.add(_builder_solution.__code__)
    seen = []
    previous = sys.getprofile()

    def watch(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            seen.append(frame.f_code.co_name)
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(watch)
    try:
        got = _call_on_copies(fn, case)
    finally:
        sys.setprofile(previous)
    return (_USED_REFERENCE, seen[0]) if seen else got


def check_builder_test(fn) -> Report:
    """fn(op) -> (habit, factor): for an operation ``op`` of ``builder_ops()`` (a dict: name, flops, bytes,
    dtype, matmul, fused_bytes, flash_bytes, fp32_only, gpu, launch_us), the habit in ``HABITS`` that cuts its
    time bound t = max(F/C, D/B, launch_us) most, and the factor t_before / t_after. Precision: bytes halved and,
    for a matmul, the bf16 tensor-core peak; fusion: ``fused_bytes``; flash: ``flash_bytes`` and half the
    FLOPs (causal tiles skipped); "none" with 1.0 when no habit gains 10%. A habit within 5% of the best counts
    as right; the factor must be within 10% of the counted one for the habit you name."""
    cases = [dict(op=op) for op in builder_ops()]

    def compare(case, got):
        op = case["op"]
        f = _habit_factors(op)
        best, best_f = _reference(op)
        if isinstance(got, tuple) and got and got[0] is _USED_REFERENCE:
            return (
                f"your function calls the checker's own answer ({got[1]}): compute the time before and after "
                "each habit from op's fields yourself"
            )
        try:
            habit, factor = got
        except (TypeError, ValueError):
            return f"expected a pair (habit, factor), got {_short(got)}"
        if habit not in HABITS:
            return f"habit must be one of {HABITS}, got {habit!r}"
        if best == "none" and habit != "none":
            return (
                f"{op['name']}: no habit gains 10% ({habit} {f[habit]:.3g}x): it sits at its roof or below the "
                "launch overhead; look for the time elsewhere in the step"
            )
        if best != "none" and f[habit] < 0.95 * best_f:
            return f"{op['name']}: {habit} gives {f[habit]:.3g}x, but {best} gives {best_f:.3g}x"
        if not close(factor, f[habit], 0.10):
            return f"{op['name']}: {habit} gives {f[habit]:.3g}x by the counts, you said {_short(factor)}"
        return None

    return run_cases("builder_test", fn, cases, compare, call=_call_refusing_the_reference)


check_builder_test.solution = _builder_solution
check_builder_test.hints = [
    "Write one helper first: the time of a kernel is the largest of F / C, D / B and the launch cost "
    "op['launch_us'], with C and B from hardware.get(op['gpu']) (roofline.peak_for picks C: the tensor cores "
    "only for a matmul). Each habit's factor is that time before over that time after, one input changed.",
    "Precision halves the bytes and, for a matmul, moves C to the bf16 tensor cores; it does not apply where "
    "op['fp32_only'] is set. Fusion swaps in op['fused_bytes'], flash op['flash_bytes'] and half the FLOPs "
    "(causal tiles skipped); a habit whose field is None gives 1.0.",
    "An operation under the launch cost gains nothing from fewer bytes: that is the 'none' case (no habit "
    "gains 10%). Work one op by hand first: write its time before and after each habit, and say which of "
    "F / C, D / B and the launch cost is the largest in each; the factor changes only where that term changes.",
]


def check_named_habit(habit, op_name: str = "bias add + GELU") -> Report:
    """The Builder Test's first step, before writing a kernel: ``habit`` (one of ``HABITS``) is the one that moves
    the bound of the operation of ``builder_ops()`` whose name starts with ``op_name`` most (``_habit_factors``;
    within 5% of the best counts, as in ``check_builder_test``). ``None`` fails with a line asking for a
    habit. Raises ValueError for an ``op_name`` no operation has."""
    op = next((o for o in builder_ops() if o["name"].startswith(op_name)), None)
    if op is None:
        raise ValueError(f"op_name must start the name of one of builder_ops(), got {op_name!r}")
    rep = Report("named habit", cases=1)
    best, factor = _reference(op)
    f = _habit_factors(op)
    if habit is None:
        rep.failures.append(f"no habit named yet for {op['name']}: set my_habit to one of {HABITS}")
    elif habit not in HABITS:
        rep.failures.append(f"habit must be one of {HABITS}, got {habit!r}")
    elif f[habit] < 0.95 * factor or (best == "none") != (habit == "none"):
        rep.failures.append(f"{op['name']}: {habit} gives {f[habit]:.3g}x, {best} gives {factor:.3g}x")
    return rep


# ---- your own fused kernel ---------------------------------------------------------------------------------

#: (M, N) of the bias + GELU exercise: one element, short rows, partial blocks, and 67 x 2003, above 2^17 elements
#: (past one program of any block a flat kernel may fix). The checker adds a drawn shape and one with rows wider
#: than any block a row kernel may fix (``cases.ROW_LIMIT``: GPT-2's 768 and 3072 fit in 4096).
SHAPES = [(1, 1), (1, 17), (3, 1000), (7, 1793), (33, 100), (67, 2003)]
REL = ABS = 1e-5  # tanh-GELU in fp32 against float64: a few fp32 ulps of h and of tanh, far below this


def gelu_ref(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """tanh-GELU(x + bias) in float64 (Hendrycks and Gimpel, 2016; GPT-2's approximation)."""
    h = x.double() + bias.double()
    return 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))


def gelu_erf_ref(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The exact GELU, h Phi(h) = 0.5 h (1 + erf(h / sqrt 2)), of h = x + bias, in float64: not GPT-2's."""
    h = x.double() + bias.double()
    return 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))


def bias_gelu_mistake(got: torch.Tensor, x: torch.Tensor, bias: torch.Tensor) -> str | None:
    """The mistake a wrong ``out`` (float64 on the CPU, (M, N)) shows in its pattern, or None: the exact (erf) GELU
    for GPT-2's tanh one, the bias left out, or the bias indexed by the row (flat index // N), by k // M or by
    k mod M instead of the column (flat index mod N). Each is named only where it explains every element."""
    x, bias = x.double().cpu(), bias.double().cpu()
    M, N = x.shape

    def fits(ref):
        return bool(((got - ref).abs() <= REL * ref.abs() + ABS).all())

    if fits(gelu_erf_ref(x, bias)):
        return (
            "that is the exact GELU, 0.5 h (1 + erf(h / sqrt 2)); GPT-2's is the tanh approximation, "
            "0.5 h (1 + tanh(sqrt(2 / pi) (h + 0.044715 h^3))), up to 1e-3 apart"
        )
    if fits(gelu_ref(x, torch.zeros_like(bias))):
        return "out is GELU(x): the bias was never added (h = x + bias[column], in registers)"
    rows, flat = torch.arange(M)[:, None].expand(M, N), torch.arange(M * N).reshape(M, N)
    wrong = {
        "the bias of the row, bias[k // N]": rows,
        "bias[k // M], the column were x stored column by column": flat // M,
        "bias[k % M], the flat index modulo the number of rows": flat % M,
    }
    for what, index in wrong.items():
        if int(index.max()) < N and not torch.equal(index, flat % N) and fits(gelu_ref(x, bias[index])):
            return f"the bias is indexed wrong: out used {what}; element k = i N + j needs its column's, bias[k % N]"
    return None


def check_bias_gelu(fn, seed: int | None = None) -> Report:
    """fn(x, bias, out): write tanh-GELU(x + bias) into ``out``; x, out: (M, N) contiguous fp32 on
    gpulab.DEVICE, bias: (N,). The checker owns every buffer (guarded, see ``kernelcheck``): ``out`` starts
    poisoned, reads past the end find poison rather than unmapped memory. Awkward shapes (``SHAPES``, one drawn
    in [2, 40] x [2, 3000] and a few rows wider than ``cases.ROW_LIMIT``), fresh random inputs, all drawn by
    ``cases.Draw`` from ``seed`` (which the report prints), a float64 reference within ``REL`` and ``ABS``: names
    the first wrong element, a write past the end ("mask the store") and a missed one."""
    draw = Draw(seed)
    seed = draw.seed
    shapes = SHAPES + [(draw.size(2, 40), draw.size(2, 3000)), (draw.size(1, 3), draw.past(ROW_LIMIT))]
    cases = [dict(x=draw.randn(m, n, scale=3.0), bias=draw.randn(n)) for m, n in shapes]

    def mismatch(got, ref, case):
        got = got.detach().double().cpu()
        bad = (~((got - ref).abs() <= REL * ref.abs() + ABS)).nonzero()
        if not len(bad):
            return None
        i, j = bad[0].tolist()
        head = (
            f"shape {tuple(got.shape)} (seed {seed}): {len(bad)} wrong, first at [{i}, {j}]: expected "
            f"{ref[i, j].item():.7g}, got {got[i, j].item():.7g}"
        )
        named = bias_gelu_mistake(got, case["x"], case["bias"])
        return Mistake("values", f"values differ: {head}: {named}") if named else head

    return draw.stamp(
        check_kernel(
            "bias_gelu",
            fn,
            cases,
            out=lambda c: (c["x"].shape, torch.float32),
            reference=lambda c: gelu_ref(c["x"], c["bias"]),
            mismatch=mismatch,
        )
    )


check_bias_gelu.solution = ex09_solutions.bias_gelu
check_bias_gelu.solution_module = ex09_solutions
check_bias_gelu.hints = [
    "Treat x as one flat array of M x N elements, as lesson 01's kernels do: each program takes one block of "
    "them, and a mask on the load and on the store stops the last block at the end.",
    "The element at flat position k sits in column k mod N, so that is the bias it needs; load the bias under "
    "the same mask, add it in registers and never store the sum.",
    "GELU_tanh(h) is half of h times (1 + tanh(sqrt(2 / pi) (h + 0.044715 h cubed))); where your Triton has no "
    "tanh, tanh(z) equals 2 sigmoid(2z) - 1. Launch enough programs to cover M x N.",
]


def swap_in(kernel, steps: int = 3, seed: int = 0) -> dict:
    """Train the tiny GPT (``gpulab.capstone.gpt.TINY``) ``steps`` steps with torch's bias + GELU and again with
    ``kernel(x, bias, out)`` in the MLP (``Options(bias_gelu=kernel)``); same seed. Returns both loss curves and
    the largest difference. Run it after ``check_bias_gelu`` passes."""
    from ..capstone.gpt import TINY, Options, Trainer

    curves = {}
    for name, opts in (("torch", Options()), ("yours", Options(bias_gelu=kernel))):
        t = Trainer(TINY, opts, device=gpulab.DEVICE, seed=seed)
        curves[name] = [float(t.step()) for _ in range(steps)]
    diff = max(abs(a - b) for a, b in zip(curves["torch"], curves["yours"]))
    return dict(**curves, max_diff=diff)
