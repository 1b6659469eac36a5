"""Strided copy and row/column matrix copy: exact against torch on seeded random inputs (fresh each run, the seed
in a failure's report) of awkward sizes, every dtype, outputs poisoned with NaN before the launch; bad input
names the argument."""

import pytest
import torch

import gpulab
from gpulab.kernels import strided as S

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [1, 17, 1000, 1793]
STRIDES = [1, 2, 3, 7, 64, 5000]  # 5000 > every size: one output element
pytestmark = pytest.mark.usefixtures("seed")


def _rand(shape, dtype):
    return torch.randn(shape, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)  # seeded by the seed fixture


def _assert_exact(got, ref):
    got, ref = got.cpu(), ref.cpu()
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.dtype, ref.shape)
    assert not got.double().isnan().any(), "an element was left unwritten (NaN poison)"
    bad = (got != ref).nonzero()
    assert not len(bad), f"{len(bad)} elements differ, first at {bad[0].tolist()}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_strided_copy_matches_torch(n, dtype, poisoned):
    x = _rand(n, dtype)
    for stride in STRIDES:
        _assert_exact(S.strided_copy(x, stride), x[::stride])


@pytest.mark.parametrize("block, num_warps", [(16, 1), (128, 4), (2048, 8)])
def test_strided_copy_any_block(block, num_warps, poisoned):
    x = _rand(1793, torch.float32)
    for stride in (1, 3):
        _assert_exact(S.strided_copy(x, stride, block=block, num_warps=num_warps), x[::stride])


def test_strided_copy_from_misaligned_base(poisoned):
    """A view starting one element in is still 1-D contiguous; the copy must not assume 16-byte alignment."""
    x = _rand(1001, torch.float16)
    for offset in (1, 3):
        _assert_exact(S.strided_copy(x[offset:], 1), x[offset:])
        _assert_exact(S.strided_copy(x[offset:], 2), x[offset::2])


def test_reference_and_torch_baseline():
    x = _rand(1000, torch.float32)
    y = torch.empty(334, device=gpulab.DEVICE)
    _assert_exact(S.strided_copy_ref(x, 3), x[::3])
    _assert_exact(S.strided_copy_torch(x, y, 3), x[::3])


def test_empty_input():
    assert S.strided_copy(torch.empty(0, device=gpulab.DEVICE), 4).numel() == 0
    assert S.matrix_copy(torch.empty(0, 5, device=gpulab.DEVICE), "columns").shape == (0, 5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (17, 100), (100, 17), (33, 65)])
@pytest.mark.parametrize("by", S.BY)
def test_matrix_copy_matches_torch(shape, by, dtype, poisoned):
    a = _rand(shape, dtype)
    b = S.matrix_copy(a, by)
    assert b.is_contiguous()
    _assert_exact(b, a)


@pytest.mark.parametrize("by", S.BY)
def test_matrix_copy_of_a_transposed_view(by, poisoned):
    """Any strides: walking the rows of a.t() walks the columns of a's memory."""
    a = _rand((40, 70), torch.float32)
    _assert_exact(S.matrix_copy(a.t(), by), a.t().contiguous())
    _assert_exact(S.matrix_copy(a[:, ::3], by, block=16), a[:, ::3].contiguous())
    _assert_exact(S.matrix_copy_ref(a.t()), a.t().contiguous())


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda x: S.strided_copy(x.reshape(4, -1), 1), "x"),
        (lambda x: S.strided_copy(x.to(torch.int32), 1), "x"),
        (lambda x: S.strided_copy(x.tolist(), 1), "x"),
        (lambda x: S.strided_copy(x[::2], 1), "x"),
        (lambda x: S.strided_copy(x, 0), "stride"),
        (lambda x: S.strided_copy(x, 2.0), "stride"),
        (lambda x: S.strided_copy(x, True), "stride"),
        (lambda x: S.strided_copy(x, 1, block=1000), "block"),
        (lambda x: S.strided_copy(x, 1, num_warps=3), "num_warps"),
        (lambda x: S.strided_copy_ref(x, -1), "stride"),
        (lambda x: S.matrix_copy(x, "rows"), "a"),
        (lambda x: S.matrix_copy(x.reshape(4, -1).double(), "rows"), "a"),
        (lambda x: S.matrix_copy(x.reshape(4, -1), "diagonal"), "by"),
        (lambda x: S.matrix_copy(x.reshape(4, -1), "rows", block=24), "block"),
    ],
)
def test_bad_input_names_argument(call, word):
    x = torch.randn(64, device=gpulab.DEVICE)
    with pytest.raises((TypeError, ValueError), match=word):
        call(x)


