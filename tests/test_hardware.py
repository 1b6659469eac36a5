"""The GPU table: every GPU the issue names, every number positive and sourced."""
import pytest

from gpulab import dtypes, hardware

REQUIRED = ["T4", "L4", "A10", "A100 40GB SXM", "A100 80GB SXM", "H100 SXM", "H100 PCIe", "H200", "RTX 4090",
            "Seed accelerator"]


@pytest.mark.parametrize("name", REQUIRED)
def test_entry_is_complete_and_sourced(name):
    s = hardware.get(name)
    assert s.sources and all(k in hardware.SOURCES for k in s.sources), f"{name}: unknown source key"
    assert s.hbm_gbps > 0 and s.peak("fp32") > 0
    if name != "Seed accelerator":
        assert s.sms > 0 and s.smem_per_sm_kib > 0 and s.compute_capability
        # tensor cores are faster than the FP32 CUDA cores wherever they exist
        assert all(s.peak_tflops[d] is None or s.peak_tflops[d] >= s.peak("fp32") for d in ("fp16", "bf16", "tf32"))


def test_feature_gating_follows_compute_capability():
    for s in hardware.GPUS.values():
        if s.compute_capability is None:
            continue
        assert (s.peak_tflops["fp8"] is not None) == (s.compute_capability >= (8, 9))
        assert (s.peak_tflops["bf16"] is not None) == (s.compute_capability >= (8, 0))


def test_known_values_and_lookup_by_torch_name():
    assert hardware.get("NVIDIA H200").sms == 132
    assert hardware.get("NVIDIA A100-SXM4-80GB").hbm_gbps == 2039
    assert hardware.get("Tesla T4").name == "T4"
    assert hardware.get("NVIDIA L4").name == "L4"
    assert hardware.get("NVIDIA H100 PCIe").sms == 114
    assert hardware.get("seed accelerator").name == "Seed accelerator"
    for other in ["NVIDIA L40S", "NVIDIA H100 NVL", "NVIDIA A100 80GB PCIe", "NVIDIA GeForce RTX 4090 Laptop GPU",
                  "NVIDIA H200 MIG 1g.18gb"]:
        with pytest.raises(KeyError, match="unknown GPU"):
            hardware.get(other)  # a variant with other numbers must not borrow a table entry's
        assert hardware.find(other) is None
    with pytest.raises(TypeError, match="name must be"):
        hardware.get(None)


def test_peak_errors():
    with pytest.raises(LookupError, match="no fp8"):
        hardware.get("A100 40GB SXM").peak("fp8")
    with pytest.raises(ValueError, match="dtype must be one of"):
        hardware.get("H200").peak("int8")


def test_rated_dtypes_are_the_tables():
    assert hardware.DTYPES == dtypes.MATMUL
    assert all(set(s.peak_tflops) == set(dtypes.MATMUL) for s in hardware.GPUS.values())


def test_table_rows_cover_every_gpu():
    rows = hardware.table_rows()
    assert [r["GPU"] for r in rows] == list(hardware.GPUS)
