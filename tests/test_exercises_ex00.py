"""Lesson 00's kernel exercise, the vector add: a right kernel passes, and a wrong one, an unmasked one, one
launched on too small a grid each get the message that names the mistake
(none crashes the process: the checker's guards take the stray stores)."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pytest
import triton
import triton.language as tl

from gpulab.exercises import ex00, hint, kernelcheck


@pytest.fixture(autouse=True)
def _short_long_case(monkeypatch):
    """The long case (``kernelcheck.LONG_N``) costs interpreter time; tests/test_kernelcheck_hostile.py runs it."""
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


@triton.jit
def _add(
    x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK_LOAD: tl.constexpr, MASK_STORE: tl.constexpr, OP: tl.constexpr
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if MASK_LOAD:
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
    else:
        x = tl.load(x_ptr + offs)
        y = tl.load(y_ptr + offs)
    z = x + y if OP == 0 else (x - y if OP == 1 else x + x)  # 0: right; 1: subtracts; 2: reads x twice
    if MASK_STORE:
        tl.store(out_ptr + offs, z, mask=mask)
    else:
        tl.store(out_ptr + offs, z)


def launcher(block=128, mask_load=True, mask_store=True, op=0, grid=None):
    def add(x, y, out):
        n = x.numel()
        g = grid(n, block) if grid else triton.cdiv(n, block)
        _add[(g,)](x, y, out, n, BLOCK=block, MASK_LOAD=mask_load, MASK_STORE=mask_store, OP=op)

    return add


def test_right_kernels_pass():
    for block in (16, 128, 1024):  # a block larger than most cases' n, and one smaller
        rep = ex00.check_add(launcher(block=block))
        assert rep.ok and rep.cases == 8, (block, str(rep))
    assert ex00.check_add(ex00.check_add.solution).ok


def test_wrong_values_name_index_expected_and_got():
    for op in (1, 2):
        rep = ex00.check_add(launcher(op=op))
        text = str(rep)
        assert not rep.ok and "values differ" in text and "first at index" in text and "expected" in text, text


def test_unmasked_kernel_is_named_and_does_not_crash():
    rep = ex00.check_add(launcher(mask_load=False, mask_store=False))
    assert not rep.ok and "past the end of out" in str(rep) and "mask the store" in str(rep), str(rep)
    # n = 128 fills its one block exactly: no mask is needed there, so that case passes
    assert not any("x=<float32 tensor of shape (128,)>" in f for f in rep.failures), str(rep)


def test_grid_too_small_is_named():
    rep = ex00.check_add(launcher(grid=lambda n, b: n // b))  # floor: drops the last partial block
    assert not rep.ok and "grid is too small" in str(rep) and "cdiv" in str(rep), str(rep)


def test_python_errors_are_reported_not_raised():
    def broken(x, y, out):
        out.copy_(x + y.view(2, -1))  # a shape error in the learner's launcher

    rep = ex00.check_add(broken)
    assert not rep.ok and "raised RuntimeError" in str(rep), str(rep)


def test_stub_reports_not_attempted():
    def stub(x, y, out):
        raise NotImplementedError

    rep = ex00.check_add(stub)
    assert not rep.attempted and "not attempted" in str(rep)


def test_checker_owns_guarded_inputs_and_output(monkeypatch):
    monkeypatch.setattr(kernelcheck, "_CAN_FORK", False)  # the spy's record must survive: run in this process
    seen = {}

    def spy(x, y, out):
        seen["views"] = [t.untyped_storage().nbytes() for t in (x, y, out)]
        launcher()(x, y, out)

    assert ex00.check_add(spy).ok
    assert all(b >= 2 * kernelcheck.PREFLIGHT_GUARD_BYTES for b in seen["views"])  # each sits inside guard regions


def test_hints_come_one_at_a_time_then_point_to_the_solution(capsys):
    check = ex00.check_add
    check._hints_shown = 0
    assert len(check.hints) == 2
    for i in range(2):
        hint(check)
        assert f"hint {i + 1} of 2" in capsys.readouterr().out
    hint(check)
    assert "show_solution(ex00.check_add)" in capsys.readouterr().out
    check._hints_shown = 0


# ---- the transfer exercises: a reversal kernel, and Little's law per thread ---------------------------------------


@triton.jit
def _reverse(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK: tl.constexpr, SHIFT: tl.constexpr, FLIP: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    src = n - SHIFT - offs if FLIP else offs  # SHIFT 1 is right; 0 is off by one
    if MASK:
        tl.store(out_ptr + offs, tl.load(x_ptr + src, mask=mask), mask=mask)
    else:
        tl.store(out_ptr + offs, tl.load(x_ptr + src))


def reverser(block=128, mask=True, shift=1, flip=True, grid=None):
    def reverse(x, out):
        n = x.numel()
        g = grid(n, block) if grid else triton.cdiv(n, block)
        _reverse[(g,)](x, out, n, BLOCK=block, MASK=mask, SHIFT=shift, FLIP=flip)

    return reverse


def test_reverse_right_kernels_pass():
    for block in (16, 1024):
        rep = ex00.check_reverse(reverser(block=block))
        assert rep.ok and rep.cases == 8, (block, str(rep))
    assert ex00.check_reverse(ex00.check_reverse.solution).ok


def test_reverse_off_by_one_is_named_as_a_load_past_the_end():
    rep = ex00.check_reverse(reverser(shift=0))  # x[n - i]: lane 0 reads x[n]
    assert not rep.ok and "loaded past the end of x" in str(rep), str(rep)


def test_reverse_copy_unmasked_and_small_grid_are_named():
    rep = ex00.check_reverse(reverser(flip=False))
    assert not rep.ok and "a copy of x, not reversed" in str(rep), str(rep)
    rep = ex00.check_reverse(reverser(mask=False))
    assert not rep.ok and "mask the store" in str(rep), str(rep)
    rep = ex00.check_reverse(reverser(grid=lambda n, b: n // b))
    assert not rep.ok and "grid is too small" in str(rep), str(rep)


def test_reverse_stub_and_hints(capsys):
    from tests.exercise_checks import check_hints_then_solution, check_stub_not_attempted

    check_stub_not_attempted(ex00.check_reverse, 2)
    check_hints_then_solution(ex00.check_reverse, capsys)


def test_loads_in_flight_by_hand_and_its_mistakes():
    import math

    from gpulab.core import hardware

    check, sol = ex00.check_loads_in_flight, ex00.check_loads_in_flight.solution
    # by hand: H200, 4.8 TB/s x 600 ns = 2.88e6 bytes over 132 x 64 x 32 = 270,336 threads = 10.7 bytes: 3 fp32 loads
    assert sol("H200", 600.0, 64, 4) == 3 and sol("H200", 600.0, 64, 16) == 1
    assert check(sol).ok

    def need(g, lat):
        return hardware.get(g).hbm_tbps * lat * 1e3

    for wrong, said in (
        (lambda g, lat, w, s: max(1, sol(g, lat, w, s) - 1) if sol(g, lat, w, s) > 1 else 0, "round up"),
        (lambda g, lat, w, s: max(1, math.ceil(need(g, lat) / (hardware.get(g).sms * w * s))), "32 threads"),
        (lambda g, lat, w, s: max(1, math.ceil(need(g, lat) / (w * 32 * s))), "shared by all"),
        (lambda g, lat, w, s: float(sol(g, lat, w, s)), "expected an int"),
    ):
        rep = check(wrong)
        assert not rep.ok and said in str(rep), str(rep)
