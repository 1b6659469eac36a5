"""Exercises of lesson 08b (the FlashAttention backward): the backward tiled in torch from the saved logsumexp and
delta = rowsum(dO o O), then (optional) the same in Triton. Both are checked against float64 autograd with both
causal flags, B and H above 1 and lengths that are multiples of no tile; a wrong answer is matched against the
answers of the usual mistakes (``_SIGNATURES``: no delta, no scale, P not masked, dS not transposed, P not
normalised by lse), each computed in float64 (Dao et al. 2022, Appendix B.2, for the derivation)."""

from __future__ import annotations

import math
import random

import torch
from torch.overrides import TorchFunctionMode

import gpulab

from ..core import tolerances
from ..kernels.flash_attention import flash_attention_ref
from . import Report, _short, ex08b_solutions, run_cases_once
from .kernelcheck import check_kernel

#: (B, H, L) of the backward's cases: L = 1, lengths that are multiples of no tile of 16 or more, B and H above 1;
#: ``TILED_L`` is the length at which an L x L tensor is told apart from tiles of up to 64 x 64.
BACKWARD_CASES = ((1, 1, 1), (2, 3, 45), (1, 2, 77))
TILED_L = 150
BACKWARD_D = 16
#: The usual mistakes of a FlashAttention backward, as switches of ``_grads64``, each with what to fix.
_SIGNATURES = (
    (dict(delta=False), "dS = P o (dP - delta): the delta term (delta = rowsum(dO o O)) is missing"),
    (dict(scaled=False), "dQ and dK carry the factor scale = 1/sqrt(d) of S = scale q k^T"),
    (dict(masked=False), "the rebuilt P is not causally masked: set P to 0 where key n > query m"),
    (dict(transpose=False), "dK = scale dS^T Q: dS is transposed (keys are its columns)"),
    (dict(normalised=False), "P is exp(scale q k^T - lse): subtract the saved logsumexp of the row"),
)


def _describe(case) -> str:
    """A case in a report line: its shape and causal flag (its six tensors share the shape)."""
    return f"(B, H, L, d) = {tuple(case['q'].shape)}, causal={case['causal']}"


def _grads64(q, k, v, do, causal, *, delta=True, scaled=True, masked=True, transpose=True, normalised=True):
    """(dq, dk, dv) of softmax(scale q k^T [causal]) v in float64 by the backward's formulas, each usual mistake a
    switch (False makes it): q, k, v, do (B, H, L, d); returns three (B, H, L, d) float64 tensors on the CPU."""
    q, k, v, do = (t.detach().double().cpu() for t in (q, k, v, do))
    L, d = q.shape[2], q.shape[3]
    sc = 1.0 / math.sqrt(d)
    s = q @ k.transpose(-1, -2) * sc
    keep = torch.ones(L, L, dtype=torch.bool).tril() if causal else torch.ones(L, L, dtype=torch.bool)
    lse = torch.logsumexp(s.masked_fill(~keep, float("-inf")), -1, keepdim=True)
    p = torch.exp(s - lse) if normalised else torch.exp(s)
    if masked:
        p = p * keep
    o = torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ v
    dv = p.transpose(-1, -2) @ do
    dp = do @ v.transpose(-1, -2)
    ds = p * (dp - (do * o).sum(-1, keepdim=True)) if delta else p * dp
    f = sc if scaled else 1.0
    dq = ds @ k * f
    dk = (ds.transpose(-1, -2) if transpose else ds) @ q * f
    return dq, dk, dv


def _mismatch(got: list, ref: list, q, k, v, do, causal, dtype, input_precision="ieee") -> str | None:
    """None when each of got = (dq, dk, dv) is within ``tolerances.attention_rel`` (grad) of ref (max |error| /
    max |ref|) for ``dtype`` inputs whose matmuls declare ``input_precision`` ("ieee": torch's fp32; "tf32":
    Triton's default dot); else which gradients are wrong, and the usual mistake whose answer they are."""
    rel = tolerances.attention_rel(dtype, input_precision, grad=True)
    floor = max(ref[2].abs().max().item(), 1e-3)  # dq, dk are 0 at L = 1: dv = dO sets the scale
    errs = [tolerances.max_rel_error(g, r, floor) for g, r in zip(got, ref)]
    bad = [n for n, e in zip(("dq", "dk", "dv"), errs) if not e <= rel]
    if not bad:
        return None
    msg = "max |error| / max |reference| " + ", ".join(f"{n} {e:.1e}" for n, e in zip(("dq", "dk", "dv"), errs))
    for switch, fix in _SIGNATURES:
        if switch.get("masked") is False and not causal:
            continue
        wrong = _grads64(q, k, v, do, causal, **switch)
        if all(tolerances.max_rel_error(g, w, floor) <= 4 * rel for g, w in zip(got, wrong)):
            return f"{' and '.join(bad)} wrong: {fix}"
    return f"{' and '.join(bad)} wrong (> {rel:.1e}): {msg}"


