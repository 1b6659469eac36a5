"""gpulab.models.waves: the seed's tile and wave numbers exactly, the model's invariants on random shapes, bad input."""

import math
import random

import numpy as np
import pytest

from gpulab import figures
from gpulab.core import hardware
from gpulab.models import waves

pytestmark = [pytest.mark.usefixtures("seed"), pytest.mark.cpu_same]  # seeded inputs; pure models


def test_seed_1792_is_98_tiles_in_one_wave():
    p = waves.wave_plan(1792, tile=(256, 128), sms=108)
    assert (p.tiles_m, p.tiles_n, p.tiles) == (7, 14, 98)
    assert p.waves == 1 and p.last_wave_tiles == 98
    assert p.tile_efficiency == 1.0 and p.wave_efficiency == pytest.approx(98 / 108)


def test_seed_1793_is_120_tiles_in_two_waves_the_second_with_12_busy():
    p = waves.wave_plan(1793, tile=(256, 128), sms=108)
    assert (p.tiles_m, p.tiles_n, p.tiles) == (8, 15, 120)
    assert p.waves == 2 and p.busy_per_wave() == [108, 12]
    assert p.last_wave_tiles == 12 and p.last_wave_occupancy == pytest.approx(12 / 108)
    assert p.wave_efficiency == pytest.approx(120 / 216)
    assert p.tile_efficiency == pytest.approx(1793**2 / (120 * 256 * 128))


def test_seed_defaults_and_a100_from_the_table():
    assert waves.SEED_TILE == (256, 128) and waves.SEED_SMS == 108
    assert waves.wave_plan(1793, gpu="A100 80GB SXM").slots == 108
    assert waves.wave_plan(1793, gpu=hardware.get("H200")).sms == 132


def test_invariants_on_random_shapes(seed):
    rng = random.Random(seed)
    for _ in range(300):
        M, N = rng.randrange(1, 20000), rng.randrange(1, 20000)
        tile = (2 ** rng.randrange(4, 9), 2 ** rng.randrange(4, 9))
        sms, bps = rng.randrange(1, 200), rng.randrange(1, 4)
        p = waves.wave_plan(M, N, tile, sms=sms, blocks_per_sm=bps)
        # the fewest tiles that cover the output: one fewer would leave rows or columns out
        assert (p.tiles_m - 1) * tile[0] < M <= p.tiles_m * tile[0] and (p.tiles_n - 1) * tile[
            1
        ] < N <= p.tiles_n * tile[1]
        assert (p.waves - 1) * p.slots < p.tiles <= p.waves * p.slots
        assert sum(p.busy_per_wave()) == p.tiles and len(p.busy_per_wave()) == p.waves
        assert 0 < p.last_wave_occupancy <= 1 and 0 < p.wave_efficiency <= 1 and 0 < p.tile_efficiency <= 1
        assert p.efficiency == pytest.approx(p.tile_efficiency * p.wave_efficiency)
        # an output that is a whole number of full waves of full tiles wastes nothing
        q = waves.wave_plan(tile[0] * p.slots, tile[1], tile, sms=sms, blocks_per_sm=bps)
        assert q.efficiency == 1.0 and q.waves == 1


def test_blocks_per_sm_widens_a_wave():
    assert waves.wave_plan(1793, tile=(256, 128), sms=108, blocks_per_sm=2).waves == 1


