"""The lesson08 suite's shared definitions (shapes, FLOPs) and its autotune report's table, without a GPU."""
import pytest

import gpulab
from gpulab.bench import lesson08
from gpulab.timing import NoGPUTimingError


def test_setting_shape_and_flops_by_hand():
    assert lesson08.setting_shape(1024, 128) == (16, 16, 1024, 128)  # B*L = 16384 tokens, H*d = 2048
    assert lesson08.setting_shape(16384, 64) == (1, 32, 16384, 64)
    # 4 * B * H * L^2 * d = 4 * 16 * 16 * 2^20 * 2^7 = 2^37; causal half; backward 2.5x
    assert lesson08.setting_flops(1024, 128, False) == 2.0**37
    assert lesson08.setting_flops(1024, 128, True) == 2.0**36
    assert lesson08.setting_flops(1024, 128, True, backward=True) == 2.5 * 2.0**36


def test_autotune_report_text_on_made_up_rows():
    rows = [{"d": 128, "L": 1024, "B": 16, "H": 16, "causal": True,
             "fixed_tflops": {"128x64 w4 s2": 301.4, "64x64 w4 s3": "OutOfResources: shared memory"},
             "autotuned_tflops": 299.6, "autotuned_config": "128x64 w4 s2", "sdpa_flash_tflops": 350.2}]
    text = lesson08.autotune_report_text(rows)
    assert "d=128 L= 1024 causal=True : 128x64 w4 s2 301, 64x64 w4 s3 failed; autotuned 300 [128x64 w4 s2]; " \
           "SDPA flash 350" in text


@pytest.mark.skipif(gpulab.ON_GPU, reason="interpreter-mode refusal")
def test_autotune_report_refuses_without_a_gpu():
    with pytest.raises(NoGPUTimingError):
        lesson08.autotune_report(progress=False)
