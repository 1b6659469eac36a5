"""The GPU table: every GPU the lessons plan for (V100 and T4 up to B200), every number positive and sourced."""

import pytest

from gpulab.core import dtypes, hardware

REQUIRED = [
    "T4",
    "L4",
    "A10",
    "A100 40GB SXM",
    "A100 80GB SXM",
    "H100 SXM",
    "H100 PCIe",
    "H200",
    "RTX 4090",
    "Seed accelerator",
]


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
    for other in [
        "NVIDIA L40S",
        "NVIDIA H100 NVL",
        "NVIDIA A100 80GB PCIe",
        "NVIDIA GeForce RTX 4090 Laptop GPU",
        "NVIDIA H200 MIG 1g.18gb",
    ]:
        with pytest.raises(KeyError, match="unknown GPU"):
            hardware.get(other)  # a variant with other numbers must not borrow a table entry's
        assert hardware.find(other) is None
    with pytest.raises(TypeError, match="name must be"):
        hardware.get(None)


def test_a_model_whose_name_adds_a_word_is_not_the_tables():
    for other in ["NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 4090 D GPU", "NVIDIA H100 SUPER", "NVIDIA A100 Ti"]:
        with pytest.raises(KeyError, match="another model than the table's"):
            hardware.get(other)
        assert hardware.find(other) is None
    # words that describe the board or its memory keep the model
    assert hardware.get("NVIDIA GeForce RTX 4090").name == "RTX 4090"
    assert hardware.get("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert hardware.get("NVIDIA H100 Tensor Core GPU").name == "H100 SXM"
    assert hardware.get("rtx 4090").name == "RTX 4090" and hardware.get("A100-SXM4-80GB").name == "A100 80GB SXM"


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


@pytest.mark.parametrize("name", ["V100 SXM2", "B200"])
def test_new_generations_are_complete_and_sourced(name):
    s = hardware.get(name)
    assert s.sources and all(k in hardware.SOURCES for k in s.sources)
    assert s.sms > 0 and s.hbm_gbps > 0 and s.peak("fp32") > 0 and s.peak("fp16") > s.peak("fp32")


def test_new_generations_values_and_lookup():
    assert hardware.get("Tesla V100-SXM2-32GB").name == "V100 SXM2"
    assert hardware.get("NVIDIA B200").name == "B200"
    assert hardware.get("B200").peak("bf16") == 2250.0 and hardware.get("B200").hbm_gbps == 7700
    with pytest.raises(LookupError, match="no bf16"):
        hardware.get("V100 SXM2").peak("bf16")
    for other in ["Tesla V100-PCIE-16GB", "NVIDIA GB200"]:
        assert hardware.find(other) is None


@pytest.mark.parametrize(
    "name",
    [
        "H200",
        "H100 SXM",
        "H100 PCIe",
        "A100 40GB SXM",
        "A100 80GB SXM",
        "L4",
        "T4",
        "A10",
        "RTX 4090",
        "V100 SXM2",
        "B200",
    ],
)
def test_memory_hierarchy_fields(name):
    s = hardware.get(name)
    assert s.regs_per_sm == 65536 and s.year >= 2017
    # the combined L1/shared array holds at least the shared memory one SM may take
    assert s.l1_smem_per_sm_kib >= s.smem_per_sm_kib
    assert s.l2_kib > 0 and s.hbm_gb > 0


def test_memory_hierarchy_known_values():
    h200 = hardware.get("H200")
    assert (h200.l1_smem_per_sm_kib, h200.l2_kib, h200.hbm_gb) == (256, 60 * 1024, 141.0)
    assert hardware.get("H100 SXM").l2_kib == 50 * 1024
    assert hardware.get("A100 80GB SXM").l2_kib == 40 * 1024 and hardware.get("T4").l2_kib == 4 * 1024
    assert hardware.get("Seed accelerator").l2_kib is None


def test_tpus_are_complete_and_sourced():
    assert list(hardware.TPUS) == ["TPU v4", "TPU v5e", "TPU v5p", "TPU v6e"]
    for t in hardware.TPUS.values():
        assert t.sources and all(k in hardware.SOURCES for k in t.sources), t.name
        assert t.bf16_tflops > 0 and t.hbm_gbps > 0 and t.hbm_gb > 0 and t.mxus_per_chip >= t.tensorcores >= 1
    assert hardware.get_tpu("v5e").vmem_mib == 128 and hardware.get_tpu("TPU v6e").mxu_shape == (256, 256)
    assert hardware.get_tpu("tpu v4").mxus_per_chip == 8  # two TensorCores of four MXUs
    with pytest.raises(KeyError, match="unknown TPU"):
        hardware.get_tpu("v7")
    with pytest.raises(TypeError, match="name must be"):
        hardware.get_tpu(5)
    assert [r["TPU"] for r in hardware.tpu_rows()] == list(hardware.TPUS)


def test_every_accepted_name_plans_and_the_error_lists_them():
    from gpulab.core import plan

    # the short names a person types: each names the table's SXM board, as GPULAB_AS_GPU takes it
    assert hardware.get("V100") is hardware.GPUS["V100 SXM2"]
    assert hardware.get("a100") is hardware.GPUS["A100 40GB SXM"]
    assert hardware.get("H100") is hardware.GPUS["H100 SXM"]
    plannable = [n for n, s in hardware.GPUS.items() if s.compute_capability]
    for name in hardware.ACCEPTED_NAMES:
        spec = hardware.get(name)
        assert hardware.get(name.lower()) is spec
        if spec.name in plannable:
            assert plan.choose(name, None).gpu is spec, name
    assert set(plannable) <= {hardware.get(n).name for n in hardware.ACCEPTED_NAMES}
    with pytest.raises(KeyError) as e:
        hardware.get("V99")
    assert all(n in str(e.value) for n in hardware.ACCEPTED_NAMES)
    for pcie in ("Tesla V100-PCIE-16GB", "V100 PCIe", "A100 PCIe", "NVIDIA A100-PCIE-40GB"):
        assert hardware.find(pcie) is None, f"{pcie}: a PCIe board has other numbers than the SXM entry"


# ---- history: links and CPUs (lesson 00) ---------------------------------------------------------------------


def test_link_rates_by_hand_per_direction():
    # PCIe 3.0: 8 GT/s x 16 lanes, 128b/130b, 8 bits a byte = 15.75 GB/s; 6.0: 64 x 16 x 242/256 / 8 = 121
    assert hardware.LINKS["PCIe 3.0 x16"].gbps == pytest.approx(8 * 16 * 128 / 130 / 8)
    assert hardware.LINKS["PCIe 1.0 x16"].gbps == pytest.approx(4.0)
    assert hardware.LINKS["PCIe 6.0 x16"].gbps == pytest.approx(121.0)
    # NVLink totals count both directions: the H100's 900 GB/s is 450 each way
    assert hardware.LINKS["NVLink 4 (H100)"].gbps == pytest.approx(450.0)
    for link in hardware.LINKS.values():
        assert link.sources and all(k in hardware.SOURCES for k in link.sources), link.name
    years = {k: [s.year for s in hardware.LINKS.values() if s.kind == k] for k in ("PCIe", "NVLink")}
    assert all(y == sorted(y) for y in years.values()) and set(years) == {"PCIe", "NVLink"}


def test_cpu_trends_carry_their_source_and_every_series():
    data = hardware.cpu_trends()
    assert "karlrupp/microprocessor-trend-data" in data["source"] and "CC BY 4.0" in data["license"]
    assert set(data["series"]) == set(hardware.CPU_SERIES)
    for name, points in data["series"].items():
        assert len(points) > 50 and all(len(p) == 2 and p[1] > 0 for p in points), name
        assert 1970 < min(p[0] for p in points) < max(p[0] for p in points) < 2023, name


def test_best_by_year_takes_the_largest_within_the_window_inclusive():
    points = [[1999.0, 5.0], [2000.5, 7.0], [2001.0, 3.0], [2003.0, 9.0], [2010.0, 1.0]]
    assert hardware.best_by_year(points, [2000, 2002, 2006, 2010]) == [7.0, 9.0, None, 1.0]
    assert hardware.best_by_year(points, [2000], window=0.0) == [None]
    assert hardware.best_by_year(points, [2001], window=0.0) == [3.0]
    with pytest.raises(ValueError, match="window"):
        hardware.best_by_year(points, [2000], window=-1)


def test_single_thread_flattened_while_transistors_kept_climbing():
    # the seed's claim, read from the data: 1995-2005 against 2010-2020
    s = hardware.cpu_trends()["series"]
    (t95, t05, t10, t20), (p95, p05, p10, p20) = (
        hardware.best_by_year(s[k], [1995, 2005, 2010, 2020]) for k in ("transistors", "single_thread")
    )
    assert p05 / p95 > 10 and p20 / p10 < 3 and t20 / t10 > 10


def test_every_gpu_names_its_memory_kind_as_its_sources_do():
    """GDDR on the T4, A10, L4 and RTX 4090, HBM on every data-centre GPU from the V100 on (lesson 00 prints it): each
    kind appears, as a whole word, in one of the entry's sources."""
    import re

    kinds = {s.name: s.memory_kind for s in hardware.GPUS.values() if s.year is not None}
    assert kinds == {
        "T4": "GDDR6",
        "L4": "GDDR6",
        "A10": "GDDR6",
        "A100 40GB SXM": "HBM2",
        "A100 80GB SXM": "HBM2e",
        "H100 SXM": "HBM3",
        "H100 PCIe": "HBM2e",
        "H200": "HBM3e",
        "RTX 4090": "GDDR6X",
        "V100 SXM2": "HBM2",
        "B200": "HBM3e",
    }
    for name, kind in kinds.items():
        text = " ".join(hardware.SOURCES[k] for k in hardware.get(name).sources)
        assert re.search(rf"\b{kind}\b", text, flags=re.IGNORECASE), f"{name}: no source names {kind}"
    assert hardware.get("Seed accelerator").memory_kind is None
    assert [r["memory"] for r in hardware.table_rows()] == [s.memory_kind for s in hardware.GPUS.values()]
