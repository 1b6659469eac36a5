"""The kernel checkers name a mistake from the pattern of the output, not only "values differ": a and b swapped
(scale_add), the stride not applied (strided_copy), a 2-D grid with its axes swapped (transpose, tiled matmul),
the accumulator carried from tile to tile (persistent matmul), the erf GELU for the tanh one and the bias indexed
by the row or left out (bias_gelu); a checker run once per dtype says a shared mistake once, naming the dtypes; the torch backward of 08b says each
mistake in one short line;
and the function checkers show what came back: a float N as returned, an empty state merged with m started at 0."""

import math

import pytest
import torch
import triton
import triton.language as tl

import gpulab  # noqa: F401  (the interpreter before any kernel)
from gpulab.exercises import Report, ex01, ex04, ex06, ex07, ex08, ex08b, ex09, mistakes, run_cases_once, say_once

pytestmark = pytest.mark.usefixtures("seed")


def _text(report) -> str:
    assert not report.ok, str(report)
    return str(report)


# ---- scale_add: a and b swapped --------------------------------------------------------------------------------


@triton.jit
def _scale_add_swapped_kernel(x_ptr, y_ptr, a, b, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, b * tl.load(x_ptr + offs, mask=mask) + a, mask=mask)


def test_scale_add_with_a_and_b_swapped_is_named():
    def swapped(x, a, b, out):
        _scale_add_swapped_kernel[(triton.cdiv(x.numel(), 256),)](x, out, a, b, x.numel(), BLOCK=256)

    assert "a and b swapped" in _text(ex01.check_scale_add(swapped))


# ---- strided_copy: the stride never applied -------------------------------------------------------------------


@triton.jit
def _copy_unstrided_kernel(x_ptr, y_ptr, n_out, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def test_strided_copy_without_the_stride_is_named():
    def unstrided(x, stride, out):
        _copy_unstrided_kernel[(triton.cdiv(out.numel(), 1024),)](x, out, out.numel(), stride, BLOCK=1024)

    text = _text(ex06.check_strided_copy(unstrided))
    assert "the stride is not applied" in text and "x[k * stride]" in text


# ---- a 2-D grid with its axes swapped ---------------------------------------------------------------------------


def test_transpose_with_its_grid_axes_swapped_is_named_not_too_small():
    from gpulab.exercises import ex06_solutions as sol

    def swapped(a, out, block=32):
        M, N = a.shape
        sol.transpose_kernel[(triton.cdiv(N, block), triton.cdiv(M, block))](a, out, M, N, BLOCK=block)

    text = _text(ex06.check_transpose(swapped))
    assert "the grid's axes are swapped" in text and "too small" not in text


@triton.jit
def _matmul_2d_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(
            a_ptr + offs_m[:, None] * K + ks[None, :], mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0
        )
        b = tl.load(
            b_ptr + ks[:, None] * N + offs_n[None, :], mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0
        )
        acc = tl.dot(a, b, acc)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16), mask=mask)


def test_tiled_matmul_with_its_grid_axes_swapped_is_named():
    def swapped(a, b, out):
        (M, K), N = a.shape, b.shape[1]
        grid = (triton.cdiv(N, 64), triton.cdiv(M, 32))  # the kernel reads program_id(0) as the row of tiles
        _matmul_2d_kernel[grid](a, b, out, M, N, K, BLOCK_M=32, BLOCK_N=64, BLOCK_K=32)

    text = _text(ex07.check_tiled_matmul(swapped))
    assert "the grid's axes are swapped" in text and "too small" not in text


def test_swapped_grid_is_named_only_where_swapping_covers_out():
    # out (100, 40) in 64 x 16 tiles needs grid (2, 3); launched (3, 2), it writes out[:100, :32]
    unwritten = torch.ones(100, 40, dtype=torch.bool)
    unwritten[:, :32] = False
    flat = unwritten.flatten()
    named = mistakes.swapped_grid(flat, (100, 40), [{"grid": [3, 2], "ints": {"BLOCK_M": 64, "BLOCK_N": 16}}])
    assert "grid (2, 3) covers out" in named and "out[:100, :32]" in named
    assert mistakes.swapped_grid(flat, (100, 40), [{"grid": [3, 2], "ints": {"BLOCK": 16}}]) is None  # too small
    assert mistakes.swapped_grid(flat, (100, 40), [{"grid": [6], "ints": {"BLOCK": 64}}]) is None  # 1-D
    scattered = torch.ones(100, 40, dtype=torch.bool)
    scattered[::2] = False  # not a rectangle from the corner
    assert mistakes.swapped_grid(scattered.flatten(), (100, 40), [{"grid": [3, 2], "ints": {"M": 64, "N": 16}}]) is None


