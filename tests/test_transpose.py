"""Transpose, naive and tiled: exact against a.t() on seeded random inputs (fresh each run, the seed in a
failure's report; any M, N; every dtype; any strides), outputs poisoned with NaN before the launch; bad input
names the argument."""

import random

import pytest
import torch

import gpulab
from gpulab.kernels import transpose as T

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(1, 1), (1, 17), (17, 1), (33, 65), (64, 64), (100, 37)]
pytestmark = pytest.mark.usefixtures("seed")


def _rand(shape, dtype):
    return torch.randn(shape, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)


def _assert_transpose(got, a):
    ref = a.t().cpu()
    got = got.cpu()
    assert got.dtype == a.dtype and got.shape == ref.shape, (got.dtype, tuple(got.shape))
    assert got.is_contiguous()
    assert not got.double().isnan().any(), "an element was left unwritten (NaN poison)"
    bad = (got != ref).nonzero()
    assert not len(bad), f"{len(bad)} elements differ, first b{bad[0].tolist()}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES + ["random"])
def test_tiled_matches_torch(shape, dtype, poisoned):
    if shape == "random":
        shape = (random.randrange(2, 90), random.randrange(2, 90))  # seeded by the seed fixture
    a = _rand(shape, dtype)
    _assert_transpose(T.transpose(a), a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_naive_matches_torch(shape, dtype, poisoned):
    a = _rand(shape, dtype)
    _assert_transpose(T.transpose_naive(a), a)


@pytest.mark.parametrize("block_m, block_n, num_warps", [(16, 64, 4), (64, 16, 2), (8, 8, 1), (32, 128, 8)])
def test_tiled_any_tile(block_m, block_n, num_warps, poisoned):
    a = _rand((70, 45), torch.float32)
    _assert_transpose(T.transpose(a, block_m, block_n, num_warps), a)


def test_naive_any_block(poisoned):
    a = _rand((9, 100), torch.float16)
    _assert_transpose(T.transpose_naive(a, block=16), a)


def test_any_strides(poisoned):
    a = _rand((40, 70), torch.float32)
    for view in (a.t(), a[:, ::3], a[::2]):
        _assert_transpose(T.transpose(view), view)
        _assert_transpose(T.transpose_naive(view), view)


def test_torch_baseline_and_reference():
    a = _rand((33, 65), torch.bfloat16)
    _assert_transpose(T.transpose_torch(a), a)
    _assert_transpose(T.transpose_ref(a), a)


def test_empty():
    a = torch.empty(0, 7, device=gpulab.DEVICE)
    assert T.transpose(a).shape == (7, 0) and T.transpose_naive(a).shape == (7, 0)


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda a: T.transpose(a.flatten()), "a"),
        (lambda a: T.transpose(a.double()), "a"),
        (lambda a: T.transpose(a.tolist()), "a"),
        (lambda a: T.transpose(a, block_m=32), "block_m and block_n"),
        (lambda a: T.transpose(a, block_m=48, block_n=32), "block_m"),
        (lambda a: T.transpose(a, block_m=32, block_n=512), "block_n"),
        (lambda a: T.transpose(a, num_warps=5), "num_warps"),
        (lambda a: T.transpose_naive(a.to(torch.int16)), "a"),
        (lambda a: T.transpose_naive(a, block=3), "block"),
    ],
)
def test_bad_input_names_argument(call, word):
    a = torch.randn(8, 8, device=gpulab.DEVICE)
    with pytest.raises((TypeError, ValueError), match=word):
        call(a)


def test_launch_limits_and_num_warps_alone():
    a = torch.randn(8, 8, device=gpulab.DEVICE)
    with pytest.raises(ValueError, match="num_warps needs block_m and block_n"):  # the autotuner ignored it
        T.transpose(a, num_warps=8)
    # more programs than a CUDA grid holds (expanded views: no memory): a clear error before any allocation
    tall = torch.zeros(1, 1, dtype=torch.float16, device=gpulab.DEVICE).expand(2**31, 1)
    with pytest.raises(ValueError, match="a: .* grid limit"):
        T.transpose_naive(tall)
    big = torch.zeros(1, 1, dtype=torch.float16, device=gpulab.DEVICE).expand(2**16, 2**15 + 1)
    with pytest.raises(ValueError, match="a: .* grid limit"):
        T.transpose(big, block_m=1, block_n=1)


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a GPU (autotuning, a 4 GiB input)")
def test_gpu_autotune_and_int64_offsets():
    a = _rand((1024, 1536), torch.float32)
    _assert_transpose(T.transpose(a), a)  # autotuned (M * N >= TUNE_MIN_ELEMENTS)
    assert T.best_config() is not None
    # past 2^31 elements: int64 offsets in both kernels
    a = torch.randn(2**16 + 3, 2**15 + 5, device="cuda", dtype=torch.float16)
    ref = a.t().contiguous()
    assert torch.equal(T.transpose(a), ref)
    assert torch.equal(T.transpose_naive(a), ref)


@pytest.mark.skipif(gpulab.ON_GPU, reason="the GPU branch in the interpreter (on a GPU the real one runs)")
def test_the_gpu_branch_tunes_from_tune_min_elements_and_takes_the_first_tile_below(monkeypatch, poisoned):
    """At TUNE_MIN_ELEMENTS or more the shared autotuner times every candidate tile once and the transpose takes the
    fastest, stored under the dtype and M's and N's buckets; below, the first tile, untimed."""
    from gpulab.kernels import _autotune

    from .gpu_branch import on_gpu_branch

    calls = on_gpu_branch(monkeypatch, T, winner=3)
    a = _rand((1000, T.TUNE_MIN_ELEMENTS // 1000 + 1), torch.bfloat16)
    _assert_transpose(T.transpose(a), a)
    want = T.AUTOTUNE_CONFIGS[3]
    assert len(calls) == len(T.AUTOTUNE_CONFIGS) and T.best_config() == {
        "BLOCK_M": want.kwargs["BLOCK_M"],
        "BLOCK_N": want.kwargs["BLOCK_N"],
        "num_warps": want.num_warps,
    }
    assert _autotune.cached(("transpose", torch.bfloat16, 1024, 2048)) is want
    small = _rand((33, 65), torch.float32)
    _assert_transpose(T.transpose(small), small)
    assert (
        len(calls) == len(T.AUTOTUNE_CONFIGS) and T.best_config()["BLOCK_M"] == T.AUTOTUNE_CONFIGS[0].kwargs["BLOCK_M"]
    )
