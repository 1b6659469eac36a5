"""Wrong kernels a learner writes, each run through its lesson's real checker, with the message it must get: the
mistake named as a class from what the run showed (programs that stored nothing, blocks that overlap, a mask one
element too wide, two arguments swapped, arithmetic in a narrower float format, a named values pattern over an
unread input, a gradient never written), one line for a message every dtype shares, and no cause asserted that the
run did not show. ``kernelcheck.LONG_N`` is lowered (the long case costs interpreter time)."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import math

import pytest
import torch
import triton
import triton.language as tl

from gpulab.exercises import Report, ex00, ex01, ex02, ex03, ex04, ex05, ex07, ex08b, ex08b_solutions, ex09, kernelcheck
from gpulab.exercises.kerneldiagnosis import NARROWER_ROUNDINGS, Case, narrower_precision
from gpulab.exercises.kernelwatch import Guarded, Seen

pytestmark = pytest.mark.usefixtures("seed")
BLOCK = 128


@pytest.fixture(autouse=True)
def short_cases(monkeypatch):
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


def failing(rep: Report) -> str:
    text = str(rep)
    assert rep.attempted and not rep.ok, text
    assert all(len(line) <= 420 for line in text.splitlines()), text
    return text


def grid1(x):
    return (triton.cdiv(x.numel(), BLOCK),)


# ---- which programs stored what ------------------------------------------------------------------------------------


SPLIT_BY_M, LAST_K_TILE = 1, 2  # _matmul_mistake's MISTAKE: one wrong line each in a right tiled matmul


@triton.jit
def _matmul_mistake(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    pid = tl.program_id(0)
    if MISTAKE == 1:  # SPLIT_BY_M: split by M's tiles where N's belong
        pid_m, pid_n = pid // tl.cdiv(M, BLOCK), pid % tl.cdiv(M, BLOCK)
    else:
        pid_m, pid_n = pid // tl.cdiv(N, BLOCK), pid % tl.cdiv(N, BLOCK)
    offs_m = pid_m * BLOCK + tl.arange(0, BLOCK)
    offs_n = pid_n * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        ks = k0 + tl.arange(0, BLOCK)
        a = tl.load(
            a_ptr + offs_m[:, None] * K + ks[None, :], mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0
        )
        b = tl.load(
            b_ptr + ks[:, None] * N + offs_n[None, :], mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0
        )
        if MISTAKE == 2:  # LAST_K_TILE: each step's dot replaces the sum
            acc = tl.dot(a, b)
        else:
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))  # fmt: skip


def matmul_with(mistake: int):
    """ex07's launcher for ``_matmul_mistake`` with ``mistake``: 32 x 32 tiles, one program per output tile."""

    def launch(a, b, out):
        M, K = a.shape
        N = b.shape[1]
        _matmul_mistake[(triton.cdiv(M, 32) * triton.cdiv(N, 32),)](a, b, out, M, N, K, BLOCK=32, MISTAKE=mistake)

    return launch


def test_the_matmul_without_a_mistake_passes():  # so each failure below comes from its one wrong line
    rep = ex07.check_tiled_matmul(matmul_with(0))
    assert rep.ok, str(rep)


def test_programs_that_store_nothing_are_named_not_a_grid_too_small():
    text = failing(ex07.check_tiled_matmul(matmul_with(SPLIT_BY_M)))
    assert "stored nothing into out" in text and "program ids" in text, text
    assert "grid is too small" not in text, text


@triton.jit
def _add_without_pid(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)  # every program takes block 0
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_programs_whose_blocks_overlap_are_named_with_the_tail_they_left():
    text = failing(ex00.check_add(lambda x, y, out: _add_without_pid[grid1(x)](x, y, out, x.numel(), BLOCK=BLOCK)))
    assert "never written" in text and "both stored out[" in text and "blocks overlap" in text, text


# ---- a mask one element too wide, said once for every access ------------------------------------------------------


