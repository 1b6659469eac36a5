"""The kernel checker against hostile launchers: one small wrong kernel per CLASS of mistake (an input written,
no Triton launch, out written by torch, a constant stored, one program, unmasked loads, a far store, an endless
loop, out never written, NaN from arithmetic, an exception of any kind, a huge message), each run through a
lesson's real checker (add, scale_add, sincos_fused, transpose) and asserted on the message it must get. None
may crash, hang or pass. ``kernelcheck.LONG_N`` is lowered here (the long case costs interpreter time) except
in the test of one program with a large block, which needs the real length. Every time-out here is decided by a
``ProgramClock`` (a count of the programs a case ran), never by this machine's speed; the learner's wall clock is
tested with an injected ``time.monotonic``."""

import gpulab  # (first: it sets TRITON_INTERPRET=1 before triton is imported)  # isort: skip
import itertools
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from gpulab.exercises import Report, ex00, ex01, ex04, ex06, kernelcheck, kerneldiagnosis, kernelwatch
from gpulab.exercises.kernelwatch import Seen, Violation

pytestmark = pytest.mark.usefixtures("seed")


REAL_LONG_N = kernelcheck.LONG_N
helper = None  # a @triton.jit helper of the GPU-style kernel below, set by its test


@pytest.fixture(autouse=True)
def short_cases(monkeypatch):
    monkeypatch.setattr(kernelcheck, "LONG_N", 4099)


class ProgramClock:
    """A clock for the pre-flight's time limit (``kernelcheck.CLOCK``) that moves ``seconds`` for each program the
    child starts and stands still otherwise. ``most``: the most programs it saw one case start. A safety catch
    only: where programs go uncounted, an endless kernel would hang the test, so after ``HANG_S`` of wall time
    the clock raises instead (a check here takes seconds)."""

    HANG_S = 600.0

    def __init__(self, seconds: float):
        self.seconds, self.most, self.t0 = seconds, 0, time.monotonic()

    def __call__(self, progress: kernelcheck.Progress) -> float:
        if time.monotonic() - self.t0 > self.HANG_S:
            raise AssertionError(f"no time-out after {self.HANG_S:g} s of wall time: are programs counted?")
        self.most = max(self.most, progress.programs)
        return progress.programs * self.seconds


