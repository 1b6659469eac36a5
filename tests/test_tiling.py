"""gpulab.models.tiling: the seed's numbers (FP32, T = 32: 8 FLOP/B; 2N^3 loads against 2N^3/T; 2T^2 s bytes), the
general formulas against brute-force counts, the shared-memory limit, bad input."""

import random

import numpy as np
import pytest

from gpulab import figures
from gpulab.models import tiling

pytestmark = [pytest.mark.usefixtures("seed"), pytest.mark.cpu_same]  # seeded inputs; pure models


def test_seed_fp32_t32_is_8_flop_per_byte():
    assert tiling.tile_intensity(32, "fp32") == 8.0
    assert tiling.step_intensity(32, 32, 32, "fp32") == 8.0
    assert tiling.tile_intensity(32, "bf16") == 16.0


def test_seed_loads_2n3_against_2n3_over_t():
    for N in (64, 1024, 4096):
        assert tiling.input_loads(N) == 2 * N**3
        for T in (1, 16, 32, 64):  # T divides N: the seed's 2N^3 / T exactly
            assert tiling.input_loads(N, tile=T) * T == 2 * N**3


def test_seed_footprint_2t2s():
    assert tiling.footprint_bytes(32, "fp32") == 2 * 32**2 * 4 == 8192
    assert tiling.footprint_bytes(128, "bf16", stages=3) == 3 * 2 * 128**2 * 2


def _brute_loads(M, N, K, BM, BN):
    """Count the elements every output tile loads, tile by tile (masked edges load only real elements)."""
    total = 0
    for i0 in range(0, M, BM):
        for j0 in range(0, N, BN):
            rows, cols = min(BM, M - i0), min(BN, N - j0)
            total += rows * K + K * cols
    return total


def test_input_loads_against_a_tile_by_tile_count(seed):
    rng = random.Random(seed)
    for _ in range(50):
        M, N, K = rng.randrange(1, 300), rng.randrange(1, 300), rng.randrange(1, 300)
        BM, BN = rng.choice([1, 16, 32, 64]), rng.choice([1, 16, 32, 128])
        assert tiling.input_loads(M, N, K, tile=(BM, BN)) == _brute_loads(M, N, K, BM, BN)
    assert tiling.input_loads(5, 7, 3) == 2 * 5 * 7 * 3 == tiling.input_loads(5, 7, 3, tile=1)


def test_step_intensity_by_hand_and_bk_cancels(seed):
    # 128 x 128 x 32 in bf16: 2 x 128 x 128 x 32 = 1,048,576 FLOPs over (128 x 32 + 32 x 128) x 2 = 16,384 bytes
    assert tiling.step_intensity(128, 128, 32, 2) == 64.0
    # 64 x 128 x 16 in fp32: 262,144 FLOPs over (1024 + 2048) x 4 = 12,288 bytes = 21 1/3 FLOP/B
    assert tiling.step_intensity(64, 128, 16, 4) == pytest.approx(64 / 3)
    # 16 x 16 x 64 in fp8: 32,768 FLOPs over 2048 bytes
    assert tiling.step_intensity(16, 16, 64, 1) == 16.0
    rng = random.Random(seed)
    for _ in range(50):  # BK is in both the FLOPs and the bytes of a step: it cancels
        BM, BN = (2 ** rng.randrange(4, 9) for _ in range(2))
        s = rng.choice([1, 2, 4])
        assert tiling.step_intensity(BM, BN, 16, s) == pytest.approx(tiling.step_intensity(BM, BN, 256, s))


def test_shared_memory_limit():
    assert tiling.shared_memory_bytes("H200") == 228 * 1024
    assert tiling.fits(tiling.footprint_bytes(128, "bf16", stages=3), "H200")  # 192 KiB
    assert not tiling.fits(tiling.footprint_bytes(256, "bf16"), "H200")  # 256 KiB
    assert tiling.largest_square_tile("fp32", "H200") == 128  # 2 * 128^2 * 4 = 128 KiB; 256 would be 512 KiB
    assert tiling.largest_square_tile("bf16", "H200", stages=4) == 64
    assert tiling.largest_square_tile("fp32", "T4") == 64


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: tiling.tile_intensity(0), "T"),
        (lambda: tiling.tile_intensity(32, "fp64"), "dtype"),
        (lambda: tiling.tile_intensity(32, 0), "dtype"),
        (lambda: tiling.input_loads(0), "M"),
        (lambda: tiling.input_loads(8, tile=(0, 8)), "tile rows"),
        (lambda: tiling.footprint_bytes(32, stages=0), "stages"),
        (lambda: tiling.step_intensity(32, 32, -1), "BK"),
        (lambda: tiling.shared_memory_bytes("Seed accelerator"), "gpu"),
        (lambda: tiling.fits(0, "H200"), "footprint"),
        (lambda: tiling.input_loads(64, tile=32.0), "tile"),
        (lambda: tiling.input_loads(64, tile=(32, 32, 32)), "tile"),
        (lambda: tiling.input_loads(64, tile="32"), "tile"),
        (lambda: tiling.input_loads(64, tile=(32, 0.5)), "tile columns"),
        (lambda: tiling.tile_intensity(32.0), "T"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    with pytest.raises((TypeError, ValueError), match=word):
        call()


def test_numpy_ints_are_ints():
    assert tiling.input_loads(np.int64(64), tile=np.int64(32)) == 2 * 64**3 // 32
    assert tiling.input_loads(64, tile=(np.int32(32), np.int64(16))) == 4 * 64 * 64 + 2 * 64 * 64
    assert tiling.tile_intensity(np.int64(32), "fp32") == 8.0 and tiling.tile_intensity(32, np.int64(2)) == 16.0
    assert tiling.footprint_bytes(np.int64(32), "bf16", stages=np.int8(2)) == 2 * 2 * 32 * 32 * 2


def test_tile_explorer_slider_changes_the_figure():
    ex = figures.lesson07.TileExplorer(T=32, dtype="fp32", gpu="H200")
    title = ex.live.fig.layout.title.text
    assert "fits" in title and "NOT" not in title
    ex.T.value = 256  # 512 KiB of fp32 tiles
    assert ex.live.fig.layout.title.text != title and "does NOT fit" in ex.live.fig.layout.title.text
    assert list(ex.live.fig.data[3].x) == [256]
