"""sin(x)^2 + cos(x)^2: the five-kernel chain, the fused kernel and torch eager against float64, on seeded random
inputs (fresh each run, the seed in a failure's report) of awkward sizes, outputs poisoned with NaN before every
launch; never compared with == 1."""

import pytest
import torch

import gpulab
from gpulab.kernels import sincos as S

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [1, 17, 1000, 1793] if not gpulab.ON_GPU else [1, 17, 1000, 1793, 2**20 + 3]
# absolute tolerances against the float64 result (about 1): fused rounds once from fp32 registers; unfused
# and eager round sin, cos and both squares to the dtype as well, so they get a few ulps of 1.
FUSED_TOL = {torch.float32: 1e-6, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
UNFUSED_TOL = {torch.float32: 1e-6, torch.float16: 4 * 2.0**-10, torch.bfloat16: 4 * 2.0**-7}
FAST_TOL = 1e-4  # approximate sin/cos (GPU only); the suite prints the measured error
pytestmark = pytest.mark.usefixtures("seed")


@pytest.fixture
def poisoned(monkeypatch):
    """Every torch.empty_like the launchers call returns NaNs, so an element left unwritten fails."""
    real = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: real(t, **kw).fill_(float("nan")))


def _rand(n, dtype, scale=3.0):
    return (torch.randn(n, dtype=torch.float64) * scale).to(dtype).to(gpulab.DEVICE)  # seeded by the seed fixture


def _check(got, x, tol, repeat=1):
    ref = S.sincos_ref(x, repeat).cpu()
    got64 = got.double().cpu()
    assert got.dtype == x.dtype and got.shape == x.shape
    assert not torch.isnan(got64).any(), "an element was left unwritten (NaN poison)"
    err = (got64 - ref).abs()
    assert err.max() <= tol, f"max abs error {err.max().item():.3g} at index {err.argmax().item()} > {tol:.3g}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_fused_matches_float64(n, dtype, poisoned):
    x = _rand(n, dtype)
    _check(S.sincos(x), x, FUSED_TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_unfused_matches_float64(n, dtype, poisoned):
    x = _rand(n, dtype)
    _check(S.sincos_unfused(x, block=256), x, UNFUSED_TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_eager_matches_float64(dtype):
    x = _rand(1793, dtype)
    _check(S.sincos_eager(x), x, UNFUSED_TOL[dtype])


@pytest.mark.parametrize("block", [16, 128, 2048])
def test_fused_any_block_and_shape(block, poisoned):
    x = _rand(1793, torch.float32).reshape(1, 1793)
    _check(S.sincos(x, block=block), x, FUSED_TOL[torch.float32])


def test_fp16_fused_is_closer_than_unfused():
    """The lesson's explanation: unfused rounds each intermediate to fp16, fused keeps fp32 registers."""
    x = _rand(4097, torch.float16)
    ref = S.sincos_ref(x).cpu()
    fused, unfused = S.sincos(x).double().cpu(), S.sincos_unfused(x).double().cpu()
    assert (fused != unfused).any()
    assert (fused - ref).abs().mean() < (unfused - ref).abs().mean()


def test_repeat_chain(poisoned):
    x = _rand(1000, torch.float32)
    _check(S.sincos(x, repeat=3), x, 3 * FUSED_TOL[torch.float32], repeat=3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_fused_shared_reduction_matches_float64(n, dtype, poisoned):
    x = _rand(n, dtype)
    _check(S.sincos(x, shared=True), x, FUSED_TOL[dtype])


SHARED_SIN_COS_TOL = 1.5e-7  # absolute, against float64 sin and cos; measured about 7.4e-8 on |x| <= 8192


def test_shared_reduction_gives_sin_and_cos_in_every_quadrant(poisoned):
    # s^2 + c^2 would hide a swapped or wrongly signed pair: check sin and cos themselves, across all quadrants,
    # near multiples of pi/2 and up to the fast path's limit 8192, and both signs
    k = torch.arange(-20, 21, dtype=torch.float64) * (torch.pi / 2)
    x = torch.cat(
        [
            torch.randn(3000, dtype=torch.float64) * 5,
            (torch.rand(3000, dtype=torch.float64) * 2 - 1) * S.SHARED_MAX_ABS,
            k,
            k + 1e-3,
            k - 1e-3,
            torch.tensor([0.0, -0.0, S.SHARED_MAX_ABS, -S.SHARED_MAX_ABS]),
        ]
    )
    x = x.float().to(gpulab.DEVICE)
    s, c = S.sin_cos_parts(x, shared=True)
    x64 = x.double().cpu()
    for name, got, ref in (("sin", s, torch.sin(x64)), ("cos", c, torch.cos(x64))):
        err = (got.double().cpu() - ref).abs()
        assert err.max() <= SHARED_SIN_COS_TOL, (
            f"{name}: max abs error {err.max().item():.3g} at x = {x64[err.argmax()].item()!r}"
        )


def test_shared_reduction_falls_back_for_large_and_special_inputs(poisoned):
    # a block with any |x| > SHARED_MAX_ABS takes tl.sin/tl.cos (exact reduction); inf and NaN give NaN
    x = torch.tensor([1e5, -3e7, 123456.7, 0.5], device=gpulab.DEVICE)
    s, c = S.sin_cos_parts(x, shared=True)
    s0, c0 = S.sin_cos_parts(x, shared=False)
    assert torch.equal(s, s0) and torch.equal(c, c0)
    assert (s.double().cpu() - torch.sin(x.double().cpu())).abs().max() < 1e-6
    x = torch.tensor([float("inf"), float("nan"), 1.0], device=gpulab.DEVICE)
    y = S.sincos(x, shared=True).cpu()
    assert torch.isnan(y[:2]).all() and abs(y[2].item() - 1.0) < 1e-6


def test_fast_math():
    x = _rand(1793, torch.float32)
    if gpulab.ON_GPU:
        assert S.FAST_MATH_AVAILABLE
        _check(S.sincos(x, fast=True), x, FAST_TOL)
    else:  # the interpreter cannot run libdevice's fast_sinf: fast=True falls back to tl.sin/tl.cos
        assert not S.FAST_MATH_AVAILABLE
        assert torch.equal(S.sincos(x, fast=True), S.sincos(x))


def test_empty_input():
    x = torch.empty(0, device=gpulab.DEVICE)
    assert S.sincos(x).numel() == 0 and S.sincos_unfused(x).numel() == 0


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda x: S.sincos(x.to(torch.int32)), "x"),
        (lambda x: S.sincos(x.reshape(2, -1).t()), "x"),
        (lambda x: S.sincos(x.tolist()), "x"),
        (lambda x: S.sincos(x, block=1000), "block"),
        (lambda x: S.sincos(x, num_warps=3), "num_warps"),
        (lambda x: S.sincos(x, repeat=0), "repeat"),
        (lambda x: S.sincos_unfused(x, block=8), "block"),
        (lambda x: S.sincos_unfused(x.double()), "x"),
    ],
)
def test_bad_input_names_argument(call, word):
    x = torch.randn(64, device=gpulab.DEVICE)
    with pytest.raises((TypeError, ValueError), match=word):
        call(x)


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="compiled-kernel metadata needs a GPU")
def test_compiled_metadata_has_registers():
    from gpulab.kernels.resources import kernel_resources

    x = torch.randn(2**20, device="cuda")
    _, k = S.sincos_launch(x)  # autotuned
    assert S.best_config() is not None and kernel_resources(k)["n_regs"] > 0
    _, k = S.sincos_launch(x, block=1024, num_warps=4)
    res = kernel_resources(k)
    assert res["n_regs"] > 0 and res["n_spills"] >= 0
    _, k = S.sincos_launch(x, block=16384, num_warps=4)  # 128 elements per thread instead of 8
    big = kernel_resources(k)
    assert big["n_regs"] >= res["n_regs"] or big["n_spills"] > 0