def failing(rep: Report) -> str:
    text = str(rep)
    assert rep.attempted and not rep.ok, text
    assert len(text) < 3000 and all(len(line) <= 420 for line in text.splitlines()), text
    return text


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if MODE == 5:  # unmasked loads, masked store
        x = tl.load(x_ptr + offs)
        y = tl.load(y_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
    if MODE == 0:  # right
        tl.store(out_ptr + offs, x + y, mask=mask)
    if MODE == 1:  # the sum stored into x, in place: out never written
        tl.store(x_ptr + offs, x + y, mask=mask)
    if MODE == 2:  # right, and y zeroed as scratch
        tl.store(out_ptr + offs, x + y, mask=mask)
        tl.store(y_ptr + offs, y * 0.0, mask=mask)
    if MODE == 3:  # no mask at all
        tl.store(out_ptr + offs, x + y)
    if MODE == 4:  # a store 2^20 elements apart per lane: far beyond any guard
        tl.store(out_ptr + offs * 1048576, x + y, mask=mask)
    if MODE == 5:
        tl.store(out_ptr + offs, x + y, mask=mask)
    if MODE == 6:  # NaN of the kernel's own arithmetic
        tl.store(out_ptr + offs, x + y + tl.sqrt(-1.0 - y * y), mask=mask)
    if MODE == 7:  # an endless loop
        i = 0
        while i >= 0:
            i += 1
        tl.store(out_ptr + offs, x + y, mask=mask)
    if MODE == 8:  # garbage, to be overwritten by torch
        tl.store(out_ptr + offs, x * 0.0, mask=mask)


def add_with(mode, block=128, grid=None):
    def add(x, y, out):
        n = x.numel()
        g = grid(n) if grid else (triton.cdiv(n, block),)
        _add[g](x, y, out, n, BLOCK=block, MODE=mode)

    return add


def test_right_kernel_passes_and_is_seen_to_launch():
    rep = ex00.check_add(add_with(0))
    assert rep.ok, str(rep)


def test_input_written_in_place_is_named():
    text = failing(ex00.check_add(add_with(1)))
    assert "stored into x, an input" in text and "write only into out" in text, text


def test_input_zeroed_as_scratch_is_named():
    text = failing(ex00.check_add(add_with(2)))
    assert "stored into y, an input" in text, text


def test_input_written_by_torch_is_named():
    def add(x, y, out):
        add_with(0)(x, y, out)
        y.zero_()

    text = failing(ex00.check_add(add))
    assert "elements of y changed" in text and "an input must stay as it is" in text, text


def test_no_triton_launch_is_named():
    text = failing(ex00.check_add(lambda x, y, out: out.copy_(x + y)))
    assert "launched no Triton kernel" in text and "written another way" in text, text


def test_out_written_by_torch_after_a_launch_is_named():
    def add(x, y, out):
        scratch = torch.empty_like(out)
        add_with(0)(x, y, scratch)  # the kernel writes a tensor of the launcher's own
        out.copy_(scratch)

    text = failing(ex00.check_add(add))
    assert "not by a tl.store of your kernel" in text, text


def test_out_changed_after_the_last_launch_is_named():
    def add(x, y, out):
        add_with(8)(x, y, out)
        out.copy_(x + y)

    text = failing(ex00.check_add(add))
    assert "out changed after your kernel's last launch" in text, text


def test_new_tensor_returned_is_never_written():
    def add(x, y, out):
        new = torch.empty_like(out)
        add_with(0)(x, y, new)
        return new

    text = failing(ex00.check_add(add))
    assert "out was never written" in text and "stored nothing into the checker's buffers" in text, text
    assert "grid is too small" not in text, text


def test_one_program_with_a_large_block_fails_the_long_case(monkeypatch):
    monkeypatch.setattr(kernelcheck, "LONG_N", REAL_LONG_N)
    block = 2**17  # the largest power-of-two block assumed to compile; LONG_N is above it
    rep = ex00.check_add(add_with(0, block=block, grid=lambda n: (1,)))
    text = failing(rep)
    assert "the grid is too small" in text and "(the grid was (1,))" in text, text
    assert rep.failed == 1, text  # only the long case: every other length fits in one block


def test_one_program_whose_block_covers_every_length_is_named(monkeypatch):
    monkeypatch.setattr(kernelcheck, "LONG_N", REAL_LONG_N)

    def add(x, y, out):  # right on every length, but always a single program
        n = x.numel()
        _add[(1,)](x, y, out, n, BLOCK=triton.next_power_of_2(n), MODE=0)

    rep = ex00.check_add(add)
    text = failing(rep)
    assert "one program did all the work" in text and f"the {REAL_LONG_N} elements of out" in text, text
    assert rep.failed == 1, text  # only the long case is above kernelcheck.ONE_PROGRAM_MIN_ELEMENTS


def test_answer_computed_by_torch_before_the_kernel_is_named():
    @triton.jit
    def keep(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # loads every input, stores out back unchanged
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x, y = tl.load(x_ptr + offs, mask=mask), tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask) + 0.0 * x * y, mask=mask)

    def add(x, y, out):
        out.copy_(x + y)
        keep[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)

    text = failing(ex00.check_add(add))
    assert "out already held the answer before your kernel's first launch" in text, text


def test_out_zeroed_by_the_launcher_before_a_right_kernel_still_passes():
    def add(x, y, out):
        out.zero_()  # a launcher may clear out first (an atomic accumulation needs it)
        add_with(0)(x, y, out)

    rep = ex00.check_add(add)
    assert rep.ok, str(rep)