def test_sweep_and_predicted_rate():
    ns = [1792, 1793]
    assert waves.sweep(ns, sms=108, what="tiles") == [98, 120]
    assert waves.sweep(ns, sms=108, what="waves") == [1, 2]
    eff = waves.sweep(ns, sms=108)
    assert isinstance(eff, list) and eff[0] > eff[1]
    # 1793^2 useful of 120 tiles of 256 x 128 (0.8176), in 2 waves of 108 slots holding 120 (0.5556):
    # 600 x 1793^2 / (216 x 256 x 128) = 272.526 TFLOP/s
    assert waves.predicted_tflops(1793, 1793, 4096, 600.0, (256, 128), sms=108) == pytest.approx(272.52612643771704)
    assert eff == pytest.approx([1792**2 / (108 * 256 * 128), 1793**2 / (216 * 256 * 128)])  # 0.9074, 0.4542


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: waves.wave_plan(0, tile=(256, 128), sms=108), "M"),
        (lambda: waves.wave_plan(1793, -1, sms=108), "N"),
        (lambda: waves.wave_plan(1793, tile=(0, 128), sms=108), "tile_m"),
        (lambda: waves.wave_plan(1793, tile=(256,), sms=108), "tile"),
        (lambda: waves.wave_plan(1793, tile=(256, 128)), "sms"),
        (lambda: waves.wave_plan(1793, sms=108, gpu="H200"), "sms"),
        (lambda: waves.wave_plan(1793, sms=1.5), "sms"),
        (lambda: waves.wave_plan(1793, sms=108, blocks_per_sm=0), "blocks_per_sm"),
        (lambda: waves.wave_plan(1793.0, sms=108), "M"),
        (lambda: waves.wave_plan(1793, gpu="Seed accelerator"), "gpu"),
        (lambda: waves.sweep([1792], sms=108, what="nope"), "what"),
        (lambda: waves.predicted_tflops(1, 1, 0, 1.0, (16, 16), sms=1), "K"),
        (lambda: waves.predicted_tflops(1, 1, 1, -1.0, (16, 16), sms=1), "full_rate_tflops"),
        (lambda: waves.predicted_tflops(1, 1, 1, math.nan, (16, 16), sms=1), "full_rate_tflops"),
        (lambda: waves.predicted_tflops(1, 1, 1, math.inf, (16, 16), sms=1), "full_rate_tflops"),
        (lambda: waves.sweep([1792], sms=108, what="summary"), "what"),  # a method, not a number
        (lambda: waves.sweep([1792], sms=108, what="busy_per_wave"), "what"),
        (lambda: waves.sweep([1792], sms=108, what="__class__"), "what"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    with pytest.raises((TypeError, ValueError), match=word):
        call()


def test_numpy_ints_are_ints():
    p = waves.wave_plan(np.int64(1793), tile=(np.int32(256), np.int64(128)), sms=np.int64(108))
    assert p == waves.wave_plan(1793, tile=(256, 128), sms=108) and type(p.M) is int and type(p.sms) is int
    assert waves.predicted_tflops(np.int64(1792), 1792, np.int16(64), 100.0, (256, 128), sms=108) == pytest.approx(
        100.0 * 98 / 108
    )  # one full-area wave of 98 tiles on 108 SMs


def test_sweep_reads_fields_and_properties():
    assert waves.sweep([1792, 1793], sms=108, what="tiles") == [98, 120]
    assert waves.sweep([1792, 1793], sms=108, what="M") == [1792, 1793]  # a field, not only properties
    assert "summary" not in waves.QUANTITIES and "efficiency" in waves.QUANTITIES


def test_unknown_gpu_raises_key_error():
    with pytest.raises(KeyError):
        waves.wave_plan(1793, gpu="Voodoo 3")


def test_wave_explorer_slider_changes_the_figure():
    ex = figures.lesson07.WaveExplorer(n=1792, tile=(256, 128), sms=108)
    assert ex.plan.tiles == 98 and ex.plan.waves == 1
    title = ex.live.fig.layout.title.text
    ex.n.value = 1793
    assert ex.plan.tiles == 120 and list(ex.live.fig.data[3].y) == [108, 12]
    assert ex.live.fig.layout.title.text != title and list(ex.live.fig.data[2].x) == [1793]
    for tr in ex.live.fig.data:
        assert isinstance(tr.x, (list, tuple)) and len(tr.x) == len(tr.y) > 0


def test_cdiv_counts_pieces_and_refuses_what_is_not_a_size():
    assert [waves.cdiv(a, 4) for a in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]
    assert waves.cdiv(np.int64(1793), np.int32(128)) == 15 and waves.cdiv(2**70 + 1, 2**70) == 2
    for a, b, error, named in [
        (-5, 4, ValueError, "a must be >= 0"),
        (5, -4, ValueError, "b must be >= 1"),
        (5, 0, ValueError, "b must be >= 1"),
        (5.0, 4, TypeError, "a must be an integer"),
        (5, 2.5, TypeError, "b must be an integer"),
        (True, 4, TypeError, "a must be an integer"),
        ("5", 4, TypeError, "a must be an integer"),
    ]:
        with pytest.raises(error, match=named):
            waves.cdiv(a, b)
