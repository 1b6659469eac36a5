"""Exercises of lesson 08b (the FlashAttention backward): the backward tiled in torch from the saved logsumexp and
delta = rowsum(dO o O), then (optional) the same in Triton. Both are checked against float64 autograd with both
causal flags, B and H above 1, lengths that are multiples of no tile and every head dimension of the lesson; a
wrong answer is matched against the answers of the usual mistakes (``_SIGNATURES``: no delta, no scale, P not
masked, dS not transposed, P not normalised by lse), each computed in float64 (Dao et al. 2022, Appendix B.2, for
the derivation). What the launcher did is checked too (``work``): no gradient from torch's autograd, no torch
attention kernel, and (the torch backward, at ``MEMORY_CASE``) no more memory at once than a tiled backward
needs (``memory_bound``), which one head's L x L matrix exceeds."""

from __future__ import annotations

import math

import torch

import gpulab

from ..core import tolerances
from ..kernels.flash_attention import HEAD_DIMS, flash_attention_ref
from . import Report, _short, ex08b_solutions, run_cases_once, work
from .cases import Draw
from .kernelcheck import check_kernel

#: (B, H, L) of the backward's cases: L = 1, lengths that are multiples of no tile of 16 or more, B and H above 1.
BACKWARD_CASES = ((1, 1, 1), (2, 3, 45), (1, 2, 77))
#: The head dimensions each case's is drawn from (``flash_attention.HEAD_DIMS``, 16 to 128), every one of them used.
BACKWARD_HEAD_DIMS = HEAD_DIMS
#: (B, H, L, d) at which the torch backward's memory is held to ``memory_bound`` (not causal: the memory is the
#: same, and the interpreter time halves): there one head's L x L matrix with the outputs (352 KiB in fp32) is over
#: the bound (256 KiB), and tiles of up to 64 x 64 with the outputs are under it.
MEMORY_CASE = (1, 2, 256, 16)


def memory_bound(B: int, H: int, L: int, d: int) -> int:
    """Bytes a tiled backward of fp32 (B, H, L, d) inputs holds at once, at most: six (B, H, L, d) buffers (dq, dk,
    dv and the temporaries of their updates) and four tiles of 64 x 64 (S or P, dP, dS and a product that updates a
    block), 4 bytes an element."""
    return 4 * (6 * B * H * L * d + 4 * 64 * 64)


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
    names = ("dq", "dk", "dv")
    for i, j in ((0, 1), (0, 2), (1, 2)):  # two gradients each stored where the other belongs
        if {names[i], names[j]} == set(bad) and all(
            tolerances.max_rel_error(got[a], ref[b], floor) <= rel for a, b in ((i, j), (j, i))
        ):
            return (
                f"{names[i]} and {names[j]} swapped: out[{i}] holds {names[j]} and out[{j}] holds {names[i]}; "
                "out[0] = dq, out[1] = dk, out[2] = dv"
            )
    return f"{' and '.join(bad)} wrong (> {rel:.1e}): {msg}"


def _shapes(draw: Draw, cases) -> list[tuple[int, int, int, int]]:
    """(B, H, L, d): the fixed (B, H, L) ``cases`` and one drawn (B, H in 1..3 and 2..3, L in [2, 69]), each with a
    head dimension of ``BACKWARD_HEAD_DIMS``, every one of them among the cases (``Draw.spread``)."""
    shapes = [*cases, (draw.size(1, 3), draw.size(2, 3), draw.size(2, 69))]
    return [(*s, d) for s, d in zip(shapes, draw.spread(BACKWARD_HEAD_DIMS, len(shapes)))]


