"""Lesson 02's CUDA ``if (lane < b)`` kernel (gpulab.kernels.lane_branch): the lane-mask model against b counted by
hand (gpulab.models.simt.boundary_sweep), the float64 reference's arithmetic by hand, the launcher's errors naming the
argument, the CUDA source's branch, the counter case's model, the suite's ``lane_branch`` step under the test
clock (the CUDA build replaced by the reference), and the figure with and without a record. On a GPU: the built
kernel against float64 on poisoned outputs."""

import contextlib
import re

import pytest
import torch

import gpulab  # first: it picks the mode  # isort: skip

from gpulab import figures
from gpulab.bench import __main__ as bench_cli
from gpulab.bench import lesson02
from gpulab.core import timing
from gpulab.kernels import lane_branch as lb
from gpulab.measure import counter_cases as CC
from gpulab.measure import counters, ncu
from gpulab.models import simt

pytestmark = pytest.mark.usefixtures("seed")
CPU_ONLY = pytest.mark.skipif(gpulab.ON_GPU, reason="checks what gpulab does without a GPU")
TEST_CLOCK = pytest.mark.skipif(gpulab.ON_GPU, reason="the test clock is for the CPU; on a GPU the real paths run")


def _x(n):
    return (torch.rand(n, dtype=torch.float64) * 2 - 1).float().to(gpulab.DEVICE)


# ---- the model --------------------------------------------------------------------------------------------------


def test_boundary_sweep_by_hand_equal_paths():
    rows = simt.boundary_sweep(3, 3, [0, 1, 4, 31, 32])
    assert [r["b"] for r in rows] == [0, 1, 4, 31, 32]
    assert [r["steps_paid"] for r in rows] == [3, 6, 6, 6, 3]  # both loops whenever 0 < b < 32
    assert [r["efficiency"] for r in rows] == [1.0, 0.5, 0.5, 0.5, 1.0]
    assert [r["time_ratio"] for r in rows] == [1.0, 2.0, 2.0, 2.0, 1.0]
    assert [r["divergent"] for r in rows] == [False, True, True, True, False]


def test_boundary_sweep_by_hand_unequal_paths_and_default_boundaries():
    rows = {r["b"]: r for r in simt.boundary_sweep(3, 2)}
    assert sorted(rows) == list(range(33))
    assert rows[0]["steps_paid"] == 2 and rows[0]["time_ratio"] == 1.0  # path B alone: the unit of time
    assert rows[4]["steps_paid"] == 5 and rows[4]["time_ratio"] == 2.5
    assert rows[4]["efficiency"] == (4 * 3 + 28 * 2) / (5 * 32)
    assert rows[32]["steps_paid"] == 3 and rows[32]["time_ratio"] == 1.5 and rows[32]["efficiency"] == 1.0


@pytest.mark.parametrize(
    "kw, err, match",
    [
        (dict(cost_a=3, cost_b=0), ValueError, "cost_b"),
        (dict(cost_a=-1, cost_b=2), ValueError, "cost_a"),
        (dict(cost_a=3, cost_b=2, boundaries=[33]), ValueError, "boundary"),
        (dict(cost_a=3, cost_b=2, boundaries=[True]), TypeError, "boundary"),
        (dict(cost_a=2.0, cost_b=2), TypeError, "cost_a"),
    ],
)
def test_boundary_sweep_names_the_bad_argument(kw, err, match):
    with pytest.raises(err, match=match):
        simt.boundary_sweep(**kw)


# ---- the reference and the CUDA source ------------------------------------------------------------------------


def test_reference_arithmetic_by_hand():
    x = torch.full((64,), 0.5, dtype=torch.float32)
    y1, y2 = lb.lane_branch_ref(x, 4, trips=1), lb.lane_branch_ref(x, 4, trips=2)
    lane_a = torch.tensor([i % 32 < 4 for i in range(64)])  # elements 0-3 and 32-35
    a1, a2 = 0.5 * 0.999 + 0.001, (0.5 * 0.999 + 0.001) * 0.999 + 0.001
    assert y1.dtype == torch.float64
    assert torch.allclose(y1[lane_a], torch.tensor(a1, dtype=torch.float64), rtol=0, atol=1e-7)
    assert torch.allclose(y2[lane_a], torch.tensor(a2, dtype=torch.float64), rtol=0, atol=1e-7)
    assert torch.equal(y1[~lane_a], torch.full((56,), -0.25, dtype=torch.float64))  # 0.5^2 - 0.5
    assert torch.equal(y2[~lane_a], torch.full((56,), -0.4375, dtype=torch.float64))  # (-0.25)^2 - 0.5
    assert torch.equal(lb.lane_branch_ref(x, 17, trips=0), x.double())
    assert torch.equal(lb.lane_branch_ref(x, 0, 2), torch.full((64,), -0.4375, dtype=torch.float64))
    assert torch.allclose(lb.lane_branch_ref(x, 32, 2), torch.full((64,), a2, dtype=torch.float64), atol=1e-7)


