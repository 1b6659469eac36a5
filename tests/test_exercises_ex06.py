"""Lesson 06's kernel exercises: the strided read and the transpose, each checked with a right, a wrong and an
unmasked kernel and a too-small grid (each mistake gets the message naming it, none crashes the process)."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pytest
import triton
import triton.language as tl

from gpulab.exercises import ex06, hint, kernelcheck


@pytest.fixture(autouse=True)
def _short_long_case(monkeypatch):
    """The long case (``kernelcheck.LONG_N``) costs interpreter time; tests/test_kernelcheck_hostile.py runs it."""
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


@triton.jit
def _strided(x_ptr, y_ptr, n_out, stride, BLOCK: tl.constexpr, MASK: tl.constexpr, WRONG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    src = offs if WRONG else offs * stride  # WRONG: reads x[k], a plain copy
    if MASK:
        tl.store(y_ptr + offs, tl.load(x_ptr + src, mask=mask), mask=mask)
    else:
        tl.store(y_ptr + offs, tl.load(x_ptr + src))


def strided(block=128, mask=True, wrong=False, grid=None):
    def strided_copy(x, stride, out):
        n = out.numel()
        g = grid(n, block) if grid else triton.cdiv(n, block)
        _strided[(g,)](x, out, n, stride, BLOCK=block, MASK=mask, WRONG=wrong)

    return strided_copy


@triton.jit
def _transpose(a_ptr, b_ptr, M, N, BLOCK: tl.constexpr, MASK: tl.constexpr, WRONG: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    in_a = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(a_ptr + offs_m[:, None] * N + offs_n[None, :], mask=in_a)
    if WRONG:  # stores the tile where it was: a copy, not a transpose
        tl.store(b_ptr + offs_m[:, None] * N + offs_n[None, :], tile, mask=in_a)
    elif MASK:
        tl.store(
            b_ptr + offs_n[:, None] * M + offs_m[None, :],
            tl.trans(tile),
            mask=(offs_n[:, None] < N) & (offs_m[None, :] < M),
        )
    else:
        tl.store(b_ptr + offs_n[:, None] * M + offs_m[None, :], tl.trans(tile))


def transpose(block=32, mask=True, wrong=False, grid=None):
    def transpose_(a, out):
        M, N = a.shape
        g = grid(M, N, block) if grid else (triton.cdiv(M, block), triton.cdiv(N, block))
        _transpose[g](a, out, M, N, BLOCK=block, MASK=mask, WRONG=wrong)

    return transpose_


def test_right_kernels_pass():
    rep = ex06.check_strided_copy(strided())
    assert rep.ok and rep.cases == 8, str(rep)
    rep = ex06.check_transpose(transpose())
    assert rep.ok and rep.cases == 8, str(rep)
    assert ex06.check_strided_copy(ex06.check_strided_copy.solution).ok
    assert ex06.check_transpose(ex06.check_transpose.solution).ok


def test_wrong_kernels_name_the_element():
    rep = ex06.check_strided_copy(strided(wrong=True))
    assert not rep.ok and "values differ" in str(rep) and "first out[1]" in str(rep), str(rep)  # x[1], not x[2]
    rep = ex06.check_transpose(transpose(wrong=True))
    assert not rep.ok and "a transpose moves a[i, j] to b[j, i]" in str(rep), str(rep)


def test_unmasked_kernels_are_named_and_do_not_crash():
    for rep in (ex06.check_strided_copy(strided(mask=False)), ex06.check_transpose(transpose(mask=False))):
        assert not rep.ok and "past the end of out" in str(rep) and "mask the store" in str(rep), str(rep)


def test_grid_too_small_is_named():
    rep = ex06.check_strided_copy(strided(grid=lambda n, b: max(n // b, 1) - (n > b)))
    assert not rep.ok and "grid is too" in str(rep), str(rep)
    rep = ex06.check_transpose(transpose(grid=lambda M, N, b: (max(M // b, 1), max(N // b, 1))))  # misses edges
    assert not rep.ok and "never written" in str(rep) and "partial tiles at the edges" in str(rep), str(rep)


def test_stubs_report_not_attempted_and_hints_come_before_the_solution(capsys):
    def stub(*args):
        raise NotImplementedError

    for check in (ex06.check_strided_copy, ex06.check_transpose):
        assert not check(stub).attempted
        check._hints_shown = 0
        for i in range(2):
            hint(check)
            assert f"hint {i + 1} of 2" in capsys.readouterr().out
        hint(check)
        assert f"show_solution(ex06.{check.__name__})" in capsys.readouterr().out
        check._hints_shown = 0


@triton.jit
def _transpose_a_stride(a_ptr, b_ptr, M, N, BLOCK: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    tile = tl.load(a_ptr + offs_m[:, None] * N + offs_n[None, :], mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    # the mistake: out's row stride taken as N (a's), with the right mask
    tl.store(
        b_ptr + offs_n[:, None] * N + offs_m[None, :],
        tl.trans(tile),
        mask=(offs_n[:, None] < N) & (offs_m[None, :] < M),
    )


def test_a_store_with_as_row_stride_is_named_not_told_to_mask():
    """Masked, yet its stores land past the end of out (N > M) or on the wrong elements (N < M): the checker
    says which stride is wrong, never "mask the store"."""

    def transpose_(a, out):
        M, N = a.shape
        _transpose_a_stride[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, out, M, N, BLOCK=32)

    rep = ex06.check_transpose(transpose_)
    text = str(rep)
    assert not rep.ok and "out[j, i] lives at j * M + i, not j * N + i" in text, text
    assert "mask the store" not in text and "grid is too small" not in text, text
    assert not ex06._wrong_row_stride(transpose())  # a right kernel is not suspected
    assert not ex06._wrong_row_stride(transpose(mask=False))  # nor an unmasked one with the right stride


@triton.jit
def _transpose_load_stride(a_ptr, b_ptr, M, N, stride_am, BLOCK: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    # the mistake: a's row stride taken as stride_am, which the launcher gives as M (out's), with the right masks
    tile = tl.load(
        a_ptr + offs_m[:, None] * stride_am + offs_n[None, :], mask=(offs_m[:, None] < M) & (offs_n[None, :] < N)
    )
    tl.store(
        b_ptr + offs_n[:, None] * M + offs_m[None, :],
        tl.trans(tile),
        mask=(offs_n[:, None] < N) & (offs_m[None, :] < M),
    )


def transpose_load_stride(stride):
    def transpose_(a, out):
        M, N = a.shape
        _transpose_load_stride[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, out, M, N, stride(a, out), BLOCK=32)

    return transpose_


@pytest.mark.parametrize(
    "stride", [lambda a, out: a.shape[0], lambda a, out: out.stride(0)], ids=["M", "out.stride(0)"]
)
def test_a_load_with_outs_row_stride_is_named_not_told_to_mask(stride):
    """Masked, yet its loads run past the end of a (M > N) or leave elements of a unread (M < N): the checker
    says the load's row stride is wrong, never "mask the load" or "never loaded"."""
    rep = ex06.check_transpose(transpose_load_stride(stride))
    text = str(rep)
    assert not rep.ok and "the load steps from one row of a to the next by M, out's row length" in text, text
    assert "mask the load" not in text and "never loaded" not in text and "the store uses" not in text, text
    assert ex06._load_with_out_stride(transpose_load_stride(stride))


def test_the_load_probe_suspects_no_other_kernel():
    """A right kernel, an unmasked one, a copy and the store-stride mistake are not taken for a load-stride one,
    and the store-stride mistake keeps its own message."""
    assert ex06.check_transpose(transpose()).ok
    for fn in (
        transpose(),
        transpose(mask=False),
        transpose(wrong=True),
        transpose_load_stride(lambda a, out: a.shape[1]),
    ):
        assert not ex06._load_with_out_stride(fn)

    def store_stride(a, out):
        M, N = a.shape
        _transpose_a_stride[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, out, M, N, BLOCK=32)

    assert not ex06._load_with_out_stride(store_stride)
    text = str(ex06.check_transpose(store_stride))
    assert "out[j, i] lives at j * M + i, not j * N + i" in text and "the load steps" not in text, text
