"""gpulab.models.fusion: byte accounting (the seed's exact numbers), the launch-overhead model, resource-pressure
helpers, the lesson's first widget, the suite's report, and the lesson 04 exercise checkers."""

import math

import numpy as np
import pytest
import torch

from gpulab import figures
from gpulab.bench import lesson04
from gpulab.exercises import ex04 as ex
from gpulab.models import fusion


@pytest.mark.parametrize("n", [1, 17, 1000, 1793, 2**28])
def test_seed_byte_accounting(n):
    assert fusion.element_transfers(n, fused=False) == 11 * n  # seed: 11n transfers unfused
    assert fusion.bytes_moved(n, torch.float32, fused=False) == 44 * n  # = 44n bytes in fp32
    assert fusion.element_transfers(n, fused=True) == 2 * n  # fused: 2n transfers
    assert fusion.bytes_moved(n, "fp32", fused=True) == 8 * n  # = 8n bytes


def test_bytes_generic_in_dtype():
    assert fusion.bytes_moved(10, torch.float16, False) == 220 and fusion.bytes_moved(10, "bf16", True) == 40
    assert fusion.bytes_moved(10, torch.float64, False) == 880 and fusion.bytes_moved(10, "fp8", True) == 20
    ops = (("exp", ("x",), ("t",)), ("mul", ("t", "w"), ("y",)))  # y = exp(x) * w
    assert fusion.element_transfers(5, False, ops) == 25 and fusion.launches(False, ops) == 2
    assert fusion.element_transfers(5, True, ops) == 15  # fused: read x and w, write y
    assert fusion.launches(False) == 5 and fusion.launches(True) == 1


@pytest.mark.parametrize(
    "ops, inputs, outputs",
    [
        ((("add", ("x", "y"), ("z",)),), ("x", "y"), ("z",)),  # x + y: 3n fused, not 2n
        ((("add", ("x", "x"), ("z",)),), ("x",), ("z",)),  # x + x reads x once
        ((("inc", ("x",), ("x",)),), ("x",), ("x",)),  # in place: read x, write x
        ((("mul", ("a", "b"), ("t",)), ("add", ("t", "c"), ("y",))), ("a", "b", "c"), ("y",)),  # a * b + c
        ((("sin", ("x",), ("s",)), ("cos", ("x",), ("c",))), ("x",), ("s", "c")),  # two outputs, one input
    ],
)
def test_fused_counts_distinct_inputs_and_outputs(ops, inputs, outputs):
    assert fusion.chain_arrays(ops) == (inputs, outputs)
    assert fusion.element_transfers(7, True, ops) == 7 * (len(inputs) + len(outputs))
    assert fusion.bytes_moved(7, "fp16", True, ops) == 2 * 7 * (len(inputs) + len(outputs))