def _kernel_constants():
    src = lb.KERNEL_SOURCE
    a = re.search(r"if \(lane < b\).*?v = fmaf\(v, ([-\d.]+)f, ([-\d.]+)f\)", src, re.S)
    b = re.search(r"else.*?v = fmaf\(v, v, ([-\d.]+)f\)", src, re.S)
    return a, b


def test_cuda_source_branches_on_the_lane_with_two_loops():
    src = lb.KERNEL_SOURCE
    assert "__global__ void lane_branch_kernel" in src
    assert "int lane = threadIdx.x % 32;" in src
    assert "if (lane < b) {" in src and "} else {" in src
    assert src.count("for (int t = 0; t < trips; ++t)") == 2  # one loop per path: a real branch, both paid
    assert "if (i >= n) return;" in src  # n need not be a multiple of the block
    assert "lane_branch_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>" in lb.HOST_SOURCE
    assert lb.CUDA_SOURCE.startswith(lb.KERNEL_SOURCE)
    assert "lane_branch_launch(torch::Tensor x" in lb.CPP_DECLARATION


def test_reference_uses_the_kernels_constants():
    a, b = _kernel_constants()
    assert a and b, "path A's or path B's FMA not found in the kernel source"
    f32 = [float(torch.tensor(float(v), dtype=torch.float32)) for v in (*a.groups(), *b.groups())]
    assert f32 == [lb.A_MUL, lb.A_ADD, lb.B_ADD]


def test_build_dir_is_under_gpulabs_cache_dir(monkeypatch, tmp_path):
    from dataclasses import replace

    from gpulab.core import settings
    from gpulab.measure import device

    monkeypatch.setattr(settings, "SETTINGS", replace(settings.SETTINGS, cache_dir=str(tmp_path / "c")))
    assert lb.build_dir() == tmp_path / "c" / "cuda" / "lane_branch"
    assert device.cache_dir() == settings.cache_dir() == tmp_path / "c"


def test_counts_by_hand():
    assert lb.lane_branch_counts(1000, 256) == (256_000, 8000)
    with pytest.raises(ValueError, match="trips"):
        lb.lane_branch_counts(10, -1)


# ---- the launcher's errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, kw, err, match",
    [
        (lambda: _x(64).double(), {}, TypeError, "x must have dtype"),
        (lambda: _x(64).reshape(8, 8), {}, ValueError, "x must have 1 dimension"),
        (lambda: _x(128)[::2], {}, ValueError, "x must be contiguous"),
        (lambda: [0.5] * 64, {}, TypeError, "x must be a torch.Tensor"),
        (lambda: _x(64), dict(b=33), ValueError, "b must be <= 32"),
        (lambda: _x(64), dict(b=-1), ValueError, "b must be >= 0"),
        (lambda: _x(64), dict(b=4.0), TypeError, "b must be an integer"),
        (lambda: _x(64), dict(trips=-1), ValueError, "trips must be >= 0"),
        (lambda: _x(64), dict(trips=2**21), ValueError, "trips must be <="),
        (lambda: _x(64), dict(block=48), ValueError, "block must be a multiple of 32"),
        (lambda: _x(64), dict(block=16), ValueError, "block must be >= 32"),
        (lambda: _x(64), dict(block=2048), ValueError, "block must be <= 1024"),
    ],
)
def test_launcher_names_the_bad_argument(make, kw, err, match):
    args = dict(b=4, trips=8, block=256) | kw
    with pytest.raises(err, match=match):
        lb.lane_branch(make(), **args)


def test_reference_names_the_bad_argument():
    with pytest.raises(ValueError, match="b must be <= 32"):
        lb.lane_branch_ref(_x(8), 40)
    with pytest.raises(TypeError, match="trips must be an integer"):
        lb.lane_branch_ref(_x(8), 4, trips=None)


@CPU_ONLY
def test_launcher_says_it_needs_a_gpu():
    with pytest.raises(RuntimeError, match="needs a GPU.*lane_branch_ref"):
        lb.lane_branch(_x(64), 4, 8)
    assert not lb._BUILT  # nothing was built


# ---- the counter case -----------------------------------------------------------------------------------------


def _ncu_rows(case, inst_of, threads_of):
    """Parsed-ncu-shaped rows, one kernel per range, with the counters given per b."""
    return [
        {
            "id": i,
            "range": r.name,
            "kernel": "lane_branch_kernel",
            "metrics": {
                ncu.WARP_INST: inst_of(r.params["b"]),
                ncu.THREAD_INST: threads_of(r.params["b"]),
                ncu.TIME: 1000.0,
            },
        }
        for i, r in enumerate(case.ranges)
    ]


