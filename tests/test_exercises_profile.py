"""The lessons' one call after a checker passes (gpulab.exercises.profile): the learner's kernel traced at a small
size, its counts beside the lesson's model and gpulab's recorded kernel, for lessons 02, 06, 07 and 07b; a stub, a
kernel that raises, strays, hangs or computes wrongly is one line naming the checker, never an exception; on a GPU
the line about Nsight Compute, and ncu run only when asked.

Expected counts are worked out by hand in the comments (sectors of a 32-lane request, tiles, bytes) or computed in
NumPy from the inputs; gpulab's column is read from the reference file here, never from the code under test."""

from __future__ import annotations

import numpy as np
import pytest
import triton
import triton.language as tl

from gpulab.core import reference
from gpulab.exercises import ex02_solutions, ex06_solutions, ex07_solutions, ex07b_solutions, kernelcheck
from gpulab.exercises import profile as P
from gpulab.kernels import divergence as dv
from gpulab.kernels import transpose as T
from gpulab.measure import ncu

GPU = "H200"  # the counts are for the GPU the recording ran on, on any machine
REC = reference.load("h200")["counters"]["cases"]


def _recorded(case, label, quantity):
    return next(r["counter"] for r in REC[case]["comparison"] if r["label"] == label and r["quantity"] == quantity)


def _row(text: str, quantity: str) -> list[str]:
    """The cells after the quantity's name: yours, model, gpulab's."""
    line = next(ln for ln in text.splitlines() if ln.strip().startswith(quantity + "  "))
    return line.strip()[len(quantity) :].split()


def _named(name, fn):
    """``fn`` called under the name ``name`` (the function itself keeps its own)."""

    def call(*args):
        return fn(*args)

    call.__name__ = name
    return call


@pytest.fixture(scope="module")
def solved():
    """Each exercise's solution profiled once: exercise -> text."""
    sols = {
        "loop_grouped": ex02_solutions.loop_grouped,
        "strided_copy": ex06_solutions.strided_copy,
        "transpose": ex06_solutions.transpose,
        "tiled_matmul": ex07_solutions.tiled_matmul,
        "persistent_matmul": ex07b_solutions.persistent_matmul,
    }
    return {k: P.profile_mine(fn, gpu=GPU, print_it=False) for k, fn in sols.items()}


def test_every_table_is_labelled_as_traced_here_for_the_gpu(solved):
    for name, text in solved.items():
        head = text.splitlines()[0]
        assert head.startswith(f"your {name}_kernel ("), text
        assert "traced on this machine as the H200 would issue it" in head, text
        assert len(text.splitlines()) <= 15


def test_lesson02_lanes_and_loop_steps_beside_simt_loop(solved):
    text = solved["loop_grouped"]
    # by hand from the inputs: slots sorted by cost, BLOCK 128 (the solution's); a program loops to its largest trip
    # count, and each step's tl.where has a lane on its first side while that lane's own count is not used up
    trips = dv.mixed_trips(P.LOOP["n"], P.LOOP["frac"], P.LOOP["cheap"], P.LOOP["expensive"], seed=0)
    slots = np.sort(trips)[::-1].reshape(-1, 128)
    steps = slots.max(axis=1)
    lanes = 32 * slots.sum() / (steps.sum() * 128)
    assert _row(text, "where: lanes on first side")[:2] == [f"{lanes:.3g}"] * 2
    assert _row(text, "loop steps/program")[:2] == [f"{steps.mean():.3g}"] * 2
    # Triton never splits a warp: 32 threads an instruction, traced and modelled; gpulab's loop_cost_kernel alone on
    # the H200 (its range also holds torch's reduction, which the comparison's 31.9 includes)
    ours = [
        r["metrics"][ncu.THREADS_PER_INST]
        for r in REC["divergence"]["rows"]
        if r["range"] == "gpulab:divergence:loop-sorted" and r["kernel"] == "loop_cost_kernel"
    ]
    assert len(ours) == 1 and _row(text, "threads/inst") == ["32", "32", f"{ours[0]:.3g}"]
    assert "divergence / loop-sorted recorded on NVIDIA H200" in text


def test_lesson06_strided_copy_beside_the_sector_model(solved):
    text = solved["strided_copy"]
    # BLOCK 128 on 4 warps: a lane an output, lanes 4 * 4 = 16 bytes apart: 32 lanes span 512 bytes, 16 sectors;
    # 128 useful bytes of 512 moved; the dense store 128 bytes, 4 sectors. gpulab's kernel (BLOCK 1024, 4 outputs a
    # lane) issued 32 sectors a load request and 16 a store request on the H200
    ld = _recorded("coalescing", "stride4", "ld sectors/request")
    assert _row(text, "ld sectors/request") == ["16", "16", f"{ld:.3g}"] and ld == 32
    assert _row(text, "ld sectors/32 el")[:2] == ["16", "16"]
    assert _row(text, "ld efficiency")[:2] == ["25%", "25%"]
    assert _row(text, "st sectors/request")[:2] == ["4", "4"]