def check_flash_backward(fn, seed: int | None = None) -> Report:
    """fn(q, k, v, o, lse, do, causal) -> (dq, dk, dv): the FlashAttention backward tiled in torch. q, k, v, do, o:
    (B, H, L, d) float32 (o the forward's output); lse: (B, H, L) float32, the forward's row logsumexp; returns
    three (B, H, L, d) tensors. Checked against float64 autograd (``flash_attention_ref``) within
    ``tolerances.ATTENTION_GRAD_REL`` on (B, H, L) in ``BACKWARD_CASES`` and a drawn one, each with a head
    dimension of ``BACKWARD_HEAD_DIMS``, both causal flags, and ``MEMORY_CASE``; the shapes and inputs are drawn by
    ``cases.Draw`` from ``seed``, which the report prints. A wrong gradient is matched against the usual mistakes'
    answers (``_SIGNATURES``); a right one must not come from torch's autograd or attention kernels, and at
    ``MEMORY_CASE`` the tensors it makes may not take more than ``memory_bound`` at once (``work.torch_shortcut``:
    one head's L x L matrix does)."""
    draw = Draw(seed)
    cases = []
    for B, H, L, d in [*_shapes(draw, BACKWARD_CASES), MEMORY_CASE]:
        q, k, v, do = (draw.randn(B, H, L, d, dtype=torch.float64, device="cpu") for _ in range(4))
        for causal in (False,) if (B, H, L, d) == MEMORY_CASE else (False, True):
            o, lse = flash_attention_ref(q, k, v, causal)
            f32 = [t.float() for t in (q, k, v, o, lse, do)]
            cases.append(dict(zip(("q", "k", "v", "o", "lse", "do"), f32), causal=causal))
    tally = work.Tally()
    launcher = work.watched(fn, tally, torch_ops=True, interpreted_only=False)

    def call(fn, case):
        return launcher(*(t.clone() if isinstance(t, torch.Tensor) else t for t in case.values()))

    def compare(case, got):
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
        if msg is not None:
            return msg
        if (B, H, L, d) != MEMORY_CASE:
            return work.torch_shortcut(tally)
        what = (
            f" (one head's L x L matrix alone: {L * L * 4 / 2**20:.2f} MiB; the bound: six (B, H, L, d) buffers and "
            "four 64 x 64 tiles, in fp32)"
        )
        return work.torch_shortcut(tally, memory_bound(B, H, L, d), what)

    return draw.stamp(run_cases_once("flash_backward", fn, cases, compare, call=call, describe=_describe))


check_flash_backward.solution = ex08b_solutions.flash_backward
check_flash_backward.hints = [
    "compute delta, each row's sum of dO o O, once; then loop over query blocks i and key blocks j (causal: only j up to the "
    "block's last row) and rebuild the tile P = exp(q_i k_j^T * scale - lse_i), zero where the causal mask hides it",
    "from the tile: dV_j += P^T dO_i, dP = dO_i V_j^T, dS = P o (dP - delta_i), dQ_i += scale dS K_j and dK_j += "
    "scale dS^T Q_i (section 1's five formulas, one tile at a time)",
]


def check_flash_backward_kernel(fn, seed: int | None = None) -> Report:
    """fn(q, k, v, do, lse, delta, causal, out) launches Triton kernels that write the gradients into ``out``:
    out[0] = dq, out[1] = dk, out[2] = dv. q, k, v, do: contiguous (B, H, L, d), fp32 in the interpreter and fp16
    on a GPU; lse, delta: (B, H, L) float32 (the forward's logsumexp and rowsum(dO o O)); out: (3, B, H, L, d) in
    q's dtype. Checked by ``kernelcheck.check_kernel`` (guard regions, a time limit, address checks) on (B, H, L)
    in ``BACKWARD_CASES`` and a drawn one, each with a head dimension of ``BACKWARD_HEAD_DIMS`` (drawn by ``cases.Draw``
    from ``seed``, which the report prints), both causal flags, against float64 within
    ``tolerances.ATTENTION_GRAD_REL``; a wrong gradient is matched against the usual mistakes' answers
    (``_SIGNATURES``). The kernels must read q, k and v (every element loaded) and the launcher must not take the
    gradients from torch's autograd or attention kernels (``work.torch_shortcut``)."""
    dtype = torch.float16 if gpulab.ON_GPU else torch.float32
    draw = Draw(seed)
    cases = []
    for B, H, L, d in _shapes(draw, BACKWARD_CASES):
        q, k, v, do = (draw.randn(B, H, L, d, dtype=torch.float64, device="cpu") for _ in range(4))
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
        msg = _mismatch(list(g), list(ref), q, k, v, do, c["causal"], c["q"].dtype, "tf32")  # tl.dot's default
        return msg or work.torch_shortcut(tally)

    tally = work.Tally()
    return draw.stamp(
        check_kernel(
            "flash_backward_kernel",
            work.watched(fn, tally, torch_ops=True),
            cases,
            out=lambda c: ((3, *c["q"].shape), c["q"].dtype),
            reference=reference,
            mismatch=mismatch,
            unwritten=lambda c, mask, stores, launches: _gradients_unwritten(mask),
        )
    )


def _gradients_unwritten(mask: torch.Tensor) -> str | None:
    """The message for an out (3, B, H, L, d) of which one or two gradients (out[0] = dq, out[1] = dk, out[2] =
    dv) were never written at all while another was, or None. ``mask``: bool, flat, True where never written."""
    parts = mask.reshape(3, -1)
    whole = [i for i in range(3) if bool(parts[i].all())]
    if not whole or len(whole) == 3:
        return None
    names = " and ".join(f"out[{i}] ({('dq', 'dk', 'dv')[i]})" for i in whole)
    return (
        f"{names} {'was' if len(whole) == 1 else 'were'} never written, while the rest of out was: out is (3, B, H, "
        "L, d), out[0] = dq, out[1] = dk, out[2] = dv; each kernel must store its gradients into its part of out"
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
