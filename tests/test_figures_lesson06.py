"""Lesson 06's figures: the stride figure's model by hand, the traversal figure with its values off the bars,
the stride table against the recording, and the sector explorer at both ends of every slider and dropdown."""

import re

import pytest

import gpulab  # noqa: F401  (first: it picks the mode)
from gpulab import figures
from gpulab.core import reference
from tests.figure_checks import assert_readable, check_figure

RECORDED = reference.load("h200")


def test_stride_figure_model_by_hand_and_with_the_recording():
    fig = figures.lesson06.stride_figure((1, 2, 4), 3.0)
    assert len(fig.data) == 3 and fig.data[0].y[0] == pytest.approx(3.0)  # stride 1, fp32: every byte useful
    assert fig.data[0].y[2] == pytest.approx(3.0 * 2 / (4 + 1))  # stride 4: read at 1/4, write dense
    fig = figures.lesson06.stride_figure((1, 2, 4, 8, 16, 32, 64), 4.3, RECORDED["lesson06"], "recorded")
    assert len(fig.data) == 5
    assert_readable(fig)
    check_figure(fig, "stride figure")
    # the model lines coincide while the lanes are at most a granule apart (every granule touched is then 1/stride
    # useful, whatever its size): each line narrower than the one under it, and the subtitle says where
    widths = [tr.line.width for tr in fig.data[:3]]
    assert widths == sorted(widths, reverse=True) and widths[0] - widths[1] >= 2 and widths[1] - widths[2] >= 2
    said = " ".join(re.sub(r"<br>|</?sup>", " ", fig.layout.title.text).split())
    assert "32-byte and 64-byte at strides 1 to 8; 64-byte and 128-byte at 1 to 16" in said


def test_traversal_figure_puts_values_in_the_labels_not_on_the_bars():
    rec = RECORDED["lesson06"]
    bounds = {"by rows": (1.0, 1.0), "by columns": (0.125, 1.0), "torch": (None, 1.0)}
    fig = figures.lesson06.traversal_figure(rec, bounds, 4.0, "recorded")
    n_bars = len(rec["traversal"]["rows"]) + sum(r["dtype"] == "fp32" for r in rec["transpose"]["rows"])
    assert fig.data[0].orientation == "h"  # names read across: none turns or runs into the next
    assert len(fig.data[0].y) == n_bars and set(fig.data[2].x) == {4.0}
    assert fig.data[0].text is None  # nothing for a model mark to strike
    by_cols = next(r for r in rec["traversal"]["rows"] if r["method"] == "by columns")
    assert f"by columns<br>{by_cols['tbps']:.2f} TB/s" in fig.data[0].y
    assert list(fig.data[1].x) == [4.0, 0.5]  # by rows 1 x 4, by columns 1/8 x 4
    assert_readable(fig)


def test_stride_table_reads_the_recording():
    text = figures.lesson06.stride_table(RECORDED["lesson06"])
    lines = text.splitlines()
    assert len(lines) == 1 + len(RECORDED["lesson06"]["stride"]["rows"])
    row16 = next(line for line in lines if line.split()[0] == "16")
    # torch at stride 16 (0.508 TB/s) sits on the 64-byte line (0.506): within 1 %, not below it
    assert row16.split()[2] == "0.508" and row16.rstrip().endswith("64 B (1.01x)"), row16
    assert lines[1].split()[-2:] == ["all", "(0.91x)"]  # stride 1: the three lines coincide


def test_sector_explorer_at_both_ends_of_every_slider_and_option():
    e = figures.lesson06.SectorExplorer(stride=1, offset=0, itemsize=4, copy_tbps=4.3)
    assert e.itemsize.style.description_width == "initial"  # "bytes per element", not cut
    title = e.live.fig.layout.title.text
    for w in (e.stride, e.offset):
        for end in (w.min, w.max, w.min):
            w.value = end
            assert_readable(e.live.fig)
            check_figure(e.live.fig, f"{w.description} = {end}")
    for s in e.itemsize.options:
        e.itemsize.value = s
        e.stride.value = e.stride.max
        assert_readable(e.live.fig)
        e.stride.value = e.stride.min
        assert_readable(e.live.fig)
    e.itemsize.value, e.stride.value = 4, 8
    assert e.live.fig.layout.title.text != title and e.request.n_sectors == 32  # 32 B apart: a sector a lane