class _Largest(TorchFunctionMode):
    """Records the largest tensor (elements) that any torch function returns inside the ``with`` block."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def check_flash_backward(fn) -> Report:
    """fn(q, k, v, o, lse, do, causal) -> (dq, dk, dv): the FlashAttention backward tiled in torch. q, k, v, do, o:
    (B, H, L, d) float32 (o the forward's output); lse: (B, H, L) float32, the forward's row logsumexp; returns
    three (B, H, L, d) tensors. Checked against float64 autograd (``flash_attention_ref``) within
    ``tolerances.ATTENTION_GRAD_REL`` on (B, H, L) in ``BACKWARD_CASES`` and a random one, both causal flags; at
    L = ``TILED_L`` no tensor it makes may hold an L x L matrix per head (tiles of up to 64 x 64 do not). A wrong
    gradient is matched against the usual mistakes' answers (``_SIGNATURES``)."""
    rng = random.Random()
    shapes = [*BACKWARD_CASES, (rng.randint(1, 3), rng.randint(2, 3), rng.randrange(2, 70)), (1, 2, TILED_L)]
    cases = []
    for B, H, L in shapes:
        q, k, v, do = (torch.randn(B, H, L, BACKWARD_D, dtype=torch.float64) for _ in range(4))
        for causal in (False, True):
            o, lse = flash_attention_ref(q, k, v, causal)
            f32 = [t.float() for t in (q, k, v, o, lse, do)]
            cases.append(dict(zip(("q", "k", "v", "o", "lse", "do"), f32), causal=causal))

    def call(fn, case):
        with _Largest() as seen:
            got = fn(*(t.clone() if isinstance(t, torch.Tensor) else t for t in case.values()))
        return got, seen.largest

    def compare(case, result):
        got, largest = result
        try:
            dq, dk, dv = got
        except (TypeError, ValueError):
            return f"expected a tuple (dq, dk, dv), got {_short(got)}"
        q, k, v, do = (case[n].double() for n in ("q", "k", "v", "do"))
        B, H, L, d = q.shape
        for n, g in zip(("dq", "dk", "dv"), (dq, dk, dv)):
            if not isinstance(g, torch.Tensor) or tuple(g.shape) != (B, H, L, d):
                return f"{n} must be a tensor of shape {(B, H, L, d)}, got {_short(g)}"
        ref = _grads64(q, k, v, do, case["causal"])
        msg = _mismatch([dq, dk, dv], ref, q, k, v, do, case["causal"], torch.float32)
        if msg is None and L == TILED_L and largest >= B * H * L * L:
            return (
                f"a tensor of {largest} elements was made: that is an L x L matrix per head (B*H*L*L = "
                f"{B * H * L * L}); work tile by tile, a block of queries against a block of keys"
            )
        return msg

    return run_cases_once("flash_backward", fn, cases, compare, call=call, describe=_describe)


check_flash_backward.solution = ex08b_solutions.flash_backward
check_flash_backward.hints = [
    "delta = (do * o).sum(-1) once; then loop over query blocks i and key blocks j (causal: only j up to the "
    "block's last row) and rebuild the tile P = exp(q_i k_j^T * scale - lse_i), zero where the causal mask hides it",
    "from the tile: dV_j += P^T dO_i, dP = dO_i V_j^T, dS = P o (dP - delta_i), dQ_i += scale dS K_j and dK_j += "
    "scale dS^T Q_i (section 1's five formulas, one tile at a time)",
]


def check_flash_backward_kernel(fn) -> Report:
    """fn(q, k, v, do, lse, delta, causal, out) launches Triton kernels that write the gradients into ``out``:
    out[0] = dq, out[1] = dk, out[2] = dv. q, k, v, do: contiguous (B, H, L, d), fp32 in the interpreter and fp16
    on a GPU; lse, delta: (B, H, L) float32 (the forward's logsumexp and rowsum(dO o O)); out: (3, B, H, L, d) in
    q's dtype. Checked by ``kernelcheck.check_kernel`` (guard regions, a time limit, address checks) on (B, H, L)
    in ``BACKWARD_CASES``, both causal flags, against float64 within ``tolerances.ATTENTION_GRAD_REL``; a wrong
    gradient is matched against the usual mistakes' answers (``_SIGNATURES``)."""
    dtype = torch.float16 if gpulab.ON_GPU else torch.float32
    cases = []
    for B, H, L in BACKWARD_CASES:
        q, k, v, do = (torch.randn(B, H, L, BACKWARD_D, dtype=torch.float64) for _ in range(4))
        for causal in (False, True):
            o, lse = flash_attention_ref(q, k, v, causal)
            delta = (do * o).sum(-1)
            dev = lambda t, dt=dtype: t.to(dt).to(gpulab.DEVICE)  # noqa: E731
            cases.append(
                dict(q=dev(q), k=dev(k), v=dev(v), do=dev(do), lse=dev(lse, torch.float32),
                     delta=dev(delta, torch.float32), causal=causal)
            )  # fmt: skip

    def reference(c):
        return torch.stack(_grads64(c["q"], c["k"], c["v"], c["do"], c["causal"]))

    def mismatch(got, ref, c):
        g = got.detach().double().cpu()
        q, k, v, do = (c[n].double().cpu() for n in ("q", "k", "v", "do"))
        return _mismatch(list(g), list(ref), q, k, v, do, c["causal"], c["q"].dtype, "tf32")  # tl.dot's default

    return check_kernel(
        "flash_backward_kernel",
        fn,
        cases,
        out=lambda c: ((3, *c["q"].shape), c["q"].dtype),
        reference=reference,
        mismatch=mismatch,
    )


check_flash_backward_kernel.solution = ex08b_solutions.flash_backward_kernel
check_flash_backward_kernel.solution_module = ex08b_solutions
check_flash_backward_kernel.hints = [
    "two kernels, as the teaching backward: one program per block of keys (grid (cdiv(L, BLOCK_N), B * H)) sums "
    "dK and dV over the query blocks; one per block of queries (grid (cdiv(L, BLOCK_M), B * H)) sums dQ over the "
    "key blocks. Each rebuilds its P tile from lse, as your torch version does",
    "lse and delta are (B, H, L): row r of head bh is at bh * L + r. Causal: the key block's loop starts at the "
    "query block holding its first key; the query block's loop stops after its last row. tl.dot takes two "
    "operands of one dtype: P and dS are fp32, so cast them to q's dtype before the dots that use them (a GPU "
    "refuses the mix at compile time; the interpreter lets it pass)",
]
