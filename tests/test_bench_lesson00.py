"""The lesson00 suite's logic in the interpreter on tiny sizes with a fake clock (never a GPU number): every
step runs, the record is JSON-able, the plan reads each working set as the docstring says, and the report
fits in 15 lines on a record shaped like a real one."""

import json

import pytest

import gpulab
from gpulab.bench import lesson00
from gpulab.core.timing import Timing
from gpulab.models import memory


def test_plan_replicates_small_working_sets_and_shares_out_large_ones():
    l2 = 60 * 2**20
    # 8 programs x 132 SMs x 4 tiles of 4 KiB = 16.5 MiB, capped at a quarter of a 60 MiB L2 = 15 MiB
    assert lesson00.replicate_limit(132) == 17_301_504 and lesson00.replicate_limit(132, l2) == 15 * 2**20
    small = lesson00.staircase_plan(4096, 132, l2)  # every one of 1056 programs reads all 1024 floats
    assert (small["programs"], small["part"], small["l2_only"]) == (1056, 1024, False)
    assert small["passes"] == round(lesson00.TARGET_BYTES / (1056 * 4096)) == 993
    assert small["bytes_read"] == 993 * 1056 * 4096
    # 16 MiB = 2^22 floats: parts of ceil(2^22 / 1056) = 3972 rounded up to 3984, on ceil(2^22 / 3984) = 1053
    mid = lesson00.staircase_plan(2**24, 132, l2)
    assert (mid["part"], mid["programs"], mid["l2_only"], mid["passes"]) == (3984, 1053, True, 256)
    assert mid["bytes_read"] == 256 * 2**24  # no part read twice
    big = lesson00.staircase_plan(2**32, 132, l2)  # 2^30 floats: parts of ceil(2^30 / 1056) rounded up to 16
    assert big["part"] == 1016816 and big["programs"] == 1056 and big["passes"] == 1 and big["bytes_read"] == 2**32


def test_sizes_span_kib_to_gib_on_whole_tiles():
    assert lesson00.SIZES[0] == 4096 and lesson00.SIZES[-1] == 2**32 and len(lesson00.SIZES) == 25
    assert all(s % 4096 == 0 for s in lesson00.SIZES) and list(lesson00.SIZES) == sorted(set(lesson00.SIZES))


@pytest.mark.skipif(gpulab.ON_GPU, reason="the fake clock is for the interpreter; on a GPU the suite itself runs")
def test_suite_runs_end_to_end_on_tiny_sizes():
    calls = []

    def fake_time_ms(fn, warmup_ms=0, rep_ms=0, graph=False):
        fn()
        calls.append(1)
        return Timing(0.01 * len(calls), 0.009, 0.011)  # not a measurement: the logic needs some numbers

    info = dict(name="NVIDIA H200", sms=1, l2_bytes=4 * 2**20)  # replicate up to 32 KiB, then share out
    data = lesson00._run(
        fake_time_ms,
        "cpu",
        info,
        False,
        sizes=(4096, 8192, 2 * 2**20),
        copy_programs=(1, 2, 4),
        copy_n=5000,
        target_bytes=64 * 1024,
    )
    json.dumps(data)
    assert [r["working_set"] for r in data["staircase"]] == [4096, 8192, 2 * 2**20]
    assert [r["l2_only"] for r in data["staircase"]] == [False, False, True]
    r = data["staircase"][0]
    assert r["tbps"] == r["bytes_read"] / (r["ms"] * 1e-3) / 1e12
    assert [r["warps"] for r in data["latency"]["rows"]] == [4, 8, 16]
    assert data["latency"]["bytes_per_warp"] == 2048  # 1024 floats over 4 warps, read and written
    assert len(lesson00.report(data).splitlines()) <= 15
    with pytest.raises(ValueError, match="multiples of 4096"):
        lesson00._run(fake_time_ms, "cpu", info, False, sizes=(1000,), copy_programs=(), copy_n=8, target_bytes=8)


def recorded_style():
    """A record shaped like the suite's, numbers made up in the H200's ranges (not a measurement)."""
    limit = 15 * 2**20
    st = [
        dict(
            working_set=s,
            tbps=30.0 if s <= 2**17 else 20.0 if s <= limit else 10.0 if s <= 2**25 else 4.4,
            l2_only=s > limit,
            ms=1.0,
            programs=1056,
            part=1,
            passes=1,
            bytes_read=4 * 2**30,
            p20_ms=0.9,
            p80_ms=1.1,
        )
        for s in lesson00.SIZES
    ]
    rows = [
        dict(programs=p, warps=4 * p, tbps=min(4.3, 4 * p * 2048 / 900e-9 / 1e12), ms=1.0, p20_ms=1.0, p80_ms=1.0)
        for p in lesson00.COPY_PROGRAMS
    ]
    return dict(
        device=dict(name="NVIDIA H200", sms=132),
        block=1024,
        num_warps=4,
        programs_per_sm=8,
        replicate_limit=limit,
        staircase=st,
        latency=dict(n=2**26, bytes_per_warp=2048, rows=rows),
    )


def test_report_on_recorded_style_data():
    data = recorded_style()
    text = lesson00.report(data)
    assert len(text.splitlines()) <= 15, text
    # L2 from the shared-out sets (10), not from the sets every program reads whole (20)
    assert "L1/shared 30.00 TB/s" in text and "L2 10.00 TB/s" in text and "HBM 4.40 TB/s" in text
    assert "latency 900 ns" in text  # the made-up sweep's latency, found by the fit
    assert len(lesson00.report(data, full=True).splitlines()) > 15
    fit = memory.fit_record(data)
    assert fit["plateaus"]["L2"] == 10.0 and fit["little"][1] == 4.3
