"""Strided and row/column access: the same bytes of useful work, different sectors (lesson 06).

- ``strided_copy(x, stride)``: ``y[k] = x[k * stride]`` for every k with ``k * stride < len(x)`` (the
  elements of ``x[::stride]``). Consecutive lanes read elements ``stride * itemsize`` bytes apart; the write is
  dense. ``stride`` is a runtime argument: one compiled kernel serves every stride > 1.
- ``matrix_copy(a, by)``: copy a matrix, each program walking along a row (``by="rows"``: lanes vary j,
  neighbouring bytes) or down a column (``by="columns"``: lanes vary i, a row's length apart). Same elements,
  same bytes of useful work; only the order, and so the sectors per warp request, differ.

Counts by hand for n copied elements of s bytes: n reads and n writes, 2ns useful bytes; no FLOPs.
``gpulab.models.sectors`` predicts how many bytes move for them. Unlike the strideCopy kernel of NVIDIA's CUDA C++
Best Practices Guide ("Strided Accesses"), which reads and writes with the same stride, only the read is
strided here, so the written array holds exactly the useful elements.

Triton lays a 1-D block over the lanes in order, ``v`` consecutive elements a lane (its blocked layout,
``sizePerThread = [v]``; ``elements_per_lane``): lane k of a warp handles outputs ``base + k * v + j``,
``j < v``. Triton's coalesce pass picks v from the widest access of the block's loads and stores, here the
dense store (16 bytes a lane), capped by BLOCK over the threads. For stride > 1 the read's addresses are not
provably contiguous, so each of a lane's v elements is its own scalar load: one instruction's lanes read
``v * stride * s`` bytes apart (``gpulab.models.sectors.warp_request(..., elements_per_lane=v)``). When the stride
is known to be 1 the v elements are one 16-byte load; the launcher passes ``CONTIGUOUS`` (a compile-time
constant) for stride 1, so that this copy is as good as a plain one. ``python -m gpulab.measure.targets
--strided-layout --cc 90`` compiles the kernel for sm_90 and prints the layout and the PTX loads.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import gpulab

from . import _autotune
from ._checks import check_block, check_tensor

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
BY = ("rows", "columns")
MATRIX_BLOCK = 1024  # elements per program in matrix_copy on a GPU; in the interpreter the row or column length
INTERPRETER_BLOCK = 1024
TUNE_MIN_N = 2**20  # below this many outputs: no autotuning, the first config
MAX_GRID_X = 2**31 - 1  # CUDA's limit on grid dimension 0 (programs per launch here)

# Candidates for the strided copy on a GPU (``gpulab.kernels._autotune``, keyed on the dtype, the number of outputs
# rounded up to a power of two, the stride and whether it is 1; below TUNE_MIN_N the first, untimed): a memory-bound
# copy wants a few thousand elements in flight per program; the first is gpulab's vector_add shape. The H200 chose it
# at every stride of lesson 06's recording but 32, where (2048, 4) (from a list of five: (4096, 4) and (8192, 8) never
# won).
AUTOTUNE_CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b, w in [(1024, 4), (2048, 4), (4096, 8)]]


VECTOR_BYTES = 16  # the widest global access one lane issues (128 bits: ld/st.global.v4.b32)


def elements_per_lane(block: int, num_warps: int = 4, itemsize: int = 4) -> int:
    """Elements each lane holds in ``strided_copy_kernel``'s layout (Triton's ``sizePerThread``), the same for
    every stride: ``min(VECTOR_BYTES // itemsize, max(1, block // (32 * num_warps)))``. Triton's coalesce
    pass gives the block the widest access of its memory operations: the dense, 16-byte-aligned store allows
    16 bytes a lane; a block smaller than 32 * num_warps * that holds fewer. block: power of two; num_warps:
    1..32; itemsize: bytes per element (4 for fp32, 2 for fp16/bf16). Raises TypeError/ValueError naming the
    argument. Checked against the compiled TTGIR for sm_90 by ``gpulab.measure.targets.strided_layouts``
    (``python -m gpulab.measure.targets --strided-layout --cc 90``): BLOCK 1024, 4 warps, fp32 gives ``sizePerThread = [4]``
    and 8 ``ld.global.b32`` per thread at stride > 1 (two ``ld.global.v4.b32`` at stride 1)."""
    check_block("block", block)
    if isinstance(num_warps, bool) or num_warps not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"num_warps must be one of 1, 2, 4, 8, 16, 32, got {num_warps!r}")
    if isinstance(itemsize, bool) or itemsize not in (1, 2, 4, 8, 16):
        raise ValueError(f"itemsize must be one of 1, 2, 4, 8, 16 bytes, got {itemsize!r}")
    return min(VECTOR_BYTES // itemsize, max(1, block // (32 * num_warps)))


@triton.jit
def strided_copy_kernel(x_ptr, y_ptr, n, stride, CONTIGUOUS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # output index k; lane order
    mask = offs < n
    src = offs if CONTIGUOUS else offs * stride  # int64: k * stride can pass 2^31
    tl.store(y_ptr + offs, tl.load(x_ptr + src, mask=mask), mask=mask)


_LAST: list = [None]  # the config of the last launch that took the autotuner's shape (``best_config``)


def _launch_strided(x, y, n: int, stride: int, config) -> None:
    """One launch of the strided copy at ``config`` (a ``triton.Config``)."""
    strided_copy_kernel[(triton.cdiv(n, config.kwargs["BLOCK"]),)](
        x, y, n, stride, CONTIGUOUS=stride == 1, **config.all_kwargs()
    )


def _scratch_run(x, n: int, stride: int):
    """``run(config)`` for the autotuner: one launch into a scratch output."""
    y = torch.empty(n, dtype=x.dtype, device=x.device)
    return lambda cfg: _launch_strided(x, y, n, stride, cfg)


def _tuned(x, n: int, stride: int):
    """The autotuner's config for x's dtype, n's power-of-two bucket and the stride (GPU only): ``AUTOTUNE_CONFIGS[0]``
    below TUNE_MIN_N, else ``_autotune.pick`` (a stored choice, or every candidate timed into a scratch output)."""
    if n < TUNE_MIN_N:
        config = AUTOTUNE_CONFIGS[0]
    else:
        key = ("strided_copy", x.dtype, 1 << (n - 1).bit_length(), stride)
        run = lambda: _scratch_run(x, n, stride)  # noqa: E731  (called only when timing)
        config = _autotune.pick(key, AUTOTUNE_CONFIGS, run, what=f"strided copy config for n = {n}, stride {stride}")
    _LAST[0] = config
    return config


def _check_stride(stride) -> int:
    if isinstance(stride, bool) or not isinstance(stride, int):
        raise TypeError(f"stride must be an int, got {type(stride).__name__}")
    if stride < 1:
        raise ValueError(f"stride must be >= 1 (elements between neighbouring lanes), got {stride}")
    return stride


def strided_copy(
    x: torch.Tensor, stride: int = 1, block: int | None = None, num_warps: int | None = None
) -> torch.Tensor:
    """``y[k] = x[k * stride]``: the elements of ``x[::stride]``, copied into a new contiguous 1-D tensor.

    x: 1-D contiguous fp32/fp16/bf16 on gpulab.DEVICE; stride: int >= 1 (elements). Returns y of length
    ``ceil(len(x) / stride)`` and x's dtype. ``block=None`` autotunes on a GPU (``AUTOTUNE_CONFIGS``, ``_tuned``)
    and uses ``INTERPRETER_BLOCK`` in the interpreter; a given
    ``block`` (power of two) and ``num_warps`` launch that shape (``num_warps`` only with ``block``). Raises
    TypeError/ValueError naming the argument.
    """
    check_tensor("x", x, dtypes=DTYPES, ndim=1, torch_op="x[::stride]")
    stride = _check_stride(stride)
    if block is not None:
        check_block("block", block)
    if num_warps is not None and (isinstance(num_warps, bool) or num_warps not in (1, 2, 4, 8, 16, 32)):
        raise ValueError(f"num_warps must be one of 1, 2, 4, 8, 16, 32, got {num_warps!r}")
    if num_warps is not None and block is None:
        raise ValueError("num_warps needs block (without a block the autotuner picks both on a GPU)")
    n = triton.cdiv(x.numel(), stride)
    y = torch.empty(n, dtype=x.dtype, device=x.device)
    if not n:
        return y
    stride = min(stride, x.numel())  # any stride >= len(x) reads x[0] alone; and Triton takes at most 64-bit ints
    contiguous = stride == 1
    if block is None and gpulab.ON_GPU:
        _launch_strided(x, y, n, stride, _tuned(x, n, stride))
    else:
        block = block or INTERPRETER_BLOCK
        extra = {} if num_warps is None else {"num_warps": num_warps}
        strided_copy_kernel[(triton.cdiv(n, block),)](x, y, n, stride, CONTIGUOUS=contiguous, BLOCK=block, **extra)
    return y


def best_config():
    """The config of the last launch that took the autotuner's shape (``block=None`` on a GPU: tuned, stored, or the
    first below TUNE_MIN_N), as ``{"BLOCK", "num_warps"}``, or None (interpreter, or no such launch yet)."""
    c = _LAST[0]
    return None if c is None else {"BLOCK": c.kwargs["BLOCK"], "num_warps": c.num_warps}


def strided_copy_ref(x: torch.Tensor, stride: int = 1) -> torch.Tensor:
    """The torch reference: ``x[::stride]`` as a new contiguous tensor (a copy is exact in any dtype)."""
    return x[:: _check_stride(stride)].clone()


def strided_copy_torch(x: torch.Tensor, y: torch.Tensor, stride: int) -> torch.Tensor:
    """torch's own strided copy, the suite's baseline: ``y.copy_(x[::stride])`` into a preallocated y."""
    return y.copy_(x[::stride])


# ---- a row-major matrix, walked by rows or by columns ----------------------------------------------------


@triton.jit
def copy_by_rows_kernel(a_ptr, b_ptr, M, N, stride_am, stride_an, stride_bm, stride_bn, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n_chunks = tl.cdiv(N, BLOCK)
    i = (pid // n_chunks).to(tl.int64)  # one row per program ...
    offs_j = (pid % n_chunks).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # ... lanes along it: j, j+1, ...
    mask = offs_j < N
    x = tl.load(a_ptr + i * stride_am + offs_j * stride_an, mask=mask)
    tl.store(b_ptr + i * stride_bm + offs_j * stride_bn, x, mask=mask)


@triton.jit
def copy_by_columns_kernel(a_ptr, b_ptr, M, N, stride_am, stride_an, stride_bm, stride_bn, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n_chunks = tl.cdiv(M, BLOCK)
    j = (pid // n_chunks).to(tl.int64)  # one column per program ...
    offs_i = (pid % n_chunks).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # ... lanes down it: i, i+1, ...
    mask = offs_i < M
    x = tl.load(a_ptr + offs_i * stride_am + j * stride_an, mask=mask)
    tl.store(b_ptr + offs_i * stride_bm + j * stride_bn, x, mask=mask)


def _matrix_block(length: int) -> int:
    if gpulab.ON_GPU:
        return MATRIX_BLOCK
    return max(16, min(MATRIX_BLOCK, triton.next_power_of_2(length)))  # the interpreter pays per element


def matrix_copy(a: torch.Tensor, by: str = "rows", block: int | None = None) -> torch.Tensor:
    """A copy of the 2-D tensor ``a`` into a new row-major (contiguous) tensor, each program walking ``block``
    elements along one row (``by="rows"``) or down one column (``by="columns"``).

    a: (M, N) fp32/fp16/bf16 on gpulab.DEVICE, any strides (for a row-major ``a`` walking rows is
    coalesced and walking columns is not; for a transposed view it is the other way round). Returns (M, N).
    Raises TypeError/ValueError naming ``a``, ``by`` or ``block``.
    """
    check_tensor("a", a, dtypes=DTYPES, ndim=2, contiguous=False, torch_op="a.contiguous()")
    if by not in BY:
        raise ValueError(f"by must be one of {BY}, got {by!r}")
    if block is not None:
        check_block("block", block)
    M, N = a.shape
    kernel, length, other = (copy_by_rows_kernel, N, M) if by == "rows" else (copy_by_columns_kernel, M, N)
    block = block or _matrix_block(length)
    grid = (other * triton.cdiv(length, block),)
    if grid[0] > MAX_GRID_X:
        raise ValueError(
            f"a: {grid[0]} programs ({other} {'rows' if by == 'rows' else 'columns'} x "
            f"{triton.cdiv(length, block)} blocks of {block}) exceed CUDA's grid limit {MAX_GRID_X}; "
            f"walk the other way or pass a larger block"
        )
    b = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if not a.numel():
        return b
    kernel[grid](a, b, M, N, a.stride(0), a.stride(1), b.stride(0), b.stride(1), BLOCK=block)
    return b


def matrix_copy_ref(a: torch.Tensor) -> torch.Tensor:
    """The torch reference: ``a.contiguous()`` as a new tensor."""
    return a.clone(memory_format=torch.contiguous_format)
