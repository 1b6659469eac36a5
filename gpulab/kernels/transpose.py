"""Matrix transpose, B = A^T, two ways (lesson 06).

- naive: a program reads a strip of one row of A (lanes along the row: coalesced) and writes it down a
  column of B (lanes M * s bytes apart: one sector per element, as in ``gpulab.models.sectors``).
- tiled: a program loads a (BLOCK_M, BLOCK_N) tile of A with lanes along its rows, transposes it on chip
  (``tl.trans``: Triton moves the tile through shared memory to change which lane holds which element) and
  stores a (BLOCK_N, BLOCK_M) tile of B with lanes along B's rows. Both sides coalesced.

Counts by hand for an (M, N) matrix of s bytes: M*N reads and M*N writes, 2MNs useful bytes; no FLOPs. The
tiled kernel's target is the copy bandwidth (a copy moves the same bytes). Source of the technique: NVIDIA's
"An Efficient Matrix Transpose in CUDA C/C++" (tiles through shared memory); the seed lecture's coalescing
section (CS336 Lecture 5).

Offsets are int64, so matrices past 2^31 elements work. Masks cover any M and N. Any strides are accepted for
A; B is a new row-major (N, M) tensor. A transpose only moves bits, so it is exact in every dtype, and the
interpreter's raw-uint16 bf16 is no problem here.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import gpulab

from . import _autotune
from ._checks import check_block, check_power_of_two, check_tensor

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
NAIVE_BLOCK = 1024  # elements of a row per program in the naive kernel (GPU)
INTERPRETER_TILE = (32, 32)  # (BLOCK_M, BLOCK_N) of the tiled kernel in the interpreter (no autotuning)
TUNE_MIN_ELEMENTS = 2**20  # below this many elements: no autotuning, the first config
MAX_GRID_X = 2**31 - 1  # CUDA's limit on grid dimension 0 (programs per launch here)

# Candidates for the tiled kernel on a GPU (``gpulab.kernels._autotune``, keyed on the dtype and M and N rounded up to
# powers of two; below TUNE_MIN_ELEMENTS the first, untimed): square and wide tiles, 4 or 8 warps. 64x64 and 32x128
# fp32 tiles are 16 KiB of shared memory each, so several programs fit on an SM (228 KiB on an H100/H200). The H200
# chose 64x64 with 8 warps in lesson 06's recording (from a list of ten); the first is the fallback for small matrices.
AUTOTUNE_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w)
    for bm, bn, w in [(64, 64, 4), (64, 64, 8), (32, 128, 4), (128, 64, 8)]
]


@triton.jit
def transpose_naive_kernel(a_ptr, b_ptr, M, N, stride_am, stride_an, stride_bn, stride_bm, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n_chunks = tl.cdiv(N, BLOCK)
    i = (pid // n_chunks).to(tl.int64)  # one row of A per program
    offs_n = (pid % n_chunks).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs_n < N
    row = tl.load(a_ptr + i * stride_am + offs_n * stride_an, mask=mask)  # lanes along A's row: coalesced
    tl.store(b_ptr + offs_n * stride_bn + i * stride_bm, row, mask=mask)  # lanes down B's column: strided


@triton.jit
def transpose_tiled_kernel(
    a_ptr, b_ptr, M, N, stride_am, stride_an, stride_bn, stride_bm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = pid // grid_n, pid % grid_n  # neighbouring programs take neighbouring tiles of a row band
    offs_m = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_a = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_n[None, :] * stride_an, mask=mask_a)  # (BM, BN)
    mask_b = (offs_n[:, None] < N) & (offs_m[None, :] < M)
    tl.store(b_ptr + offs_n[:, None] * stride_bn + offs_m[None, :] * stride_bm, tl.trans(tile), mask=mask_b)  # (BN, BM)


_LAST: list = [None]  # the config of the last launch that took the autotuner's shape (``best_config``)


def _launch_tiled(a, b, config) -> None:
    """One launch of the tiled kernel from ``a`` into ``b`` at ``config`` (a ``triton.Config``)."""
    M, N = a.shape
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    transpose_tiled_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](
        a, b, M, N, a.stride(0), a.stride(1), b.stride(0), b.stride(1), **config.all_kwargs()
    )


def _scratch_run(a):
    """``run(config)`` for the autotuner: one launch into a scratch output."""
    b = torch.empty((a.shape[1], a.shape[0]), dtype=a.dtype, device=a.device)
    return lambda cfg: _launch_tiled(a, b, cfg)


def _tuned(a):
    """The autotuner's config for a's dtype and its shape's power-of-two buckets (GPU only): ``AUTOTUNE_CONFIGS[0]``
    below TUNE_MIN_ELEMENTS, else ``_autotune.pick`` (a stored choice, or every candidate timed into a scratch
    output)."""
    M, N = a.shape
    if M * N < TUNE_MIN_ELEMENTS:
        config = AUTOTUNE_CONFIGS[0]
    else:
        key = ("transpose", a.dtype, 1 << (M - 1).bit_length(), 1 << (N - 1).bit_length())
        config = _autotune.pick(key, AUTOTUNE_CONFIGS, lambda: _scratch_run(a), what=f"transpose tile for {M} x {N}")
    _LAST[0] = config
    return config


def _check_grid(programs: int, what: str) -> None:
    if programs > MAX_GRID_X:
        raise ValueError(f"a: {programs} programs ({what}) exceed CUDA's grid limit {MAX_GRID_X}; pass larger blocks")


def _prepare(a):
    check_tensor("a", a, dtypes=DTYPES, ndim=2, contiguous=False, torch_op="a.t().contiguous()")
    return a.shape


def transpose_naive(a: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """B = A^T by rows: coalesced reads, writes a column's elements M * itemsize bytes apart.

    a: (M, N) fp32/fp16/bf16 on gpulab.DEVICE, any strides. Returns a new contiguous (N, M) tensor. ``block``:
    elements of a row per program (power of two; default ``NAIVE_BLOCK`` on a GPU, the row length rounded up in
    the interpreter). Raises TypeError/ValueError naming ``a`` or ``block``.
    """
    M, N = _prepare(a)
    if block is not None:
        check_block("block", block)
    block = block or (NAIVE_BLOCK if gpulab.ON_GPU else max(16, min(NAIVE_BLOCK, triton.next_power_of_2(N))))
    grid = M * triton.cdiv(N, block)
    _check_grid(grid, f"{M} rows x {triton.cdiv(N, block)} blocks of {block}")
    b = torch.empty((N, M), dtype=a.dtype, device=a.device)
    if a.numel():
        transpose_naive_kernel[(grid,)](a, b, M, N, a.stride(0), a.stride(1), b.stride(0), b.stride(1), BLOCK=block)
    return b


def transpose(
    a: torch.Tensor, block_m: int | None = None, block_n: int | None = None, num_warps: int | None = None
) -> torch.Tensor:
    """B = A^T through on-chip tiles: coalesced reads and coalesced writes.

    a: (M, N) fp32/fp16/bf16 on gpulab.DEVICE, any strides. Returns a new contiguous (N, M) tensor.
    ``block_m=block_n=None`` autotunes on a GPU over ``AUTOTUNE_CONFIGS`` (``_tuned``) and
    uses ``INTERPRETER_TILE`` in the interpreter; given tile sizes (powers of two, both or neither) and
    ``num_warps`` (only with them) launch that shape. Raises TypeError/ValueError naming the argument.
    """
    M, N = _prepare(a)
    if (block_m is None) != (block_n is None):
        raise ValueError("block_m and block_n must be given together (or neither, to autotune)")
    if block_m is not None:
        for name, v in (("block_m", block_m), ("block_n", block_n)):
            check_power_of_two(name, v, 1, 256)
    if num_warps is not None and (isinstance(num_warps, bool) or num_warps not in (1, 2, 4, 8, 16, 32)):
        raise ValueError(f"num_warps must be one of 1, 2, 4, 8, 16, 32, got {num_warps!r}")
    if num_warps is not None and block_m is None:
        raise ValueError("num_warps needs block_m and block_n (without them the autotuner picks all three on a GPU)")
    if block_m is not None or not gpulab.ON_GPU:
        bm, bn = (block_m, block_n) if block_m is not None else INTERPRETER_TILE
        _check_grid(triton.cdiv(M, bm) * triton.cdiv(N, bn), f"{bm} x {bn} tiles")
    b = torch.empty((N, M), dtype=a.dtype, device=a.device)
    if not a.numel():
        return b
    if block_m is None and gpulab.ON_GPU:
        _launch_tiled(a, b, _tuned(a))
    else:
        block_m, block_n = (block_m, block_n) if block_m is not None else INTERPRETER_TILE
        extra = {} if num_warps is None else {"num_warps": num_warps}
        transpose_tiled_kernel[(triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)](
            a, b, M, N, a.stride(0), a.stride(1), b.stride(0), b.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, **extra
        )
    return b


def best_config():
    """The tile of the last launch that took the autotuner's shape (no tile given, on a GPU: tuned, stored, or the first
    below TUNE_MIN_ELEMENTS), as ``{"BLOCK_M", "BLOCK_N", "num_warps"}``, or None (interpreter, or no such launch
    yet)."""
    c = _LAST[0]
    return (
        None
        if c is None
        else {"BLOCK_M": c.kwargs["BLOCK_M"], "BLOCK_N": c.kwargs["BLOCK_N"], "num_warps": c.num_warps}
    )


def transpose_torch(a: torch.Tensor) -> torch.Tensor:
    """torch's transpose into new memory, the suite's baseline: ``a.t().contiguous()``."""
    return a.t().contiguous()


def transpose_ref(a: torch.Tensor) -> torch.Tensor:
    """The torch reference: ``a.t()`` copied to a new contiguous tensor (exact in any dtype)."""
    return a.t().clone(memory_format=torch.contiguous_format)
