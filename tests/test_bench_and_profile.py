"""Timing honesty and the device profile: atomic writes, round trips, interpreter refusals."""

import json
import os

import pytest

import gpulab
from gpulab.core import reference
from gpulab.core import timing as bench
from gpulab.measure import device

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report


@pytest.mark.skipif(gpulab.ON_GPU, reason="interpreter-mode behaviour")
def test_interpreter_refuses_to_time():
    with pytest.raises(bench.NoGPUTimingError, match="needs a CUDA GPU"):
        bench.time_ms(lambda: None)
    with pytest.raises(bench.NoGPUTimingError, match="needs a CUDA GPU"):
        bench.time_ms(lambda: None, graph=True)
    with pytest.raises(bench.NoGPUTimingError, match="CUDA graph"):
        bench.capture_graph(lambda: None)
    with pytest.raises(bench.NoGPUTimingError):
        device.measure_copy_tbps()
    with pytest.raises(bench.NoGPUTimingError):
        device.measure_matmul_tflops("bf16", 64)


def _profile():
    return device.DeviceProfile(
        gpu="Test GPU",
        sms=7,
        compute_capability=[9, 0],
        l2_mb=1.0,
        copy_tbps=1.5,
        matmul_tflops={"fp32": 1.0, "fp8": None},
        provenance={"date": "2026-01-01"},
    )


def test_profile_round_trip_and_atomic_write(tmp_path, monkeypatch):
    from gpulab.core import settings

    monkeypatch.setattr(settings, "SETTINGS", settings.read({"GPULAB_CACHE_DIR": str(tmp_path)}))
    p = device.save_profile(_profile())
    assert p.parent == tmp_path and p.name == "profile-test-gpu.json"
    assert device.load_profile(gpu_name="Test GPU") == _profile()
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


def test_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "x.json"
    device.write_json_atomic(target, {"ok": 1})

    class Unserialisable:
        pass

    with pytest.raises(TypeError):
        device.write_json_atomic(target, {"bad": Unserialisable()})
    assert json.loads(target.read_text()) == {"ok": 1}
    assert sorted(os.listdir(tmp_path)) == ["x.json"]


def test_corrupt_profile_is_reported(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        device.load_profile(bad)
    assert device.load_profile(tmp_path / "missing.json") is None


def test_timing_rate():
    t = bench.Timing(median_ms=2.0, p20_ms=1.9, p80_ms=2.1)
    assert t.rate(8e9) == pytest.approx(4.0)  # 8 GB in 2 ms = 4 TB/s
    assert t.rate(8e9, unit=1e9) == pytest.approx(4000.0)


def test_reference_data_has_provenance():
    gpus = reference.available()
    assert "h200" in gpus, "the H200 reference data must be committed (python -m gpulab.bench --record)"
    data = reference.load("h200")
    prov = data["provenance"]
    for key in ("gpu", "driver", "torch", "triton", "date"):
        assert prov.get(key), f"reference provenance lacks {key}"
    assert "H200" in prov["gpu"] and "recorded on" in reference.label(data)
    prof = device.DeviceProfile.from_json(data["profile"])
    assert prof.copy_tbps > 0 and prof.matmul_tflops["bf16"] > 0
    assert len(data["roofline_points"]) >= 8
    with pytest.raises(FileNotFoundError, match="available"):
        reference.load("no-such-gpu")


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU")
def test_gpu_timing_is_positive_and_ordered():
    import torch

    x = torch.randn(2**24, device="cuda")
    t = bench.time_ms(lambda: x.mul_(1.0))
    assert 0 < t.p20_ms <= t.median_ms <= t.p80_ms
    tg = bench.time_ms(lambda: x.mul_(1.0), graph=True)
    assert 0 < tg.p20_ms <= tg.median_ms <= tg.p80_ms


@pytest.mark.gpu
@pytest.mark.skipif(not gpulab.ON_GPU, reason="needs a CUDA GPU")
def test_gpu_captured_graph_replays_the_calls():
    import torch

    x = torch.zeros(1000, device="cuda")
    g = bench.capture_graph(lambda: x.add_(1.0))  # one eager warm-up call, then one captured
    assert float(x[0]) == 1.0  # capture records, it does not run
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert float(x.min()) == float(x.max()) == 4.0


def test_profile_with_bad_numbers_is_rejected(tmp_path):
    p = tmp_path / "p.json"
    for bad in (
        '{"gpu": "g", "sms": 1, "compute_capability": [9, 0], "l2_mb": 1, "copy_tbps": "fast"}',
        '{"gpu": "g", "sms": 1, "compute_capability": [9, 0], "l2_mb": 1, "copy_tbps": NaN}',
        "[1, 2]",
        b"\xff\xfe{",
    ):
        p.write_bytes(bad if isinstance(bad, bytes) else bad.encode())
        with pytest.raises(ValueError, match="unreadable"):
            device.load_profile(p)


def test_widget_rejects_out_of_range_arguments():
    from gpulab.figures.lesson01 import InteractiveRoofline

    with pytest.raises(ValueError, match="flops must be a number in"):
        InteractiveRoofline(flops=1e16)
    with pytest.raises(ValueError, match="preset must be one of"):
        InteractiveRoofline(preset="NVIDIA H200")
    w = InteractiveRoofline(preset="H200", flops=1e15, bytes_moved=1e6)  # intensity 1e9: far right
    lo, hi = w.live.fig.layout.xaxis.range
    assert hi >= 9 and w.bound.limiter == "compute"


def test_autotune_setting_is_read_from_the_environment_and_checked():
    import subprocess
    import sys

    code = "import gpulab; print(gpulab.AUTOTUNE)"
    run = lambda v: subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,  # noqa: E731
        env={**os.environ, "GPULAB_AUTOTUNE": v},
    )
    assert run("").stdout.strip() == "full"
    assert run("First").stdout.strip() == "first"
    bad = run("fast")
    assert bad.returncode != 0 and "GPULAB_AUTOTUNE must be 'full' or 'first'" in bad.stderr


@pytest.mark.parametrize(
    "field, value",
    [
        ("sms", 0),
        ("sms", -5),
        ("sms", 7.0),
        ("sms", True),
        ("l2_mb", "big"),
        ("l2_mb", -1.0),
        ("l2_mb", float("inf")),
        ("compute_capability", None),
        ("compute_capability", [9]),
        ("compute_capability", [0, 0]),
        ("compute_capability", ["9", "0"]),
        ("gpu", ""),
        ("gpu", "  "),
        ("gpu", None),
    ],
)
def test_profile_field_out_of_range_is_rejected_naming_the_field(tmp_path, field, value):
    import json

    good = _profile().to_json()
    p = tmp_path / "p.json"
    p.write_text(json.dumps({**good, field: value}))
    with pytest.raises(ValueError, match=rf"unreadable \({field} must be"):
        device.load_profile(p)
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        device.DeviceProfile.from_json({**good, field: value})
    p.write_text(json.dumps(good))
    assert device.load_profile(p) == _profile()  # the same file with the field as measured loads
