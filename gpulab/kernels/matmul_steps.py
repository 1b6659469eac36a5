"""Lesson 07's teaching matmuls, C = A @ B, built in steps; each step changes one thing.

Teaching kernels, kept short to be read: the fast kernel is ``gpulab.kernels.matmul`` (TMA loads, a persistent
loop, autotuning, padding of awkward sizes), which the lesson links and summarises, never prints.

1. ``"no reuse"`` (``naive_kernel``): each program computes ``BLOCK`` output elements and each element loads
   its own row of A and column of B: ``2 M N K`` element loads, one FLOP per element loaded. gpulab's only
   kernel without reuse: lesson 07's suite also times it in fp32 (``noreuse``), and so do its counters.
2. ``"tiled"`` (``tiled_kernel``, ``GROUP_M = 1``): one program per ``BLOCK_M x BLOCK_N`` tile of C; each step
   along K loads a ``BLOCK_M x BLOCK_K`` tile of A and a ``BLOCK_K x BLOCK_N`` tile of B and hands both to
   ``tl.dot``, so each element of A is used ``BLOCK_N`` times and each of B ``BLOCK_M`` times:
   ``ceil(N / BN) M K + ceil(M / BM) K N`` loads (``2 N^3 / T`` for square T x T tiles; ``tiling.input_loads``).
   Tiles are launched row by row.
3. ``"grouped"``: the same kernel with ``GROUP_M = 8``; ``launch_order`` visits the tiles in groups of 8 tile
   rows, column by column, so programs that run at the same time share tiles of B (and A) in L2. The loads
   requested are unchanged; what reaches DRAM falls.
4. ``"pipelined"``: the same kernel launched with ``num_stages = 3`` instead of 1: Triton's software pipelining
   loads the next tiles into shared memory while ``tl.dot`` works on the current ones (one copy of the tiles
   per stage). No line of the kernel changes. The interpreter ignores it.

Shapes and dtypes: ``a: (M, K)``, ``b: (K, N)`` fp16 or fp32 (fp32 products as ``tl.dot``'s default, TF32 on a
GPU), any M, N, K >= 1, any strides; ``c: (M, N)`` in the same dtype, accumulated in fp32. Offsets are int32:
for teaching sizes (fewer than 2^31 elements per matrix and M * N below 2^31; ``matmul_step`` refuses larger).
The tile idea is the seed lecture's (CS336 Lecture 5, "Tile the computation to reuse inputs"); the grouped order
is Triton's tutorial 03-matrix-multiplication.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ..models import tiling, waves
from ._checks import check_matmul_operands, check_power_of_two

STEPS = ("no reuse", "tiled", "grouped", "pipelined")
DTYPES = (torch.float16, torch.float32)
#: The element type lesson 07 builds the steps in (``gpulab.bench.lesson07.build_steps``, ``gpulab.measure.targets``' rows).
BUILD_DTYPE = "fp16"


@triton.jit
def naive_kernel(
    a_ptr, b_ptr, c_ptr,  # a: (M, K), b: (K, N), c: (M, N), any strides
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """C = A @ B with no reuse: one program computes BLOCK elements of C (row-major order), grid
    ``(cdiv(M * N, BLOCK),)``; each element loads its own row of A and column of B, BLOCK_K values a step."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat output indices, (BLOCK,)
    m, n = idx // N, idx % N
    valid = idx < M * N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        mask = valid[:, None] & (ks[None, :] < K)  # (BLOCK, BLOCK_K)
        # every output element loads its own BLOCK_K values of row m of A and of column n of B
        a = tl.load(a_ptr + m[:, None] * stride_am + ks[None, :] * stride_ak, mask=mask, other=0.0)
        b = tl.load(b_ptr + ks[None, :] * stride_bk + n[:, None] * stride_bn, mask=mask, other=0.0)
        acc += tl.sum(a.to(tl.float32) * b.to(tl.float32), axis=1)
    tl.store(c_ptr + m * stride_cm + n * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=valid)