# ---- the persistent matmul's accumulator ------------------------------------------------------------------------


@triton.jit
def _persistent_carried_kernel(a_ptr, b_ptr, c_ptr, M, N, K, programs, BLOCK: tl.constexpr):
    num_n = tl.cdiv(N, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)  # once, before the loop over tiles
    for tile in range(tl.program_id(0), tl.cdiv(M, BLOCK) * num_n, programs):
        offs_m = (tile // num_n) * BLOCK + tl.arange(0, BLOCK)
        offs_n = (tile % num_n) * BLOCK + tl.arange(0, BLOCK)
        for k0 in range(0, K, BLOCK):
            ks = k0 + tl.arange(0, BLOCK)
            a = tl.load(
                a_ptr + offs_m[:, None] * K + ks[None, :], mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0
            )
            b = tl.load(
                b_ptr + ks[:, None] * N + offs_n[None, :], mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0
            )
            acc = tl.dot(a, b, acc)
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16), mask=mask)


def test_a_persistent_matmul_that_never_zeroes_its_accumulator_is_named():
    def carried(a, b, programs, out):
        (M, K), N = a.shape, b.shape[1]
        _persistent_carried_kernel[(programs,)](a, b, out, M, N, K, programs, BLOCK=32)

    text = _text(ex07.check_persistent_matmul(carried))
    assert "the accumulator is not zeroed per tile" in text


def test_accumulator_carried_is_false_for_other_wrong_products():
    a, b = torch.randn(65, 40).half(), torch.randn(40, 47).half()
    right = (a.double() @ b.double()).half()
    assert not ex07.accumulator_carried(right * 2, a, b, 3)
    assert not ex07.accumulator_carried(right.flip(0), a, b, 3)


# ---- bias + GELU ------------------------------------------------------------------------------------------------