def test_bad_arguments():
    with pytest.raises(ValueError, match="dtype"):
        fusion.bytes_moved(10, "fp33", True)
    assert fusion.bytes_moved(10, 4, True) == fusion.bytes_moved(10, "fp32", True)  # dtypes.itemsize: bytes as they are
    with pytest.raises(ValueError, match="dtype"):
        fusion.bytes_moved(10, 0, True)
    with pytest.raises(ValueError, match="n must"):
        fusion.bytes_moved(-1, "fp32", True)
    with pytest.raises(ValueError, match="overhead_us"):
        fusion.model_ms(10, overhead_us=-1)
    with pytest.raises(ValueError, match="bandwidth_tbps"):
        fusion.model_ms(10, bandwidth_tbps=0)


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: fusion.element_transfers(10, True, ()), "ops"),  # an empty chain moves nothing: an error
        (lambda: fusion.element_transfers(10, False, ()), "ops"),
        (lambda: fusion.launches(True, ()), "ops"),
        (lambda: fusion.element_transfers(10, True, (("add", 2, 1),)), "ops"),  # counts cannot say what is shared
        (lambda: fusion.element_transfers(10, True, (("store", ("x",), ()),)), "ops"),
        (lambda: fusion.element_transfers(10.0, True), "n"),
        (lambda: fusion.element_transfers(10, "no"), "fused"),  # a string is not False
        (lambda: fusion.launches("no"), "fused"),
        (lambda: fusion.crossover_n(bandwidth_tbps=-4.0), "bandwidth_tbps"),
        (lambda: fusion.crossover_n(bandwidth_tbps=0.0), "bandwidth_tbps"),
        (lambda: fusion.crossover_n(bandwidth_tbps=math.nan), "bandwidth_tbps"),
        (lambda: fusion.crossover_n(overhead_us=-5.0), "overhead_us"),
        (lambda: fusion.effective_tbps(10, 0.0), "time_ms"),
        (lambda: fusion.resident_warps(256, 4), "n_regs"),  # above the 255-register cap
        (lambda: fusion.resident_warps(0, 4), "n_regs"),
        (lambda: fusion.resident_warps(32, 33), "num_warps"),  # a block holds at most 1024 threads
        (lambda: fusion.resident_warps_shared(227 * 1024 + 1, 4), "shared_bytes"),  # above one block's limit
        (lambda: fusion.resident_warps_shared(-1, 4), "shared_bytes"),
        (lambda: fusion.resident_warps_shared(1024.0, 4), "shared_bytes"),
        (lambda: fusion.resident_warps_shared(1024, 33), "num_warps"),
        (lambda: fusion.elements_per_thread(0, 4), "block"),
        (lambda: fusion.elements_per_thread(1024, 0), "num_warps"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    with pytest.raises((TypeError, ValueError), match=word):
        call()


def test_numpy_ints_are_ints():
    assert fusion.element_transfers(np.int64(2**40), False) == 11 * 2**40
    assert fusion.resident_warps(np.int32(128), np.int64(4)) == 16


def test_model_time():
    n = 2**20
    # fused: 1 launch of 5 us = 0.005 ms, 8 x 2^20 = 8,388,608 bytes at 4 TB/s = 0.002097152 ms
    assert math.isclose(fusion.model_ms(n, "fp32", True, 5.0, 4.0), 0.007097152)
    # unfused: 5 launches = 0.025 ms, 44 x 2^20 = 46,137,344 bytes at 4 TB/s = 0.011534336 ms
    assert math.isclose(fusion.model_ms(n, "fp32", False, 5.0, 4.0), 0.036534336)
    # one launch (5 us) = 8 bytes per element at 4 TB/s (2 ps): n = 5e-6 / 2e-12 = 2.5e6
    assert math.isclose(fusion.crossover_n("fp32", True, 5.0, 4.0), 2.5e6)
    assert math.isclose(fusion.effective_tbps(2**28, 0.5), 4.294967296)  # 8 x 2^28 = 2^31 bytes in 0.5 ms
    # small n: fused saves launches (5x); large n: fused saves bytes (44/8 = 5.5x)
    assert math.isclose(
        fusion.model_ms(1, "fp32", False, 5, 4) / fusion.model_ms(1, "fp32", True, 5, 4), 5, rel_tol=1e-6
    )
    assert math.isclose(
        fusion.model_ms(2**40, "fp32", False, 5, 4) / fusion.model_ms(2**40, "fp32", True, 5, 4), 5.5, rel_tol=1e-6
    )


def test_resource_helpers():
    assert fusion.elements_per_thread(4096, 4) == 32 and fusion.elements_per_thread(16, 4) == 1
    assert fusion.resident_warps(32, 4) == 64  # register file not the limit
    assert fusion.resident_warps(128, 4) == 16  # 65536 / (128 * 128) = 4 blocks of 4 warps
    assert fusion.resident_warps(255, 8) == 8


def test_shared_memory_limits_residency_as_registers_do():
    # H200: 228 KiB = 233472 bytes per SM, 1 KiB reserved per block; counted by hand
    assert fusion.SHARED_PER_SM_BYTES == 233472
    assert fusion.resident_warps_shared(0, 4) == 64  # shared memory not the limit: the 64-warp cap
    assert fusion.resident_warps_shared(1024, 1) == 32  # 233472 // 2048 = 114 blocks, capped at 32 blocks
    assert fusion.resident_warps_shared(64 * 1024, 8) == 24  # 233472 // 66560 = 3 blocks of 8 warps
    assert fusion.resident_warps_shared(57 * 1024, 4) == 12  # 233472 // 59392 = 3 (4 without the reserved KiB)
    assert fusion.resident_warps_shared(128 * 1024, 8) == 8  # one block
    assert fusion.resident_warps_shared(227 * 1024, 1) == 1  # the most one block may use


def test_explorer_first_slider_changes_figure():
    e = figures.lesson04.LaunchModelExplorer(
        overhead_us=5.0, bandwidth_tbps=4.0, title="t", measured=[{"n": 1024, "method": "fused", "ms": 0.01}]
    )
    title, marker = e.live.fig.layout.title.text, list(e.live.fig.data[2].x)
    e.log2_n.value = 24
    assert e.live.fig.layout.title.text != title and list(e.live.fig.data[2].x) != marker
    line = list(e.live.fig.data[0].y)
    e.overhead.value = 20.0
    assert list(e.live.fig.data[0].y) != line
    assert "2^24" in e.live.fig.layout.title.text


def _fake_suite_data():
    rows = [
        {"method": m, "ms": t, "p20_ms": t, "p80_ms": t, "eff_tbps": fusion.effective_tbps(2**28, t), "bytes_model": 0}
        for m, t in [
            ("unfused", 3.0),
            ("fused", 0.55),
            ("fused fast", 0.54),
            ("eager", 2.7),
            ("compile", 0.56),
            ("naive fused", 1.07),
        ]
    ]
    sweep = [{"n": n, "method": m, "ms": 0.01} for n in (2**10, 2**12) for m in lesson04.METHODS]
    prow = {
        "study": "block",
        "block": 1024,
        "num_warps": 4,
        "repeat": 1,
        "ms": 0.6,
        "elements_per_thread": 8,
        "n_regs": 30,
        "n_spills": 0,
        "shared_bytes": 0,
        "resident_warps": 64,
    }
    acc = {
        "n": 2**24,
        "fast_math": True,
        "fp32_max_abs_error": {m: 1e-7 for m in lesson04.METHODS},
        "fp16": {"eager_fused_differ": 0.1, "eager_max_abs_error": 1e-3, "fused_max_abs_error": 5e-4},
        "bf16": {"eager_fused_differ": 0.2, "eager_max_abs_error": 1e-2, "fused_max_abs_error": 4e-3},
    }
    return {
        "n": 2**28,
        "dtype": "fp32",
        "copy_tbps": 4.28,
        "launch": {"triton_us": 2.0, "torch_us": 1.5, "triton_cpu_us": 10.0},
        "headline": rows,
        "best_config": {"BLOCK": 2048, "num_warps": 8},
        "best_config_fast": {"BLOCK": 1024, "num_warps": 4},
        "accuracy": acc,
        "sweep": sweep,
        "pressure": {"n": 2**28, "rows": [prow]},
    }


def test_report_formats_and_flags():
    data = _fake_suite_data()
    text = lesson04.report(data)
    r = lesson04.headline_ratios(data)
    assert math.isclose(r["fused"]["vs_compile"], 0.56 / 0.55)
    assert "target met" in text and "BELOW TARGET" not in text.split("naive")[0].split("fused fast")[0]
    assert (
        "gpulab's targets for the fused kernels: torch.compile ms / ours >= 1.0 and ours / copy bandwidth >= 0.9"
        in text
    )
    data["headline"][1]["ms"] = 1.0
    data["headline"][1]["eff_tbps"] = fusion.effective_tbps(2**28, 1.0)
    assert "BELOW TARGET" in lesson04.report(data)


def test_exercise_checkers():
    assert ex.check_sincos_bytes(ex.check_sincos_bytes.solution).ok
    assert not ex.check_sincos_bytes(lambda n, d, f: (2 if f else 10) * n * d.itemsize).ok
    assert not ex.check_sincos_bytes(lambda n, d, f: (2 if f else 11) * n * 4).ok
    assert ex.check_model_time_ms(ex.check_model_time_ms.solution).ok
    assert not ex.check_model_time_ms(lambda n, L, b, o, B: L * o + n * b / (B * 1e12) * 1e3).ok
    assert not ex.check_model_time_ms(lambda n, L, b, o, B: max(L * o * 1e-3, n * b / (B * 1e12) * 1e3)).ok

    def stub(*a):
        raise NotImplementedError

    assert not ex.check_model_time_ms(stub).attempted
