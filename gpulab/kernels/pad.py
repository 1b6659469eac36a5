"""Copy a row-major matrix into a buffer whose rows start on 16-byte boundaries (for TMA tensor descriptors).

TMA (Hopper's tensor memory accelerator) needs every row stride of a global tensor to be a multiple of 16 bytes
(NVIDIA CUDA C++ Programming Guide, "Tensor Memory Access"; ``cuTensorMapEncodeTiled``). A (rows, cols) fp16/bf16
matrix with cols not a multiple of 8 breaks that. ``pad_rows`` copies it once into a (rows, cols_padded) buffer
and returns the (rows, cols) view; the padding columns are never read, because the descriptor's shape stops at
cols. One read and one write of the matrix: 2 * rows * cols * itemsize bytes.

The copy is a 2D-tiled Triton kernel: each program moves BLOCK_R rows x BLOCK_C columns; loads follow the
source's rows and stores the buffer's rows, so both sides are coalesced (lesson 06). torch's
``buf[:, :cols].copy_(t)`` into the strided view stays well under copy bandwidth (lesson 07's suite times the
copy, ``gpulab/data``), which is why this kernel exists.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..models.waves import cdiv
from ._checks import check_disjoint, check_tensor

BLOCK_R, BLOCK_C = 8, 256
# The copy moves bits: each element as one integer of its width (16-byte elements as two int64), so every dtype
# works, including those Triton has no pointer type for (complex).
_WORDS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.int64}


@triton.jit
def _copy_tile(
    tile, src_ptr, dst_ptr, rows, cols, src_stride, dst_stride, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr
):
    """Copy tile number ``tile`` (row-major over BLOCK_R x BLOCK_C tiles; past the last tile: nothing)."""
    col_tiles = tl.cdiv(cols, BLOCK_C)
    r = (tile // col_tiles).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = (tile % col_tiles).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    x = tl.load(src_ptr + r[:, None] * src_stride + c[None, :], mask=mask)
    tl.store(dst_ptr + r[:, None] * dst_stride + c[None, :], x, mask=mask)


@triton.jit
def pad_rows_kernel(
    src0,
    dst0,
    rows0,
    cols0,
    src_stride0,
    dst_stride0,
    src1,
    dst1,
    rows1,
    cols1,
    src_stride1,
    dst_stride1,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """dst[r, c] = src[r, c] for r < rows, c < cols (both row-major with the given row strides), for the
    matrix ``tl.program_id(1)`` selects: 0 or 1. Two matrices in one launch (A and B of a matmul) save a launch.
    One grid axis numbers the tiles (row-major), so no shape meets the 65535 limit of a CUDA grid's y axis."""
    if tl.program_id(1) == 0:
        _copy_tile(tl.program_id(0), src0, dst0, rows0, cols0, src_stride0, dst_stride0, BLOCK_R, BLOCK_C)
    else:
        _copy_tile(tl.program_id(0), src1, dst1, rows1, cols1, src_stride1, dst_stride1, BLOCK_R, BLOCK_C)


def aligned16(t: torch.Tensor) -> bool:
    """True if TMA can read ``t`` (2D) as it is: last dim contiguous, 16-byte aligned base and row stride, and
    rows that do not overlap (a row stride of at least the row length, so no stride-0 ``expand`` views)."""
    return (
        t.stride(1) == 1
        and (t.stride(0) * t.element_size()) % 16 == 0
        and t.data_ptr() % 16 == 0
        and t.shape[1] > 0
        and (t.shape[0] <= 1 or t.stride(0) >= t.shape[1])
    )


