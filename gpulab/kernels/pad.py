"""Copy a row-major matrix into a buffer whose rows start on 16-byte boundaries (for TMA tensor descriptors).

TMA (Hopper's tensor memory accelerator) needs every row stride of a global tensor to be a multiple of 16 bytes
(NVIDIA CUDA C++ Programming Guide, "Tensor Memory Access"; ``cuTensorMapEncodeTiled``). A (rows, cols) fp16/bf16
matrix with cols not a multiple of 8 breaks that. ``pad_rows`` copies it once into a (rows, cols_padded) buffer
and returns the (rows, cols) view; the padding columns are never read, because the descriptor's shape stops at
cols. One read and one write of the matrix: 2 * rows * cols * itemsize bytes.

The copy is a 2D-tiled Triton kernel: each program moves BLOCK_R rows x BLOCK_C columns; loads follow the
source's rows and stores the buffer's rows, so both sides are coalesced (lesson 06). torch's
``buf[:, :cols].copy_(t)`` into the strided view reached well under copy bandwidth on the H200 in our
measurements, which is why this kernel exists.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import check_tensor

BLOCK_R, BLOCK_C = 8, 256
# The copy moves bits: each element as one integer of its width (16-byte elements as two int64), so every dtype
# works, including those Triton has no pointer type for (complex).
_WORDS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.int64}


@triton.jit
def pad_rows_kernel(src_ptr, dst_ptr, rows, cols, src_stride, dst_stride,
                    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """dst[r, c] = src[r, c] for r < rows, c < cols (both row-major with the given row strides)."""
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    x = tl.load(src_ptr + r[:, None] * src_stride + c[None, :], mask=mask)
    tl.store(dst_ptr + r[:, None] * dst_stride + c[None, :], x, mask=mask)


def aligned16(t: torch.Tensor) -> bool:
    """True if TMA can read ``t`` (2D) as it is: last dim contiguous, 16-byte aligned base and row stride, and
    rows that do not overlap (a row stride of at least the row length, so no stride-0 ``expand`` views)."""
    return (t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0
            and t.shape[1] > 0 and (t.shape[0] <= 1 or t.stride(0) >= t.shape[1]))


def pad_rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself if TMA can read it (``aligned16``), else a (rows, cols) view of a new (rows, cols rounded up
    to 16 bytes) buffer holding a bit-exact copy of ``t``. t: 2D, any dtype, any strides, on gpulab.DEVICE.
    Raises TypeError/ValueError naming the argument."""
    check_tensor("t", t, ndim=2, contiguous=False)
    if aligned16(t):
        return t
    if t.stride(1) != 1:
        t = t.clone(memory_format=torch.contiguous_format)  # not .contiguous(): a (rows, 1) view keeps its stride
        if aligned16(t):
            return t
    rows, cols = t.shape
    per16 = 16 // t.element_size()
    buf = torch.empty((rows, -(-cols // per16) * per16), device=t.device, dtype=t.dtype)
    view = buf[:, :cols]
    copy_rows(t, view)
    return view


def copy_rows(src: torch.Tensor, dst: torch.Tensor) -> None:
    """dst[:, :] = src bit for bit, by ``pad_rows_kernel``: src and dst 2D of one shape and element size, each
    with unit column stride and any row stride (e.g. into or out of a row-padded buffer). Bits move as integer
    words of the element's width, so every dtype copies exactly. Raises ValueError naming the argument."""
    if src.shape != dst.shape or src.element_size() != dst.element_size():
        raise ValueError(f"src and dst must have one shape and element size, got {tuple(src.shape)} "
                         f"({src.element_size()} B) and {tuple(dst.shape)} ({dst.element_size()} B)")
    for name, t in (("src", src), ("dst", dst)):
        if t.ndim != 2 or (t.shape[1] > 1 and t.stride(1) != 1):
            raise ValueError(f"{name} must be 2D with unit column stride, got shape {tuple(t.shape)}, "
                             f"strides {t.stride()}")
    rows, cols = src.shape
    if not (rows and cols):
        return
    word = _WORDS[src.element_size()]
    s, d = src.view(word), dst.view(word)  # same bits; 16-byte elements become two words
    words = s.shape[1]
    grid = (triton.cdiv(rows, BLOCK_R), triton.cdiv(words, BLOCK_C))
    pad_rows_kernel[grid](s, d, rows, words, s.stride(0), d.stride(0), BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C)