def test_lesson06_transpose_beside_the_sector_model(solved):
    text = solved["transpose"]
    # a tiled transpose: 32 elements of a row are 128 bytes, 4 sectors, on both sides; gpulab's tiled kernel the same
    assert _row(text, "ld sectors/32 el")[:2] == ["4", "4"]
    assert _row(text, "st sectors/32 el") == [
        "4",
        "4",
        f"{_recorded('coalescing', 'transpose-tiled', 'st sectors/32 el'):.3g}",
    ]


def test_lesson07_bytes_of_the_tiles_beside_2n3s_over_t(solved):
    text = solved["tiled_matmul"]
    # 256^2 fp16 in 32 x 32 tiles: 64 programs, each reads a 32 x 256 strip of A and a 256 x 32 strip of B:
    # 64 * 2 * 8192 elements * 2 bytes = 2,097,152 bytes = 2 * 256^3 * 2 / 32
    assert 64 * 2 * 8192 * 2 == 2 * 256**3 * 2 // 32 == 2_097_152
    assert _row(text, "L2 read bytes")[:4] == ["2.1", "MB", "2.1", "MB"]
    assert _row(text, "programs")[0] == "64"
    assert "tiling / tiled-group8 recorded on NVIDIA H200" in text and "x its model" in text


def test_lesson07b_work_balance_beside_the_wave_model(solved):
    text = solved["persistent_matmul"]
    # 288^2 in 32 x 32 tiles: 9 x 9 = 81 tiles on 66 programs: 15 programs compute 2 tiles, 51 compute 1; the mean
    # work over the busiest program's is (81 / 66) / 2 = 61%
    assert _row(text, "programs")[:2] == ["66", "66"]
    assert _row(text, "work balance")[:2] == [f"{81 / 66 / 2:.0%}"] * 2 == ["61%", "61%"]
    assert "81 tiles on 66 programs" in text


# ---- kernels that are not yet right ------------------------------------------------------------------------------


@triton.jit
def _copy_tile_kernel(a_ptr, b_ptr, M, N, BLOCK: tl.constexpr):  # "transposes" by copying: b = a
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(a_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask)
    tl.store(b_ptr + offs_m[:, None] * N + offs_n[None, :], tile, mask=mask)


@triton.jit
def _unmasked_transpose_kernel(a_ptr, b_ptr, M, N, BLOCK: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    tile = tl.load(a_ptr + offs_m[:, None] * N + offs_n[None, :])
    tl.store(b_ptr + offs_n[:, None] * M + offs_m[None, :], tl.trans(tile))


@triton.jit
def _unstrided_copy_kernel(x_ptr, y_ptr, n_out, stride, BLOCK: tl.constexpr):  # forgets the stride
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def _tile_launcher(kernel):
    def transpose(a, out):
        M, N = a.shape
        kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, out, M, N, BLOCK=32)

    return transpose


def test_a_stub_is_one_line_that_sends_to_the_checker():
    def loop_grouped(x, trips, order, out):
        raise NotImplementedError

    text = P.profile_mine(loop_grouped, gpu=GPU, print_it=False)
    assert text.count("\n") == 0
    assert text == (
        "not profiled: loop_grouped is still the stub (it raises NotImplementedError); "
        "write it, then pass ex02.check_loop_grouped(loop_grouped)"
    )


@pytest.mark.parametrize(
    "fn, said",
    [
        (_tile_launcher(_copy_tile_kernel), "transpose's result on a 70 x 70 probe differs from the reference"),
        (
            _tile_launcher(_unmasked_transpose_kernel),
            "transpose stores outside its buffers on a 70 x 70 probe (after out)",
        ),
        (
            _named(
                "strided_copy",
                lambda x, stride, out: _unstrided_copy_kernel[(8,)](x, out, out.numel(), stride, BLOCK=128),
            ),
            "strided_copy's result on a 1000 probe differs from the reference",
        ),
        (_named("transpose", lambda a, out: out.copy_(a.t())), "transpose launched no Triton kernel"),
        (_named("tiled_matmul", lambda a, b, out: a.view(-1)[10**6]), "tiled_matmul raised IndexError"),
    ],
    ids=["copies", "unmasked", "no-stride", "torch-only", "raises"],
)
def test_a_wrong_kernel_is_one_line_naming_the_checker(fn, said):
    text = P.profile_mine(fn, gpu=GPU, print_it=False)
    assert text.count("\n") == 0, text
    assert text.startswith(f"not profiled: {said}"), text
    assert "; the checker names the mistake: ex0" in text, text