def test_counter_case_model_against_counters_by_hand():
    case = CC.lane_branch_case(n=64, trips=4, block=32, boundaries=(0, 5, 32))
    assert [r.label for r in case.ranges] == ["b0", "b5", "b32"]
    assert case.metrics == (ncu.THREAD_INST, ncu.WARP_INST, ncu.TIME)
    rows = _ncu_rows(case, lambda b: 1000.0 if b in (0, 32) else 2000.0, lambda b: 32000.0)
    out = {(c["label"], c["quantity"]): c for c in counters.compare(case, rows)}
    assert out["b0", "threads/inst"]["model"] == 32 and out["b0", "threads/inst"]["counter"] == 32
    assert out["b5", "threads/inst"]["model"] == 16 and out["b5", "threads/inst"]["counter"] == 16
    assert out["b5", "warp inst"]["model"] == 2000 and out["b5", "warp inst"]["ratio"] == 1.0
    assert out["b32", "warp inst"]["model"] == 1000


def test_counter_case_refuses_boundaries_without_zero():
    with pytest.raises(ValueError, match="include 0"):
        CC.lane_branch_case(boundaries=(1, 2))
    with pytest.raises(ValueError, match="boundary"):
        CC.lane_branch_case(boundaries=(0, 40))


@CPU_ONLY
def test_counter_case_setup_needs_the_gpu_kernel():
    case = CC.lane_branch_case(n=64, trips=2, block=32, boundaries=(0, 7))
    runs = case.setup(case)
    assert [r.name for r, _ in runs] == [r.name for r in case.ranges]
    with pytest.raises(RuntimeError, match="needs a GPU"):
        runs[1][1]()


# ---- the suite's step under the test clock ----------------------------------------------------------------------


def _step(**kw):
    with timing.test_clock(ms=2.0):
        return lesson02.run(progress=False, steps=("lane_branch",), lane_n=3 * 256 + 7, lane_trips=8, **kw)


@TEST_CLOCK
def test_step_runs_end_to_end_under_the_test_clock():
    data = _step()
    assert set(data) == {"lane_branch", "clock"} and data["clock"] == timing.FAKE_LABEL
    lane = data["lane_branch"]
    assert (lane["n"], lane["trips"], lane["block"]) == (3 * 256 + 7, 8, 256)
    assert [r["b"] for r in lane["rows"]] == list(range(33))
    assert all(r["median_ms"] == 2.0 and r["time_ratio"] == 1.0 for r in lane["rows"])
    assert [r["model_time_ratio"] for r in lane["rows"]] == [1.0] + [2.0] * 31 + [1.0]
    assert [r["model_efficiency"] for r in lane["rows"]] == [1.0] + [0.5] * 31 + [1.0]
    assert lane["max_abs_err"] < 1e-6  # the reference against itself, through float32
    assert lane["counters"] is None and lane["counters_note"].startswith("counters not read")
    assert timing.is_fake_record(data)
    text = lesson02.report(data)
    assert "CUDA if (lane < b)" in text and "counters not read" in text


@TEST_CLOCK
def test_step_keeps_what_ncu_counted(monkeypatch):
    case = CC.CASES["lane_branch"]
    rows = _ncu_rows(case, lambda b: 1000.0 if b in (0, 32) else 2000.0, lambda b: 32000.0 if b % 2 else 33000.0)
    monkeypatch.setattr(ncu, "available", lambda: (True, ""))
    monkeypatch.setattr(counters, "measure", lambda name: {"case": name, "comparison": counters.compare(name, rows)})
    lane = _step()["lane_branch"]
    assert lane["counters_note"] == "read with Nsight Compute" and lane["counters"]["case"] == "lane_branch"
    eff = simt.lane_branch_points(lane)["efficiency"]
    assert sorted(eff) == list(range(33))
    assert eff[0] == 33000 / 1000 / 32 and eff[5] == 32000 / 2000 / 32
    assert "1: 16.0 (16)" in lesson02.lane_report(lane)  # b = 1: 32000 / 2000 threads per instruction


@TEST_CLOCK
def test_step_keeps_the_times_when_ncu_fails(monkeypatch):
    def fail(name):
        raise RuntimeError("ncu failed on case 'lane_branch' (exit 1): ==ERROR== boom")

    monkeypatch.setattr(ncu, "available", lambda: (True, ""))
    monkeypatch.setattr(counters, "measure", fail)
    lane = _step()["lane_branch"]
    assert lane["counters"] is None and "RuntimeError: ncu failed" in lane["counters_note"]
    assert len(lane["rows"]) == 33


