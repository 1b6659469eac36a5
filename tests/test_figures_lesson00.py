"""Every lesson-00 figure builds, with and without a recording: every trace holds finite data, no axis range
reaches far beyond the data it shows, and the figures without a recording say so."""

import math

import pytest

from gpulab.core import hardware, reference
from gpulab.figures import lesson00 as figs
from gpulab.figures import plots
from gpulab.models import memory
from tests.figure_checks import assert_no_empty_panel, check_figure
from tests.test_bench_lesson00 import recorded_style

H200 = hardware.get("H200")


def _values(fig, axis):
    out = []
    for t in fig.data:
        if t.type == "bar" and axis == "x":  # a horizontal bar covers the axis from its left edge to its value
            out += [10 ** fig.layout.xaxis.range[0]] if fig.layout.xaxis.type == "log" else [0]
        vals = getattr(t, axis)
        assert vals is not None and len(vals) > 0, f"empty trace {t.name!r}"
        out += [v for v in vals if isinstance(v, (int, float)) and v is not None]
    return out


def _check(fig):
    """Every trace has data; each axis with a range covers its data and reaches at most one decade (log) or a
    third of the span (linear) past it."""
    assert fig.data, "no traces"
    for t in fig.data:
        xs, ys = list(t.x), list(t.y)
        assert xs and ys, f"empty trace {t.name!r}"
        assert any(isinstance(v, (int, float)) and math.isfinite(v) for v in xs + ys), f"no numbers in {t.name!r}"
    for axis in ("x", "y"):
        lay = fig.layout[f"{axis}axis"]
        vals = [v for v in _values(fig, axis) if math.isfinite(v)]
        if lay.range is None or not vals:
            continue
        lo, hi = lay.range
        if lay.type == "log":
            dlo, dhi = math.log10(min(v for v in vals if v > 0)), math.log10(max(vals))
            assert lo <= dlo + 1e-9 and hi >= dhi - 1e-9, f"{axis} range {lay.range} cuts data [{dlo}, {dhi}]"
            assert dlo - lo <= 1.01 and hi - dhi <= 1.31, f"{axis} range {lay.range} far beyond data [{dlo}, {dhi}]"
        else:
            dlo, dhi = min(vals), max(vals)
            span = max(dhi - dlo, abs(dhi), 1e-12)
            assert lo <= dlo + 1e-9 and hi >= dhi - 1e-9, f"{axis} range {lay.range} cuts data [{dlo}, {dhi}]"
            assert dlo - lo <= span / 3 + 1e-9 and hi - dhi <= span / 3 + 1e-9, (
                f"{axis} range {lay.range} far beyond data [{dlo}, {dhi}]"
            )


@pytest.mark.parametrize("name", ["H200", "H100 SXM", "A100 80GB SXM", "L4", "T4", "V100 SXM2", "B200"])
def test_hierarchy_figure(name):
    fig = figs.hierarchy_figure(hardware.get(name))
    _check(fig)
    bar = fig.data[0]
    assert list(bar.y) == ["registers", "L1/shared", "L2", "HBM"]
    assert "TB/s datasheet" in bar.text[3] and "per SM" in bar.text[0] and "not recorded" in bar.text[2]


def test_hierarchy_figure_with_measured_plateaus():
    fig = figs.hierarchy_figure(H200, recorded_style())
    _check(fig)
    text = fig.data[0].text
    assert "30 TB/s measured" in text[1] and "10 TB/s measured" in text[2]
    assert "4.8 TB/s datasheet, 4.4 TB/s measured" in text[3]
    with pytest.raises(ValueError, match="no memory hierarchy"):
        figs.hierarchy_figure(hardware.get("Seed accelerator"))


def test_staircase_figure_recorded_and_model_only():
    fig = figs.staircase_figure(recorded_style(), H200)
    _check(fig)
    names = [t.name for t in fig.data]
    assert "measured: every SM reads the whole set" in names and any(n.startswith("L2: 60 MiB") for n in names)
    assert "measured: each SM reads its own share, past its L1" in names
    assert any(n.startswith("L1 of one SM: 256 KiB") for n in names)
    empty = figs.staircase_figure(None, H200)
    _check(empty)
    assert "no recording" in empty.layout.title.text


