"""A small tiled matmul, C = A @ B, written to show precision, not speed.

Two knobs change the numbers it produces, not the work it does:

- ``input_precision`` (fp32 inputs only): ``"tf32"`` cuts each fp32 input to TF32 (10 explicit mantissa
  bits) in the tensor-core multiply; ``"ieee"`` keeps full fp32. On a GPU Triton's ``tl.dot`` uses TF32
  by default; Triton's interpreter would compute exact fp32 whatever you ask, and gpulab's patch
  (``triton_compat``) makes it cut "tf32" inputs as the GPU does. Triton 3.9's CUDA backend accepts
  ``"tf32"``, ``"tf32x3"``, ``"ieee"``, ``"bf16x3"`` and ``"bf16x6"`` (its ``allowed_dot_input_precisions``);
  this kernel offers the two that every Triton since ``input_precision`` replaced ``allow_tf32`` accepts (the
  GPU tests run both).
- ``acc_dtype``: ``torch.float32`` (the usual mixed precision: 16-bit products summed in fp32) or
  ``torch.float16`` (``tl.dot(a, b, acc, out_dtype=tl.float16)``: the running sum itself is rounded to
  fp16, the accumulation lesson). The seed lecture: "Mixed precision separates input representation from
  accumulation: FP16 products with FP32 accumulation are one common pattern" (CS336 Lecture 5).

Shapes: ``a: (M, K)``, ``b: (K, N)`` of one dtype (fp32, fp16 or bf16), any M, N, K >= 1 (masks cover
ragged edges); ``c: (M, N)`` float32, holding the accumulator's value (not rounded again to the input
dtype, so the error you see is that of the inputs and the accumulator).

The bf16 workaround: Triton 3.9's interpreter holds bf16 tensors as raw uint16 bits, and its ``tl.dot``
multiplies those bit patterns as integers (``np.matmul`` on the raw array), so a bf16 ``tl.dot`` there is
wrong. ``bf16_dot_is_exact()`` runs a 16x16x16 probe on small integers (exact in bf16 and in any
accumulator); where it fails, the kernel upcasts bf16 tiles to fp32 before ``tl.dot`` (exact: a bf16
product fits in fp32). On a GPU the native bf16 dot is kept.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

import gpulab

from ..core import plan
from ._checks import check_matmul_operands, check_power_of_two

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INPUT_PRECISIONS = ("tf32", "ieee")
ACC_DTYPES = (torch.float32, torch.float16)
GPU_BLOCKS = (128, 128, 32)  # (BLOCK_M, BLOCK_N, BLOCK_K) on a GPU with Triton's tensor-core dots
# where plan.small_tiles (tl.dot as FP32 FMA): 128x128x32 spills 11 KB in fp16 on sm_75, this tile none
SMALL_BLOCKS = (64, 64, 16)
INTERPRETER_BLOCKS = (32, 32, 32)


def planned_blocks(plan_: plan.Plan | None = None) -> tuple[int, int, int]:
    """The default (BLOCK_M, BLOCK_N, BLOCK_K) on the planned GPU (``plan_``, default ``plan.current()``):
    ``SMALL_BLOCKS`` where ``plan_.small_tiles``, else ``GPU_BLOCKS``. Pure; the interpreter takes
    ``INTERPRETER_BLOCKS`` instead."""
    return SMALL_BLOCKS if (plan_ or plan.current()).small_tiles else GPU_BLOCKS


def num_warps_for(block_m: int, block_n: int) -> int:
    """Warps of a launch: 8 for tiles of 128 x 128 outputs or more, else 4."""
    return 8 if block_m * block_n >= 128 * 128 else 4


@triton.jit
def matmul_precision_kernel(
    a_ptr, b_ptr, c_ptr,  # a: (M, K), b: (K, N) of one dtype; c: (M, N) fp32; any strides
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, ACC_FP16: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    """C = A @ B, one program per (BLOCK_M, BLOCK_N) tile of C, grid ``(cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))``.
    INPUT_PRECISION: how ``tl.dot`` takes fp32 inputs ("tf32" or "ieee"); ACC_FP16: the running sum in fp16
    instead of fp32; UPCAST: bf16 tiles upcast to fp32 first. Stores the accumulator's value as fp32."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    # int64 offsets: an element offset past 2^31 (a 4 GiB operand, or a large stride) must not wrap
    offs_m = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K).to(tl.int64)
    if ACC_FP16:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=(offs_m[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )  # (BLOCK_M, BLOCK_K)
        b = tl.load(
            b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
            mask=(ks[:, None] < K) & (offs_n[None, :] < N),
            other=0.0,
        )  # (BLOCK_K, BLOCK_N)
        if UPCAST:  # the interpreter's bf16 workaround: exact, since a bf16 product fits in fp32
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        if ACC_FP16:
            acc = tl.dot(a, b, acc, out_dtype=tl.float16)  # the running sum is rounded to fp16
        else:
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    c = acc.to(tl.float32)
    tl.store(
        c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
        c,
        mask=(offs_m[:, None] < M) & (offs_n[None, :] < N),
    )


def matmul_precision(
    a: torch.Tensor,
    b: torch.Tensor,
    input_precision: str = "tf32",
    acc_dtype: torch.dtype = torch.float32,
    upcast_bf16: bool | None = None,
    blocks: tuple[int, int, int] | None = None,
) -> torch.Tensor:
    """C = A @ B with a chosen input precision and accumulator dtype; returns float32 ``c: (M, N)``.

    a: (M, K), b: (K, N), same dtype in (fp32, fp16, bf16), on gpulab.DEVICE (any strides).
    input_precision: "tf32" or "ieee" (fp32 inputs; ignored for 16-bit inputs, which the tensor cores take
    as they are). acc_dtype: torch.float32 or torch.float16 (fp16 accumulation needs 16-bit inputs).
    upcast_bf16: None chooses the workaround only where ``bf16_dot_is_exact()`` is False.
    blocks: (BLOCK_M, BLOCK_N, BLOCK_K), powers of two >= 16 (default ``planned_blocks()`` on a GPU,
    ``INTERPRETER_BLOCKS`` in the interpreter).
    Raises TypeError/ValueError naming the argument.
    """
    check_matmul_operands(a, b, DTYPES)
    if input_precision not in INPUT_PRECISIONS:
        raise ValueError(f"input_precision must be one of {INPUT_PRECISIONS}, got {input_precision!r}")
    if acc_dtype not in ACC_DTYPES:
        raise ValueError(f"acc_dtype must be torch.float32 or torch.float16, got {acc_dtype!r}")
    if acc_dtype == torch.float16 and a.dtype != torch.float16:
        raise ValueError(f"acc_dtype=torch.float16 needs fp16 inputs a and b, got {a.dtype}")
    bm, bn, bk = blocks or (planned_blocks() if gpulab.ON_GPU else INTERPRETER_BLOCKS)
    for name, v in (("BLOCK_M", bm), ("BLOCK_N", bn), ("BLOCK_K", bk)):
        check_power_of_two(f"blocks: {name}", v, 16)
    if upcast_bf16 is None:
        upcast_bf16 = a.dtype == torch.bfloat16 and not bf16_dot_is_exact()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    if M and N:
        if K == 0:
            return c.zero_()
        grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
        matmul_precision_kernel[grid](
            a, b, c,
            M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
            INPUT_PRECISION=input_precision, ACC_FP16=acc_dtype == torch.float16,
            UPCAST=bool(upcast_bf16) and a.dtype == torch.bfloat16, num_warps=num_warps_for(bm, bn),
        )  # fmt: skip
    return c


def matmul_precision_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The torch reference, in float64, of the inputs as they are (already rounded to their dtype)."""
    return a.double() @ b.double()


@triton.jit
def _dot_probe_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :])
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], tl.dot(a, b))  # the native dot, no workaround


def bf16_dot_probe(n: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Run one native bf16 ``tl.dot`` on n x n small integers in [-2, 2]; returns (got, expected), float32.

    Integers that small, their products and sums of 16 of them are exact in bf16 and fp32, so any
    difference is the dot itself, not rounding.
    """
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-2, 3, (n, n), generator=g).to(torch.bfloat16).to(gpulab.DEVICE)
    b = torch.randint(-2, 3, (n, n), generator=g).to(torch.bfloat16).to(gpulab.DEVICE)
    c = torch.full((n, n), float("nan"), device=gpulab.DEVICE)
    _dot_probe_kernel[(1,)](a, b, c, N=n)
    return c.cpu(), (a.double() @ b.double()).float().cpu()


@functools.cache
def bf16_dot_is_exact() -> bool:
    """True if a bf16 ``tl.dot`` on 16x16x16 small integers equals the float product exactly (cached).

    False on Triton 3.9's interpreter, which multiplies the raw bf16 bit patterns (seen in gpulab's tests),
    and False where the probe itself fails to run (then the workaround, which avoids the bf16 dot, is used).
    """
    try:
        got, expected = bf16_dot_probe()
    except Exception:  # noqa: BLE001  (any failure of the native bf16 dot means: do not use it)
        return False
    return bool(torch.equal(got, expected))
