"""Offsets shifted by a constant are named as such, not told to mask (issue 39 item 5): the pre-flight records,
for every 1-D access, the constant between the element each lane addressed and its place pid * BLOCK + lane
(``Seen.shifts``), and whether an access that strayed was given a mask (``Violation.masked``). A shifted load or
store, a block shifted whole, a far store under a right mask: each gets "shifted by s", whatever s is; only an
access given no mask is told to mask. Each class is run through the lessons' real checkers (ex00's add, ex01's
scale_add, ex04's sincos), with several members."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pytest
import torch
import triton
import triton.language as tl

from gpulab.exercises import Report, ex00, ex01, ex04, kernelcheck

pytestmark = pytest.mark.usefixtures("seed")

BLOCK = 128


@pytest.fixture(autouse=True)
def short_cases(monkeypatch):
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)  # the long case costs interpreter time


def failing(rep: Report) -> str:
    text = str(rep)
    assert rep.attempted and not rep.ok, text
    return text


@triton.jit
def _scale_add(x_ptr, y_ptr, a, b, n, BLOCK: tl.constexpr, LOAD: tl.constexpr, STORE: tl.constexpr,
               MASK: tl.constexpr):  # fmt: skip
    """y = a x + b with the load's offsets shifted by LOAD and the store's by STORE. MASK 0: no mask; 1: each
    access masked by its own offsets (< n); 2: both masked by the block's offsets, unshifted (a right mask)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    lo, so = offs + LOAD, offs + STORE
    if MASK == 0:
        tl.store(y_ptr + so, a * tl.load(x_ptr + lo) + b)
    elif MASK == 1:
        tl.store(y_ptr + so, a * tl.load(x_ptr + lo, mask=lo < n) + b, mask=so < n)
    else:
        tl.store(y_ptr + so, a * tl.load(x_ptr + lo, mask=offs < n) + b, mask=offs < n)


def scale_add(load=0, store=0, mask=1):
    def launch(x, a, b, out):
        n = x.numel()
        _scale_add[(triton.cdiv(n, BLOCK),)](x, out, a, b, n, BLOCK=BLOCK, LOAD=load, STORE=store, MASK=mask)

    return launch


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, LOAD: tl.constexpr, MASK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    lo = offs + LOAD
    m = (lo < n) if MASK == 1 else (offs < n)
    tl.store(out_ptr + offs, tl.load(x_ptr + lo, mask=m) + tl.load(y_ptr + lo, mask=m), mask=offs < n)


def add(load, mask):
    def launch(x, y, out):
        n = x.numel()
        _add[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, LOAD=load, MASK=mask)

    return launch


# ---- the record ------------------------------------------------------------------------------------------------


def _seen(fn, n=1000):
    x = torch.randn(n)
    host = dict(device="cpu", shared=True, guard_bytes=kernelcheck.PREFLIGHT_GUARD_BYTES)
    g_in = kernelcheck.Guarded(x.shape, x.dtype, fill=x, **host)
    g_out = kernelcheck.Guarded(x.shape, x.dtype, **host)
    return kernelcheck.preflight_once(lambda x, out: fn(x, 2.0, 1.0, out), {"x": g_in}, g_out)


def test_the_record_holds_each_accesss_shift_and_whether_a_mask_let_it_stray():
    assert _seen(scale_add()).shifts == {"load:x": 0, "store:out": 0}  # the lesson's offsets: no shift
    seen = _seen(scale_add(load=3, store=3))  # masked on the shifted offsets: nothing strays
    assert seen.shifts == {"load:x": 3, "store:out": 3} and not seen.violations
    seen = _seen(scale_add(load=5, mask=2))  # a right mask over shifted loads: x[1000] to x[1004] loaded
    assert seen.shifts == {"load:x": 5, "store:out": 0}
    assert [(v.op, v.name, v.side, v.masked, v.lo, v.hi) for v in seen.violations] == [
        ("load", "x", "after", True, 1000, 1004)
    ]
    seen = _seen(scale_add(mask=0))  # no mask: the stray lanes had none to pass
    assert {(v.op, v.masked) for v in seen.violations} == {("load", False), ("store", False)}


def test_a_far_store_is_named_by_the_pointer_it_was_offset_from():
    """Every lane beyond out's guard region: the pointer, offset from out's, names out (not the nearest buffer)."""
    seen = _seen(scale_add(store=1 << 20, mask=2))
    assert seen.shifts["store:out"] == 1 << 20
    assert [(v.name, v.side, v.masked) for v in seen.violations] == [("out", "after_far", True)]


# ---- through the checkers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", [1, 3, BLOCK])
def test_a_block_shifted_late_is_named_by_its_shift(s):
    """offs = pid * BLOCK + tl.arange(0, BLOCK) + s, masked offs < n: nothing strays, out[0] to out[s - 1] are
    never written."""
    text = failing(ex01.check_scale_add(scale_add(load=s, store=s)))
    assert f"the offsets are shifted by +{s}: every block starts {s} element" in text, text
    assert "mask the" not in text and "were never written" not in text, text


