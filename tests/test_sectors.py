"""gpulab.models.sectors: the address model, the seed's four sectors, sectors against stride/offset/element size, the
copy model, the explorer widget, the lesson06 suite's report, and the lesson 06 exercise checkers."""

import math
import random

import numpy as np
import pytest

from gpulab import figures
from gpulab.bench import lesson06
from gpulab.exercises import ex06 as ex
from gpulab.models import sectors as sec

pytestmark = pytest.mark.usefixtures("seed")  # random inputs: fresh each run, the seed in a failure's report


def test_seed_four_sectors():
    """CUDA Best Practices Guide / seed lecture: 32 aligned consecutive 4-byte loads = four 32-byte transactions."""
    r = sec.warp_request(itemsize=4, stride=1, offset=0)
    assert r.n_sectors == 4 and r.bytes_moved == 128 and r.useful_bytes == 128 and r.efficiency == 1.0
    assert r.sectors == (0, 1, 2, 3) and len(r.lines) == 1
    assert [len(s) for s in r.lane_sectors()] == [1] * 32 and r.lane_sectors()[9] == (1,)


def test_address_model():
    for _ in range(20):
        n_cols, s, base = random.randrange(1, 5000), random.choice([1, 2, 4, 8]), random.randrange(0, 2**20)
        i, j = random.randrange(0, 5000), random.randrange(0, n_cols)
        a = sec.address(i, j, n_cols, s, base)
        assert a == base + s * (i * n_cols + j)
        if j + 1 < n_cols:
            assert sec.address(i, j + 1, n_cols, s, base) - a == s  # along a row: s bytes apart
        assert sec.address(i + 1, j, n_cols, s, base) - a == n_cols * s  # down a column: a row apart


@pytest.mark.parametrize("itemsize", sec.ITEMSIZES)
@pytest.mark.parametrize("stride", [1, 2, 3, 4, 5, 8, 16, 33, 64])
def test_sectors_against_stride(itemsize, stride):
    """Aligned: lanes cover stride*itemsize bytes each; below one sector per lane every sector in the span is
    touched, from one sector per lane on each lane pays its own."""
    r = sec.warp_request(itemsize, stride, 0)
    assert r.n_sectors == min(32, stride * itemsize)
    assert math.isclose(r.efficiency, 32 * itemsize / (32 * min(32, stride * itemsize)))


def test_offset_and_granule():
    assert sec.warp_request(4, 1, 4).n_sectors == 5 and math.isclose(sec.warp_request(4, 1, 4).efficiency, 0.8)
    assert sec.warp_request(4, 1, 32).n_sectors == 4  # a whole sector later: aligned again
    assert sec.warp_request(4, 1, 0, sector_bytes=128).n_sectors == 1
    assert math.isclose(sec.warp_request(4, 64, 0, sector_bytes=64).efficiency, 4 / 64)
    assert sec.warp_request(4, 1, 0, lanes=8).n_sectors == 1
    r = sec.request([30], 4)  # a misaligned element straddles two sectors
    assert r.sectors == (0, 1) and r.lane_sectors() == [(0, 1)] and r.efficiency == 4 / 64
    assert sec.request([0, 0, 4], 4).useful_bytes == 8  # distinct bytes
    assert sec.warp_request(4, 2, 0).used_bytes_per_sector() == {k: 16 for k in range(8)}


def test_elements_per_lane_spreads_one_instructions_lanes():
    """Lane k's j-th load reads element (k*v + j)*stride: each instruction's lanes are v*stride*itemsize apart."""
    r = sec.warp_request(4, 2, elements_per_lane=4)  # lanes 4 x 2 x 4 = 32 B apart: a sector each
    assert r.n_sectors == 32 and r.addresses[:3] == (0, 32, 64) and r.useful_bytes == 128
    assert sec.warp_request(4, 2, elements_per_lane=4, load=3).addresses[:2] == (24, 56)  # element 3, 4 + 3
    for itemsize, stride in ((4, 1), (4, 2), (2, 3), (8, 5)):  # v = 1 is the textbook request, load or not
        assert sec.warp_request(itemsize, stride, elements_per_lane=1) == sec.warp_request(itemsize, stride)
    # the v loads of a lane read every element of the lanes' span once: x[0 .. 32v) at stride s
    v, s = 4, 3
    every = sorted(a for j in range(v) for a in sec.warp_request(4, s, elements_per_lane=v, load=j).addresses)
    assert every == [e * s * 4 for e in range(32 * v)]
    # stride 4, fp32, v = 4: lanes 64 B apart, still one sector each (at 8 B apart v = 1 shares sectors)
    assert sec.warp_request(4, 4, elements_per_lane=4).n_sectors == 32 and sec.warp_request(4, 4).n_sectors == 16


