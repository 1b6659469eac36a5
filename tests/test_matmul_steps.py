"""Lesson 07's teaching matmuls (gpulab.kernels.matmul_steps): every step against float64 on awkward M, N, K,
poisoned outputs, strided inputs; the launch order by hand; the hand counts; bad arguments named."""

import pytest
import torch
import triton
import triton.language as tl

import gpulab  # first: it picks the mode (TRITON_INTERPRET) before Triton is imported
from gpulab.core import tolerances
from gpulab.kernels import matmul_steps

SMALL = matmul_steps.StepConfig(BLOCK_M=32, BLOCK_N=16, BLOCK_K=16, num_warps=4, BLOCK=64)  # quick in the interpreter


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("step", matmul_steps.STEPS)
def test_every_step_matches_float64_on_awkward_shapes(step, dtype):
    seed = 11
    gen = torch.Generator().manual_seed(seed)
    for M, N, K in [(1, 1, 1), (33, 17, 70), (70, 35, 3), (65, 47, 129)]:
        a = torch.randn(M, K, generator=gen, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)
        b = torch.randn(K, N, generator=gen, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)
        out = torch.full((M, N), float("nan"), dtype=dtype, device=gpulab.DEVICE)  # poisoned: every element written
        matmul_steps.matmul_step(a, b, step, SMALL, out=out)
        tf32 = tolerances.declares_tf32(dtype)  # the steps' tl.dot declares no precision: Triton's default
        msg = tolerances.matmul_mismatch(out, a, b, matmul_steps.matmul_ref(a, b).cpu(), tf32=tf32)
        assert msg is None, f"{step} {dtype} M, N, K = {M, N, K} (seed {seed}): {msg}"


def test_strided_inputs():
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(40, 50, generator=gen, dtype=torch.float64).half().to(gpulab.DEVICE).t()  # (50, 40), strided
    b = torch.randn(24, 40, generator=gen, dtype=torch.float64).half().to(gpulab.DEVICE).t()  # (40, 24)
    for step in matmul_steps.STEPS:
        c = matmul_steps.matmul_step(a, b, step, SMALL)
        assert tolerances.matmul_mismatch(c, a, b, matmul_steps.matmul_ref(a, b).cpu()) is None, step


@triton.jit
def _order_kernel(out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = matmul_steps.launch_order(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


def _order(tiles_m, tiles_n, group_m):
    out = torch.full((tiles_m * tiles_n, 2), -1, dtype=torch.int32, device=gpulab.DEVICE)
    _order_kernel[(tiles_m * tiles_n,)](out, tiles_m * 16, tiles_n * 16, BLOCK_M=16, BLOCK_N=16, GROUP_M=group_m)
    return [tuple(r) for r in out.cpu().tolist()]


def test_launch_order_by_hand():
    # 3 tile rows, 2 tile columns. GROUP_M = 1: row by row.
    assert _order(3, 2, 1) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    # GROUP_M = 2: rows 0-1 column by column, then the last group (row 2 alone) column by column
    assert _order(3, 2, 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]


def test_step_counts_by_hand():
    cfg = matmul_steps.StepConfig(BLOCK_M=128, BLOCK_N=64)
    # no reuse: 2 M N K elements; 4-byte elements
    assert matmul_steps.step_counts("no reuse", 100, 200, 300, 4, cfg) == (2 * 100 * 200 * 300, 2 * 100 * 200 * 300 * 4)
    # tiled, M = 100 (1 tile row of 128), N = 300 (5 tile columns of 64), K = 50: A read 5 times, B once
    flops, nbytes = matmul_steps.step_counts("tiled", 100, 300, 50, 2, cfg)
    assert nbytes == (5 * 100 * 50 + 1 * 50 * 300) * 2 == 80_000 and flops == 3_000_000
    # square N = 4096, T = 128 tiles, fp16: loads 2 N^3 / T, intensity T / s = 64 FLOP/byte
    flops, nbytes = matmul_steps.step_counts("pipelined", 4096, 4096, 4096, 2, matmul_steps.StepConfig(128, 128))
    assert nbytes == 2 * 4096**3 // 128 * 2 and flops / nbytes == 64


def test_bad_arguments_are_named():
    a = torch.ones(4, 5, device=gpulab.DEVICE, dtype=torch.float16)
    with pytest.raises(ValueError, match="step must be one of"):
        matmul_steps.matmul_step(a, a.t(), "fast")
    with pytest.raises(ValueError, match="agree on K"):
        matmul_steps.matmul_step(a, a, "tiled")
    with pytest.raises(ValueError, match="out must be"):
        matmul_steps.matmul_step(
            a, a.t().contiguous(), "tiled", out=torch.empty(4, 3, device=gpulab.DEVICE, dtype=torch.float16)
        )
    with pytest.raises(TypeError):
        matmul_steps.matmul_step(a.double(), a.t().double(), "tiled")


def test_no_reuse_is_exact_in_fp32_on_one_element_and_k_zero(poisoned):
    """The no-reuse step as lesson 07's suite and counters launch it (``StepConfig()``, fp32): a 1 x 1 x 1 product,
    and K = 0 (a zero matrix, every element written)."""
    a, b = torch.tensor([[3.0]], device=gpulab.DEVICE), torch.tensor([[-2.5]], device=gpulab.DEVICE)
    assert matmul_steps.matmul_step(a, b, "no reuse").item() == -7.5
    for step in matmul_steps.STEPS:
        c = matmul_steps.matmul_step(
            torch.empty(4, 0, device=gpulab.DEVICE), torch.empty(0, 3, device=gpulab.DEVICE), step
        )
        assert c.shape == (4, 3) and (c == 0).all(), step
    assert matmul_steps.matmul_step(
        torch.empty(0, 5, device=gpulab.DEVICE), torch.ones(5, 3, device=gpulab.DEVICE), "tiled"
    ).shape == (0, 3)


def test_sizes_past_int32_offsets_are_refused_naming_the_argument():
    """The steps' offsets are int32: an operand or output whose last element lies 2^31 elements past its first, or
    M * N >= 2^31 outputs for no reuse, is refused before any launch (M * N on views of one element)."""
    one = torch.ones(1, device=gpulab.DEVICE, dtype=torch.float16)
    try:  # address space only: the pages are never written (refused before any launch)
        a = torch.empty(2**31 + 1, device=gpulab.DEVICE, dtype=torch.float16).as_strided((2, 1), (2**31, 1))
    except (RuntimeError, MemoryError) as e:
        pytest.skip(f"cannot reserve 4 GB of address space: {e}")
    with pytest.raises(ValueError, match="a: the teaching kernels' offsets are int32"):
        matmul_steps.matmul_step(a, one.view(1, 1), "tiled")
    big = one.expand(65536, 32769)  # stride 0: offset 0, but M * N = 65536 * 32769 > 2^31
    with pytest.raises(ValueError, match="M \\* N must be below 2\\^31"):
        matmul_steps.matmul_step(one.expand(65536, 1), one.expand(1, 32769), "no reuse", out=big)
    with pytest.raises(ValueError, match="config: BLOCK must be a power of two"):
        matmul_steps.matmul_step(one.view(1, 1), one.view(1, 1), "no reuse", matmul_steps.StepConfig(BLOCK=100))
    with pytest.raises(ValueError, match="config: BLOCK_M must be a power of two"):
        matmul_steps.matmul_step(one.view(1, 1), one.view(1, 1), "tiled", matmul_steps.StepConfig(BLOCK_M=8))
