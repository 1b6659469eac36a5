"""Exercises of lesson 03 (precision)."""

from __future__ import annotations

import math
import random

import torch
import triton
import triton.language as tl

import gpulab

from ..core import dtypes
from ..models import formats
from ..models.waves import cdiv
from . import Report, _short, close, ex03_solutions, is_int, kernelcheck, run_cases, say_once
from .cases import Draw
from .kernelcheck import check_kernel, checker_made

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
_BF16_NOTE = (
    "only cases with bf16 fail: compute in fp32 (x.to(tl.float32)) and cast on the store "
    "(y.to(out_ptr.dtype.element_ty)); Triton's interpreter mishandles bf16 values otherwise"
)


def check_relu_cast(fn, seed: int | None = None) -> Report:
    """fn(x, out) launches a Triton kernel that writes out = max(x, 0) in out's dtype; x: 1-D fp32, fp16 or
    bf16 on gpulab.DEVICE, any length; out: x's shape, in x's dtype or (for fp32 x) fp16 or bf16. The checker
    owns x and out (guarded buffers, see ``kernelcheck``), runs each (x dtype, out dtype) pair of
    ``RELU_CAST_PAIRS`` on awkward lengths (1, 17, 1000, 1793, and random ones; the fp32 pair also
    ``kernelcheck.LONG_N``) with fresh normal inputs, and names the mistake (``kernelcheck``): a missing mask,
    too small a grid, an input written, no Triton launch, wrong values (against float64: within one ulp of
    out's dtype, i.e. one rounding). The random length in [2, 5000] and the inputs are drawn by ``cases.Draw``
    from ``seed``, which the report prints."""
    draw = Draw(seed)
    sizes = AWKWARD + [draw.size(2, 5000)]
    total = draw.stamp(Report("relu_cast"))
    for din, dout in RELU_CAST_PAIRS:
        lengths = sizes + [kernelcheck.LONG_N] * (din == dout == torch.float32)
        cases = [dict(x=draw.randn(n, dtype=din, scale=3.0)) for n in lengths]
        rep = check_kernel(
            f"relu_cast {dtypes.name_of(din)}->{dtypes.name_of(dout)}",
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
    return say_once(total)


check_relu_cast.solution = ex03_solutions.relu_cast
check_relu_cast.solution_module = ex03_solutions
check_relu_cast.hints = [
    "the skeleton is the copy kernel's; what changes is the value stored and the dtype it is stored in",
    "compute in fp32 whatever x's dtype, and round once, on the store: a pointer knows the dtype it points to "
    "(out_ptr.dtype.element_ty)",
]


# ---- the block-scaled fp8 quantizer --------------------------------------------------------------------------

#: Values per scale of the quantizer exercise: the MX block size (OCP MX v1.0), ``formats.MX_BLOCK``.
QUANT_BLOCK = formats.MX_BLOCK
#: Slack on the quotient x / scale, in fp32 ulps: a kernel divides (or multiplies by 448 / amax) in fp32, a
#: few roundings away from the float64 quotient; its e4m3 rounding may land on either side only there.
_QUOTIENT_ULPS = 4


def _quant_cases(draw: Draw) -> list[dict]:
    """Fresh inputs on which no shortcut passes: each block of 32 has its own magnitude (10^-3 to 10^3, so one
    scale for the whole tensor fails), signs mixed (a block's largest magnitude is often negative, so max(x)
    instead of max(|x|) fails), one block all zeros (its scale is 0: a kernel that divides by it makes NaN),
    lengths that end in a partial block (1, 31, 33, 1000, 1793, one drawn in [2, 5000]) and ``kernelcheck.LONG_N``;
    everything drawn by ``draw``."""
    cases = []
    for n in [1, 31, 32, 33, 1000, 1793, kernelcheck.LONG_N, draw.size(2, 5000)]:
        g = torch.Generator().manual_seed(draw.seed_for())
        nb = cdiv(n, QUANT_BLOCK)
        mag = 10.0 ** (torch.rand(nb, generator=g, dtype=torch.float64) * 6 - 3)
        x = torch.randn(nb * QUANT_BLOCK, generator=g, dtype=torch.float64) * mag.repeat_interleave(QUANT_BLOCK)
        if nb > 2:
            x[QUANT_BLOCK : 2 * QUANT_BLOCK] = 0.0
        cases.append(dict(x=x[:n].float().to(gpulab.DEVICE)))
    return cases


def _quant_amax(x: torch.Tensor) -> torch.Tensor:
    """Per block of ``QUANT_BLOCK``: the largest |x| (float64, CPU, (cdiv(n, 32),)), the last block partial."""
    x64 = x.detach().double().cpu()
    nb = cdiv(x64.numel(), QUANT_BLOCK)
    padded = torch.zeros(nb * QUANT_BLOCK, dtype=torch.float64)
    padded[: x64.numel()] = x64.abs()
    return padded.view(nb, QUANT_BLOCK).amax(dim=1)


def _quant_quotient(x: torch.Tensor) -> torch.Tensor:
    """x / scale per element, float64 (0 in a block of zeros), scale = amax / 448."""
    amax = _quant_amax(x).repeat_interleave(QUANT_BLOCK)[: x.numel()]
    scale = amax / formats.E4M3_MAX
    return torch.where(amax > 0, x.detach().double().cpu() / torch.where(amax > 0, scale, 1.0), 0.0)


@triton.jit
def _cast_e4m3_kernel(v_ptr, q_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(q_ptr + offs, tl.load(v_ptr + offs, mask=mask).to(tl.float8e4nv), mask=mask)


def _interpreter_e4m3(v32: torch.Tensor) -> torch.Tensor:
    """fp32 values cast to e4m3 by Triton's interpreter (float64, CPU). Triton 3.9's interpreter rounds ties
    away from zero and truncates below e4m3's smallest normal (2^-6); a GPU rounds to nearest even (PTX
    cvt.rn.satfinite). A learner's cast judged on the CPU is allowed the interpreter's rounding. Raises
    RuntimeError on a GPU, where the cast kernel compiles for the GPU and no interpreter cast exists to compare."""
    if gpulab.ON_GPU:
        raise RuntimeError("_interpreter_e4m3: gpulab runs on a GPU here; only the GPU's stores are judged")
    q = torch.empty(v32.numel(), dtype=torch.float8_e4m3fn)
    _cast_e4m3_kernel[(triton.cdiv(v32.numel(), 1024),)](v32.contiguous(), q, v32.numel(), BLOCK=1024)
    return q.double()


def _quant_values_mismatch(got, ref, case, interpreted: bool | None = None):
    """None when each stored e4m3 value is the rounding to nearest even (saturating at 448, formats.quantize_e4m3)
    of x / scale, allowing the quotient a few fp32 ulps (``_QUOTIENT_ULPS``); in the interpreter, its own cast
    of those quotients too (``_interpreter_e4m3``). interpreted: whether got was stored by the interpreter (None:
    where got lives on the CPU)."""
    v64 = _quant_quotient(case["x"])
    v32 = v64.float()
    lo, hi = v32, v32
    for _ in range(_QUOTIENT_ULPS):
        lo, hi = torch.nextafter(lo, torch.tensor(-math.inf)), torch.nextafter(hi, torch.tensor(math.inf))
    cands = [formats.quantize_e4m3(t.double()) for t in (lo, v32, hi)]
    if got.device.type == "cpu" if interpreted is None else interpreted:
        cands += [_interpreter_e4m3(t) for t in (lo, v32, hi)]
    cands = torch.stack(cands)
    g = got.detach().double().cpu()
    bad = ~((g >= cands.min(0).values) & (g <= cands.max(0).values))
    if not bad.any():
        return None
    i = int(bad.nonzero()[0])
    head = (
        f"{int(bad.sum())} of {g.numel()} values differ from x / scale rounded to nearest e4m3; first at index {i}: "
        f"x = {case['x'][i].item():.6g}, x / scale = {v64[i].item():.6g}, expected {ref[i].item():.6g}, got "
        f"{g[i].item():.6g}"
    )
    grid = formats.e4m3_values(nonnegative=True)  # sorted magnitudes, 0 to 448
    # rounded toward zero from the quotient or from one a few fp32 ulps off it (the kernel divides in fp32)
    toward_zero = torch.zeros_like(bad)
    for t in (lo, v32, hi):
        mag = t.double().abs().clamp(max=formats.E4M3_MAX)
        down = grid[(torch.searchsorted(grid, mag, right=True) - 1).clamp(min=0)]
        toward_zero |= g == torch.copysign(down, v64)
    zero_block = (_quant_amax(case["x"]) == 0).repeat_interleave(QUANT_BLOCK)[: g.numel()]
    if bool((bad & zero_block).any()):
        j = int((bad & zero_block).nonzero()[0])
        head += (
            f"; index {j} lies in a block of zeros, whose scale is 0: x / 0 is NaN (0/0), and a NaN cast to e4m3 is "
            "NaN on a GPU, garbage in the interpreter; divide only where amax > 0"
        )
    elif bool(toward_zero[bad].all()):
        head += ": every miss is rounded toward zero; round to nearest (the cast .to(tl.float8e4nv) does)"
    elif bool((g.abs() > formats.E4M3_MAX).any() | torch.isinf(g).any()):
        head += ": a value beyond 448, e4m3's largest finite value: the scale makes each block's amax land on 448"
    return head


def _quant_scales_mismatch(got, ref, case):
    """None when each scale is amax / 448 within a few fp32 roundings (2^-21 relative); else the first that differs,
    and what a wrong scale most often is."""
    g = got.detach().double().cpu()
    bad = ~((g - ref).abs() <= 2.0**-21 * ref.abs())
    if not bad.any():
        return None
    i = int(bad.nonzero()[0])
    head = (
        f"{int(bad.sum())} of {g.numel()} scales differ; first block {i} (amax {ref[i].item() * 448:.6g}): expected "
        f"amax / 448 = {ref[i].item():.6g}, got {g[i].item():.6g}"
    )
    live = ref > 0
    ratio = g[live] / ref[live]
    if live.sum() > 1 and bool((g[live] == g[live][0]).all()):
        return head + ": one scale for the whole tensor; each block of 32 values has its own"
    if live.any() and torch.allclose(g[live] * ref[live], torch.ones_like(ratio), rtol=1e-5):
        return (
            head + ": that is 448 / amax, what x is multiplied by; store the scale that multiplies back, x ~ q * scale"
        )
    if live.any() and torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-5):
        return head + f": off by a constant factor ({ratio[0].item():.4g}); e4m3's largest finite value is 448"
    return head


def check_quantize_fp8(fn, seed: int | None = None) -> Report:
    """fn(x, q, scales) launches a Triton kernel that quantizes x block by block: for each block of
    ``QUANT_BLOCK`` (32) consecutive values (the last block may be shorter), scale = amax / 448 (amax the
    block's largest |x|; 448 e4m3's largest finite value), q = x / scale rounded to nearest e4m3 (0 in a
    block of zeros, whose scale is 0), so that x ~ q * scale. x: (n,) float32; q: (n,) torch.float8_e4m3fn;
    scales: (cdiv(n, 32),) float32; all on gpulab.DEVICE.

    The checker owns the buffers (guarded, see ``kernelcheck``) and runs each case twice, once judging q and
    once judging scales (the other output is a plain tensor the checker makes, ``checker_made``, so that each run
    has one guarded output; the messages call each by its name), on the inputs of ``_quant_cases``, against
    float64 (``_quant_values_mismatch``, ``_quant_scales_mismatch``); it names the mistake: a missing mask, too small a grid, a NaN from dividing by a
    zero scale, one scale for the tensor, the reciprocal scale, rounding toward zero. The rounding rules are
    ``formats.quantize_e4m3``'s (OCP 8-bit floating point, e4m3fn). The inputs are drawn by ``cases.Draw`` from
    ``seed``, which the report prints."""
    draw = Draw(seed)
    cases = _quant_cases(draw)
    nblocks = lambda c: cdiv(c["x"].numel(), QUANT_BLOCK)  # noqa: E731
    # the output a run does not judge is the checker's too, unguarded, and named as the exercise names it
    q_of = lambda c: checker_made(  # noqa: E731
        torch.empty(c["x"].shape, dtype=torch.float8_e4m3fn, device=c["x"].device), "q"
    )
    s_of = lambda x: checker_made(  # noqa: E731
        torch.empty(cdiv(x.numel(), QUANT_BLOCK), dtype=torch.float32, device=x.device), "scales"
    )
    total = draw.stamp(Report("quantize_fp8"))
    runs = [
        (
            "quantize_fp8 q",
            lambda x, q: fn(x, q, s_of(x)),
            lambda c: (c["x"].shape, torch.float8_e4m3fn),
            lambda c: formats.quantize_e4m3(_quant_quotient(c["x"])),
            _quant_values_mismatch,
        ),
        (
            "quantize_fp8 scales",
            lambda x, s: fn(x, q_of(dict(x=x)), s),
            lambda c: ((nblocks(c),), torch.float32),
            lambda c: _quant_amax(c["x"]) / formats.E4M3_MAX,
            _quant_scales_mismatch,
        ),
    ]
    for name, call, out, reference, mismatch in runs:
        rep = check_kernel(
            name,
            call,
            cases,
            out=out,
            out_name=name.split()[-1],
            reference=reference,
            mismatch=mismatch,
            notes={
                "nan_arith": (
                    "; a quantizer's NaN comes from 0 / 0 (a block of zeros has scale 0: divide only where amax > 0) "
                    "or from a quotient past e4m3's 448, which the cast turns into NaN (x / scale, scale = amax / "
                    "448, stays within 448)"
                )
            },
        )
        if not rep.attempted:
            return Report("quantize_fp8", attempted=False)
        total.extend(rep)
    return say_once(total)


check_quantize_fp8.solution = ex03_solutions.quantize_fp8
check_quantize_fp8.solution_module = ex03_solutions
check_quantize_fp8.hints = [
    "a program can own whole blocks: lay its elements out as a 2-D tile, one block of 32 per row, so that the "
    "amax of every block is one reduction along the row axis",
    "the mask works on the flat index of each element; a masked-off lane must not raise a block's amax (which "
    "value, loaded there, is harmless to a max of magnitudes?)",
    "the scale multiplies back (x ~ q * scale) and is 0 for a block of zeros: divide only where it is not, and "
    "let the store's cast into q's dtype do the rounding",
]


def _quant_bytes_solution(n: int, dtype: torch.dtype, block: int) -> int:
    """HBM bytes of the block quantizer (``check_quantize_fp8``, any block size): read n values of ``dtype``,
    write n one-byte e4m3 values and one 4-byte fp32 scale per block of ``block`` (the last block may be
    partial, and has its scale too)."""
    return n * dtype.itemsize + n + cdiv(n, block) * 4


def check_quant_bytes(fn) -> Report:
    """fn(n, dtype, block) -> int: the bytes the block quantizer of exercise 4 moves through HBM on n values of
    torch dtype ``dtype`` (fp32, bf16 or fp16 in), one fp32 scale per ``block`` values, e4m3 values out."""
    rng = random.Random()
    cases = [dict(n=1, dtype=torch.float32, block=32), dict(n=1000, dtype=torch.bfloat16, block=32)]
    cases += [
        dict(
            n=rng.choice(AWKWARD + [rng.randrange(1, 2**31)]),
            dtype=rng.choice(RELU_DTYPES[:3]),
            block=rng.choice([16, 32, 128]),
        )
        for _ in range(20)
    ]

    def compare(case, got):
        n, d, b = case["n"], case["dtype"], case["block"]
        exp = _quant_bytes_solution(n, d, b)
        if not is_int(got):
            return f"expected an int number of bytes, got {_short(got)}"
        if got == exp:
            return None
        head = f"expected {exp}, got {got}"
        if got == n * d.itemsize + n:
            return head + ": the scales are written too, one fp32 per block"
        if got == n * d.itemsize + n + (n // b) * 4:
            return head + ": a partial last block has a scale too: ceil(n / block) scales"
        if got == n * d.itemsize + n + cdiv(n, b):
            return head + ": each scale here is fp32, 4 bytes (MXFP8's E8M0 scale would be 1)"
        if got == 2 * n * d.itemsize + cdiv(n, b) * 4 or got == 2 * n * d.itemsize:
            return head + ": the values are written as e4m3, one byte each, whatever the input dtype"
        return head

    return run_cases("quant_bytes", fn, cases, compare)


check_quant_bytes.solution = _quant_bytes_solution
check_quant_bytes.hints = [
    "list every array the kernel reads or writes, with its length and its bytes per element; one of them is not n long",
]