def test_matrix_request():
    assert sec.matrix_request(1000, 4, "row").sectors == (0, 1, 2, 3)  # 32 consecutive fp32: 128 bytes from 0
    col = sec.matrix_request(1000, 4, "column")
    assert col.n_sectors == 32 and col.efficiency == 4 / 32
    assert sec.matrix_request(1, 4, "column").n_sectors == 4  # a one-column matrix is a vector
    assert sec.matrix_request(10, 4, "row", j=5).addresses == tuple(4 * j for j in range(5, 10))


def test_numpy_ints_are_ints():
    assert sec.warp_request(np.int64(4), np.int64(2), np.int32(8), lanes=np.int8(16)) == sec.warp_request(4, 2, 8, 16)
    assert sec.address(np.int64(2), np.int64(3), np.int64(10), np.int64(4)) == 4 * (2 * 10 + 3)
    assert sec.matrix_request(np.int64(1000), np.int64(4), "column").n_sectors == 32
    assert sec.effective_tbps(np.int64(10**9), np.int64(4), 1.0) == pytest.approx(8.0)  # 8e9 bytes in 1 ms


def test_stream_efficiency_counts_shared_sectors_once():
    per_request = sec.warp_request(4, 1, 4).efficiency
    stream = sec.stream_efficiency(2**14, 4, 1, 4)
    assert per_request == 0.8 and stream > 0.999
    assert math.isclose(sec.stream_efficiency(2**12, 4, 2, 0), 0.5)
    assert math.isclose(sec.stream_efficiency(2**12, 4, 64, 0), 4 / 32)