@triton.jit
def _bias_gelu_variant_kernel(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = (offs // (n // N)) if MISTAKE == 1 else offs % N  # 1: k // M, every bias element loaded, the wrong one
    h = tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + col, mask=mask)
    if MISTAKE == 3:  # 3: the exact GELU, erf
        y = 0.5 * h * (1.0 + tl.math.erf(h * 0.7071067811865476))
    else:
        y = 0.5 * h * (2.0 * tl.sigmoid(2.0 * 0.7978845608028654 * (h + 0.044715 * h * h * h)))
    tl.store(y_ptr + offs, y, mask=mask)


@pytest.mark.parametrize(
    "mistake, named",
    [
        (1, "the bias is indexed wrong: out used bias[k // M]"),
        (3, "exact GELU"),
    ],
)
def test_bias_gelu_mistakes_are_named(mistake, named):
    def variant(x, bias, out):
        n = x.numel()
        _bias_gelu_variant_kernel[(triton.cdiv(n, 4096),)](x, bias, out, n, x.shape[1], BLOCK=4096, MISTAKE=mistake)

    assert named in _text(ex09.check_bias_gelu(variant))


def test_bias_gelu_mistake_names_each_pattern_and_nothing_for_noise():
    x, bias = torch.randn(7, 50) * 3, torch.randn(50)
    rows = torch.arange(7)[:, None].expand(7, 50)
    assert "never added" in ex09.bias_gelu_mistake(ex09.gelu_ref(x, torch.zeros(50)), x, bias)
    assert "bias of the row" in ex09.bias_gelu_mistake(ex09.gelu_ref(x, bias[rows]), x, bias)
    assert "exact GELU" in ex09.bias_gelu_mistake(ex09.gelu_erf_ref(x, bias), x, bias)
    got = ex09.gelu_ref(x, bias) + 1e-2 * torch.randn(7, 50, dtype=torch.float64)
    assert ex09.bias_gelu_mistake(got, x, bias) is None


# ---- function checkers: what came back, as it came back ---------------------------------------------------------


def test_crossing_n_shows_a_float_as_returned():
    text = _text(ex01.check_crossing_n(lambda c, b, s: float(ex01.check_crossing_n.solution(c, b, s))))
    assert "got 600.0 (a float)" in text and "got 600:" not in text


def test_merge_with_m_started_at_zero_names_the_start_value():
    def from_zero(m_a, l_a, u_a, m_b, l_b, u_b):
        m = max(0.0, m_a, m_b)  # the running max started at 0, not -inf
        fa = math.exp(m_a - m) if l_a else 0.0
        fb = math.exp(m_b - m) if l_b else 0.0
        return m, l_a * fa + l_b * fb, u_a * fa + u_b * fb

    text = _text(ex08.check_merge(from_zero))
    assert "-inf" in text and "start" in text and "do not divide by l" not in text


# ---- one line for a mistake every dtype's run makes ------------------------------------------------------------


def test_a_line_every_dtype_shares_is_said_once_with_the_dtypes():
    rep = Report("relu_cast", cases=11, failed=11)
    mask = "stored past the end of out (indices 1 to 127; n=1): mask the store"
    rep.failures = [
        f"{mask} [6 of 6 cases, e.g. relu_cast fp32->fp32(x=<float32 tensor of shape (1,)>)]",
        f"{mask} [5 of 5 cases, e.g. relu_cast fp16->fp16(x=<float16 tensor of shape (1,)>)]\n    -> advice",
        f"{mask} [5 of 5 cases, e.g. relu_cast fp16->fp16(x=<float16 tensor of shape (1,)>)]\n    -> advice",
        "values differ: first at index 3 [2 of 5 cases, e.g. relu_cast bf16->bf16(x=<bfloat16 tensor of shape (17,)>)]",
    ]
    lines = say_once(rep).failures
    assert lines[0] == f"{mask} [6 of 6 cases; e.g. relu_cast fp32->fp32(x=<float32 tensor of shape (1,)>)]"
    assert lines[1].startswith(f"{mask} [10 of 10 cases, in fp16->fp16, fp16->fp16;") and lines[1].endswith("-> advice")
    assert lines[2].startswith("values differ: first at index 3 [2 of 5 cases;") and len(lines) == 3


@triton.jit
def _sincos_unmasked_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.float32)
    tl.store(y_ptr + offs, (tl.sin(x) * tl.sin(x) - tl.cos(x) * tl.cos(x)).to(y_ptr.dtype.element_ty))


def test_a_mask_missing_in_every_dtype_is_one_line():
    def unmasked(x, out):
        _sincos_unmasked_kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)

    rep = ex04.check_sincos_fused(unmasked)
    assert not rep.ok and len(rep.failures) == 1, str(rep)
    assert "mask the store" in rep.failures[0] and ", in fp32, fp16, bf16;" in rep.failures[0]


# ---- one short line a mistake (lesson 08b's backward) -----------------------------------------------------------


def _backward_without_delta(q, k, v, o, lse, do, causal):
    sc = 1 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-1, -2) * sc
    if causal:
        L = q.shape[2]
        s = s.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    p = torch.exp(s - lse[..., None])
    ds = p * (do @ v.transpose(-1, -2))  # dS = P o dP: the delta term left out
    return ds @ k * sc, ds.transpose(-1, -2) @ q * sc, p.transpose(-1, -2) @ do


def test_the_torch_backwards_mistake_is_one_short_line():
    rep = ex08b.check_flash_backward(_backward_without_delta)
    assert not rep.ok and len(rep.failures) == 1, str(rep)
    line = rep.failures[0]
    assert (
        "the delta term" in line and f"[{rep.cases} of {rep.cases} cases, e.g. flash_backward((B, H, L, d) = " in line
    )
    assert len(line) <= 200, line


def test_run_cases_once_says_each_message_once_and_counts_its_cases():
    cases = [dict(x=x) for x in (1, 2, 3, 4, 0)]
    rep = run_cases_once(
        "inv", lambda x: 1 / x if x != 3 else "no", cases, lambda c, got: "not a number" if got == "no" else None
    )
    assert rep.failed == 2 and len(rep.failures) == 2
    assert "raised ZeroDivisionError: division by zero [1 of 5 cases, e.g. inv(x=0)]" in rep.failures
    assert "not a number [1 of 5 cases, e.g. inv(x=3)]" in rep.failures
    assert not run_cases_once("stub", lambda x: (_ for _ in ()).throw(NotImplementedError), cases, None).attempted
