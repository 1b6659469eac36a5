"""Two probes of the memory system for lesson 00: a repeated read of a working set (the hierarchy's
staircase) and a copy on a limited number of programs (latency hiding).

``read_sum``: the working set is the first ``n`` float32 elements of ``x`` (W = 4n bytes), cut into parts of
``part`` elements (the last may be shorter). Program ``p`` of ``programs`` reads part ``p mod n_parts`` when
there are fewer parts than programs (each SM then reads the whole of a small working set and keeps its own
copy in its L1), else parts ``p, p + programs, ...``; it reads them ``passes`` times within the launch and
writes one float32 partial sum, so the compiler cannot drop the loads. The first pass brings the data in
(``time_ms`` flushes the L2 before each launch); the later passes hit the smallest level that holds it.
``l2_only=True`` loads past the L1 (``.cg``), so that shared-out parts, which together could sit in the SMs'
L1s, are read from the L2 or HBM.

``copy_persistent``: y = x with a grid of exactly ``programs`` programs, each walking the tiles ``p, p +
programs, ...``: bandwidth against the number of programs (and warps) in flight shows Little's law, bytes in
flight = bandwidth x latency.

Counts by hand: ``read_sum_counts`` (bytes read, one add per element read) and ``copy_counts`` (8n bytes).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..core.validate import positive_int
from ..models.waves import cdiv
from ._checks import check_block, check_tensor

NUM_WARPS = 4  # warps per program of both kernels (the latency sweep counts warps as programs x NUM_WARPS)


@triton.jit
def read_sum_kernel(x_ptr, out_ptr, n, part, n_parts, passes, BLOCK: tl.constexpr, CACHE: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(passes):
        for p in range(pid % n_parts, n_parts, n_programs):  # one part when parts < programs
            start = tl.cast(p, tl.int64) * part
            for i in range(0, part, BLOCK):
                offs = i + tl.arange(0, BLOCK)
                mask = (offs < part) & (start + offs < n)
                acc += tl.load(x_ptr + start + offs, mask=mask, other=0.0, cache_modifier=CACHE)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def copy_persistent_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    n_tiles = tl.cdiv(n, BLOCK)
    for tile in range(pid, n_tiles, n_programs):
        offs = tl.cast(tile, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def read_sum(
    x: torch.Tensor, programs: int, part: int, passes: int = 1, block: int = 1024, l2_only: bool = False
) -> torch.Tensor:
    """Partial sums of ``passes`` reads of the working set ``x`` (see the module docstring).

    x: contiguous float32 (n,) on gpulab.DEVICE, n >= 1; programs: the grid size; part: elements per part
    (a multiple of 16 keeps the loads aligned and vectorized); passes: reads of the working set per launch;
    block: elements per load (power of two in [16, 65536]); l2_only: load with ``cache_modifier=".cg"``
    (cache in L2, not in the SM's L1; PTX ISA, ld's cache operators), so a part an SM reads again cannot
    come from its L1. Returns float32 (programs,). Raises TypeError/ValueError naming a bad argument.
    """
    check_tensor("x", x, dtypes=(torch.float32,), ndim=1)
    check_block("block", block)
    n = x.numel()
    if n == 0:
        raise ValueError("x must hold at least one element (the working set)")
    programs, part, passes = (
        positive_int("programs", programs),
        positive_int("part", part),
        positive_int("passes", passes),
    )
    out = torch.empty(programs, dtype=torch.float32, device=x.device)
    if not isinstance(l2_only, bool):
        raise TypeError(f"l2_only must be a bool, got {type(l2_only).__name__}")
    read_sum_kernel[(programs,)](
        x, out, n, part, triton.cdiv(n, part), passes, BLOCK=block, CACHE=".cg" if l2_only else "", num_warps=NUM_WARPS
    )
    return out


def copy_persistent(x: torch.Tensor, programs: int, block: int = 1024, out: torch.Tensor | None = None) -> torch.Tensor:
    """y = x on a grid of exactly ``programs`` programs (each loops over tiles of ``block`` elements).

    x: contiguous float32 (n,) on gpulab.DEVICE; out: an optional float32 (n,) to write into (the suites reuse
    one buffer). Returns y. Raises TypeError/ValueError naming a bad argument.
    """
    check_tensor("x", x, dtypes=(torch.float32,), ndim=1)
    check_block("block", block)
    programs = positive_int("programs", programs)
    if out is None:
        out = torch.empty_like(x)
    else:
        check_tensor("out", out, dtypes=(torch.float32,), ndim=1)
        if out.shape != x.shape:
            raise ValueError(f"out must have the shape of x {tuple(x.shape)}, got {tuple(out.shape)}")
    if x.numel():
        copy_persistent_kernel[(programs,)](x, out, x.numel(), BLOCK=block, num_warps=NUM_WARPS)
    return out


def read_sum_ref(x: torch.Tensor, programs: int, part: int, passes: int = 1) -> torch.Tensor:
    """The partial sums in float64, program by program: (programs,)."""
    x64 = x.detach().double().cpu()
    n = x64.numel()
    n_parts = cdiv(n, part)
    sums = torch.stack([x64[p * part : (p + 1) * part].sum() for p in range(n_parts)])
    # program p reads part p mod n_parts when parts are fewer than programs, else parts p, p + programs, ...
    return torch.stack([passes * sums[pid % n_parts :: programs].sum() for pid in range(programs)])


def read_sum_counts(n: int, programs: int, part: int, passes: int = 1) -> tuple[int, int]:
    """(adds, bytes read) by hand for ``read_sum`` on n float32 elements: every element of every part a
    program visits is read once per pass. With ``n_parts >= programs`` the programs share the parts out and
    the launch reads 4n bytes per pass; with fewer parts, each part j is read by the programs p = j mod
    n_parts, ``programs // n_parts`` of them plus one for the first ``programs % n_parts`` parts."""
    n_parts = cdiv(n, part)
    sizes = [part] * (n // part) + ([n % part] if n % part else [])
    if n_parts >= programs:
        elems = n
    else:
        elems = sum((programs // n_parts + (j < programs % n_parts)) * sizes[j] for j in range(n_parts))
    return passes * elems, 4 * passes * elems


def copy_counts(n: int) -> int:
    """Bytes moved by ``copy_persistent`` on n float32 elements: read x, write y, 8n."""
    return 8 * n