def _granules_listed(n, itemsize, stride, offset, g):
    """The granules the n elements touch, every one listed (the count written the slow, obvious way)."""
    touched = set()
    for k in range(n):
        a = offset + k * stride * itemsize
        touched.update(range(a // g, (a + itemsize - 1) // g + 1))
    return len(touched)


def test_stream_sectors_closed_form_is_the_listed_count(seed):
    rng = random.Random(seed)
    for _ in range(3000):
        n, s = rng.randrange(1, 200), rng.choice([1, 2, 3, 4, 8, 16])
        stride, offset, g = rng.randrange(1, 70), rng.randrange(0, 600), rng.choice([1, 2, 4, 8, 32, 64, 128, 256])
        assert sec.stream_sectors(n, s, stride, offset, g) == _granules_listed(n, s, stride, offset, g), (
            n, s, stride, offset, g,
        )  # fmt: skip
    # an element wider than the granule touches every granule it spans, not only its first and last
    assert sec.stream_sectors(1, 16, 1, 0, 2) == 8


def test_stream_efficiency_of_a_huge_stream_lists_no_address():
    # 2^40 addresses would take 8 TB to list; the closed form needs a few divisions
    assert sec.stream_efficiency(2**40, 4, 1, 4) == pytest.approx(1.0, abs=1e-9)
    assert sec.stream_efficiency(2**40, 4, 2, 0) == 0.5
    # 2^62 elements 12 B apart from byte 12: bytes 12 .. 12 * 2^62 + 3, granules 0 .. 12 * 2^22 of 2^40 B
    assert sec.stream_sectors(2**62, 4, 3, 12, 2**40) == 12 * 2**22 + 1


def test_copy_model():
    assert sec.copy_efficiency(1.0) == 1.0 and math.isclose(sec.copy_efficiency(0.5, 0.5), 0.5)
    assert math.isclose(sec.strided_copy_efficiency(64, 4), 2 / 9)  # read 1/8, write 1
    assert math.isclose(sec.strided_copy_efficiency(2, 4), 2 / 3)
    assert math.isclose(sec.predicted_tbps(1, 4, 4.0), 4.0)
    assert math.isclose(sec.predicted_tbps(8, 4, 4.5), 1.0)  # 4.5 x 2/9: stride 8 of fp32 reads 1/8 useful
    assert math.isclose(sec.predicted_tbps(16, 4, 4.5), sec.predicted_tbps(64, 4, 4.5))  # levels off
    # 128-byte sectors: a read 4/128 = 1/32 useful, the write full: 2 / (32 + 1) of 4.0 TB/s
    assert math.isclose(sec.predicted_tbps(64, 4, 4.0, sector_bytes=128), 0.24242424242424243)
    assert math.isclose(sec.effective_tbps(2**28, 4, 0.5), 4.294967296)  # 2 x 2^28 x 4 = 2^31 bytes in 0.5 ms


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: sec.warp_request(3, 1, 0), "itemsize"),
        (lambda: sec.warp_request(4, 0, 0), "stride"),
        (lambda: sec.warp_request(4, 1.5, 0), "stride"),
        (lambda: sec.warp_request(4, 1, 2), "offset"),
        (lambda: sec.warp_request(4, 1, 0, lanes=33), "lanes"),
        (lambda: sec.warp_request(4, 1, 0, sector_bytes=48), "sector_bytes"),
        (lambda: sec.request([], 4), "addresses"),
        (lambda: sec.request([-4], 4), "addresses"),
        (lambda: sec.address(0, 5, 5, 4), "j"),
        (lambda: sec.address(0, 0, 0, 4), "n_cols"),
        (lambda: sec.matrix_request(10, 4, "diagonal"), "along"),
        (lambda: sec.copy_efficiency(0.0), "read_efficiency"),
        (lambda: sec.copy_efficiency(1.0, 2.0), "write_efficiency"),
        (lambda: sec.predicted_tbps(1, 4, 0), "copy_tbps"),
        (lambda: sec.effective_tbps(10, 4, 0), "time_ms"),
        (lambda: sec.matrix_request(10, 4, "row", lanes=100), "lanes"),
        (lambda: sec.matrix_request(10, 4, "row", lanes=0), "lanes"),
        (lambda: sec.matrix_request(10, 3), "itemsize"),
        (lambda: sec.matrix_request(10, 4, "row", j=10), "j"),
        (lambda: sec.matrix_request(10, 4, "column", j=10), "j"),
        (lambda: sec.matrix_request(10, 4, "row", i=-1), "i"),
        (lambda: sec.predicted_tbps(1, 4, math.nan), "copy_tbps"),
        (lambda: sec.predicted_tbps(1, 4, math.inf), "copy_tbps"),
        (lambda: sec.predicted_tbps(1, 4, -4.0), "copy_tbps"),
        (lambda: sec.effective_tbps(-1, 4, 1.0), "n"),
        (lambda: sec.effective_tbps(math.nan, 4, 1.0), "n"),
        (lambda: sec.effective_tbps(math.inf, 4, 1.0), "n"),
        (lambda: sec.effective_tbps(10, 4, math.nan), "time_ms"),
        (lambda: sec.effective_tbps(10, 4, math.inf), "time_ms"),
        (lambda: sec.effective_tbps(10, 0, 1.0), "itemsize"),
        (lambda: sec.copy_efficiency(math.nan), "read_efficiency"),
        (lambda: sec.warp_request(4, 2, elements_per_lane=0), "elements_per_lane"),
        (lambda: sec.warp_request(4, 2, elements_per_lane=2.0), "elements_per_lane"),
        (lambda: sec.warp_request(4, 2, elements_per_lane=True), "elements_per_lane"),
        (lambda: sec.warp_request(4, 2, elements_per_lane=4, load=4), "load"),
        (lambda: sec.warp_request(4, 2, load=-1), "load"),
    ],
)
def test_bad_arguments(call, word):
    with pytest.raises((TypeError, ValueError), match=word):
        call()


def test_explorer_sliders_change_figure():
    e = figures.lesson06.SectorExplorer(copy_tbps=4.0)
    fig = e.live.fig
    title, sectors = fig.layout.title.text, list(fig.data[0].base)
    assert "4 sectors" in title and "efficiency 100.0%" in title and len(fig.data) == 4
    e.stride.value = 2  # the first slider of the first widget (the browser test moves it)
    assert fig.layout.title.text != title and list(fig.data[0].base) != sectors and "8 sectors" in fig.layout.title.text
    e.offset.value = 3  # 12 bytes in: the last lane's element spills into a ninth sector
    assert e.request.n_sectors == 9 and "9 sectors" in fig.layout.title.text
    e.itemsize.value = 8
    assert e.request == sec.warp_request(8, 2, 24)
    assert "TB/s" in e.readout.value
    for trace in fig.data:  # every trace holds plain lists (see gpulab.figures.plots)
        assert isinstance(trace.x, tuple) and len(trace.x) > 0


