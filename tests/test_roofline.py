"""The roofline model, and the seed lecture's numbers (Stanford CS336 Lecture 5, "Start with two budgets")."""

import math

import numpy as np
import pytest

from gpulab.core import hardware
from gpulab.models import roofline

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report

SEED = hardware.get("Seed accelerator")


def test_seed_ridge_is_100_flop_per_byte():
    assert roofline.ridge_point(SEED.peak("fp32"), SEED.hbm_tbps) == pytest.approx(100.0)


def test_seed_kernel_intensity_10_compute_10ms_memory_100ms():
    b = roofline.bound(1e12, 100e9, SEED.peak("fp32"), SEED.hbm_tbps)
    assert b.intensity == pytest.approx(10.0)
    assert b.compute_ms == pytest.approx(10.0)
    assert b.memory_ms == pytest.approx(100.0)
    assert b.limiter == "memory" and b.time_ms == pytest.approx(100.0)


def test_seed_kernel_moving_10GB_takes_10ms():
    b = roofline.bound(1e12, 10e9, SEED.peak("fp32"), SEED.hbm_tbps)
    assert b.memory_ms == pytest.approx(10.0) and b.time_ms == pytest.approx(10.0)
    assert b.intensity == pytest.approx(roofline.ridge_point(100, 1))  # exactly at the ridge


@pytest.mark.parametrize("i", [0.01, 1, 50, 100, 150, 1e4])
def test_attainable_is_min_of_roof_and_slope(i):
    assert roofline.attainable_tflops(i, 100, 1) == pytest.approx(min(100, i))


@pytest.mark.parametrize(
    "f, d, c, b, compute_ms, memory_ms, limiter",
    [
        (2e12, 1e11, 100, 2, 20.0, 50.0, "memory"),  # 2e12 / 100e12 s = 20 ms; 1e11 / 2e12 s = 50 ms
        (6e13, 3e10, 989.5, 4.8, 60.637, 6.25, "compute"),  # 6e13 / 989.5e12 s = 60.637 ms; 3e10 / 4.8e12 s = 6.25 ms
        (0, 8e9, 67, 4, 0.0, 2.0, "memory"),  # a copy: no FLOPs, 8 GB at 4 TB/s
    ],
)
def test_bound_by_hand(f, d, c, b, compute_ms, memory_ms, limiter):
    r = roofline.bound(f, d, c, b)
    assert (r.compute_ms, r.memory_ms) == (pytest.approx(compute_ms, rel=1e-4), pytest.approx(memory_ms))
    assert r.limiter == limiter and r.time_ms == pytest.approx(max(compute_ms, memory_ms), rel=1e-4)


def test_bound_on_random_inputs_meets_the_attainable_rate(seed):
    import random

    rng = random.Random(seed)
    for _ in range(200):
        f, d, c, b = (10 ** rng.uniform(3, 15), 10 ** rng.uniform(3, 12), 10 ** rng.uniform(0, 3), rng.uniform(0.1, 5))
        r = roofline.bound(f, d, c, b)
        assert r.time_ms >= r.compute_ms and r.time_ms >= r.memory_ms
        # the rate at the bound is the attainable rate, from the other side of the roofline
        assert f / (r.time_ms * 1e-3) / 1e12 == pytest.approx(roofline.attainable_tflops(f / d, c, b))


@pytest.mark.parametrize(
    "args,msg",
    [
        ((1e9, 0, 100, 1), "bytes_moved"),
        ((-1, 1e9, 100, 1), "flops"),
        ((1e9, 1e9, 0, 1), "peak_tflops"),
        ((1e9, 1e9, 100, float("nan")), "hbm_tbps"),
        ((1e9, "x", 100, 1), "bytes_moved"),
        ((10**400, 1e9, 100, 1), "flops"),
        ((1e9, 1e9, 100, float("inf")), "hbm_tbps"),
        ((True, 1e9, 100, 1), "flops"),
    ],
)
def test_bad_input_names_the_argument(args, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        roofline.bound(*args)


def test_numpy_numbers_are_numbers():
    b = roofline.bound(np.int64(10**12), np.float32(100e9), np.int64(100), np.float64(1.0))
    assert b.compute_ms == pytest.approx(10.0) and b.memory_ms == pytest.approx(100.0)
    assert roofline.intensity(-0.0, 1.0) == 0.0 and math.copysign(1, roofline.intensity(-0.0, 1.0)) == 1


def test_which_peak_applies():
    h = hardware.get("H200")
    # the H200 datasheet (dense): FP32 67 TFLOP/s, TF32 494.5, BF16 989.5
    assert roofline.peak_for(h, "elementwise", "bf16") == 67.0  # no tensor cores for ReLU
    assert roofline.peak_for(h, "matmul", "bf16") == 989.5
    assert roofline.peak_for(h, "matmul", "fp32") == 67.0
    assert roofline.peak_for(h, "matmul", "fp32", tf32=True) == 494.5
    with pytest.raises(LookupError, match="T4 has no bf16"):
        roofline.peak_for(hardware.get("T4"), "matmul", "bf16")
    with pytest.raises(ValueError, match="op_kind"):
        roofline.peak_for(h, "softmax")


def test_kernel_point_rates():
    p = roofline.KernelPoint("x", flops=2e12, bytes_moved=1e12, time_ms=1000.0)
    assert p.intensity == 2 and p.tflops == pytest.approx(2.0) and p.tbps == pytest.approx(1.0)
    assert math.isclose(str(roofline.bound(1, 1, 1, 1)).count("FLOP/B"), 1)


def test_unit_rates_and_the_instruction_issue_roof_by_hand():
    h200 = hardware.get("H200")  # 132 SMs, 67 TFLOP/s FP32: a clock of 67e12 / (2 x 128 x 132)
    assert roofline.unit_rate(h200, "fp32") == pytest.approx(33.5)  # 67 TFLOP/s / 2 FLOPs per FMA
    assert roofline.unit_rate(h200, "bf16") == pytest.approx(67.0)  # twice the lanes
    assert roofline.unit_rate(h200, "sfu") == pytest.approx(67 * 16 / 256)  # 16 of 128 lanes' worth: 4.1875
    # a copy at 4 TB/s moves 8 bytes per element: 0.5e12 elements/s against 33.5e12 instructions/s
    assert roofline.instructions_per_element(h200, 4.0, 8) == pytest.approx(67.0)
    with pytest.raises(LookupError, match="T4"):
        roofline.unit_rate(hardware.get("T4"), "fp32")
    with pytest.raises(ValueError, match="unit must be one of"):
        roofline.unit_rate(h200, "fp64")
    with pytest.raises(ValueError, match="bytes_per_element"):
        roofline.instructions_per_element(h200, 4.0, 0)