@triton.jit
def _add_mask_le(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs <= n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_a_mask_one_too_wide_is_said_once_for_every_access():
    text = failing(ex00.check_add(lambda x, y, out: _add_mask_le[grid1(x)](x, y, out, x.numel(), BLOCK=BLOCK)))
    line = next(ln for ln in text.splitlines() if "past the end of out" in ln)
    assert "past the end of x" in line and "past the end of y" in line, text
    assert line.count("offs <= n?") == 1 and "bound them with offs < n" in line, text


# ---- what the values show --------------------------------------------------------------------------------------


@triton.jit
def _gated_residual_x_g_swapped(x_ptr, g_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (r + g * tl.sigmoid(x)).to(out_ptr.dtype.element_ty), mask=mask)


def test_two_inputs_swapped_are_named_by_their_names():
    def launch(x, g, r, out):
        _gated_residual_x_g_swapped[grid1(x)](x, g, r, out, x.numel(), BLOCK=BLOCK)

    text = failing(ex04.check_gated_residual(launch))
    assert "the answer with x and g swapped" in text, text
    assert "r swapped" not in text, text


@triton.jit
def _scale_add_fp16(x_ptr, y_ptr, a, b, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float16)
    tl.store(y_ptr + offs, (a * x + b).to(tl.float16), mask=mask)


def test_arithmetic_in_float16_is_named_for_an_fp32_out():
    def launch(x, a, b, out):
        _scale_add_fp16[grid1(x)](x, out, a, b, x.numel(), BLOCK=BLOCK)

    text = failing(ex01.check_scale_add(launch))
    assert "within a few float16 roundings" in text and "compute in fp32" in text, text


def _case(got: list, ref: list) -> Case:
    out = Guarded((len(got),), torch.float32, "cpu")
    out.view.copy_(torch.tensor(got))
    return Case({}, out, Seen(), True, ref64=torch.tensor(ref, dtype=torch.float64))


def test_narrower_precision_only_for_values_that_format_holds_and_close_enough():
    u16 = 2.0**-11
    near = [1.0 + 2 * u16, 2.0, -3.0]  # values float16 holds, a rounding or two off
    assert "float16" in narrower_precision(_case(near, [1.0, 2.0 + 2 * u16, -3.0]))
    assert narrower_precision(_case([1.0001, 2.0, -3.0], [1.0, 2.0, -3.0])) is None  # float16 cannot hold 1.0001
    far = 4 * NARROWER_ROUNDINGS * 2.0**-8
    assert narrower_precision(_case([1.0, 2.0, -3.0], [1.0 + far, 2.0, -3.0])) is None  # past any format's rounding


@triton.jit
def _bias_gelu_row_bias(x_ptr, b_ptr, y_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    h = tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs // N, mask=mask)  # the row's bias
    z = 0.7978845608028654 * (h + 0.044715 * h * h * h)
    tl.store(y_ptr + offs, 0.5 * h * (1.0 + (2.0 * tl.sigmoid(2.0 * z) - 1.0)), mask=mask)


def test_a_named_values_pattern_is_said_where_it_also_leaves_an_input_unread():
    def launch(x, bias, out):
        _bias_gelu_row_bias[grid1(x)](x, bias, out, x.numel(), x.shape[-1], BLOCK=BLOCK)

    text = failing(ex09.check_bias_gelu(launch))
    assert "the bias is indexed wrong" in text and "of bias were never loaded" in text, text


# ---- one line per message, and only causes the run showed ----------------------------------------------------------


@triton.jit
def _gated_residual_g_shifted(x_ptr, g_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs + 1, mask=mask).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (r + x * tl.sigmoid(g)).to(out_ptr.dtype.element_ty), mask=mask)


def test_a_long_message_every_dtype_shares_is_one_line():
    def launch(x, g, r, out):
        _gated_residual_g_shifted[grid1(x)](x, g, r, out, x.numel(), BLOCK=BLOCK)

    text = failing(ex04.check_gated_residual(launch))
    lines = [ln for ln in text.splitlines() if ln.lstrip().startswith("- ")]
    assert len(lines) == 1 and "in fp32, bf16" in lines[0] and "shifted by +1" in lines[0], text


def test_a_gradient_never_written_is_named_not_a_grid_too_small():
    def only_dq(q, k, v, do, lse, delta, causal, out):
        B, H, L, d = q.shape
        ex08b_solutions.dq_kernel[(triton.cdiv(L, 16), B * H)](
            q, k, v, do, lse, delta, out[0], L, 1.0 / math.sqrt(d), CAUSAL=causal, D=d, BLOCK_M=16, BLOCK_N=16
        )

    text = failing(ex08b.check_flash_backward_kernel(only_dq))
    assert "out[1] (dk) and out[2] (dv) were never written" in text, text
    assert "grid is too small" not in text, text


@triton.jit
def _quantize_times_scale(x_ptr, q_ptr, scale_ptr, n, GROUP: tl.constexpr, ROWS: tl.constexpr):
    blocks = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    offs = blocks[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    scale = tl.max(tl.abs(x), axis=1) / 448.0
    tl.store(q_ptr + offs, (x * scale[:, None]).to(q_ptr.dtype.element_ty), mask=mask)  # times, not divided by
    tl.store(scale_ptr + blocks, scale, mask=blocks * GROUP < n)


def test_a_quantizer_nan_is_not_blamed_on_zero_blocks_alone():
    def launch(x, q, scales):
        n = x.numel()
        _quantize_times_scale[(triton.cdiv(triton.cdiv(n, 32), 16),)](x, q, scales, n, GROUP=32, ROWS=16)

    text = failing(ex03.check_quantize_fp8(launch))
    nan = [ln for ln in text.splitlines() if "is NaN" in ln]
    assert nan and all("past e4m3's 448" in ln for ln in nan), text


def test_a_matmul_that_keeps_one_k_tile_is_named():
    text = failing(ex07.check_tiled_matmul(matmul_with(LAST_K_TILE)))
    assert "the product over the last K tile alone" in text and "acc = tl.dot(a, b, acc)" in text, text


def test_two_gradients_stored_in_each_others_place_are_named():
    def swapped(q, k, v, do, lse, delta, causal, out):
        B, H, L, d = q.shape
        scale = 1.0 / math.sqrt(d)
        kw = dict(CAUSAL=causal, D=d, BLOCK_M=16, BLOCK_N=16)
        grid = (triton.cdiv(L, 16), B * H)
        ex08b_solutions.dkdv_kernel[grid](q, k, v, do, lse, delta, out[2], out[1], L, scale, **kw)  # dv, dk
        ex08b_solutions.dq_kernel[grid](q, k, v, do, lse, delta, out[0], L, scale, **kw)

    text = failing(ex08b.check_flash_backward_kernel(swapped))
    assert "dk and dv swapped: out[1] holds dv and out[2] holds dk" in text, text


def test_integer_tensors_are_not_tried_swapped():
    f32, i32 = torch.ones(4), torch.arange(4, dtype=torch.int32)
    case = dict(x=f32, w=f32 + 1, trips=i32, order=i32.flip(0), a=1.5, b=2.5)
    pairs = {(a, b) for a, b, _, _ in kernelcheck.swapped_cases(case, lambda c: c["x"], None)}
    assert pairs == {("x", "w"), ("a", "b")}


@triton.jit
def _bias_gelu_rows(x_ptr, b_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    row, cols = tl.program_id(0), tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (cols < N) & (row < M)  # a scalar condition with a block's: Triton 3.6's interpreter refuses the mask
    h = tl.load(x_ptr + row * N + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
    z = 0.7978845608028654 * (h + 0.044715 * h * h * h)
    tl.store(y_ptr + row * N + cols, 0.5 * h * (1.0 + (2.0 * tl.sigmoid(2.0 * z) - 1.0)), mask=mask)


def test_a_mask_the_interpreter_refuses_is_named_with_a_way_round():
    def launch(x, bias, out):
        M, N = x.shape
        _bias_gelu_rows[(M, triton.cdiv(N, BLOCK))](x, bias, out, M, N, BLOCK=BLOCK)

    text = failing(ex09.check_bias_gelu(launch))
    if "mask has unsupported dtype" not in text:
        pytest.skip("this Triton's interpreter takes the mask")
    assert "which a GPU compiles" in text and "cols * 0 + row < M" in text, text


@triton.jit
def _quantize_scales_unmasked(x_ptr, q_ptr, scale_ptr, n, GROUP: tl.constexpr, ROWS: tl.constexpr):
    blocks = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    offs = blocks[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    amax = tl.max(tl.abs(x), axis=1)
    scale = amax / 448.0
    q = x / tl.where(amax > 0.0, scale, 1.0)[:, None]
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(scale_ptr + blocks, scale)  # no mask: the last program's rows run past the scales


def test_a_store_past_a_buffer_the_checker_made_names_it_as_the_exercise_does():
    def launch(x, q, scales):
        n = x.numel()
        _quantize_scales_unmasked[(triton.cdiv(triton.cdiv(n, 32), 16),)](x, q, scales, n, GROUP=32, ROWS=16)

    text = failing(ex03.check_quantize_fp8(launch))
    assert "stored past the end of scales (" in text and "mask the store into scales" in text, text
    assert "launcher's own" not in text and "scale_ptr" not in text and " out" not in text, text
    assert len([ln for ln in text.splitlines() if "past the end" in ln]) == 1, text  # both runs, one line


# ---- a wrong formula named by its answer (the exercise's mismatch signatures) ---------------------------------------


@triton.jit
def _reverse_each_block(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    src = pid * BLOCK + (BLOCK - 1 - tl.arange(0, BLOCK))  # counted from the block's end, not x's
    tl.store(out_ptr + offs, tl.load(x_ptr + src, mask=src < n), mask=offs < n)


def test_a_reverse_within_each_block_is_named_with_its_block():
    def launch(x, out):
        _reverse_each_block[grid1(x)](x, out, x.numel(), BLOCK=BLOCK)

    text = failing(ex00.check_reverse(launch, seed=1))
    assert f"out reverses x within each block of {BLOCK} elements, not across the whole of x" in text, text


@triton.jit
def _loop_block_trips(x_ptr, trips_ptr, order_ptr, y_ptr, n, BLOCK: tl.constexpr, MOST: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(order_ptr + offs, mask=mask, other=0)
    x = tl.load(x_ptr + idx, mask=mask, other=0.0)
    trips = tl.load(trips_ptr + idx, mask=mask, other=0)
    count = tl.max(trips, axis=0) if MOST else tl.min(trips, axis=0)  # one count for the block, no lane kept
    for _ in range(count):
        x = tl.sin(x) * 0.9 + 0.1
    tl.store(y_ptr + offs, x, mask=mask)


@pytest.mark.parametrize("most", [False, True])
def test_a_loop_run_to_one_count_per_block_is_named(most):
    def launch(x, trips, order, out):
        _loop_block_trips[grid1(x)](x, trips, order, out, x.numel(), BLOCK=BLOCK, MOST=most)

    text = failing(ex02.check_loop_grouped(launch, seed=1))
    said = "each slot ran its block's most trips" if most else "each slot ran its block's fewest trips"
    assert said in text and "values differ: 1 of" not in text, text


@triton.jit
def _sincos_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    s, c = tl.sin(x), tl.cos(x)
    tl.store(out_ptr + offs, (s * s + c * c).to(out_ptr.dtype.element_ty), mask=mask)  # the lesson's identity


def test_sin_squared_plus_cos_squared_is_named_as_not_depending_on_x():
    def launch(x, out):
        _sincos_sum[grid1(x)](x, out, x.numel(), BLOCK=BLOCK)

    text = failing(ex04.check_sincos_fused(launch, seed=1))
    assert "out does not depend on x" in text and "is 1 for every x" in text, text
    assert len(text.splitlines()) == 3 and "in fp32, fp16, bf16" in text, text  # one line for the three dtypes


@triton.jit
def _sigmoid3_bwd_without_inner_slope(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    dy = tl.load(dy_ptr + offs, mask=mask)
    s1 = 1.0 / (1.0 + tl.exp(-x))
    s2 = 1.0 / (1.0 + tl.exp(-s1))
    s3 = 1.0 / (1.0 + tl.exp(-s2))
    tl.store(dx_ptr + offs, dy * (s3 * (1.0 - s3)) * (s2 * (1.0 - s2)), mask=mask)  # s1's slope left out


def test_a_backward_missing_one_slope_names_that_slope():
    def launch(x, dy, out):
        _sigmoid3_bwd_without_inner_slope[grid1(x)](x, dy, out, x.numel(), BLOCK=BLOCK)

    text = failing(ex05.check_sigmoid3_bwd(launch, seed=1))
    assert "the inner sigmoid's slope s1(1 - s1) is missing" in text, text
