"""gpulab.models.scaling: Chinchilla's compute-optimal ratio, a run's FLOPs (Kaplan's 6ND or a model's own count) and
its hours at an MFU, each against a count by hand."""

import pytest

from gpulab.models import scaling

pytestmark = pytest.mark.cpu_same  # pure arithmetic


def test_chinchillas_ratio_is_twenty_tokens_a_parameter():
    assert scaling.TOKENS_PER_PARAM == pytest.approx(1.4e12 / 70e9) == pytest.approx(20.0)
    assert scaling.compute_optimal_tokens(124_439_808) == pytest.approx(20 * 124_439_808)
    assert scaling.compute_optimal_tokens(70e9) == pytest.approx(1.4e12)


def test_training_flops_are_six_n_d_unless_a_model_counts_its_own():
    assert scaling.training_flops(1e9, 2e10) == pytest.approx(6 * 1e9 * 2e10)
    assert scaling.training_flops(1e9, 2e10, flops_per_token=7.5e9) == pytest.approx(7.5e9 * 2e10)
    # at the compute-optimal ratio the FLOPs grow as the square of the parameters
    grow = scaling.training_flops(1e10, scaling.compute_optimal_tokens(1e10)) / scaling.training_flops(
        1e9, scaling.compute_optimal_tokens(1e9)
    )
    assert grow == pytest.approx(100.0)


def test_run_hours_by_hand():
    # 1e18 FLOPs at half of 1000 TFLOP/s: 1e18 / 5e14 = 2000 s
    assert scaling.run_hours(1e18, 1000.0, 0.5) == pytest.approx(2000 / 3600)
    assert scaling.run_hours(1e18, 1000.0, 1.0) == pytest.approx(1000 / 3600)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: scaling.run_hours(1e18, 1000.0, 1.5), "mfu"),
        (lambda: scaling.run_hours(1e18, 1000.0, 0.0), "mfu"),
        (lambda: scaling.run_hours(1e18, -1.0, 0.5), "peak_tflops"),
        (lambda: scaling.run_hours(0.0, 1000.0, 0.5), "flops"),
        (lambda: scaling.training_flops(1e9, 0), "tokens"),
        (lambda: scaling.training_flops(1e9, 1e9, flops_per_token=float("inf")), "flops_per_token"),
        (lambda: scaling.compute_optimal_tokens(-5), "n_params"),
    ],
)
def test_refuses_what_is_no_run(call, name):
    with pytest.raises(ValueError, match=name):
        call()