@TEST_CLOCK
def test_step_refuses_a_wrong_kernel(monkeypatch):
    monkeypatch.setattr(lesson02, "_lane_kernel", lambda: lambda x, b, trips, block: x.clone())
    with pytest.raises(RuntimeError, match="differs from its float64 reference at b = 0"):
        _step()


def test_suite_steps_and_the_cli_know_lane_branch():
    assert lesson02.STEPS == ("variants", "lane_branch")
    assert lesson02.LIVE["steps"] == ("variants",)  # the notebook's live cell builds no CUDA code
    with contextlib.ExitStack() as stack:
        if not gpulab.ON_GPU:
            stack.enter_context(timing.test_clock())
        with pytest.raises(ValueError, match="unknown"):
            lesson02.run(progress=False, steps=("lanes",))
    with pytest.raises(SystemExit, match="unknown step"):
        bench_cli.main(["--only", "lesson02", "--steps", "lanes"])


@CPU_ONLY
def test_step_refuses_to_time_without_a_gpu():
    with pytest.raises(timing.NoGPUTimingError):
        lesson02.lane_branch_step(n=64, trips=2)


# ---- the figure -----------------------------------------------------------------------------------------------


def test_figure_without_a_record_draws_the_model_and_says_so():
    fig = figures.lesson02.lane_branch_figure(None, "no GPU here: recorded on NVIDIA H200")
    assert [tr.name for tr in fig.data] == ["model: efficiency", "model: time / time at b = 0"]
    assert list(fig.data[0].y) == [1.0] + [0.5] * 31 + [1.0]
    assert list(fig.data[1].y) == [1.0] + [2.0] * 31 + [1.0]
    assert [a.text for a in fig.layout.annotations] == ["no recording yet on this GPU: the model alone"]
    assert "H200" not in fig.layout.title.text  # a provenance without a record would claim one


@TEST_CLOCK
def test_figure_with_a_record_draws_the_measured_points(monkeypatch):
    case = CC.CASES["lane_branch"]
    rows = _ncu_rows(case, lambda b: 1000.0 if b in (0, 32) else 2000.0, lambda b: 34000.0)
    monkeypatch.setattr(ncu, "available", lambda: (True, ""))
    monkeypatch.setattr(counters, "measure", lambda name: {"comparison": counters.compare(name, rows)})
    lane = _step()["lane_branch"]
    for r in lane["rows"]:  # times shaped as a divergent warp would give them
        r["time_ratio"] = 1.0 if r["b"] in (0, 32) else 1.97
    fig = figures.lesson02.lane_branch_figure(lane, "measured here")
    names = [tr.name for tr in fig.data]
    assert names[2:] == ["measured: Nsight Compute", "measured: median time"]
    assert list(fig.data[2].y) == [34000 / 1000 / 32] + [34000 / 2000 / 32] * 31 + [34000 / 1000 / 32]
    assert list(fig.data[3].y) == [r["time_ratio"] for r in lane["rows"]]
    assert not fig.layout.annotations and "measured here" in fig.layout.title.text
    lo, hi = fig.layout.yaxis.range
    assert lo < 34 / 64 and hi > 34 / 32  # the measured efficiencies inside the panel


@TEST_CLOCK
def test_figure_with_a_record_but_no_counters_says_why():
    lane = _step()["lane_branch"]
    fig = figures.lesson02.lane_branch_figure(lane, "fake")
    assert [tr.name for tr in fig.data][2:] == ["measured: median time"]
    assert [a.text for a in fig.layout.annotations] == [lane["counters_note"]]


# ---- on a GPU ---------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU (and nvcc)")
@pytest.mark.parametrize("b", [0, 1, 17, 31, 32])
@pytest.mark.parametrize("n", [1, 33, 3 * 256 + 7, 2**20 + 3])
def test_built_kernel_against_float64_on_poisoned_outputs(poisoned, b, n):
    x = _x(n)
    y = lb.lane_branch(x, b, trips=64, block=256)
    ref = lb.lane_branch_ref(x, b, trips=64)
    assert y.dtype == torch.float32 and y.shape == x.shape
    assert not torch.isnan(y).any(), "an element was never written"
    err = (y.double() - ref).abs().max().item()
    assert err < 1e-5, f"b = {b}, n = {n}: max |error| {err:.3g}"


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU (and nvcc)")
def test_built_kernel_with_other_blocks_and_no_trips(poisoned):
    x = _x(5000)
    for block in (32, 96, 1024):
        assert torch.allclose(lb.lane_branch(x, 9, 16, block).double(), lb.lane_branch_ref(x, 9, 16), atol=1e-5)
    assert torch.equal(lb.lane_branch(x, 9, 0), x)


def test_launcher_refuses_an_input_that_requires_grad():
    x = _x(64).requires_grad_()
    with pytest.raises(ValueError, match="x requires grad.*lane_branch_ref"):
        lb.lane_branch(x, 4, 8)