def test_strides_past_64_bits_and_launch_limits(poisoned):
    # any stride >= len(x) copies x[0] alone; Triton cannot take an int past 64 bits, so the launcher clamps it
    x = _rand(17, torch.float32)
    for stride in (17, 2**63, 2**64, 2**80):
        _assert_exact(S.strided_copy(x, stride), x[:1])
    with pytest.raises(ValueError, match="num_warps needs block"):  # the autotuner would silently ignore it
        S.strided_copy(x, 1, num_warps=8)
    # one program per column of a (1, 2^31) matrix: more programs than a CUDA grid holds (an expand: no memory)
    wide = torch.zeros(1, 1, dtype=torch.float16, device=gpulab.DEVICE).expand(1, 2**31)
    with pytest.raises(ValueError, match="a: .* grid limit"):
        S.matrix_copy(wide, "columns")


def test_elements_per_lane_is_the_compiled_layout():
    """The rule against Triton's own compile for sm_90 (TTGIR sizePerThread, PTX loads per thread): the
    coalescing counters' launch, a block too small for 16 bytes a lane, and 2-byte elements."""
    from gpulab.measure import targets

    variants = [(1024, 4, "fp32", False), (1024, 4, "fp32", True), (256, 4, "fp32", False), (4096, 8, "fp16", False)]
    for (block, warps, dtype, contiguous), got in zip(variants, targets.strided_layouts(variants)):
        itemsize = 4 if dtype == "fp32" else 2
        v = S.elements_per_lane(block, warps, itemsize)
        assert got["size_per_thread"] == [v], got
        per_thread = block // (32 * warps)  # elements a thread holds: v at a time
        bits = 8 * itemsize
        if contiguous:  # one vector load of v elements
            assert got["ptx"] == {
                f"ld.global.v{v}.b{bits}": per_thread // v,
                f"st.global.v{v}.b{bits}": per_thread // v,
            }
        else:  # one scalar load per element
            assert got["ptx"][f"ld.global.b{bits}"] == per_thread
    assert S.elements_per_lane(1024, 4, 4) == 4 and S.elements_per_lane(128, 4, 4) == 1
    assert S.elements_per_lane(4096, 4, 2) == 8 and S.elements_per_lane(512, 4, 2) == 4


@pytest.mark.parametrize(
    "kwargs, word",
    [({"block": 1000}, "block"), ({"num_warps": 3}, "num_warps"), ({"itemsize": 3}, "itemsize")],
)
def test_elements_per_lane_names_a_bad_argument(kwargs, word):
    with pytest.raises((TypeError, ValueError), match=word):
        S.elements_per_lane(**{"block": 1024, "num_warps": 4, "itemsize": 4, **kwargs})


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a GPU (device check, autotuning, a 4 GiB input)")
def test_gpu_only_paths():
    with pytest.raises(ValueError, match="x"):
        S.strided_copy(torch.randn(64), 1)  # a CPU tensor in GPU mode
    x = torch.randn(2**22, device="cuda")
    _assert_exact(S.strided_copy(x, 1), x)  # autotuned (n >= TUNE_MIN_N)
    assert S.best_config() is not None
    # int64 offsets: k * stride passes 2^31 elements
    big = torch.empty(2**31 + 2**20, dtype=torch.float16, device="cuda")
    big[:: 2**20] = torch.arange(2**11 + 1, device="cuda", dtype=torch.float16)
    _assert_exact(S.strided_copy(big, 2**20), big[:: 2**20])


@pytest.mark.skipif(gpulab.ON_GPU, reason="the GPU branch in the interpreter (on a GPU the real one runs)")
def test_the_gpu_branch_tunes_from_tune_min_n_per_stride_and_takes_the_first_config_below(monkeypatch, poisoned):
    """At TUNE_MIN_N outputs or more the shared autotuner times every candidate once and the copy takes the fastest,
    stored under the dtype, the outputs' bucket and the stride; below, the first config, untimed."""
    from gpulab.kernels import _autotune

    from .gpu_branch import on_gpu_branch

    calls = on_gpu_branch(monkeypatch, S, winner=1)
    x = _rand(2 * S.TUNE_MIN_N + 3, torch.float16)
    _assert_exact(S.strided_copy(x, 2), x[::2])  # TUNE_MIN_N + 2 outputs
    want = S.AUTOTUNE_CONFIGS[1]
    assert len(calls) == len(S.AUTOTUNE_CONFIGS)
    assert S.best_config() == {"BLOCK": want.kwargs["BLOCK"], "num_warps": want.num_warps}
    assert _autotune.cached(("strided_copy", torch.float16, 2 * S.TUNE_MIN_N, 2)) is S.AUTOTUNE_CONFIGS[1]
    _assert_exact(S.strided_copy(x, 3), x[::3])  # fewer than TUNE_MIN_N outputs: the first config, untimed
    assert len(calls) == len(S.AUTOTUNE_CONFIGS)
    first = S.AUTOTUNE_CONFIGS[0]
    assert S.best_config() == {"BLOCK": first.kwargs["BLOCK"], "num_warps": first.num_warps}