def test_a_result_wrong_only_at_the_trace_size_is_caught_there():
    # 8 programs of 128 slots cover the probe's 1000 but not the trace's 4096: the probe passes, the trace does not
    def loop_grouped(x, trips, order, out):
        ex02_solutions.loop_grouped_kernel[(8,)](x, trips, order, out, x.numel(), BLOCK=128)

    text = P.profile_mine(loop_grouped, gpu=GPU, print_it=False)
    assert text == (
        "not profiled: loop_grouped's result at 4096 differs from the reference; "
        "the checker names the mistake: ex02.check_loop_grouped(loop_grouped)"
    )


def test_a_kernel_past_the_time_limit_is_one_line(monkeypatch):
    monkeypatch.setattr(kernelcheck, "CASE_TIME_LIMIT_S", -1.0)  # every run is past it when it is read
    text = P.profile_mine(ex06_solutions.transpose, gpu=GPU, print_it=False)
    assert text.startswith("not profiled: transpose did not finish on a 70 x 70 probe"), text


def test_a_naive_transpose_shows_its_stores_against_the_model():
    # right values, uncoalesced writes: each lane of a store request writes 4 bytes into a sector of its own, 32 sectors
    # for 32 elements where the tiled transpose's model writes 4
    def transpose(a, out):  # gpulab's naive kernel: a row of A per program, stored down a column of out
        M, N = a.shape
        grid = (M * triton.cdiv(N, 128),)
        T.transpose_naive_kernel[grid](a, out, M, N, a.stride(0), a.stride(1), out.stride(0), out.stride(1), BLOCK=128)

    text = P.profile_mine(transpose, gpu=GPU, print_it=False)
    assert _row(text, "st sectors/32 el")[:2] == ["32", "4"]
    assert _row(text, "ld sectors/32 el")[:2] == ["4", "4"]


def test_an_unknown_exercise_and_a_non_function_are_one_line():
    assert P.profile_mine(_named("my_copy", ex06_solutions.transpose), print_it=False).startswith(
        "not profiled: 'my_copy' is no kernel exercise profile_mine knows (loop_grouped, strided_copy, transpose"
    )
    assert P.profile_mine(42, exercise="transpose", print_it=False).startswith(
        "not profiled: 'transpose' is not a function"
    )
    text = P.profile_mine(_named("my_copy", ex06_solutions.transpose), exercise="transpose", gpu=GPU, print_it=False)
    assert _row(text, "st sectors/32 el")[:2] == ["4", "4"]


# ---- hardware counters on a GPU ----------------------------------------------------------------------------------


def test_on_a_gpu_ncu_is_offered_and_run_only_when_asked(monkeypatch):
    from gpulab.measure import counters

    runs = []

    def measure(case):
        runs.append(case)
        rec = dict(REC[case])
        return {**rec, "provenance": {**rec["provenance"], "gpu": "NVIDIA H100 (a test's fake)"}}

    monkeypatch.setattr(P, "_on_gpu", lambda: True)
    monkeypatch.setattr(counters, "measure", measure)
    monkeypatch.setattr(ncu, "available", lambda: (False, "the driver lets only administrators read GPU counters"))
    text = P.profile_mine(ex06_solutions.transpose, gpu=GPU, print_it=False)
    assert (
        text.splitlines()[-1]
        == "  no hardware counters on this GPU: the driver lets only administrators read GPU counters"
    )
    monkeypatch.setattr(ncu, "available", lambda: (True, ""))
    text = P.profile_mine(ex06_solutions.transpose, gpu=GPU, print_it=False)
    assert "profile_mine(transpose, counters=True) measures gpulab's kernel now" in text.splitlines()[-1]
    assert runs == [] and "recorded on NVIDIA H200" in text
    text = P.profile_mine(ex06_solutions.transpose, counters=True, gpu=GPU, print_it=False)
    assert runs == ["coalescing"]
    assert "gpulab's: coalescing / transpose-tiled measured now on NVIDIA H100 (a test's fake)" in text
    assert _row(text, "st sectors/32 el") == ["4", "4", "4"]


def test_off_a_gpu_no_counters_line_and_no_ncu(monkeypatch):
    from gpulab.measure import counters

    monkeypatch.setattr(P, "_on_gpu", lambda: False)
    monkeypatch.setattr(counters, "measure", lambda case: pytest.fail("ncu run off a GPU"))
    text = P.profile_mine(ex06_solutions.transpose, counters=True, gpu=GPU, print_it=False)
    assert "Nsight Compute" not in text and "ncu could not" not in text
    assert "recorded on NVIDIA H200" in text