@triton.jit
def launch_order(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of program ``pid``: GROUP_M tile rows at a time, column by column (GROUP_M = 1: row by row)."""
    num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    first_m = (pid // (GROUP_M * num_n)) * GROUP_M  # the group's first tile row
    rows = min(num_m - first_m, GROUP_M)  # the last group may have fewer rows
    return first_m + (pid % (GROUP_M * num_n)) % rows, (pid % (GROUP_M * num_n)) // rows


@triton.jit
def tiled_kernel(
    a_ptr, b_ptr, c_ptr,  # a: (M, K), b: (K, N), c: (M, N), any strides
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    """C = A @ B by tiles: one program computes one (BLOCK_M, BLOCK_N) tile of C, grid
    ``(cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),)``, its tile chosen by ``launch_order``; fp32 accumulator."""
    pid_m, pid_n = launch_order(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) rows of C
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,) columns of C
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,  # (BLOCK_M, BLOCK_K)
            mask=(offs_m[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,  # (BLOCK_K, BLOCK_N)
            mask=(ks[:, None] < K) & (offs_n[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)  # A's tile used BLOCK_N times, B's BLOCK_M times
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@dataclass(frozen=True)
class StepConfig:
    """Launch shape of the tiled steps (``BLOCK_*`` powers of two >= 16) and of ``"no reuse"`` (``BLOCK``
    outputs per program, ``BLOCK_K`` values per step)."""

    BLOCK_M: int = 128
    BLOCK_N: int = 128
    BLOCK_K: int = 32
    num_warps: int = 8
    BLOCK: int = 128


#: What each step launches: (GROUP_M, num_stages) of ``tiled_kernel``; None for ``naive_kernel``.
STEP_LAUNCH = {"no reuse": None, "tiled": (1, 1), "grouped": (8, 1), "pipelined": (8, 3)}


def matmul_step(
    a: torch.Tensor, b: torch.Tensor, step: str, config: StepConfig = StepConfig(), out: torch.Tensor | None = None
) -> torch.Tensor:
    """C = A @ B with the teaching kernel of ``step`` (one of ``STEPS``); returns ``c: (M, N)`` in the inputs'
    dtype, ``out`` if given. a: (M, K), b: (K, N), fp16 or fp32, any strides, every element offset of a, b and c
    below 2^31 (the kernels' offsets are int32; ``gpulab.kernels.matmul.matmul`` takes any size). ``config``: the
    launch shape (its ``BLOCK*`` fields powers of two, those of the tiles >= 16). Raises TypeError/ValueError
    naming the bad argument."""
    if step not in STEPS:
        raise ValueError(f"step must be one of {STEPS}, got {step!r}")
    check_matmul_operands(a, b, DTYPES)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype) if out is None else out
    if c.shape != (M, N) or c.dtype != a.dtype or c.device != a.device:
        raise ValueError(
            f"out must be ({M}, {N}) {a.dtype} on {a.device}, got {tuple(c.shape)} {c.dtype} on {c.device}"
        )
    naive = STEP_LAUNCH[step] is None
    blocks = ("BLOCK", "BLOCK_K") if naive else ("BLOCK_M", "BLOCK_N", "BLOCK_K")
    for name in blocks:
        check_power_of_two(f"config: {name}", getattr(config, name), 1 if naive else 16)
    for name, t in (("a", a), ("b", b), ("out", c)):
        _check_int32_offsets(name, t)
    if naive and M * N >= 2**31:
        raise ValueError(
            f"the no-reuse kernel numbers the M * N outputs in int32: M * N must be below 2^31, got {M * N}"
        )
    if M == 0 or N == 0:
        return c
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    if naive:
        naive_kernel[(waves.cdiv(M * N, config.BLOCK),)](*args, BLOCK=config.BLOCK, BLOCK_K=config.BLOCK_K)
        return c
    group_m, stages = STEP_LAUNCH[step]
    grid = (waves.cdiv(M, config.BLOCK_M) * waves.cdiv(N, config.BLOCK_N),)
    tiled_kernel[grid](
        *args, BLOCK_M=config.BLOCK_M, BLOCK_N=config.BLOCK_N, BLOCK_K=config.BLOCK_K, GROUP_M=group_m,
        num_warps=config.num_warps, num_stages=stages,
    )  # fmt: skip
    return c


def _check_int32_offsets(name: str, t: torch.Tensor) -> None:
    """ValueError naming ``t`` when its last element lies 2^31 elements or more past its first (strides >= 0)."""
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) if t.numel() else 0
    if last >= 2**31:
        raise ValueError(
            f"{name}: the teaching kernels' offsets are int32, and its last element lies {last} elements past its "
            "first (2^31 or more); gpulab.kernels.matmul.matmul takes any size"
        )


def matmul_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The reference in float64, of the inputs as they are (already rounded to their dtype)."""
    return a.double() @ b.double()


def step_counts(step: str, M: int, N: int, K: int, itemsize: int, config: StepConfig = StepConfig()) -> tuple[int, int]:
    """(FLOPs, requested input bytes) of ``step`` by hand: ``2 M N K`` FLOPs; loads ``2 M N K`` elements with no
    reuse, ``ceil(N / BN) M K + ceil(M / BM) K N`` with tiles (grouping and pipelining request the same loads;
    they change where the loads are served from and when). Their ratio is the model intensity (FLOP/byte),
    ``T / s`` for square T x T tiles on a square matmul."""
    if step not in STEPS:
        raise ValueError(f"step must be one of {STEPS}, got {step!r}")
    tile = None if STEP_LAUNCH[step] is None else (config.BLOCK_M, config.BLOCK_N)
    return 2 * M * N * K, tiling.input_loads(M, N, K, tile=tile) * itemsize
