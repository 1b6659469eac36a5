"""The kernel checker's defences against CLASSES of wrong kernels that pass a check run in a fixed order on one
machine: for each class, the case that was found and at least one more member of the class written for the test,
each run through a lesson's real checker (or ``check_kernel`` directly) and asserted on the message it must get.
``kernelcheck.LONG_N`` is lowered (the long case costs interpreter time)."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import pytest
import triton
import triton.language as tl

from gpulab.exercises import Report, ex00, kernelcheck

pytestmark = pytest.mark.usefixtures("seed")


@pytest.fixture(autouse=True)
def short_cases(monkeypatch):
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


def failing(rep: Report) -> str:
    text = str(rep)
    assert rep.attempted and not rep.ok, text
    assert len(text) < 3000 and all(len(line) <= 420 for line in text.splitlines()), text
    return text


# ---- work outside a program's own block: right in the interpreter's order, a race on a GPU ----------------------


@triton.jit
def _add_order(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    if MODE == 1:  # garbage into the first element of the next program's block, which that program overwrites
        nxt = (pid + 1) * BLOCK
        tl.store(out_ptr + nxt, -1.0, mask=nxt < n)
    if MODE == 2:  # reads the last element the previous program stored: 0 in order, NaN where it is not yet there
        if pid > 0:
            prev = tl.load(out_ptr + pid * BLOCK - 1)
            s += prev - prev
    if MODE == 3:  # the pid is never used: every program computes and stores all of out
        for start in range(0, n, BLOCK):
            o = start + tl.arange(0, BLOCK)
            m = o < n
            tl.store(out_ptr + o, tl.load(x_ptr + o, mask=m) + tl.load(y_ptr + o, mask=m), mask=m)
    else:
        tl.store(out_ptr + offs, s, mask=mask)


def add_order(mode: int, block: int = 128):
    def add(x, y, out):
        _add_order[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK=block, MODE=mode)

    return add


def test_the_right_add_has_no_order_dependence():
    assert ex00.check_add(add_order(0)).ok


def test_a_store_into_the_next_programs_block_is_named():
    text = failing(ex00.check_add(add_order(1)))
    assert "programs (0,) and (1,) both stored into out[128]" in text and "no fixed order" in text, text


def test_a_load_of_what_another_program_stored_is_named():
    text = failing(ex00.check_add(add_order(2)))
    assert "program (1,) loaded out[127], which program (0,) stored" in text and "no fixed order" in text, text


def test_every_program_doing_all_the_work_is_named():
    text = failing(ex00.check_add(add_order(3)))
    assert "both stored into out[0]" in text and "more than once" in text, text