def pad_rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself if TMA can read it (``aligned16``), else a (rows, cols) view of a new (rows, cols rounded up
    to 16 bytes) buffer holding a bit-exact copy of ``t``. t: 2D, any dtype, any strides, on gpulab.DEVICE, not
    requiring grad under grad mode (the copy has no backward). Raises TypeError/ValueError naming the argument."""
    return _pad_rows_many([t], single=True)[0]


def pad_rows_many(ts) -> list:
    """``pad_rows`` of each tensor in the list or tuple ``ts``, with the copies made two matrices of one element
    size per launch (a matmul's A and B in one launch). Returns a list in the order of ``ts``. Raises
    TypeError/ValueError naming the argument."""
    return _pad_rows_many(ts, single=False)


def _pad_rows_many(ts, single: bool) -> list:
    if not isinstance(ts, (list, tuple)):
        raise TypeError(f"ts must be a list or tuple of tensors, got {type(ts).__name__}")
    out, pairs = [], []
    for i, t in enumerate(ts):
        name = "t" if single else f"ts[{i}]"
        check_tensor(name, t, ndim=2, contiguous=False, bit_views=True, torch_op="torch's own copy")
        if aligned16(t):
            out.append(t)
            continue
        if t.stride(1) != 1:
            t = t.clone(memory_format=torch.contiguous_format)  # not .contiguous(): a (rows, 1) view keeps its stride
            if aligned16(t):
                out.append(t)
                continue
        out.append(row_padded_empty(t.shape[0], t.shape[1], t.dtype, t.device))
        pairs.append((t, out[-1]))
    copy_pairs(pairs)
    return out


def row_padded_empty(rows: int, cols: int, dtype: torch.dtype, device) -> torch.Tensor:
    """An uninitialised (rows, cols) view of a new (rows, cols rounded up to 16 bytes) buffer: rows that TMA can
    read (``aligned16``). The padding columns are never written here."""
    per16 = 16 // dtype.itemsize
    return torch.empty((rows, cdiv(cols, per16) * per16), device=device, dtype=dtype).narrow(1, 0, cols)


def copy_rows(src: torch.Tensor, dst: torch.Tensor) -> None:
    """dst[:, :] = src bit for bit, by ``pad_rows_kernel``: src and dst 2D of one shape and element size, each
    with unit column stride and any row stride (e.g. into or out of a row-padded buffer), dst's rows apart, neither
    requiring grad under grad mode. src and dst must not share memory: tiles run in no fixed order, so a tile
    could read rows another tile has already overwritten (``b[:-1]`` into ``b[1:]``). Memory is compared as byte
    ranges (``check_disjoint``), so views whose elements interleave without meeting are refused too. Bits move as
    integer words of the element's width, so every dtype copies exactly. Raises TypeError/ValueError naming the
    argument."""
    check_tensor("src", src, contiguous=False, bit_views=True, torch_op="dst.copy_(src)")
    # a negative or conjugate dst is refused: its bits are not its values
    check_tensor("dst", dst, contiguous=False, torch_op="dst.copy_(src)")
    if src.shape != dst.shape or src.element_size() != dst.element_size():
        raise ValueError(
            f"src and dst must have one shape and element size, got {tuple(src.shape)} "
            f"({src.element_size()} B) and {tuple(dst.shape)} ({dst.element_size()} B)"
        )
    for name, t in (("src", src), ("dst", dst)):
        if t.ndim != 2 or (t.shape[1] > 1 and t.stride(1) != 1):
            raise ValueError(
                f"{name} must be 2D with unit column stride, got shape {tuple(t.shape)}, strides {t.stride()}"
            )
    if dst.shape[0] > 1 and dst.shape[1] and dst.stride(0) < dst.shape[1]:
        raise ValueError(
            f"dst's rows must not overlap (row stride >= row length), got shape {tuple(dst.shape)}, "
            f"strides {dst.stride()}"
        )
    check_disjoint("src", src, "dst", dst)  # tiles run in no fixed order: a row could be read after it is overwritten
    copy_pairs([(src, dst)])


def _words(t: torch.Tensor) -> torch.Tensor:
    """The bits of 2D ``t`` (unit column stride, or one column) as integer words: same memory, 16-byte elements
    as two int64. Conjugate and negative views are materialised first (their bits are not the values)."""
    t = t.resolve_conj().resolve_neg()
    if t.shape[1] == 1 and t.stride(1) != 1:
        t = t.as_strided(t.shape, (t.stride(0), 1))  # one column: its stride is never used
    return t.view(_WORDS[t.element_size()])


def copy_pairs(pairs) -> None:
    """dst[:, :] = src for each (src, dst) pair, by ``pad_rows_kernel``, two pairs of one element size per launch.
    Unchecked (``copy_rows`` is the checked copy): the caller guarantees 2D, one shape and element size and unit
    column stride (or one column) per pair, disjoint memory, dst's rows apart and never a negative or conjugate
    view."""
    jobs = []
    for src, dst in pairs:
        if src.numel():
            s, d = _words(src), _words(dst)
            jobs.append((s, d, s.shape[0], s.shape[1]))
    by_word: dict = {}
    for job in jobs:
        by_word.setdefault(job[0].dtype, []).append(job)
    for both in (g[i : i + 2] for g in by_word.values() for i in range(0, len(g), 2)):
        tiles = max(cdiv(r, BLOCK_R) * cdiv(c, BLOCK_C) for _, _, r, c in both)
        (s0, d0, r0, c0), (s1, d1, r1, c1) = both[0], both[-1]
        pad_rows_kernel[(tiles, len(both))](
            s0,
            d0,
            r0,
            c0,
            s0.stride(0),
            d0.stride(0),
            s1,
            d1,
            r1,
            c1,
            s1.stride(0),
            d1.stride(0),
            BLOCK_R=BLOCK_R,
            BLOCK_C=BLOCK_C,
        )