@pytest.mark.skipif(gpulab.ON_GPU, reason="the GPU branch in the interpreter (on a GPU the real one runs)")
def test_the_gpu_branch_tunes_from_tune_min_n_and_takes_the_first_config_below(monkeypatch, poisoned):
    """At n >= TUNE_MIN_N the shared autotuner times every candidate once (into a scratch output) and the launch
    takes the fastest, stored under the dtype, n's bucket, FAST, REPEAT and SHARED; below, the first, untimed."""
    from gpulab.kernels import _autotune

    from .gpu_branch import on_gpu_branch

    calls = on_gpu_branch(monkeypatch, S, winner=2)
    x = _rand(S.TUNE_MIN_N + 5, torch.float32)
    _check(S.sincos(x, shared=True), x, FUSED_TOL[torch.float32])
    assert len(calls) == len(S.AUTOTUNE_CONFIGS) and S.best_config() is S.AUTOTUNE_CONFIGS[2]
    assert _autotune.cached(("sincos", torch.float32, 2 * S.TUNE_MIN_N, False, 1, True)) is S.AUTOTUNE_CONFIGS[2]
    _check(S.sincos(x[: S.TUNE_MIN_N]), x[: S.TUNE_MIN_N], FUSED_TOL[torch.float32])  # shared=False: a new key
    assert len(calls) == 2 * len(S.AUTOTUNE_CONFIGS)
    small = _rand(1793, torch.float16)
    _check(S.sincos(small), small, FUSED_TOL[torch.float16])
    assert len(calls) == 2 * len(S.AUTOTUNE_CONFIGS) and S.best_config() is S.AUTOTUNE_CONFIGS[0]


def test_every_candidate_shape_has_its_sass_counted_for_every_form():
    """Lesson 04 reads the instructions a thread issues at the shape the autotuner chose (``issued_per_element``):
    a candidate without a count would fail there once it wins."""
    from gpulab.core import reference

    counted = {(r["variant"], r["block"], r["num_warps"]) for r in reference.sass()["rows"]}
    for cfg in S.AUTOTUNE_CONFIGS:
        for variant in ("precise", "shared", "fast"):
            assert (variant, cfg.kwargs["BLOCK"], cfg.num_warps) in counted, (variant, cfg)
