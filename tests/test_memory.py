"""The memory-hierarchy model: capacities, the staircase, Little's law and ridge points, against values
worked out by hand from the datasheet numbers in gpulab.core.hardware."""

import math

import pytest

from gpulab.core import hardware
from gpulab.models import memory

H200 = hardware.get("H200")


def test_h200_hierarchy_by_hand():
    regs, l1, l2, hbm = memory.hierarchy(H200)
    assert [lv.name for lv in (regs, l1, l2, hbm)] == ["registers", "L1/shared", "L2", "HBM"]
    assert regs.capacity == 65536 * 4 == 262144 and regs.device_bytes == 262144 * 132 == 34_603_008
    assert l1.capacity == 256 * 1024 and l1.scope == "per SM"
    assert l2.capacity == 60 * 1024 * 1024 == 62_914_560 and l2.scope == "device"
    assert hbm.capacity == 141_000_000_000 and hbm.tbps == 4.8 and hbm.source == "datasheet"
    assert regs.tbps is None and l1.tbps is None and l2.tbps is None  # no datasheet number for on-chip levels


def test_measured_bandwidths_fill_the_levels():
    levels = memory.hierarchy(H200, measured={"L1/shared": 30.0, "L2": 11.5, "HBM": None})
    assert [lv.tbps for lv in levels] == [None, 30.0, 11.5, 4.8]
    assert levels[2].source == "measured" and levels[3].source == "datasheet"
    with pytest.raises(ValueError, match="unknown level 'L3'"):
        memory.hierarchy(H200, measured={"L3": 1.0})
    with pytest.raises(ValueError, match="measured"):
        memory.hierarchy(H200, measured={"L2": -1.0})


def test_hierarchy_refuses_gpus_without_one():
    with pytest.raises(ValueError, match="no memory hierarchy"):
        memory.hierarchy(hardware.get("Seed accelerator"))
    with pytest.raises(TypeError, match="GPUSpec"):
        memory.hierarchy("H200")


def test_level_for_at_the_boundaries():
    assert memory.level_for(4096, H200) == "L1/shared"
    assert memory.level_for(262_144, H200) == "L1/shared"
    assert memory.level_for(262_145, H200) == "L2"
    assert memory.level_for(62_914_560, H200) == "L2"
    assert memory.level_for(62_914_561, H200) == "HBM"
    with pytest.raises(ValueError, match="exceeds"):
        memory.level_for(200 * 10**9, H200)
    with pytest.raises(ValueError, match="working_set"):
        memory.level_for(0, H200)


def test_fit_plateaus_takes_medians_inside_each_level():
    kib, mib = 1024, 1024**2
    sizes = [4 * kib, 16 * kib, 64 * kib, 1 * mib, 8 * mib, 20 * mib, 40 * mib, 2**30, 2**32]
    tbps = [20.0, 22.0, 21.0, 9.0, 10.0, 11.0, 6.0, 4.1, 4.3]
    # L1: ws <= 256 KiB / 2; L2: 512 KiB < ws <= 30 MiB (40 MiB sits in the step and is left out); HBM: > 120 MiB
    plateaus = memory.fit_plateaus(sizes, tbps, H200)
    assert plateaus == {"L1/shared": 21.0, "L2": 10.0, "HBM": pytest.approx(4.2)}
    assert memory.expected_tbps(8192, H200, plateaus) == 21.0
    assert memory.expected_tbps(10**9, H200, plateaus) == pytest.approx(4.2)
    assert memory.fit_plateaus([4 * kib], [20.0], H200) == {"L1/shared": 20.0, "L2": None, "HBM": None}
    with pytest.raises(ValueError, match="same length"):
        memory.fit_plateaus([4 * kib, 8 * kib], [1.0], H200)


def test_littles_law_by_hand():
    # 4.8 TB/s x 700 ns = 4.8e12 B/s x 7e-7 s = 3.36e6 bytes in flight
    assert memory.bytes_in_flight(4.8, 700) == pytest.approx(3.36e6)
    # 100 warps x 1024 B / 700 ns = 102400 / 700 B/ns = 146.29 GB/s
    assert memory.little_tbps(100, 1024, 700, 4.8) == pytest.approx(0.1462857, rel=1e-6)
    assert memory.little_tbps([1, 100, 10**4], 1024, 700, 4.8)[2] == 4.8  # capped by the peak
    assert memory.warps_to_saturate(4.8, 700, 1024) == pytest.approx(3281.25)
    with pytest.raises(ValueError, match="latency_ns"):
        memory.little_tbps(1, 1024, 0, 4.8)


def test_fit_little_recovers_a_hand_made_sweep():
    # latency 500 ns, 2048 B per warp: 1 warp -> 2048 / 500 B/ns = 4.096 GB/s; the peak is 4.0 TB/s
    warps = [1, 10, 100, 1000, 4000]
    tbps = [0.004096, 0.04096, 0.4096, 4.0, 4.0]
    latency, peak = memory.fit_little(warps, tbps, 2048)
    assert latency == pytest.approx(500.0) and peak == 4.0
    latency, _ = memory.fit_little([64, 128], [3.9, 4.0], 2048)  # no rising side: the fewest-warps point
    assert latency == pytest.approx(33.6082, rel=1e-5)  # Little: 64 x 2048 = 131,072 bytes in flight / 3.9 TB/s
    with pytest.raises(ValueError, match="non-empty"):
        memory.fit_little([], [], 2048)


def test_ridge_points_by_hand():
    rows = {r["name"]: r for r in memory.ridge_points()}
    assert rows["V100 SXM2"]["dtype"] == "fp16" and rows["V100 SXM2"]["ridge"] == pytest.approx(125 / 0.9)
    assert rows["H200"]["ridge"] == pytest.approx(989.5 / 4.8)
    assert rows["B200"]["ridge"] == pytest.approx(2250 / 7.7)
    assert rows["TPU v5e"]["ridge"] == pytest.approx(197 / 0.819) and rows["TPU v5e"]["kind"] == "TPU"
    assert rows["TPU v6e"]["ridge"] == pytest.approx(918 / 1.638)
    assert "Seed accelerator" not in rows
    years = [r["year"] for r in memory.ridge_points()]
    assert years == sorted(years) and years[0] == 2017
    assert all(math.isfinite(r["ridge"]) and r["ridge"] > 100 for r in rows.values())  # every one past 100 FLOP/B