def test_a_store_mask_that_stops_short_is_not_blamed_on_the_grid():
    @triton.jit
    def short_store(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        s = tl.load(x_ptr + offs, mask=offs < n) + tl.load(y_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, s, mask=offs < n - 1)  # the last element is never stored

    def add(x, y, out):
        short_store[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)

    text = failing(ex00.check_add(add))
    assert "covers them: check the store's mask" in text and "the grid is too small" not in text, text


def test_a_grid_of_no_programs_is_named():
    text = failing(ex00.check_add(add_with(0, grid=lambda n: (triton.cdiv(n, 128) - 1,))))
    assert "launched with grid (0,), which runs no program" in text, text  # the lengths of one block
    assert "the grid is too small" in text, text  # the longer lengths: one program short


def test_a_time_out_names_the_grid_it_stopped(monkeypatch):
    monkeypatch.setattr(kernelcheck, "CLOCK", ProgramClock(61.0))  # the limit (60 s) passes in the first program
    text = failing(ex00.check_add(add_with(7)))
    assert "in a launch with grid (1,)" in text and "endless loop" in text, text  # the first length is 1


def test_a_very_fine_grid_is_told_it_is_slow_not_that_it_loops(monkeypatch):
    monkeypatch.setattr(kernelcheck, "CASE_TIME_LIMIT_S", 0.1)
    monkeypatch.setattr(kernelcheck, "CLOCK", ProgramClock(1e-3))  # 100 programs in the limit, 500 in 5 times it
    rep = ex00.check_add(add_with(0, block=1))  # right, one element per program
    text = failing(rep)
    # lengths 1, 17 and 128 end within 5 x 0.1 s, so 128 runs on past the limit; 1000 would not, and is stopped
    assert "too slow for Triton's interpreter" in text and "with grid (1000,)" in text, text
    assert "slow, not stuck" in text and "BLOCK" in text and "endless loop" not in text, text
    assert "took more than 0.1 s" in text and "the longest 0.128 s" in text, text  # the note: ran on, and passed


def test_a_case_that_ends_between_two_reads_is_judged_by_its_count(monkeypatch):
    # the clock is read once more after the child's record: a case that ran all its programs between two reads
    # is still judged by its count
    monkeypatch.setattr(kernelcheck, "CASE_TIME_LIMIT_S", 0.1)
    monkeypatch.setattr(kernelcheck, "POLL_S", 3600.0)  # no read while the child runs
    monkeypatch.setattr(kernelcheck, "CLOCK", ProgramClock(1e-3))
    text = failing(ex00.check_add(add_with(0, block=1)))
    assert "with grid (1000,)" in text and "slow, not stuck" in text and "endless loop" not in text, text


def test_the_learners_limit_is_60_s_on_the_wall_clock(monkeypatch):
    assert kernelcheck.CLOCK is kernelcheck.wall_clock and kernelcheck.CASE_TIME_LIMIT_S == 60.0
    stands_still = types.SimpleNamespace(monotonic=lambda: 5.0)
    monkeypatch.setattr(kernelcheck, "time", stands_still)
    assert ex00.check_add(add_with(0)).ok  # however long the cases take here, no time passed on the clock
    jumps = itertools.count(0.0, 61.0)  # 61 s between two reads: past the limit at the first read after the start
    monkeypatch.setattr(kernelcheck, "time", types.SimpleNamespace(monotonic=lambda: next(jumps)))
    text = failing(ex00.check_add(add_with(7)))
    assert "did not finish within 60 s" in text and "endless loop" in text, text


@pytest.mark.parametrize("check", [ex00.check_add, ex04.check_sincos_fused], ids=["add", "sincos_fused"])
def test_solutions_pass_the_real_long_case(monkeypatch, check):
    monkeypatch.setattr(kernelcheck, "LONG_N", REAL_LONG_N)
    assert check(check.solution).ok


def test_unmasked_loads_with_a_masked_store_are_named():
    text = failing(ex00.check_add(add_with(5)))
    assert "loaded past the end of x" in text and "mask the load" in text, text
    assert "n=1000" in text or "n=17" in text or "n=1)" in text, text


@pytest.mark.parametrize("check", [ex00.check_add, ex01.check_scale_add], ids=["add", "scale_add"])
def test_cuda_habit_grid_n_block_1024_no_mask_is_named_not_a_crash(monkeypatch, check):
    @triton.jit
    def one_per_thread(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # grid=(n,): programs far past n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs))

    def launch(x, *rest):
        out = rest[-1]
        one_per_thread[(x.numel(),)](x, out, x.numel(), BLOCK=1024)

    clock = ProgramClock(0.0)
    monkeypatch.setattr(kernelcheck, "CLOCK", clock)
    text = failing(check(launch))
    assert "stored past the end of out" in text and "mask the store" in text, text
    # each launch stops at its first stray store: at most ceil(5000 / 1024) programs of a grid of up to 5000
    assert 1 <= clock.most <= 5, clock.most


def test_far_store_is_named_and_never_lands():
    text = failing(ex00.check_add(add_with(4)))
    assert "stored far past the end of out" in text and "beyond its guard region" in text, text
    probe = torch.ones(4)
    assert probe.sum().item() == 4.0  # the process and its memory are intact


def test_endless_loop_gets_a_time_out(monkeypatch):
    monkeypatch.setattr(kernelcheck, "CASE_TIME_LIMIT_S", 2.0)
    monkeypatch.setattr(kernelcheck, "CLOCK", ProgramClock(3.0))  # past the limit once the first program started
    rep = ex00.check_add(add_with(7))
    text = failing(rep)
    assert "did not finish within 2 s" in text and "endless loop" in text, text
    assert "the remaining 7 cases were not run" in text and rep.failed == 1, text


def test_a_child_past_its_cpu_limit_is_stopped_and_named(monkeypatch):
    monkeypatch.setattr(kernelcheck, "CLOCK", ProgramClock(0.0))  # the time limit never passes
    monkeypatch.setattr(kernelcheck, "CHILD_CPU_LIMIT_S", 1)  # the child's own CPU seconds, however busy this machine
    rep = ex00.check_add(add_with(7))
    text = failing(rep)
    assert "used its 1 CPU seconds and was stopped" in text and "endless loop" in text, text
    assert "the remaining 7 cases were not run" in text and rep.failed == 1, text


_ORPHAN_SCRIPT = """
import os, pathlib, sys
import gpulab
import triton
import triton.language as tl
from gpulab.exercises import ex00


@triton.jit
def endless(x_ptr, n):
    i = 0
    while i >= 0:
        i += 1


def add(x, y, out):  # runs in the pre-flight's child: says who it is, then never ends
    mark = pathlib.Path(sys.argv[1])
    mark.with_suffix(".tmp").write_text(str(os.getpid()))
    mark.with_suffix(".tmp").rename(mark)
    endless[(1,)](x, x.numel())


ex00.check_add(add)
"""


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (ended, waiting for its new parent to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(condition, what: str, safety_s: float = 120.0) -> None:
    """Wait for ``condition()``; the wall-clock bound only catches a hang (each wait here takes well under 1 s)."""
    t0 = time.monotonic()
    while not condition():
        assert time.monotonic() - t0 < safety_s, f"still waiting after {safety_s:g} s for {what}"
        time.sleep(0.02)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_the_pre_flight_child_ends_with_the_process_checking(tmp_path):
    script, mark = tmp_path / "check.py", tmp_path / "child.pid"
    script.write_text(_ORPHAN_SCRIPT)
    checker = subprocess.Popen([sys.executable, str(script), str(mark)], cwd=Path(__file__).resolve().parents[1])
    child = None
    try:
        _wait_for(lambda: mark.exists() or checker.poll() is not None, "the child's launch")
        assert mark.exists(), f"the checking process ended first (rc {checker.returncode})"
        child = int(mark.read_text())
        status = Path(f"/proc/{child}/status").read_text()
        assert f"PPid:\t{checker.pid}\n" in status, status  # the pre-flight's child, in its endless launch
        cpu = next(ln for ln in Path(f"/proc/{child}/limits").read_text().splitlines() if ln.startswith("Max cpu"))
        assert cpu.split()[3:5] == [str(kernelcheck.CHILD_CPU_LIMIT_S), str(kernelcheck.CHILD_CPU_LIMIT_S + 5)], cpu
        checker.kill()  # SIGKILL: the checking process runs no cleanup of its own
        checker.wait()
        _wait_for(lambda: not _running(child), "the orphaned child to end")
    finally:
        checker.kill()
        checker.wait()
        if child is not None and _running(child):
            os.kill(child, signal.SIGKILL)


def test_nan_from_arithmetic_is_not_blamed_on_a_load():
    text = failing(ex00.check_add(add_with(6)))
    assert "the kernel's arithmetic made it" in text and "mask the load" not in text, text


@pytest.mark.parametrize("exc", [SystemExit(3), ValueError("9" * 10**6)], ids=["SystemExit", "huge"])
def test_exceptions_are_reported_short(exc):
    def add(x, y, out):
        raise exc

    rep = ex00.check_add(add)
    text = failing(rep)
    assert f"raised {type(exc).__name__}" in text and len(rep.failures) == 1 and "\n" not in rep.failures[0], text


def test_keyboard_interrupt_still_interrupts():
    def add(x, y, out):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ex00.check_add(add)


def test_one_line_per_mistake_with_its_count():
    rep = ex00.check_add(add_with(3))  # no mask: every length that is not a multiple of 128 fails the same way
    text = failing(rep)
    assert len(rep.failures) == 1 and f"[{rep.failed} of {rep.cases} cases" in text, text


def test_huge_result_of_a_counting_exercise_stays_short():
    text = failing(ex00.check_copy_time(lambda n_bytes, tbps: "7" * 10**6))
    assert len(text) < 3000, len(text)


@triton.jit
def _sincos(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if MODE == 0:  # never loads x: stores the identity's value
        tl.store(out_ptr + offs, tl.full([BLOCK], 1.0, tl.float32).to(out_ptr.dtype.element_ty), mask=mask)
    else:  # loads x, and still stores the constant
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        tl.store(out_ptr + offs, (x * 0.0 + 1.0).to(out_ptr.dtype.element_ty), mask=mask)


def test_sincos_constant_without_a_load_is_named():
    text = failing(
        ex04.check_sincos_fused(
            lambda x, out: _sincos[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128, MODE=0)
        )
    )
    assert "elements of x were never loaded" in text, text


def test_sincos_constant_after_a_load_is_named():
    text = failing(
        ex04.check_sincos_fused(
            lambda x, out: _sincos[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128, MODE=1)
        )
    )
    # sin^2 + cos^2 is 1 for every x; the exercise's sin^2 - cos^2 is not, so the constant fails on its values,
    # named as an answer that does not depend on x
    assert "values differ" in text and "out does not depend on x" in text, text


def test_sincos_two_kernels_where_one_is_asked_for():
    def two(x, out):
        g = (triton.cdiv(x.numel(), 128),)
        _sincos[g](x, out, x.numel(), BLOCK=128, MODE=1)
        ex04.check_sincos_fused.solution(x, out)

    text = failing(ex04.check_sincos_fused(two))
    assert "launched 2 kernels" in text and "exactly 1" in text, text


@triton.jit
def _transpose(a_ptr, b_ptr, M, N, BLOCK: tl.constexpr, MASK_STORE: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    tile = tl.load(a_ptr + offs_m[:, None] * N + offs_n[None, :], mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    ptrs = b_ptr + offs_n[:, None] * M + offs_m[None, :]
    if MASK_STORE:
        tl.store(ptrs, tl.trans(tile), mask=(offs_n[:, None] < N) & (offs_m[None, :] < M))
    else:
        tl.store(ptrs, tl.trans(tile))


def transpose_with(mask_store=True, floor=False):
    def transpose(a, out):
        M, N = a.shape
        tiles = (lambda k: k // 32) if floor else (lambda k: triton.cdiv(k, 32))
        _transpose[(tiles(M), tiles(N))](a, out, M, N, BLOCK=32, MASK_STORE=mask_store)

    return transpose


def test_transpose_right_passes_and_2d_mistakes_are_named():
    assert ex06.check_transpose(transpose_with()).ok
    text = failing(ex06.check_transpose(transpose_with(mask_store=False)))
    assert "stored past the end of out" in text or "stored far past the end of out" in text, text
    text = failing(ex06.check_transpose(transpose_with(floor=True)))  # the edge tiles are never launched
    assert "never written" in text and "partial tiles at the edges" in text, text


def test_without_fork_the_checks_still_hold_and_the_report_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(kernelcheck, "_CAN_FORK", False)
    assert ex00.check_add(add_with(0)).ok
    text = failing(ex00.check_add(add_with(3)))
    assert "mask the store" in text and "no time limit here" in text, text


def test_a_gpu_style_jit_function_is_interpreted_in_the_pre_flight():
    # on a GPU (Triton 3.6) @triton.jit gives a JITFunction: the pre-flight must run it, and a helper it
    # calls, in the interpreter; here one is built by hand from the same Python functions
    from triton.runtime.jit import JITFunction

    def plus(a, b):
        return a + b

    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        if MASK:
            tl.store(out_ptr + offs, helper(x, y), mask=mask)
        else:
            tl.store(out_ptr + offs, helper(x, y))

    add_kernel.__globals__["helper"] = JITFunction(plus)
    kernel = JITFunction(add_kernel)

    def launch(mask):
        return lambda x, y, out: kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128, MASK=mask)

    assert ex00.check_add(launch(True)).ok
    text = failing(ex00.check_add(launch(False)))
    assert "stored past the end of out" in text, text


def test_on_a_gpu_only_an_interpreter_failure_runs_unguarded():
    run = kernelwatch.run_unguarded
    failed = dict(raised="InterpreterError: TypeError(...)", interpreter_error=True)
    assert run(Seen(**failed), "cuda")
    assert not run(Seen(**failed), "cpu")  # the interpreter is the only run here
    assert not run(Seen(), "cuda")  # a clean pre-flight runs guarded
    far = [Violation("store", "out", "after", 1, 0, 0)]
    for bad in (dict(timeout=True), dict(died=int(signal.SIGSEGV)), dict(violations=far)):
        assert not run(Seen(**failed, **bad), "cuda"), bad  # a far store or a hang never reaches the GPU
    assert not run(Seen(raised="NotImplementedError", not_implemented=True), "cuda")
    assert not run(Seen(raised="SystemExit: 3", interpreter_error=False), "cuda")  # the launcher's own raise


def test_only_an_error_inside_the_interpreters_run_of_a_kernel_counts_as_the_interpreters():
    from triton.runtime.errors import InterpreterError

    def raises(e):
        def fn():
            raise e

        return fn

    assert kernelwatch.call(raises(InterpreterError("TypeError('x')")), []).interpreter_error
    for e in (SystemExit(3), ValueError("bad grid"), TypeError("x")):
        seen = kernelwatch.call(raises(e), [])
        assert seen.raised.startswith(type(e).__name__) and not seen.interpreter_error, seen


@pytest.mark.skipif(gpulab.ON_GPU, reason="stands for a GPU's JITFunctions by hand; a GPU compiles the real ones")
def test_jit_helpers_reached_by_attribute_and_through_helpers_are_interpreted_too():
    # on a GPU every @triton.jit function is a JITFunction, triton.language's own (tl.cdiv, tl.sum) among them:
    # a helper reached as a module's attribute, and the helper it calls, must run interpreted in the pre-flight
    import types

    from triton.runtime.jit import JITFunction

    def inner(a, b):
        return a + b

    def outer(a, b):
        return deep(a, b)  # noqa: F821  (set below, in this module's globals as the helper's own)

    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, helpers.outer(x, y), mask=mask)  # noqa: F821

    outer.__globals__["deep"] = JITFunction(inner)
    add_kernel.__globals__["helpers"] = types.SimpleNamespace(outer=JITFunction(outer))
    kernel = JITFunction(add_kernel)
    launch = lambda x, y, out: kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)  # noqa: E731
    rep = ex00.check_add(launch)
    assert rep.ok, str(rep)


def test_a_stored_nan_equal_to_one_runs_poison_is_still_seen_stored():
    # on a GPU out is poisoned twice, with the sign bit flipped between the pre-flight and the run: an e4m3 NaN is
    # 0x7F or 0xFF, so a kernel storing NaN there matches one run's poison, never both
    host = kernelcheck.Guarded((4,), torch.float8_e4m3fn, "cpu")
    dev = kernelcheck.Guarded((4,), torch.float8_e4m3fn, "cpu", sign_flipped=True)
    assert (host.poison, dev.poison) == (0x7F, -1)  # 0x7F and 0xFF: e4m3fn's two NaNs
    wide = kernelcheck.Guarded((1,), torch.float32, "cpu", sign_flipped=True)
    assert wide.poison & 0xFFFFFFFF == 0xFFC0DEAD and torch.isnan(wide.view).all()
    host.view.view(torch.int8)[:2] = torch.tensor([-1, 0x38], dtype=torch.int8)  # the interpreter stored -NaN, 1.0
    dev.view.view(torch.int8)[:2] = torch.tensor([-1, 0x38], dtype=torch.int8)  # the GPU stored the same
    case = kerneldiagnosis.Case({}, dev, Seen(), checked=True, preflight_out=host)
    assert dev.unwritten().tolist() == [True, False, True, True]  # the run alone mistakes the -NaN for its poison
    assert case.unwritten.tolist() == [False, False, True, True]
    assert kerneldiagnosis.Case({}, dev, Seen(), checked=False).unwritten.tolist() == [True, False, True, True]