def _fake_suite_data(tiled_ms=0.6):
    copy_tbps = 4.2
    rows = [
        {
            "stride": s,
            "ours_ms": 0.1 * s,
            "torch_ms": 0.1 * s,
            "ours_tbps": 4.0 / s,
            "torch_tbps": 3.9 / s,
            "best_config": {"BLOCK": 1024, "num_warps": 4},
        }
        for s in lesson06.STRIDES
    ]
    tr = [
        {"dtype": "fp32", "method": m, "ms": ms, "tbps": 2 * 16384**2 * 4 / (ms * 1e-3) / 1e12}
        for m, ms in [("copy (torch)", 0.5), ("naive", 3.0), ("tiled", tiled_ms), ("torch", 1.8)]
    ]
    for r in tr:
        r["vs_copy"] = r["tbps"] / tr[0]["tbps"]
    return {
        "dtype": "fp32",
        "copy_tbps": copy_tbps,
        "headline": {
            "n": 2**28,
            "dtype": "fp32",
            "ours_ms": 0.51,
            "torch_ms": 0.5,
            "ours_tbps": 4.2,
            "torch_tbps": 4.29,
            "ratio": 0.5 / 0.51,
            "best_config": {"BLOCK": 2048, "num_warps": 4},
        },
        "stride": {
            "n": 2**25,
            "itemsize": 4,
            "rows": rows,
            "offsets": [{"offset": o, "offset_bytes": 4 * o, "ms": 0.06, "tbps": 4.1} for o in lesson06.OFFSETS],
        },
        "traversal": {
            "m": 16384,
            "n": 16384,
            "dtype": "fp32",
            "rows": [
                {"method": m, "ms": ms, "tbps": 1.0}
                for m, ms in [("by rows", 0.5), ("by columns", 3.0), ("torch copy", 0.5)]
            ],
        },
        "transpose": {
            "m": 16384,
            "n": 16384,
            "rows": tr,
            "best_config": {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4},
        },
    }


def test_report_and_model_rows():
    data = _fake_suite_data()
    text = lesson06.report(data)
    assert text.count("target met") == 2 and "BELOW" not in text
    m = sec.stride_model_rows(data)
    assert [r["stride"] for r in m] == list(lesson06.STRIDES)
    assert math.isclose(m[0]["model_tbps"][32], 4.2) and math.isclose(m[-1]["model_tbps"][32], 4.2 * 2 / 9)
    assert math.isclose(m[-1]["ours_over_model"], (4.0 / 64) / (4.2 * 2 / 9))
    slow = lesson06.report(_fake_suite_data(tiled_ms=1.0))
    assert "BELOW TARGET (>= 0.8)" in slow


