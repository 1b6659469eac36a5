"""The models at the edges of their inputs: huge sizes return at once and exactly, sizes that fit nothing say so,
and bad arguments are named."""

from __future__ import annotations

import random

import pytest

from gpulab.models import attention as A


# ------------------------------------------------------------------------------------------ attention tiles
def _tiles_by_rows(L, bm, bn, causal):
    """The definition, one query block at a time (the reference for small L)."""
    n_m, n_n = -(-L // bm), -(-L // bn)
    return sum(-(-min((i + 1) * bm, L) // bn) if causal else n_n for i in range(n_m))


def _keys_by_rows(L, bm):
    return sum(min((i + 1) * bm, L) for i in range(-(-L // bm)))


def test_causal_tiles_and_bytes_agree_with_the_row_by_row_definition():
    rng = random.Random(22)
    cases = [(0, 1, 1), (1, 1, 1), (1, 128, 64), (300, 32, 16), (1000, 128, 128)]
    cases += [(rng.randint(0, 3000), rng.randint(1, 300), rng.randint(1, 300)) for _ in range(300)]
    for L, bm, bn in cases:
        for causal in (False, True):
            assert A.tiles_visited(L, bm, bn, causal) == _tiles_by_rows(L, bm, bn, causal), (L, bm, bn, causal)
        d, item = 64, 2
        want = (2 * L * d + 2 * _keys_by_rows(L, bm) * d) * item + 4 * L
        assert A.flash_bytes(1, 1, L, d, item, causal=True, block_m=bm) == want, (L, bm)


@pytest.mark.parametrize("L", [10**12 + 7, 2**62 + 3])
def test_causal_counts_at_a_huge_length_are_exact(L):
    # the row-by-row sum would take 10^10 steps and more; the closed form agrees with the formulas a row block
    # reveals: tiles of the block's size: row block i visits i + 1 of the n tiles, n(n - 1)/2 + n in all
    bm = 128
    n = -(-L // bm)
    assert A.tiles_visited(L, bm, bm, True) == n * (n - 1) // 2 + n
    # tiles half the block: row block i < n - 1 visits 2(i + 1); the last one ceil(L / 64)
    assert A.tiles_visited(L, bm, bm // 2, True) == (n - 1) * n + -(-L // (bm // 2))
    keys = bm * (n - 1) * n // 2 + L
    assert A.flash_bytes(1, 1, L, 64, 2, causal=True, block_m=bm) == (2 * L * 64 + 2 * keys * 64) * 2 + 4 * L


# ------------------------------------------------------------------------------------------ tiling
def test_largest_square_tile_is_0_when_no_tile_fits_as_lesson_07s_exercise_says():
    from dataclasses import replace

    from gpulab.core import hardware
    from gpulab.exercises import ex07
    from gpulab.models import tiling

    tiny = replace(hardware.get("T4"), smem_per_sm_kib=1)  # 1024 bytes of shared memory
    got = {}
    for s, stages in [(4, 128), (4, 129), (1, 512), (1, 513), (2, 3), (4, 1)]:
        got[s, stages] = tiling.largest_square_tile(s, tiny, stages)
        assert got[s, stages] == ex07.check_largest_tile.solution(s, 1024, stages), (s, stages)
    # 2 * 1^2 * 4 * 128 = 1024 bytes fit exactly; one more stage and not even T = 1 fits
    assert got[4, 128] == 1 and got[4, 129] == 0 and got[1, 513] == 0


# ------------------------------------------------------------------------------------------ Little's law
@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(peak_tbps=0.0, latency_ns=500.0, bytes_per_warp=1024.0), "peak_tbps"),
        (dict(peak_tbps=-4.8, latency_ns=500.0, bytes_per_warp=1024.0), "peak_tbps"),
        (dict(peak_tbps=4.8, latency_ns=0.0, bytes_per_warp=1024.0), "latency_ns"),
        (dict(peak_tbps=4.8, latency_ns=500.0, bytes_per_warp=0.0), "bytes_per_warp"),
    ],
)
def test_warps_to_saturate_names_its_own_argument(kwargs, named):
    from gpulab.models import memory

    with pytest.raises(ValueError, match=rf"^{named} must be"):
        memory.warps_to_saturate(**kwargs)


# ------------------------------------------------------------------------------------------ SIMT branch
@pytest.mark.parametrize("cost_a, cost_b", [(2**63, 1), (10**30, 10**29 + 7), (0, 2**80)])
def test_branch_counts_huge_costs_exactly(cost_a, cost_b):
    from gpulab.models import simt

    t = simt.branch(lambda tid: tid < 4, cost_a, cost_b)  # divergent: both paths paid
    assert t.steps_paid == cost_a + cost_b
    assert t.useful_lane_steps == 4 * cost_a + 28 * cost_b
    assert t.efficiency == (4 * cost_a + 28 * cost_b) / ((cost_a + cost_b) * 32)
    assert t.steps[0].path == ("A" if cost_a else "B") and t.steps[-1].path == "B"
    assert t.steps[-1].mask == tuple(lane >= 4 for lane in range(32))
    uniform = simt.branch([True] * 32, cost_a, cost_b)
    assert uniform.steps_paid == cost_a and uniform.efficiency == 1.0


def test_branch_steps_are_the_same_steps_made_on_demand():
    from gpulab.models import simt

    t = simt.branch(lambda tid: tid % 3 == 0, 3, 2)
    steps = list(t.steps)
    assert [s.path for s in steps] == ["A"] * 3 + ["B"] * 2 and len(t.steps) == 5
    assert [t.steps[i] for i in range(-5, 5)] == steps + steps
    assert t.steps[1:4] == tuple(steps[1:4])
    with pytest.raises(IndexError):
        t.steps[5]


# ------------------------------------------------------------------------------------------ fusion
@pytest.mark.parametrize("bandwidth_tbps", [1e300, 1e-300, 4.0])
def test_crossover_n_is_where_bytes_take_as_long_as_launches(bandwidth_tbps):
    from gpulab.models import fusion

    for fused in (True, False):
        n = fusion.crossover_n("fp32", fused, 5.0, bandwidth_tbps)
        assert 0 < n < float("inf")
        launch_ms = fusion.launches(fused) * 5.0 * 1e-3
        if n >= 1:  # at n*, the byte time equals the launch time: the model time is twice the launch time
            assert fusion.model_ms(round(n), "fp32", fused, 5.0, bandwidth_tbps) == pytest.approx(2 * launch_ms)
        # per element: bytes / bandwidth, times n*, is the launch time
        per_elem_ms = fusion.bytes_moved(1, "fp32", fused) / bandwidth_tbps / 1e9
        assert n * per_elem_ms == pytest.approx(launch_ms)


def test_crossover_n_beyond_floats_range_is_inf_not_an_error():
    from gpulab.models import fusion

    assert fusion.crossover_n(overhead_us=1e300, bandwidth_tbps=1e300) == float("inf")


# ------------------------------------------------------------------------------------------ E8M0
def test_encode_e8m0_refuses_fractional_and_infinite_exponents():
    import torch

    from gpulab.models import formats as F

    e = torch.tensor([-127.0, -3.0, 0.0, 5.0, 127.0, float("nan")])
    assert F.encode_e8m0(e).tolist() == [0, 124, 127, 132, 254, 255]
    assert torch.equal(F.decode_e8m0(F.encode_e8m0(e))[:5].double(), torch.exp2(e[:5].double()).float().double())
    with pytest.raises(ValueError, match="integer exponents.*3.7"):
        F.encode_e8m0(torch.tensor([1.0, 3.7]))
    for bad in (float("inf"), -float("inf"), 1e30, 127.5):
        with pytest.raises(ValueError, match="exponent must"):
            F.encode_e8m0(torch.tensor([bad], dtype=torch.float64))
    with pytest.raises(TypeError, match="exponent"):
        F.encode_e8m0(torch.tensor([True]))


# ------------------------------------------------------------------------------------------ precision
def test_fastest_within_validates_its_arguments():
    from gpulab.models import precision as P

    errors = dict(fp32=1e-7, bf16=3e-3, fp16=4e-4, how="emulated")  # "how" is matmul_errors' note: ignored
    rates = dict(fp32=50.0, bf16=670.0, fp16=650.0)
    assert P.fastest_within(float("inf"), errors, rates) == "bf16"
    assert P.fastest_within(1e-3, errors, {**rates, "bf16": None}) == "fp16"
    for budget, exc in (("1e-3", TypeError), (float("nan"), ValueError), (-1e-3, ValueError), (None, TypeError)):
        with pytest.raises(exc, match="budget"):
            P.fastest_within(budget, errors, rates)
    with pytest.raises(TypeError, match="errors must be a dict"):
        P.fastest_within(1e-3, [1e-7], rates)
    with pytest.raises(TypeError, match="rates must be a dict"):
        P.fastest_within(1e-3, errors, None)
    with pytest.raises(ValueError, match=r"errors\['bf16'\]"):
        P.fastest_within(1e-3, {**errors, "bf16": float("nan")}, rates)
    with pytest.raises(TypeError, match=r"errors\['fp16'\]"):
        P.fastest_within(1e-3, {**errors, "fp16": "small"}, rates)
    with pytest.raises(ValueError, match=r"rates\['fp32'\]"):
        P.fastest_within(1e-3, errors, {**rates, "fp32": -50.0})


# ------------------------------------------------------------------------------------------ hints
@pytest.mark.parametrize("not_a_checker", [None, "check_largest_tile", 3, print])
def test_hint_and_show_solution_name_a_wrong_checker(not_a_checker):
    from gpulab.exercises import hint, show_solution

    for fn in (hint, show_solution):
        with pytest.raises(TypeError, match=rf"{fn.__name__}\(checker\): checker must be an exercise checker"):
            fn(not_a_checker)
