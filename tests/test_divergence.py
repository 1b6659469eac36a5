"""The divergence kernels (gpulab.kernels.divergence) against float64 references on seeded random inputs (fresh
each run, the seed in a failure's report) and awkward sizes, outputs poisoned before launch; the launchers' and
helpers' errors naming the argument; the model's predictions; the suite's pipeline driven with a fake timer in
interpreter mode."""

import numpy as np
import pytest
import torch

import gpulab  # first: it sets TRITON_INTERPRET=1 when there is no GPU  # isort: skip
import triton

from gpulab import figures
from gpulab.bench import lesson02
from gpulab.core.timing import Timing
from gpulab.kernels import divergence as dv
from gpulab.models import simt

SIZES = [1, 17, 1000, 1793]
K_A, K_B = 6, 3  # short chains keep the interpreter fast; the math is the same at any length
pytestmark = pytest.mark.usefixtures("seed")
TOL = 1e-5  # fp32 chains of contractions (|d/dx| <= 0.9 per step): errors stay a few ulp of O(1) values


def _x(n):
    return (torch.randn(n, dtype=torch.float64) * 3).float().to(gpulab.DEVICE)


def _close(got, ref):
    got, ref = got.double().cpu(), ref.double().cpu()
    assert got.shape == ref.shape
    assert not torch.isnan(got).any(), (
        f"NaN at index {torch.isnan(got).nonzero()[0].item()}: an element was not written"
    )
    err = (got - ref).abs()
    assert err.max().item() <= TOL, f"max error {err.max().item():.3g} at index {err.argmax().item()}"


@pytest.mark.parametrize("n", SIZES)
def test_paths(n):
    x = _x(n)
    _close(dv.path(x, "A", K_A, block=256), dv.path_a_ref(x, K_A))
    _close(dv.path(x, "B", K_B, block=256), dv.path_b_ref(x, K_B))
    assert not torch.allclose(dv.path_a_ref(x, K_A), dv.path_b_ref(x, K_A)), "the two paths must differ"


@pytest.mark.parametrize("n", SIZES)
def test_branch_where(n):
    x, take_a = _x(n), torch.rand(n, device=gpulab.DEVICE) < 0.5
    _close(dv.branch_where(x, take_a, K_A, K_B, block=128), dv.branch_where_ref(x, take_a, K_A, K_B))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("frac", [0.0, 0.4, 1.0])
def test_branch_uniform(n, frac):
    x, block = _x(n), 64
    flags = dv.block_flags(triton.cdiv(n, block), frac, device=gpulab.DEVICE)
    ref = dv.branch_uniform_ref(x, flags, K_A, K_B, block=block)
    _close(dv.branch_uniform(x, flags, K_A, K_B, block=block), ref)
    if frac == 1.0:
        _close(ref, dv.path_a_ref(x, K_A))


@pytest.mark.parametrize("n", SIZES)
def test_loop_cost(n, seed):
    x = _x(n)
    trips = torch.from_numpy(dv.mixed_trips(n, 0.2, 1, 9, seed=seed)).to(gpulab.DEVICE)
    _close(dv.loop_cost(x, trips, block=128), dv.loop_cost_ref(x, trips))
    sort = torch.sort(trips, descending=True, stable=True).indices
    _close(dv.loop_cost(x[sort], trips[sort], block=128), dv.loop_cost_ref(x, trips)[sort.cpu()])


