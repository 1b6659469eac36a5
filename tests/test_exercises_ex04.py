"""Lesson 04's checkers: the fused sin^2 + cos^2 kernel exercise with right and wrong kernels (each usual mistake
gets the message that names it, none crashes), and the counting exercises' solutions against wrong answers."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pytest
import torch
import triton
import triton.language as tl

from gpulab.exercises import ex04, kernelcheck
from tests.exercise_checks import check_hints_then_solution, check_stub_not_attempted, recorded_compile_error


@pytest.fixture(autouse=True)
def _short_long_case(monkeypatch):
    """The long case (``kernelcheck.LONG_N``) costs interpreter time; tests/test_kernelcheck_hostile.py runs it."""
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


@triton.jit
def _sincos(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK: tl.constexpr, IN_FP32: tl.constexpr, WRONG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask) if MASK else tl.load(x_ptr + offs)
    if IN_FP32:
        x = x.to(tl.float32)
    s = tl.sin(x)
    c = tl.cos(x)
    y = s * s + c * c if WRONG else s * s - c * c  # WRONG: the lesson's sin^2 + cos^2, not the exercise's
    if WRONG == 2:  # a value that holds for sin^2 + cos^2 at every x, stored without sin or cos
        y = tl.where(x > 0, 1.0 - 2.0**-24, 1.0)
    if WRONG == 3:  # the cos^2 term left out: no named formula
        y = s * s
    if IN_FP32:
        y = y.to(out_ptr.dtype.element_ty)
    if MASK:
        tl.store(out_ptr + offs, y, mask=mask)
    else:
        tl.store(out_ptr + offs, y)


def launcher(block=128, mask=True, in_fp32=True, wrong=False, grid=None):
    def sincos_fused(x, out):
        n = x.numel()
        g = grid(n, block) if grid else triton.cdiv(n, block)
        _sincos[(g,)](x, out, n, BLOCK=block, MASK=mask, IN_FP32=in_fp32, WRONG=wrong)

    return sincos_fused


def test_right_kernels_pass():
    rep = ex04.check_sincos_fused(launcher())
    assert rep.ok and rep.cases == 16, str(rep)
    assert ex04.check_sincos_fused(ex04.check_sincos_fused.solution).ok


def test_wrong_values_name_index_expected_and_got():
    rep = ex04.check_sincos_fused(launcher(wrong=3))  # sin^2 alone
    text = str(rep)
    assert not rep.ok and "values differ" in text and "first at index" in text and "expected" in text, text


def test_the_lessons_sin_squared_plus_cos_squared_is_named():
    rep = ex04.check_sincos_fused(launcher(wrong=True))  # sin^2 + cos^2, 1 for every x
    text = str(rep)
    assert not rep.ok and "out does not depend on x" in text and "first at index" not in text, text


def test_an_answer_that_does_not_depend_on_x_fails_on_its_values():
    # sin^2 + cos^2 is 1 for every x, so a kernel that stored about 1 passed a check of its values; the exercise's
    # sin^2 - cos^2 = -cos 2x varies with x, and every case fails
    rep = ex04.check_sincos_fused(launcher(wrong=2), seed=0)  # a case of one x near pi/2 could pass by chance
    assert not rep.ok and rep.failed == rep.cases and "values differ" in str(rep), str(rep)


def test_unmasked_kernel_is_named_and_does_not_crash():
    rep = ex04.check_sincos_fused(launcher(mask=False))
    assert not rep.ok and "past the end of out" in str(rep) and "mask the store" in str(rep), str(rep)


def test_grid_too_small_is_named():
    rep = ex04.check_sincos_fused(launcher(grid=lambda n, b: max(n // b, 1) - (n > b)))
    assert not rep.ok and "grid is too" in str(rep), str(rep)


def test_tolerance_is_one_unit_of_the_dtype_at_one():
    # a value 1.5 units of fp16 at 1 off the reference fails; half a unit passes (units by hand: 2^-10)
    ref = torch.ones(4, dtype=torch.float64)
    check = ex04._abs_mismatch(ex04.SINCOS_TOL[torch.float16])
    assert check(ref + 0.5 * 2.0**-10, ref, {}) is None
    assert "1 of 4" in check(ref + torch.tensor([0, 0, 1.5 * 2.0**-10, 0], dtype=torch.float64), ref, {})


def test_16_bit_sin_gets_the_note_to_compute_in_fp32():
    rep = ex04.check_sincos_fused(launcher(in_fp32=False))  # tl.sin on fp16/bf16: Triton refuses it
    assert not rep.ok and rep.failures[0].endswith("-> " + ex04._FP32_NOTE), str(rep)  # shown first
    assert rep.failed == 10 and len(rep.failures) == 2  # the fp16 and bf16 cases, a line each; the note adds none
    assert not any(f.startswith("sincos_fused fp32") for f in rep.failures), str(rep)  # fp32 cases pass


def test_16_bit_sin_gets_the_note_where_the_gpu_compiler_refuses_it():
    # on a GPU the mistake is a CompilationError ("at 6:8:" first); the note must come all the same
    def compiled_on_a_gpu(x, out):
        if x.dtype != torch.float32:
            raise recorded_compile_error("sin_fp16" if x.dtype == torch.float16 else "sin_bf16")
        launcher()(x, out)

    rep = ex04.check_sincos_fused(compiled_on_a_gpu)
    assert not rep.ok and rep.failures[0].endswith("-> " + ex04._FP32_NOTE), str(rep)
    assert "tl.sin on fp16" in rep.failures[0] and "raised CompilationError" not in str(rep), str(rep)


def test_stub_reports_not_attempted():
    check_stub_not_attempted(ex04.check_sincos_fused, 2)


def test_hints_then_solution(capsys):
    check_hints_then_solution(ex04.check_sincos_fused, capsys)


# ---- the counting exercises (moved from the notebook): reference solutions pass, wrong answers fail -----------


def test_counting_checkers_accept_the_solutions_and_refuse_wrong_answers():
    assert ex04.check_sincos_bytes(ex04.check_sincos_bytes.solution).ok
    rep = ex04.check_sincos_bytes(lambda n, dtype, fused: (2 if fused else 10) * n * dtype.itemsize)
    assert not rep.ok and "11n transfers" in str(rep)
    assert ex04.check_model_time_ms(ex04.check_model_time_ms.solution).ok
    rep = ex04.check_model_time_ms(lambda n, L, b, o, B: L * o + n * b / (B * 1e12) * 1e3)
    assert not rep.ok and "1 µs = 1e-3 ms" in str(rep)


# ---- the transfer exercises: LayerNorm counted, and a fused chain of three inputs --------------------------------


def test_layernorm_bytes_by_hand_and_its_mistakes():
    sol = ex04.check_layernorm_bytes.solution
    # by hand, rows = 2, d = 3, fp32: unfused 8 * 6 + 4 * 2 + 2 * 3 = 62 elements; fused 2 * 6 + 2 * 3 = 18
    assert sol(2, 3, torch.float32, False) == 62 * 4 and sol(2, 3, torch.float32, True) == 18 * 4
    assert ex04.check_layernorm_bytes(sol).ok
    for wrong, said in (
        (lambda R, d, t, f: sol(R, d, t, not f), "swapped"),
        (lambda R, d, t, f: sol(R, d, t, f) // t.itemsize, "itemsize"),
        (lambda R, d, t, f: (2 * R * d if f else 8 * R * d + 4 * R + 2 * d) * t.itemsize, "reads w and b"),
        (lambda R, d, t, f: (2 * R * d + 2 * d if f else 8 * R * d + 2 * d) * t.itemsize, "mean and var are arrays"),
        (lambda R, d, t, f: (2 * R * d + 2 * d + 2 * R if f else 8 * R * d + 4 * R + 2 * d) * t.itemsize, "registers"),
    ):
        rep = ex04.check_layernorm_bytes(wrong)
        assert not rep.ok and said in str(rep), str(rep)


def test_layernorm_speedup_and_its_mistakes():
    sol, nb = ex04.check_layernorm_speedup.solution, ex04.check_layernorm_bytes.solution
    # launches dominate at one row: the ratio tends to 5 kernels / 1; bytes dominate at many rows: to 8 / 2 = 4
    assert 4.9 < sol(1, 128, torch.float32, 5.0, 4.0) < 5.0
    assert 3.9 < sol(2**20, 8192, torch.float32, 5.0, 4.0) < 4.1
    assert ex04.check_layernorm_speedup(sol).ok
    for wrong, said in (
        (lambda R, d, t, o, B: 1 / sol(R, d, t, o, B), "inverted"),
        (lambda R, d, t, o, B: nb(R, d, t, False) / nb(R, d, t, True), "ratio of the bytes"),
        (
            lambda R, d, t, o, B: (
                (o * 1e-3 + nb(R, d, t, False) / (B * 1e9)) / (o * 1e-3 + nb(R, d, t, True) / (B * 1e9))
            ),
            "five times",
        ),
    ):
        rep = ex04.check_layernorm_speedup(wrong)
        assert not rep.ok and said in str(rep), str(rep)


@triton.jit
def _chain(
    x_ptr, g_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK: tl.constexpr, SKIP: tl.constexpr, GATE: tl.constexpr
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = (tl.load(x_ptr + offs, mask=mask) if MASK else tl.load(x_ptr + offs)).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    if SKIP == 1:  # r never loaded
        r = tl.zeros_like(x)
    else:
        r = tl.load(r_ptr + offs, mask=mask).to(tl.float32)
    if SKIP == 2:  # x loaded and not used
        x = tl.zeros_like(x) + 1.0
    gate = 1.0 / (1.0 + tl.exp(-g)) if GATE else g
    y = (r + x * gate).to(out_ptr.dtype.element_ty)
    if MASK:
        tl.store(out_ptr + offs, y, mask=mask)
    else:
        tl.store(out_ptr + offs, y)


def chain(block=128, mask=True, skip=0, gate=True, grid=None):
    def gated_residual(x, g, r, out):
        n = x.numel()
        k = grid(n, block) if grid else triton.cdiv(n, block)
        _chain[(k,)](x, g, r, out, n, BLOCK=block, MASK=mask, SKIP=skip, GATE=gate)

    return gated_residual


def test_gated_residual_right_kernels_pass():
    rep = ex04.check_gated_residual(chain())
    assert rep.ok and rep.cases == 11, str(rep)
    assert ex04.check_gated_residual(ex04.check_gated_residual.solution).ok


def test_gated_residual_skipped_load_fails():
    rep = ex04.check_gated_residual(chain(skip=1))
    assert not rep.ok and "elements of r were never loaded" in str(rep), str(rep)
    rep = ex04.check_gated_residual(chain(skip=2))  # loaded, then not used: the values say which part is missing
    assert not rep.ok and "x does not multiply the gate" in str(rep), str(rep)


def test_gated_residual_wrong_gate_unmasked_and_small_grid_are_named():
    rep = ex04.check_gated_residual(chain(gate=False))
    assert not rep.ok and "not sigmoid(g)" in str(rep), str(rep)
    rep = ex04.check_gated_residual(chain(mask=False))
    assert not rep.ok and "mask the" in str(rep), str(rep)
    rep = ex04.check_gated_residual(chain(grid=lambda n, b: max(n // b, 1) - (n > b)))
    assert not rep.ok and "grid is too" in str(rep), str(rep)


def test_gated_residual_in_two_kernels_is_named():
    def two(x, g, r, out):
        gate = torch.empty_like(out)
        chain(gate=False)(torch.zeros_like(x), x, g, gate)  # a first kernel writes a copy of x ...
        chain()(gate, g, r, out)  # ... the second computes from it

    rep = ex04.check_gated_residual(two)
    assert not rep.ok and "exactly 1" in str(rep), str(rep)


def test_gated_residual_stub_and_hints(capsys):
    check_stub_not_attempted(ex04.check_gated_residual, 4)
    check_hints_then_solution(ex04.check_gated_residual, capsys)
