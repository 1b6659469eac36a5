"""The kernel checker's defences against CLASSES of wrong kernels that pass a check run in a fixed order on one
machine: for each class, the case that was found and at least one more member of the class written for the test,
each run through a lesson's real checker (or ``check_kernel`` directly) and asserted on the message it must get.
``kernelcheck.LONG_N`` is lowered (the long case costs interpreter time)."""

import gpulab  # noqa: F401  (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from gpulab.exercises import Report, ex00, ex06, kernelcheck

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


# ---- the answer computed elsewhere: the kernel must read its inputs, compute once, within a memory bound ---------


@triton.jit
def _copy(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def test_a_torch_made_temporary_copied_by_a_kernel_is_named():
    def strided_copy(x, stride, out):  # torch does the strided read; the kernel only copies its result
        tmp = x[::stride].contiguous()
        _copy[(triton.cdiv(out.numel(), 128),)](tmp, out, out.numel(), BLOCK=128)

    text = failing(ex06.check_strided_copy(strided_copy))
    assert "loaded src_ptr, a tensor the launcher made" in text and "computed outside the kernel" in text, text


@triton.jit
def _add_from(x_ptr, y_ptr, s_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x, y, s = tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m), tl.load(s_ptr + offs, mask=m)
    tl.store(out_ptr + offs, s + 0.0 * x * y, mask=m)  # loads every input element, and stores torch's sum


def test_a_torch_answer_passed_through_a_kernel_that_loads_every_input_is_named():
    def add(x, y, out):
        _add_from[(triton.cdiv(x.numel(), 128),)](x, y, x + y, out, x.numel(), BLOCK=128)

    text = failing(ex00.check_add(add))
    assert "loaded s_ptr, a tensor the launcher made" in text, text


def test_a_scratch_tensor_written_by_a_kernel_first_is_the_learners_own_work():
    def add(x, y, out):  # two kernels through a scratch tensor: right, and no data from outside a kernel
        tmp = torch.empty_like(out)
        _copy[(triton.cdiv(x.numel(), 128),)](x, tmp, x.numel(), BLOCK=128)
        _add_from[(triton.cdiv(x.numel(), 128),)](tmp, y, y, out, x.numel(), BLOCK=128)  # y + 0 * tmp * y

    rep = ex00.check_add(add)
    assert not rep.ok and "loaded" not in str(rep) and "values differ" in str(rep), str(rep)  # y, not x + y


def _add_limited(fn, bound_bytes: int):
    def out(c):
        return c["x"].shape, c["x"].dtype

    cases = [dict(x=torch.randn(n), y=torch.randn(n)) for n in (17, 4099)]
    return kernelcheck.check_kernel(
        "add", fn, cases, out=out, reference=lambda c: c["x"].double() + c["y"].double(), memory=lambda c: bound_bytes
    )


def test_memory_past_the_exercises_bound_is_named():
    def add(x, y, out):  # right, with an n x n temporary the sum never needs
        big = torch.ones(x.numel(), x.numel()) * x[:, None]
        add_order(0)(x, y, out)
        del big

    assert _add_limited(add_order(0), 64 << 20).ok
    text = failing(_add_limited(add, 64 << 20))
    assert "grew by" in text and "more than the 64 MB" in text and "[1 of 2 cases" in text, text


# ---- the pre-flight reads the learner truly --------------------------------------------------------------------


@triton.jit
def _add_quirk(x_ptr, y_ptr, out_ptr, n, BS: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BS + tl.arange(0, BS)
    m = offs < n
    shift = 1 if MODE == 4 else 0  # MODE 4: x[offs - 1], x[-1] for the first lane
    x = tl.load(x_ptr + offs - shift, mask=m)
    s = x + tl.load(y_ptr + offs, mask=m)
    if MODE == 1:  # an 8-byte store at out's last element: half of it past the end
        if pid == 0:
            tl.store((out_ptr + n - 1).to(tl.pointer_type(tl.int64)), 0)
    if MODE == 2:  # accumulates into out, as if it held zeros
        s += tl.load(out_ptr + offs, mask=m)
    if MODE == 3:  # the same through an atomic
        tl.atomic_add(out_ptr + offs, s, mask=m)
    elif MODE == 5:  # the last element left out by the store's mask; the block is not called BLOCK
        tl.store(out_ptr + offs, s, mask=offs < n - 1)
    else:
        tl.store(out_ptr + offs, s, mask=m)


def add_quirk(mode: int, block: int = 128):
    def add(x, y, out):
        _add_quirk[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BS=block, MODE=mode)

    return add


def test_an_8_byte_store_that_straddles_the_end_of_out_is_named():
    text = failing(ex00.check_add(add_quirk(1)))
    assert "stored past the end of out" in text and "8 bytes" in text, text


def test_accumulating_into_out_is_named_not_never_written():
    for mode, how in ((2, "loaded"), (3, "tl.atomic_add")):
        text = failing(ex00.check_add(add_quirk(mode)))
        assert f"{how} out[0] while it held the checker's poison" in text and "never written" not in text, text


def test_a_load_before_the_start_of_x_is_named_by_x():
    text = failing(ex00.check_add(add_quirk(4)))
    assert "loaded before the start of x (index -1)" in text and "past the end of y" not in text, text


def test_a_store_mask_that_stops_short_is_named_whatever_the_block_is_called():
    text = failing(ex00.check_add(add_quirk(5)))
    assert "check the store's mask" in text and "the grid is too small" not in text, text


@triton.jit
def _scratch(x_ptr, tmp_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(tmp_ptr + offs, tl.load(x_ptr + offs, mask=offs < n))  # no mask on the store


def test_a_store_past_the_end_of_the_launchers_own_tensor_is_named_by_it():
    def add(x, y, out):
        tmp = torch.empty(x.numel())
        _scratch[(triton.cdiv(x.numel(), 128),)](x, tmp, x.numel(), BLOCK=128)
        add_order(0)(x, y, out)

    text = failing(ex00.check_add(add))
    assert "stored past the end of tmp_ptr, a tensor of the launcher's own" in text and "indices -" not in text, text


def test_an_unmasked_scales_store_is_named_by_the_scales_tensor():
    from gpulab.exercises import ex03, ex03_solutions

    @triton.jit
    def quantize(x_ptr, q_ptr, scale_ptr, n, GROUP: tl.constexpr, ROWS: tl.constexpr):
        blocks = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        offs = blocks[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        scale = tl.max(tl.abs(x), axis=1) / 448.0
        tl.store(
            q_ptr + offs, (x / tl.where(scale > 0.0, scale, 1.0)[:, None]).to(q_ptr.dtype.element_ty), mask=offs < n
        )
        tl.store(scale_ptr + blocks, scale)  # no mask: past the end of scales in the last program

    def launch(x, q, scales):
        n = x.numel()
        quantize[(triton.cdiv(triton.cdiv(n, 32), 16),)](x, q, scales, n, GROUP=32, ROWS=16)

    assert ex03_solutions.quantize_fp8 is not None
    text = failing(ex03.check_quantize_fp8(launch))
    # both runs name the checker's scales tensor by its name (the run judging q, the run judging scales)
    assert "stored past the end of scales" in text and "indices -" not in text, text
    assert "launcher's own" not in text and "past the end of out" not in text, text


def test_a_stored_e4m3_nan_equal_to_the_poison_is_seen_stored():
    @triton.jit
    def cast(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=offs < n)
        # element 0: e4m3's NaN 0x7F, the poison's own byte (as a GPU's cast of a NaN stores it; the interpreter's
        # cast does not give a NaN, so the byte is stored as it is)
        tl.store(out_ptr.to(tl.pointer_type(tl.int8)) + offs, 0x7F, mask=offs == 0)

    cases = [dict(x=torch.randn(n)) for n in (5, 300)]
    rep = kernelcheck.check_kernel(
        "cast",
        lambda x, out: cast[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128),
        cases,
        out=lambda c: (c["x"].shape, torch.float8_e4m3fn),
        reference=lambda c: c["x"].to(torch.float8_e4m3fn).double(),
        mismatch=lambda got, ref, c: None if torch.equal(got.double(), ref) else "differ",
    )
    text = failing(rep)
    assert "out[0] (flat) is NaN" in text and "never written" not in text, text


def test_a_launcher_that_forks_neither_crashes_the_check_nor_leaves_a_process(tmp_path):
    def add(x, y, out):
        before = len(list(tmp_path.iterdir()))
        if os.fork() == 0:  # the learner's own child: says who it is, then never ends
            (tmp_path / str(os.getpid())).touch()
            while True:
                pass
        while len(list(tmp_path.iterdir())) == before:  # the launch waits until its child has said who it is
            pass
        add_order(0)(x, y, out)

    rep = ex00.check_add(add)
    pids = [int(p.name) for p in tmp_path.iterdir()]
    try:
        assert rep.ok and pids, str(rep)
        t0 = time.monotonic()
        while any(_running(pid) for pid in pids):  # killed with the pre-flight's process group; the bound: a hang
            assert time.monotonic() - t0 < 60, f"the launcher's children {pids} still run"
            time.sleep(0.02)
    finally:
        for pid in filter(_running, pids):
            os.kill(pid, signal.SIGKILL)


def test_a_launcher_whose_fork_returns_twice_is_read_once():
    def add(x, y, out):  # both processes launch the kernel and return
        os.fork()
        add_order(0)(x, y, out)

    assert ex00.check_add(add).ok


def test_a_child_that_ends_without_its_record_is_named():
    def add(x, y, out):
        add_order(0)(x, y, out)
        os._exit(3)

    text = failing(ex00.check_add(add))
    assert "ended before it could report (exit status 3" in text and "launched no Triton kernel" not in text, text


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_autotune_runs_in_the_pre_flight_and_each_config_is_checked():
    def autotuned(configs):
        @triton.autotune(configs=[triton.Config(c) for c in configs], key=["n"])
        @triton.jit
        def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            s = tl.load(x_ptr + offs, mask=offs < n) + tl.load(y_ptr + offs, mask=offs < n)
            tl.store(out_ptr + offs, s, mask=(offs < n) | (not MASK))

        def add(x, y, out):
            add_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, out, x.numel())

        return add

    right = [dict(BLOCK=64, MASK=True), dict(BLOCK=128, MASK=True)]
    assert ex00.check_add(autotuned(right)).ok
    text = failing(ex00.check_add(autotuned([dict(BLOCK=128, MASK=True), dict(BLOCK=64, MASK=False)])))
    # the second config, picked in every other case: the pre-flight says "stored past", the GPU's guard "wrote ... past"
    assert "past the end of out" in text, text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="gloo process groups of forked children")
def test_a_ring_that_loops_on_one_rank_is_not_called_a_deadlock():
    from gpulab.exercises import ex10

    def ring(x, group):
        while group.size == 1:  # one rank: nothing to wait for, and still no end
            pass
        return x

    rep = ex10.check_ring_all_reduce(ring, ps=(1,), timeout_s=3.0)
    text = str(rep)
    assert not rep.ok and "loop" in text and "deadlock" not in text, text


# ---- the time limit reads the interpreter's progress: slow is told slow, a loop is told it loops ---------------


class CostClock:
    """A clock for the time limit (``kernelcheck.CLOCK``) that charges each program ``seconds`` as it starts, and
    program number ``k`` (counted over the case, from 0) ``costs[k]`` instead: a kernel's time decided by what it
    ran, not by this machine's speed."""

    def __init__(self, seconds: float, costs: dict | None = None):
        self.seconds, self.costs = seconds, costs or {}

    def __call__(self, progress) -> float:
        started = progress.programs
        extra = sum(c - self.seconds for k, c in self.costs.items() if k < started)
        return started * self.seconds + extra


def test_a_slow_right_kernel_runs_on_and_passes(monkeypatch):
    monkeypatch.setattr(kernelcheck, "CASE_TIME_LIMIT_S", 1.0)
    monkeypatch.setattr(kernelcheck, "CLOCK", CostClock(0.01))  # BLOCK 16: 257 programs, 2.57 s on the long case
    rep = ex00.check_add(add_order(0, block=16))
    assert rep.ok and "took more than 1 s" in str(rep) and "kept finishing" in str(rep), str(rep)


def test_a_kernel_too_slow_even_so_is_told_it_is_slow(monkeypatch):
    monkeypatch.setattr(kernelcheck, "CASE_TIME_LIMIT_S", 1.0)
    monkeypatch.setattr(kernelcheck, "CLOCK", CostClock(0.01))  # BLOCK 2: 2050 programs, 20.5 s, past 5 x 1 s
    text = failing(ex00.check_add(add_order(0, block=2)))
    assert "too slow for Triton's interpreter" in text and "endless loop" not in text, text


@triton.jit
def _add_stuck(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if pid == 3:  # the fourth program never ends
        i = 0
        while i >= 0:
            i += 1
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def test_a_loop_in_one_program_is_told_it_loops(monkeypatch):
    # each case runs in a child of its own, its programs counted from 0: case 1000's fourth program charges 100 s
    monkeypatch.setattr(kernelcheck, "CLOCK", CostClock(0.01, {3: 100.0}))
    text = failing(
        ex00.check_add(lambda x, y, out: _add_stuck[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128))
    )
    assert "program (3,) ran 100 s without finishing in a launch with grid (8,)" in text and "endless loop" in text, (
        text
    )