def test_every_element_written_into_poisoned_output():
    n, block = 3 * 64 + 5, 64
    x, take_a = _x(n), torch.rand(n, device=gpulab.DEVICE) < 0.5
    trips = torch.randint(0, 5, (n,), dtype=torch.int32, device=gpulab.DEVICE)
    flags = dv.block_flags(triton.cdiv(n, block), 0.5, device=gpulab.DEVICE)
    grid = (triton.cdiv(n, block),)
    for launch, ref in [
        (lambda y: dv.path_kernel[grid](x, y, n, K=K_A, PATH_A=True, BLOCK=block), dv.path_a_ref(x, K_A)),
        (
            lambda y: dv.branch_where_kernel[grid](x, take_a.view(torch.uint8), y, n, K_A=K_A, K_B=K_B, BLOCK=block),
            dv.branch_where_ref(x, take_a, K_A, K_B),
        ),
        (
            lambda y: dv.branch_uniform_kernel[grid](x, flags.view(torch.uint8), y, n, K_A=K_A, K_B=K_B, BLOCK=block),
            dv.branch_uniform_ref(x, flags, K_A, K_B, block=block),
        ),
        (lambda y: dv.loop_cost_kernel[grid](x, trips, y, n, BLOCK=block), dv.loop_cost_ref(x, trips)),
    ]:
        y = torch.full((n + 7,), float("nan"), device=gpulab.DEVICE)
        launch(y)
        _close(y[:n], ref)
        assert torch.isnan(y[n:]).all(), "the mask must stop writes beyond n"


def test_launcher_errors_name_the_argument():
    x = _x(10)
    with pytest.raises(TypeError, match="x must have dtype"):
        dv.path(x.double())
    with pytest.raises(ValueError, match="which"):
        dv.path(x, "C")
    with pytest.raises(ValueError, match="take_a must have 10 entries"):
        dv.branch_where(x, torch.zeros(9, dtype=torch.bool, device=gpulab.DEVICE))
    with pytest.raises(TypeError, match="take_a must have dtype"):
        dv.branch_where(x, torch.zeros(10, device=gpulab.DEVICE))
    with pytest.raises(ValueError, match="block_takes_a must have 1 entries"):
        dv.branch_uniform(x, torch.zeros(2, dtype=torch.bool, device=gpulab.DEVICE), block=64)
    with pytest.raises(ValueError, match="trips must be >= 0"):
        dv.loop_cost(x, torch.full((10,), -1, dtype=torch.int32, device=gpulab.DEVICE))
    with pytest.raises(TypeError, match="trips must have dtype"):
        dv.loop_cost(x, torch.ones(10, dtype=torch.int64, device=gpulab.DEVICE))
    with pytest.raises(ValueError, match="k_a"):
        dv.branch_where(x, torch.zeros(10, dtype=torch.bool, device=gpulab.DEVICE), k_a=-1)
    with pytest.raises(ValueError, match="block"):
        dv.path(x, block=100)


BAD_HELPER_CALLS = [
    (lambda: dv.block_flags(-1, 0.5), "n_blocks"),
    (lambda: dv.block_flags(8.0, 0.5), "n_blocks"),
    (lambda: dv.block_flags(8, 1.5), "fraction_a"),
    (lambda: dv.block_flags(8, float("nan")), "fraction_a"),
    (lambda: dv.mixed_trips(-3, 0.1, 1, 9), "n"),
    (lambda: dv.mixed_trips(10, -0.1, 1, 9), "frac_expensive"),
    (lambda: dv.mixed_trips(10, 0.1, -1, 9), "cheap"),
    (lambda: dv.mixed_trips(10, 0.1, 1, 2**31), "expensive"),
    (lambda: dv.mixed_trips(10, 0.1, 1, 9, seed=-1), "seed"),
    (lambda: dv.predict_loop_ms(0.1, 1.1, 0, [1, 2], 4), "k_full"),
    (lambda: dv.predict_loop_ms(0.1, 1.1, 4, [1, 2], 0), "block"),
    (lambda: dv.predict_loop_ms(-0.1, 1.1, 4, [1, 2], 4), "t_zero_ms"),
    (lambda: dv.predict_loop_ms(0.1, float("inf"), 4, [1, 2], 4), "t_full_ms"),
    (lambda: dv.predict_loop_ms(0.1, 1.1, 4, [], 4), "trips"),
    (lambda: dv.predict_where_ms(float("nan"), 1.0), "t_a_ms"),
    (lambda: dv.predict_uniform_ms(2.0, 1.0, 1.25), "fraction_a"),
    (lambda: dv.path(torch.zeros(4, device=gpulab.DEVICE), k=True), "k"),
]


@pytest.mark.parametrize("call, name", BAD_HELPER_CALLS, ids=[name for _, name in BAD_HELPER_CALLS])
def test_helpers_name_the_bad_argument(call, name):
    with pytest.raises((TypeError, ValueError), match=rf"^{name} must"):
        call()