@pytest.mark.parametrize("s", [-1, -4])
def test_a_block_shifted_early_is_named_by_its_shift_not_told_to_mask(s):
    for mask in (1, 2):  # masked on the shifted offsets or on the block's own: either way before out[0]
        text = failing(ex01.check_scale_add(scale_add(load=s, store=s, mask=mask)))
        assert "before the start of out" in text and f"the offsets are shifted by {s}: every block starts" in text
        assert "mask the" not in text, text


@pytest.mark.parametrize("s", [1, -1, BLOCK])
def test_a_shifted_load_under_a_right_mask_is_named_with_what_out_was_computed_from(s):
    text = failing(ex01.check_scale_add(scale_add(load=s, mask=2)))
    said = f"the offsets of the load of x are shifted by {s:+d} (out[i] was computed from x[i{s:+d}])"
    assert said in text and "through the mask" in text and "mask the load" not in text, text


@pytest.mark.parametrize("s", [1, 2])
def test_a_shifted_store_is_named_with_what_out_was_computed_from(s):
    for mask in (1, 2):
        text = failing(ex01.check_scale_add(scale_add(store=s, mask=mask)))
        said = f"the offsets of the store into out are shifted by +{s} (out[i] was computed from x[i-{s}])"
        assert said in text and "mask the store" not in text, text


def test_shifted_loads_of_two_inputs_are_named_together():
    for mask in (1, 2):  # masked on the shifted offsets (x[0], y[0] never loaded) or on the block's (past the end)
        text = failing(ex00.check_add(add(load=1, mask=mask)))
        said = "the offsets of the load of x and the load of y are shifted by +1 (out[i] was computed from x[i+1] "
        assert said + "and y[i+1])" in text and "mask the load" not in text, text


@pytest.mark.parametrize("far", [1 << 20, 3 << 22])
def test_a_far_store_under_a_right_mask_is_named_by_its_offset(far):
    text = failing(ex01.check_scale_add(scale_add(store=far, mask=2)))
    assert f"stored far past the end of out (index {far}" in text and f"shifted by +{far}" in text, text
    assert "mask the store" not in text, text


def test_an_access_without_a_mask_is_told_to_mask_and_no_shift_is_named():
    text = failing(ex01.check_scale_add(scale_add(mask=0)))
    assert "mask the store" in text and "mask the load" in text and "shifted" not in text, text
    text = failing(ex01.check_scale_add(scale_add(load=1, store=1, mask=0)))  # shifted too, and unmasked
    assert "mask the store" in text and "shifted" not in text, text


@triton.jit
def _sincos_unmasked_load(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.float32)
    tl.store(y_ptr + offs, (tl.sin(x) * tl.sin(x) - tl.cos(x) * tl.cos(x)).to(y_ptr.dtype.element_ty), mask=offs < n)


def test_a_load_without_a_mask_in_another_lesson_is_told_to_mask_the_load():
    def launch(x, out):
        _sincos_unmasked_load[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)

    text = failing(ex04.check_sincos_fused(launch))
    assert "loaded past the end of x" in text and "mask the load" in text and "shifted" not in text, text


@triton.jit
def _scale_add_mask_le(x_ptr, y_ptr, a, b, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs <= n  # one lane too many
    tl.store(y_ptr + offs, a * tl.load(x_ptr + offs, mask=mask) + b, mask=mask)


def test_a_mask_one_too_wide_over_right_offsets_is_told_the_mask_not_a_shift():
    def launch(x, a, b, out):
        _scale_add_mask_le[(triton.cdiv(x.numel() + 1, BLOCK),)](x, out, a, b, x.numel(), BLOCK=BLOCK)

    text = failing(ex01.check_scale_add(launch))
    assert "stored past the end of out" in text and "the mask let index n = 1 through" in text, text
    assert "offs <= n?" in text and "shifted" not in text and "mask the store" not in text, text


@triton.jit
def _scale_add_from(x_ptr, y_ptr, a, b, start, n, BLOCK: tl.constexpr):
    offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, a * tl.load(x_ptr + offs, mask=mask) + b, mask=mask)


def test_a_right_launcher_of_two_launches_each_offset_passes():
    """A launcher that covers out in two launches, the second from a start offset: each launch's offsets are
    shifted by its start, so no one constant is named, and the kernel is right."""

    def launch(x, a, b, out):
        n = x.numel()
        half = (n // 2) // BLOCK * BLOCK
        if half:
            _scale_add_from[(half // BLOCK,)](x, out, a, b, 0, half, BLOCK=BLOCK)
        _scale_add_from[(triton.cdiv(n - half, BLOCK),)](x, out, a, b, half, n, BLOCK=BLOCK)

    rep = ex01.check_scale_add(launch)
    assert rep.ok, str(rep)