def test_exercise_checkers():
    """Lesson 06's counting exercises ask what no printed function answers: the sectors of a tile load and the
    sector model of a tiled transpose; the solutions agree with the package's request count."""
    assert ex.check_tile_sectors(ex.check_tile_sectors.solution).ok
    one_per_element = ex.check_tile_sectors(lambda r, c, s, rb: r * c)
    assert not one_per_element.ok and "count distinct sectors" in str(one_per_element)
    contiguous = ex.check_tile_sectors(lambda r, c, s, rb: -(-(r * c * s) // 32))
    assert not contiguous.ok and "row_bytes apart" in str(contiguous)
    per_row = ex.check_tile_sectors(lambda r, c, s, rb: r * -(-(c * s) // 32))
    assert not per_row.ok and "mid-sector" in str(per_row), str(per_row)
    assert ex.check_tile_transpose_tbps(ex.check_tile_transpose_tbps.solution).ok
    dense = ex.check_tile_transpose_tbps(lambda bm, bn, s, B: B)
    assert not dense.ok and "whole 32-byte sector" in str(dense)
    e = ex._row_efficiency
    read_only = ex.check_tile_transpose_tbps(lambda bm, bn, s, B: B * 2 / (1 / e(bn, s) + 1))
    assert not read_only.ok and "both sides count" in str(read_only)
    worst = ex.check_tile_transpose_tbps(lambda bm, bn, s, B: B * min(e(bn, s), e(bm, s)))
    assert not worst.ok and "add up in the time" in str(worst)

    def stub(*a):
        raise NotImplementedError

    for check in (ex.check_tile_sectors, ex.check_tile_transpose_tbps):
        assert not check(stub).attempted
    # a one-row tile is the lane-per-element request the lesson counts; hand counts for the rest
    for s in (1, 2, 4, 8, 16):
        assert ex._tile_sectors_solution(1, 32, s, 10**6) == sec.warp_request(s, 1, 0).n_sectors
    # a column is a lane per sector; rows 36 bytes apart share sectors: 0-31, 36-67, 72-103, 108-139 -> 0..4
    assert ex._tile_sectors_solution(32, 1, 4, 65536) == 32 and ex._tile_sectors_solution(4, 8, 4, 36) == 5
    assert math.isclose(ex._tile_transpose_tbps_solution(4, 64, 4, 3.0), 3.0 * 2 / (1 + 2))  # a 16-byte store row


def _run_sectors_by_hand(n_cols, width, itemsize, col, row, granule=32):
    """The distinct granules a run's bytes fall in, listed byte by byte."""
    start = (row * n_cols + col) * itemsize
    return len({b // granule for b in range(start, start + width * itemsize)})


def test_a_run_of_whole_sectors_gains_one_on_most_rows_with_one_more_column():
    """The seed's burst boundaries: rows a whole number of sectors long keep a one-sector run in one sector; one more
    column, and 15 of every 16 bf16 rows start inside a sector, so the run takes two (the bursts double)."""
    assert sec.tile_row_sectors(2048, 16, itemsize=2) == [1]
    assert sec.tile_row_sectors(2049, 16, itemsize=2) == [1] + [2] * 15
    assert (
        sec.tile_row_sectors(1024, 8, itemsize=4) == [1] and sec.tile_row_sectors(1025, 8, itemsize=4) == [1] + [2] * 7
    )
    assert (
        sec.tile_row_sectors(2048, 64, itemsize=2) == [4]
        and sec.tile_row_sectors(2049, 64, itemsize=2) == [4] + [5] * 15
    )
    assert sec.tile_row_sectors(2056, 64, itemsize=2) == [4, 5]  # rows 16-byte aligned: every other starts mid-sector
    assert sec.tile_row_sectors(2049, 16, itemsize=2, col=16) == [1] + [2] * 15


def test_tile_row_sectors_against_a_byte_by_byte_count():
    for _ in range(200):
        itemsize = random.choice([1, 2, 4, 8])
        n_cols = random.randrange(1, 3000)
        width = random.randrange(1, n_cols + 1)
        col = random.randrange(0, n_cols - width + 1)
        got = sec.tile_row_sectors(n_cols, width, itemsize, col)
        assert len(got) == 32 // math.gcd(n_cols * itemsize, 32)
        assert got == [_run_sectors_by_hand(n_cols, width, itemsize, col, i) for i in range(len(got))], (
            n_cols,
            width,
            itemsize,
            col,
        )
        # the pattern repeats: the row one period later starts at the same place in a sector
        assert _run_sectors_by_hand(n_cols, width, itemsize, col, len(got)) == got[0]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(n_cols=16, width=17), "col \\+ width"),
        (dict(n_cols=16, width=8, col=9), "col \\+ width"),
        (dict(n_cols=0, width=1), "n_cols"),
        (dict(n_cols=16, width=4, itemsize=3), "itemsize"),
        (dict(n_cols=16, width=4, sector_bytes=48), "power of two"),
    ],
)
def test_tile_row_sectors_refuses_what_is_no_run(kwargs, error):
    with pytest.raises(ValueError, match=error):
        sec.tile_row_sectors(**kwargs)


def test_sector_offset_pairs_set_half_sector_rows_beside_the_next_whole_sector_rows():
    # a synthetic sweep: every N from 1000 to 1100 at 100 TFLOP/s, except N = 16k + 8 (bf16 rows half a sector off) at
    # 90; tiles of 100 x 100, so that 1000 (10 tiles a side) and its partner 1008 (11) differ in waves
    ns = list(range(1000, 1101))
    ms = [2 * n**3 / ((90.0 if n % 16 == 8 else 100.0) * 1e9) for n in ns]
    sweep = dict(ns=ns, tile=[100, 100], torch_ms=ms)
    pairs = sec.sector_offset_pairs(sweep, "torch")
    assert [(p["n"], p["partner"]) for p in pairs] == [(n, n + 8) for n in (1016, 1032, 1048, 1064, 1080)]
    assert all(p["ratio"] == pytest.approx(0.9) for p in pairs)
    control = sec.sector_offset_pairs(sweep, "torch", row_offset=0)
    assert [(p["n"], p["partner"]) for p in control] == [(n, n + 16) for n in (1008, 1024, 1040, 1056, 1072)]
    assert all(p["ratio"] == pytest.approx(1.0) for p in control)
    sweep["torch_ms"][ns.index(1048)] = None  # a failed point leaves its pairs out
    assert [p["n"] for p in sec.sector_offset_pairs(sweep, "torch")] == [1016, 1032, 1064, 1080]
    fp32 = sec.sector_offset_pairs(sweep, "torch", itemsize=4, row_offset=16)  # fp32 rows: N = 8k + 4
    assert [p["n"] for p in fp32] == [n for n in range(1004, 1097, 8) if n != 1044]
    with pytest.raises(ValueError, match="row_offset"):
        sec.sector_offset_pairs(sweep, "torch", itemsize=4, row_offset=2)
    with pytest.raises(ValueError, match="itemsize"):
        sec.sector_offset_pairs(sweep, "torch", itemsize=8)