def test_helpers_accept_numpy_numbers():
    assert torch.equal(dv.block_flags(np.int64(8), np.float64(0.25)), dv.block_flags(8, 0.25))
    assert np.array_equal(
        dv.mixed_trips(np.int64(50), np.float32(0.5), np.int32(1), np.int64(9), seed=np.int64(3)),
        dv.mixed_trips(50, 0.5, 1, 9, seed=3),
    )
    trips = np.array([64] + [4] * 127, dtype=np.int32)
    assert dv.predict_loop_ms(np.float64(0.1), 1.1, np.int64(64), trips, np.int64(128)) == pytest.approx(1.1)


def test_inputs_and_predictions(seed):
    flags = dv.block_flags(8, 0.25)
    assert flags.sum().item() == 2 and flags.tolist() != [True, True] + [False] * 6  # spread, not bunched
    t = dv.mixed_trips(10_000, 0.1, 4, 64, seed=seed)
    assert set(np.unique(t).tolist()) == {4, 64} and 0.08 < (t == 64).mean() < 0.12
    assert dv.predict_where_ms(2.0, 1.0) == 3.0
    assert dv.predict_uniform_ms(2.0, 1.0, 0.25) == 1.25
    # one expensive element per block: every block pays 64 -> the full time; sorted: mostly cheap blocks
    trips = np.array(([64] + [4] * 127) * 128, dtype=np.int32)
    assert dv.predict_loop_ms(0.1, 1.1, 64, trips, 128) == pytest.approx(1.1)
    s = trips[np.argsort(-trips, kind="stable")]
    assert dv.predict_loop_ms(0.1, 1.1, 64, s, 128) == pytest.approx(0.1 + 1.0 * (64 + 127 * 4) / (128 * 64))


def test_suite_pipeline_with_a_fake_timer():
    calls = []

    def fake(fn):  # not a GPU time, nor this machine's: the k-th call takes k ms; only checks the pipeline
        fn()
        calls.append(1)
        d = float(len(calls))
        return Timing(d, d, d)

    data = lesson02._run(fake, gpulab.DEVICE, False, 700, 4, 2, 128, 1, 5, (0.0, 1.0), (0.25,))
    import json

    json.dumps(data)
    assert [r["fraction_a"] for r in data["uniform"]] == [0.0, 1.0]
    assert [r["layout"] for r in data["loop"]["rows"]] == ["interleaved", "sorted"]
    assert data["loop"]["rows"][1]["efficiency"] >= data["loop"]["rows"][0]["efficiency"]
    draw = dv.mixed_trips(700, 0.25, 1, 5)  # the suite's draw (seed 0): interleaved as drawn, sorted by cost
    steps = [r["block_steps"] for r in data["loop"]["rows"]]
    assert steps == [simt.loop(draw, 128).steps, simt.loop(draw[simt.group_by_cost(draw)], 128).steps]
    text = lesson02.report(data)
    assert "(a) tl.where" in text and "(b) uniform if" in text and "sorted" in text
    fig = figures.lesson02.variants_figure(data, "fake timer")
    assert len(fig.data) == 2 and len(fig.data[0].y) == len(simt.measured_rows(data)) == 2 + 2 + 2 + 2


@pytest.mark.skipif(gpulab.ON_GPU, reason="checks interpreter behaviour")
def test_suite_refuses_to_time_in_the_interpreter():
    from gpulab.core.timing import NoGPUTimingError

    with pytest.raises(NoGPUTimingError):
        lesson02.run(progress=False)


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU")
def test_large_sizes_on_gpu():
    n = 2**20 + 3
    x = _x(n)
    take_a = torch.rand(n, device=gpulab.DEVICE) < 0.5
    _close(dv.branch_where(x, take_a), dv.branch_where_ref(x, take_a))
    trips = torch.from_numpy(dv.mixed_trips(n, 0.01, 4, 64)).to(gpulab.DEVICE)
    _close(dv.loop_cost(x, trips), dv.loop_cost_ref(x, trips))