def test_little_figure_recorded_and_model_only():
    fig = figs.little_figure(recorded_style(), H200)
    _check(fig)
    assert "900 ns" in fig.layout.title.text
    empty = figs.little_figure(None, H200)
    _check(empty)
    assert "no recording" in empty.layout.title.text and "example latency of 500 ns" in empty.layout.title.text
    model = empty.data[0]
    assert max(model.y) == H200.hbm_tbps and min(model.y) < H200.hbm_tbps / 100  # the rise and the roof


def test_ridge_generations_figure():
    fig = figs.ridge_generations_figure()
    _check(fig)
    rows = memory.ridge_points()
    names = [n for t in fig.data[:2] for n in t.y]  # one row a product, named by its tick label
    assert {"V100 SXM2 (2017)", "B200 (2024)", "TPU v4 (2021)", "TPU v6e (2024)"} <= set(names)
    assert len(names) == len(set(names)) == len(rows)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "category"
    order = list(fig.layout.yaxis.categoryarray)  # oldest at the top
    assert [int(n[-5:-1]) for n in order] == sorted(r["year"] for r in rows)
    values = {n: float(v) for t in fig.data[:2] for n, v in zip(t.y, t.text)}  # each ridge's number beside it
    assert values["V100 SXM2 (2017)"] == round(next(r["ridge"] for r in rows if r["name"] == "V100 SXM2"))


# --- readability: seen in Chromium at 366, 570 and 1400 px; these pin what was fixed there -------------------------

RECORDED = reference.load("h200")


def _all_figures():
    d = RECORDED["lesson00"]
    return {
        "ceilings": figs.ceilings_figure(RECORDED["profile"], H200, reference.label(RECORDED)),
        "ceilings, no datasheet": figs.ceilings_figure(RECORDED["profile"], None, "measured"),
        "hierarchy": figs.hierarchy_figure(H200, d),
        "staircase": figs.staircase_figure(d, H200),
        "staircase, model only": figs.staircase_figure(None, H200),
        "little": figs.little_figure(d, H200),
        "little, model only": figs.little_figure(None, H200),
        "ridge": figs.ridge_generations_figure(),
    }


def test_every_figure_passes_the_shared_check_and_its_title_lines_fit_a_phone():
    for what, fig in _all_figures().items():
        if what.startswith("ceilings"):  # two panels: bars from 0 on the left, the log panel tested below
            assert_no_empty_panel(fig)
        elif what == "hierarchy":  # log bars drawn from the axis' left edge: _check above counts that edge
            _check(fig)
        else:
            check_figure(fig, what)
        title = fig.layout.title
        assert title.automargin and (title.yref, title.yanchor) == ("paper", "bottom"), what  # lowers the plot
        for line in title.text.split("<br>"):  # plots.title: a line a 366 px figure holds (the site on a phone)
            small = line.startswith("<sup>")
            chars = len(line.removeprefix("<sup>").removesuffix("</sup>"))
            assert chars <= (plots.SUB_CHARS if small else plots.TITLE_CHARS), f"{what}: title line {line!r}"


def test_byte_ticks_are_decimal_units_one_per_decade():
    t = figs._byte_ticks(4096, 4 * 2**30)  # 4.1e3 .. 4.3e9 bytes: decades 1e3 .. 1e10
    assert t["tickvals"] == [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10]
    assert t["ticktext"] == ["1 kB", "10 kB", "100 kB", "1 MB", "10 MB", "100 MB", "1 GB", "10 GB"]
    for what in ("hierarchy", "staircase"):  # never plotly's "1B" (a billion), which reads as one byte
        assert "1 GB" in _all_figures()[what].layout.xaxis.ticktext, what


def test_ceilings_matmul_panel_has_room_above_its_tallest_bar_and_sparse_ticks():
    fig = _all_figures()["ceilings"]
    top = math.log10(H200.peak_tflops["fp8"])  # the tallest bar: the fp8 datasheet rate
    assert fig.layout.yaxis2.range[1] >= top + 0.1  # room for its label; the bar does not touch the frame
    assert list(fig.layout.yaxis2.tickvals[:4]) == [1, 2, 5, 10]  # 1-2-5 per decade, not every integer
    assert fig.layout.yaxis2.range[0] <= math.log10(RECORDED["profile"]["matmul_tflops"]["fp32"])  # the lowest bar
    assert fig.layout.yaxis2.range[1] <= top + 0.5  # and not far past the data
    assert fig.layout.yaxis.range[0] == 0 and 1.1 * H200.hbm_tbps <= fig.layout.yaxis.range[1] <= 1.3 * H200.hbm_tbps
    assert fig.layout.legend.orientation == "h"  # under the panels: it takes no width from them
