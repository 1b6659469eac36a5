"""gpulab.figures: every figure the notebooks draw, built from the H200 reference recording (what a learner
without a GPU sees) and from small made-up records whose model lines are checked against hand-computed values;
each explorer at both ends of every slider (``check_figure``: no empty trace, no axis far past its data)."""

import math
import re

import pytest

import gpulab  # noqa: F401  (first: it picks the mode)
from gpulab import figures
from gpulab.bench import lesson08
from gpulab.core import hardware, reference
from gpulab.models import attention, simt
from gpulab.models.roofline import KernelPoint
from tests.figure_checks import assert_readable, check_figure

RECORDED = reference.load("h200")


def _traces_ok(fig):
    """Every trace has data, and x and y of equal length where both are given (plain lists)."""
    assert fig.data, "empty figure"
    for tr in fig.data:
        x, y = getattr(tr, "x", None), getattr(tr, "y", None)
        if x is not None and y is not None:
            assert len(x) == len(y), (tr.name, len(x), len(y))


def test_plots_title_wraps_each_line_and_sits_above_the_plot():
    from gpulab.figures import plots

    t = plots.title("word " * 30, "source " * 30, gap=34)
    lines = t["text"].split("<br>")
    big, small = [x for x in lines if not x.startswith("<sup>")], [x for x in lines if x.startswith("<sup>")]
    assert len(big) == 3 and all(len(x) <= plots.TITLE_CHARS for x in big)  # 150 characters: three lines
    assert len(small) == 3 and all(x.endswith("</sup>") and len(x) - 11 <= plots.SUB_CHARS for x in small)
    assert lines == big + small  # the subtitle under the title, each line its own <sup>
    assert t["automargin"] and (t["yref"], t["y"], t["yanchor"]) == ("paper", 1, "bottom") and t["pad"]["b"] == 34
    assert plots.title("short")["text"] == "short"


def test_plots_title_wraps_fewer_characters_in_larger_type():
    from gpulab.figures import plots

    words = "a phone's figure holds a title line of so many characters " * 3
    for size in (13, 14):
        lines = plots.title(words, words, size=size)["text"].split("<br>")
        subs = [s.removeprefix("<sup>").removesuffix("</sup>") for s in lines if s.startswith("<sup>")]
        heads = [s for s in lines if not s.startswith("<sup>")]
        assert subs and heads and max(map(len, heads)) <= plots.TITLE_CHARS * 13 / size
        assert max(map(len, subs)) <= plots.SUB_CHARS * 13 / size
        assert max(map(len, subs)) > plots.SUB_CHARS * 13 / size - 12  # wrapped near the width, not far under it


def test_plots_coincide_finds_runs_of_two_or_more_shared_x():
    from gpulab.figures import plots

    a = {k: 1.0 for k in range(6)}
    b = dict(zip(range(6), [1.02, 1.5, 1.01, 0.98, 1.5, 1.0]))  # 0 alone; 2..3 within 5%; 5 alone
    assert plots.coincide(a, b) == [(2, 3)] and plots.coincide(a, b, tol=0.01) == []
    assert plots.coincide(a, dict(a)) == [(0, 5)] and plots.coincide(a, {9: 1.0}) == []  # no shared x: none
    with pytest.raises(ValueError, match="tol"):
        plots.coincide(a, b, tol=1.5)


def test_lesson00_ceilings_beside_the_datasheet():
    profile = RECORDED["profile"]
    spec = hardware.find(profile["gpu"])
    fig = figures.lesson00.ceilings_figure(profile, spec, "recorded")
    _traces_ok(fig)
    assert len(fig.data) == 4 and "recorded" in fig.layout.title.text
    assert fig.data[2].text[0] == f"{profile['copy_tbps'] / spec.hbm_tbps:.0%}"
    assert len(figures.lesson00.ceilings_figure(profile, None).data) == 2  # no datasheet: measured bars only


def test_lesson01_measured_roofline():
    points = [KernelPoint(**p) for p in RECORDED["roofline_points"]]
    fig = figures.lesson01.measured_roofline_figure(RECORDED["profile"], points, "recorded")
    check_figure(fig, "measured roofline")
    roofs = [tr for tr in fig.data if tr.mode == "lines"]
    assert len(roofs) == 4  # measured fp32 and bf16, datasheet fp32 and bf16
    assert fig.layout.legend.orientation == "h"  # under the plot: it takes no width from it
    lowest = min(min(tr.y) for tr in fig.data)  # the slowest point, 0.4 decade above the bottom of the y axis
    assert fig.layout.yaxis.range[0] == pytest.approx(math.log10(lowest) - 0.4)
    # the datasheet's roofs under the measured ones and 2 px wider, so both show where the slopes meet
    assert [(tr.line.dash, tr.line.width) for tr in roofs] == [("dash", 4)] * 2 + [("solid", 2)] * 2
    bw = RECORDED["profile"]["copy_tbps"]  # fp32's and bf16's roofs share one slope: the figure says so, and where
    ridge = RECORDED["profile"]["matmul_tflops"]["fp32"] / bw
    said = re.search(
        r"fp32 and bf16 \(measured\) share the ([\d.]+) TB/s slope up to I = ([\d.]+)", fig.layout.title.text
    )
    assert said and float(said[1]) == round(bw, 2) and float(said[2]) == pytest.approx(ridge, rel=0.05)
    roofs = [
        dict(label=f"{k}: x", peak_tflops=c, hbm_tbps=b) for k, c, b in (("a", 100, 1), ("b", 100, 2), ("c", 9, 5))
    ]
    shared = figures.lesson01.shared_roofs(roofs)  # a and b share the flat from their ridges up; c shares nothing
    assert shared == ["a and b share the 100 TFLOP/s roof from I = 95.5 FLOP/B"]  # 5% under a's ridge at 100


def _slider_ends(slider):
    """The two ends of an ipywidgets slider: exponents for a log slider, options for a selection slider."""
    if hasattr(slider, "options"):
        return [slider.options[0], slider.options[-1]]
    if hasattr(slider, "base"):
        return [slider.base**slider.min, slider.base**slider.max]
    return [slider.min, slider.max]


def test_lesson01_explorer_follows_every_slider_to_both_ends():
    e = figures.lesson01.InteractiveRoofline(flops=1e12, bytes_moved=100e9)  # the seed: 100 ms, memory-bound
    assert e.bound.limiter == "memory" and math.isclose(e.bound.time_ms, 100, rel_tol=1e-6)
    title = e.live.fig.layout.title.text
    e.d.value = 1e9  # 1 GB instead of 100 GB
    assert e.bound.limiter == "compute" and e.live.fig.layout.title.text != title
    check_figure(e.live.fig, "explorer at D = 1 GB")
    for preset in e.preset.options:
        e.preset.value = preset
        check_figure(e.live.fig, f"explorer on {preset}")
    for name in ("c", "b", "f", "d"):
        slider = getattr(e, name)
        start = slider.value
        for end in _slider_ends(slider):
            slider.value = end
            check_figure(e.live.fig, f"explorer with {name} = {end:g}")
            star = e.live.fig.data[1]  # the kernel sits on the plot
            lo, hi = e.live.fig.layout.yaxis.range
            assert lo <= math.log10(star.y[0]) <= hi, (name, end)
            layout = e.live.fig.layout  # 1e-5 and 1e6 read as powers of ten, not SI prefixes "10µ", "1M"
            assert layout.xaxis.exponentformat == layout.yaxis.exponentformat == "power", (name, end)
        slider.value = start


def test_lesson02_branch_figures():
    seed = simt.branch(lambda tid: tid < 4, 3, 2)
    fig = figures.lesson02.branch_figure(seed, title="if thread_id < 4")
    check_figure(fig, "branch")
    assert sorted(set(fig.data[0].y)) == [0, 1, 2, 3, 4]  # 3 steps of A, then 2 of B
    e = figures.lesson02.BoundaryExplorer(boundary=4, cost_a=3, cost_b=2)
    assert e.trace.lanes_a == (0, 1, 2, 3) and e.trace.steps_paid == 5
    title = e.live.fig.layout.title.text
    e.boundary.value = 31
    assert e.trace.steps_paid == 5 and e.live.fig.layout.title.text != title
    for end, steps in ((0, 2), (32, 3)):  # uniform: the warp pays one path, B (2 steps) or A (3)
        e.boundary.value = end
        assert not e.trace.divergent and e.trace.steps_paid == steps
        check_figure(e.live.fig, f"boundary {end}")
        assert sorted(e.live.fig.layout.yaxis.range) == [-0.5, steps - 0.5]
        assert (e.live.fig.layout.yaxis.dtick, e.live.fig.layout.yaxis.tick0) == (1, 0)  # ticks on whole steps only


def test_lesson02_loop_sweep_shows_the_group_size_and_follows_it():
    e = figures.lesson02.LoopSweepExplorer(None)
    assert len(e.live.fig.data) == 2 and "gpulab-slider" in e.group._dom_classes
    assert e.group.value == 32 and list(e.group.options) == [32, 64, 128, 256, 512, 1024]  # the size, not 2**k
    e32, e1024 = e.curves(32), e.curves(1024)
    assert list(e.live.fig.data[0].y) == e32["interleaved"]
    for end in _slider_ends(e.group):
        e.group.value = end
        check_figure(e.live.fig, f"loop sweep at group {end}")
        assert f"groups of {end} lanes" in e.live.fig.layout.title.text
    assert list(e.live.fig.data[0].y) == e1024["interleaved"] != e32["interleaved"]
    assert all(s >= i for s, i in zip(e32["sorted"], e32["interleaved"]))  # sorting never loses
    assert all(a >= b for a, b in zip(e32["interleaved"], e1024["interleaved"]))  # bigger groups suffer more
    # by hand: 1 element in 1024 with 64 trips, the rest 4; sorted in groups of 32 nearly every group pays 4
    with_data = figures.lesson02.LoopSweepExplorer(RECORDED["lesson02"], group=1024)
    assert len(with_data.live.fig.data) == 4  # the model for kernel (c)'s cases, both layouts
    assert with_data.live.fig.layout.legend.orientation == "h"
    check_figure(with_data.live.fig, "loop sweep with the recorded cases")
    with pytest.raises(ValueError, match="group must be one of"):
        figures.lesson02.LoopSweepExplorer(None, group=5)


def test_lesson02_variants_figure():
    rec = RECORDED["lesson02"]
    fig = figures.lesson02.variants_figure(rec, "recorded")
    check_figure(fig, "variants")
    assert len(fig.data) == 2 and len(fig.data[0].y) == len(fig.data[1].y)
    legend = fig.layout.legend  # in rows pinned to the figure's bottom, under the x title at any width
    assert (legend.orientation, legend.yref, legend.y, legend.yanchor) == ("h", "container", 0, "bottom")
    # the recording's model rows follow from the paths alone, and sorting never makes blocks pay more steps
    t_a, t_b = rec["path_a"]["median_ms"], rec["path_b"]["median_ms"]
    assert all(abs(r["predicted_ms"] - (t_a + t_b)) < 1e-12 for r in rec["where"])
    rows_c = {(r["frac_expensive"], r["layout"]): r for r in rec["loop"]["rows"]}
    assert all(rows_c[p, "sorted"]["block_steps"] <= rows_c[p, "interleaved"]["block_steps"] for p, _ in rows_c)


def test_lesson03_figures_from_the_recording():
    rec = RECORDED["lesson03"]
    fig = figures.lesson03.relu_sweep_figure(rec["relu_sweep"], 4.0, "recorded")
    _traces_ok(fig)
    assert_readable(fig)
    dtypes = {r["dtype"] for r in rec["relu_sweep"]}
    assert len(fig.data) == 2 * len(dtypes) + 1 and list(fig.data[-1].y) == [4000.0, 4000.0]  # 4 TB/s = 4000 GB/s
    assert fig.layout.xaxis.dtick == fig.layout.yaxis.dtick == 1  # one label a decade, not 2 and 5 between them
    # where dtypes run at one rate (fp16 and bf16) or all meet the copy bandwidth, each stays visible: torch's bands
    # first, each 2 px or more narrower than the one before, the model's line narrower still; gpulab's marks nested
    bands = [tr for tr in fig.data if tr.name.startswith("torch")] + [fig.data[-1]]
    assert list(fig.data[: len(dtypes)]) == bands[:-1] and all(tr.mode == "lines" for tr in bands)
    assert all(a.line.width - b.line.width >= 2 for a, b in zip(bands, bands[1:]))
    marks = sorted((tr.marker for tr in fig.data if tr.name.startswith("gpulab")), key=lambda m: -m.size)
    assert all("open" in a.symbol and a.size - b.size >= 3 for a, b in zip(marks, marks[1:]))
    errors = dict(fp32=1e-7, tf32=1e-4, bf16=1e-3, fp16=1e-4, fp8=2e-2, how="made up")
    rates = dict(fp32=50.0, tf32=300.0, bf16=600.0, fp16=600.0, fp8=None)
    fig = figures.lesson03.rate_vs_error_figure(errors, rates, "made up")
    assert [tr.name for tr in fig.data] == ["fp32", "tf32", "bf16", "fp16"]  # fp8 has no rate: left out
    assert_readable(fig)
    lo, hi = fig.layout.yaxis.range  # 1-2-5 labels, never the 3, 4, ..., 9 of every log grid line
    assert set(t for t in fig.layout.yaxis.tickvals if lo <= math.log10(t) <= hi) <= {50, 100, 200, 500, 1000}
    assert fig.layout.xaxis.dtick == 1
    m = rec["matmul"]
    assert_readable(figures.lesson03.rate_vs_error_figure({**m["error"]}, m["tflops"], "recorded"))


def test_lesson03_error_axes_read_in_powers_of_ten():
    acc = RECORDED["lesson03"]["accumulation"]
    fig = figures.lesson03.accumulation_figure(acc, "recorded")
    assert [list(tr.x) for tr in fig.data] == [acc["k"]] * 2 and list(fig.data[0].y) == acc["fp16"]
    assert fig.layout.yaxis.exponentformat == "power"  # not SI prefixes ("100n, 1µ") on an error axis
    assert_readable(fig)
    made_up = dict(k=[16, 1024], fp16=[1e-4, 1e-2], fp32=[1e-7, 1e-6], m=16, inputs="N(0,1)")
    assert list(figures.lesson03.accumulation_figure(made_up, "made up").data[1].y) == [1e-7, 1e-6]


def _formats_rows(fmt_bits_err):
    return [dict(data=d, format=f, block=None, bits_per_value=b, rel_error=e) for d, f, b, e in fmt_bits_err]


def test_lesson03_formats_points_do_not_hide_each_other():
    # two data sets with the same error for one format, two formats 0.25 bit apart: every marker has its own spot
    rows = _formats_rows(
        [
            ("a", "fp8_e4m3", 8.0, 0.02),
            ("a", "mxfp8", 8.25, 0.02),
            ("b", "fp8_e4m3", 8.0, 0.02),
            ("b", "mxfp8", 8.25, 0.03),
            ("a", "nvfp4", 4.5, 0.2),
            ("b", "nvfp4", 4.5, 0.2),
        ]
    )
    fig = figures.lesson03.error_vs_bits_figure(rows)
    spots = [(x, y) for tr in fig.data for x, y in zip(tr.x, tr.y)]
    assert len(set(spots)) == len(spots) == 6
    assert list(fig.layout.yaxis.ticktext) == ["nvfp4: 4.5 bits", "fp8_e4m3: 8 bits", "mxfp8: 8.25 bits"]  # by bits
    assert fig.layout.xaxis.exponentformat == "power"
    assert_readable(fig)


def test_lesson03_formats_explorer_at_both_ends_of_each_slider():
    e = figures.lesson03.FormatsExplorer(mx_block=32, nv_block=16, n=256)
    assert "8.25 bits/value" in e.live.fig.layout.title.text
    title, x_before = e.live.fig.layout.title.text, list(e.live.fig.data[0].x)
    e.mx.value = 128
    assert e.live.fig.layout.title.text != title and list(e.live.fig.data[0].x) != x_before
    assert any(r["format"] == "mxfp8" and r["bits_per_value"] == 8 + 8 / 128 for r in e.rows)
    for mx in (e.BLOCKS[0], e.BLOCKS[-1]):
        for nv in (e.BLOCKS[0], e.BLOCKS[-1]):
            e.mx.value, e.nv.value = mx, nv
            assert_readable(e.live.fig)
            labels = list(e.live.fig.layout.yaxis.ticktext)
            assert f"mxfp8, block {mx}: {8 + 8 / mx:.3g} bits" in labels, labels  # tick labels follow the slider


def test_lesson04_model_lines_by_hand():
    data = dict(
        sweep=[
            dict(n=10**6, method=m, ms=t)
            for m, t in (("fused", 0.05), ("unfused", 0.1), ("eager", 0.09), ("compile", 0.05))
        ],
        launch=dict(triton_us=5.0, torch_us=10.0, triton_cpu_us=20.0),
        copy_tbps=1.0,
    )
    fig = figures.lesson04.time_figure(data, "made up")
    _traces_ok(fig)
    model = {tr.name: tr.y[0] for tr in fig.data if tr.name.startswith(("model", "copy"))}
    # 5 launches x 5 us + 44e6 bytes / 1 TB/s = 25 us + 44 us; 5 x 10 us + 44 us; 1 launch + 8e6 bytes = 5 us + 8 us
    assert math.isclose(model["model: 5 Triton launches + 44n B"], 0.069)
    assert math.isclose(model["model: 5 torch launches + 44n B"], 0.094)
    assert math.isclose(model["model: 1 Triton launch + 8n B"], 0.013)
    assert math.isclose(model["model: 1 launch at Triton's CPU cost + 8n B"], 0.028)
    assert math.isclose(model["copy bound: 8n B at copy bandwidth"], 0.008)


def test_lesson04_time_figure_views_are_few_traces_each():
    rec = RECORDED["lesson04"]
    fig = figures.lesson04.time_figure(rec, "recorded")
    assert_readable(fig)  # every dropdown view has data
    buttons = fig.layout.updatemenus[0].buttons
    assert len(buttons) == len(figures.lesson04.TIME_VIEWS) == 2
    for b in buttons:
        assert 4 <= sum(b.args[0]["visible"]) <= 7, b.label
    methods = {r["method"] for r in rec["sweep"]}
    shown = {tr.name for tr in fig.data if not tr.name.startswith(("model", "copy"))}
    assert len(shown) == len(methods)  # every measured method is in one view
    assert fig.layout.legend.orientation == "h"
    assert all(tr.legendgroup is None for tr in fig.data)  # groups stack the legend one item a row, under the plot
    for v, b in enumerate(buttons):  # each view's y axis spans its measurements, however low the copy bound goes
        measured = [y for tr in fig.data if tr.meta == v and tr.mode == "markers+lines" for y in tr.y]
        lo = math.log10(min(measured))
        if "yaxis.range" in b.args[1]:
            r0, r1 = b.args[1]["yaxis.range"]
            assert lo - 1 < r0 < lo and r1 > math.log10(max(measured)), (b.label, r0, r1)
        else:
            models = [y for tr in fig.data if tr.meta == v for y in tr.y]
            assert b.args[1]["yaxis.autorange"] is True and math.log10(min(models)) >= lo - 1, b.label
    assert "yaxis.range" in buttons[1].args[1]  # the fused view: the copy bound at n = 2^10 is decades under a launch


def test_lesson04_pressure_legend_leaves_the_right_axis_free():
    rows = RECORDED["lesson04"]["pressure"]["rows"]
    fig = figures.lesson04.pressure_figure(rows, "recorded")
    blocks = [str(r["block"]) for r in rows if r["study"] == "block"]
    assert len(fig.data) == 3 and list(fig.data[0].x) == blocks
    legend = fig.layout.legend
    assert fig.layout.yaxis2.side == "right" and legend.orientation == "h"
    assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")  # under the plot, not at its right
    assert fig.layout.yaxis2.tickmode == "auto"  # its own round ticks, not the left axis's grid in odd steps (1.51)
    assert_readable(fig)


def test_lesson04_launch_explorer_at_both_ends_of_each_slider():
    rec = RECORDED["lesson04"]
    measured = [r for r in rec["sweep"] if r["method"] in ("unfused", "fused")]
    e = figures.lesson04.LaunchModelExplorer(rec["launch"]["triton_us"], rec["copy_tbps"], measured=measured, title="t")
    title, marker = e.live.fig.layout.title.text, list(e.live.fig.data[2].x)
    e.log2_n.value = 26
    assert e.live.fig.layout.title.text != title and list(e.live.fig.data[2].x) != marker
    assert e.times(2**10)["unfused (5 kernels)"] > e.times(2**10)["fused (1 kernel)"]
    for s in (e.log2_n, e.overhead, e.bandwidth):
        for end in (s.min, s.max):
            s.value = end if s is not e.overhead else 10**end  # FloatLogSlider's min/max are exponents
            assert_readable(e.live.fig)
            assert e.live.fig.layout.xaxis.dtick == e.live.fig.layout.yaxis.dtick == 1  # decade labels only
    assert e.live.fig.layout.legend.orientation == "h"


def test_lesson04_coincide_finds_runs_of_two_or_more_sizes():
    def rows(ms):
        return [dict(n=2**k, ms=t) for k, t in zip(range(10, 16), ms)]

    a = rows([1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    b = rows([1.02, 1.5, 1.01, 0.98, 1.5, 1.0])  # 2^10 alone; 2^12..2^13 within 3%; 2^15 alone
    assert figures.lesson04.coincide(a, b) == [(2**12, 2**13)]
    assert figures.lesson04.coincide(a, b, tol=0.01) == []  # within 1%: 2^12 alone, and a run needs two sizes
    assert figures.lesson04.coincide(a, rows([1.0] * 6)) == [(2**10, 2**15)]
    with pytest.raises(ValueError, match="tol"):
        figures.lesson04.coincide(a, b, tol=3)


def _lesson04_made_up(eager_factor: float) -> dict:
    """A lesson04 record: unfused at 1 ms from 2^20 up (0.1 ms below), eager ``eager_factor`` x unfused from 2^20
    up (0.2 ms below), fused a tenth of unfused, compile at 0.05 ms."""
    sweep = []
    for k in range(16, 25, 2):
        unfused = 1.0 if k >= 20 else 0.1
        eager = eager_factor if k >= 20 else 0.2
        for m, t in (("unfused", unfused), ("eager", eager), ("fused", unfused / 10), ("compile", 0.05)):
            sweep.append(dict(n=2**k, method=m, ms=t))
    return dict(sweep=sweep, launch=dict(triton_us=5.0, torch_us=10.0, triton_cpu_us=20.0), copy_tbps=1.0)


def test_lesson04_time_figure_says_where_two_methods_coincide():
    fig = figures.lesson04.time_figure(_lesson04_made_up(1.01), "made up")
    buttons = fig.layout.updatemenus[0].buttons
    notes = [b.args[1]["annotations"] for b in buttons]
    assert len(notes[0]) == 1 and notes[1] == []  # the fused view has no pair within 3%
    text = notes[0][0]["text"]
    said = text.replace("<br>", " ")  # the note in lines a phone's figure holds (the site on a 412 px screen)
    assert "5 Triton kernels" in said and "torch eager" in said and "from n = 2^20 up" in said
    assert max(len(line) for line in text.split("<br>")) <= figures.lesson04.NOTE_CHARS
    assert [a.text for a in fig.layout.annotations] == [text]  # the first draw shows the first view's notes
    assert math.isclose(notes[0][0]["x"], 20 * math.log10(2))  # the arrow points at the first size they coincide at
    marks = {tr.name: tr.marker.symbol for tr in fig.data if tr.meta == 0 and tr.mode == "markers+lines"}
    assert len(set(marks.values())) == len(marks), marks  # one on the other, both stay visible
    apart = figures.lesson04.time_figure(_lesson04_made_up(1.1), "made up")  # 10% apart: drawn apart
    assert not apart.layout.annotations and all(
        b.args[1]["annotations"] == [] for b in apart.layout.updatemenus[0].buttons
    )
    recorded = figures.lesson04.time_figure(RECORDED["lesson04"], "recorded")  # the H200: 0.1916 vs 0.1928 ms at 2^24
    assert any("5 Triton kernels and torch eager" in a.text.replace("<br>", " ") for a in recorded.layout.annotations)
    # the fused view: the fused kernel and torch.compile 1 to 9% apart from 2^20 to 2^26, two pixels at 570 px, and
    # their marks (a dot, a cross) do not nest: named within 10%; the nested pairs of that view (a square ring
    # around the dot or a diamond) only within 3%, as the first view's
    fused = [a["text"].replace("<br>", " ") for a in recorded.layout.updatemenus[0].buttons[1].args[1]["annotations"]]
    assert fused == ["fused (1 Triton kernel) and torch.compile (1 kernel) coincide from n = 2^20 to 2^26 (within 10%)"]


def _lesson04_drawn():
    """Lesson 04's figures from the recording, each with the dropdown update it is shown after (or None): the
    time figure as first drawn and in each view, the launch explorer at its start and both ends of log2 n, the pressure figure."""
    import plotly.graph_objects as go

    rec = RECORDED["lesson04"]
    time = figures.lesson04.time_figure(rec, "recorded")
    yield "time figure", time, None
    for b in time.layout.updatemenus[0].buttons:
        yield f"time figure, view {b.label!r}", time, list(b.args)
    measured = [r for r in rec["sweep"] if r["method"] in ("unfused", "fused")]
    e = figures.lesson04.LaunchModelExplorer(rec["launch"]["triton_us"], rec["copy_tbps"], measured=measured, title="t")
    for log2_n in (e.log2_n.value, e.log2_n.min, e.log2_n.max):
        e.log2_n.value = log2_n
        yield f"launch explorer at log2 n = {log2_n}", go.Figure(e.live.fig), None
    yield "pressure figure", figures.lesson04.pressure_figure(rec["pressure"]["rows"], "recorded"), None


@pytest.mark.browser
def test_lesson04_figures_in_chromium_as_first_drawn_and_widened(browser):
    """Each lesson 04 figure drawn by plotly.js at a narrow notebook column (570 px) and a wide one (1400 px):
    directly, and first at plotly's default 700 px then widened to the cell, as a notebook's first draw is
    (``widgets.LiveFigure._fit_width``): no text on another (the x title on the legend), no hidden marker."""
    from tests.browser.figure_geometry import FigurePage, problems, stale, unknown

    page = FigurePage(browser)
    found = []
    try:
        for name, fig, update in _lesson04_drawn():
            for width in (570, 1400):
                for first in (width, 700):
                    page.draw(fig, first)
                    page.page.evaluate(
                        """([w, update]) => { const gd = document.getElementById('fig'); gd.style.width = w + 'px';
                             return Plotly.relayout(gd, {width: w}).then(() => update && Plotly.update(gd, ...update)); }""",
                        [width, update],
                    )
                    found += problems(page.geometry(), f"{name} at {width} px (first drawn at {first})")
    finally:
        page.close()
    left = unknown(found, LESSON04_KNOWN) + stale(found, LESSON04_KNOWN)
    assert not left, "\n".join(left)


#: What is still broken in lesson 04's figures, let pass by its browser test (and failing it once fixed).
LESSON04_KNOWN: dict = {}


def _annotations_within_x(fig, what):
    """Annotations placed in data units on a log x axis sit inside the data's decades (plotly reads their x in
    log10 units: x = 256 there would stretch the axis to 10^256)."""
    xs = [v for tr in fig.data for v in (tr.x or []) if isinstance(v, (int, float)) and v > 0]
    for ann in fig.layout.annotations or ():
        if ann.xref in (None, "x") and fig.layout.xaxis.type == "log" and ann.x is not None:
            assert math.log10(min(xs)) - 1 <= ann.x <= math.log10(max(xs)) + 1, f"{what}: annotation at x={ann.x}"


def test_lesson07_figures():
    rec = RECORDED["lesson07"]
    fig = figures.lesson07.tiles_figure(rec, "recorded")
    check_figure(fig, "tiles_figure")
    assert_readable(fig)
    _annotations_within_x(fig, "tiles_figure")
    notes = [a.text for a in fig.layout.annotations]
    assert len(notes) == 1 and "fp32 512 KiB" in notes[0] and "bf16 256 KiB" in notes[0]  # one note per T, not two
    assert notes and fig.layout.annotations[0].x == pytest.approx(math.log10(256))
    check_figure(figures.lesson07.sweep_figure(rec["sweep"], "recorded"), "sweep_figure")
    fig = figures.lesson07.wave_model_figure([1792, 1793], (256, 128), gpu="H200")
    sms = hardware.get("H200").sms
    assert fig.data[0].y[0] == pytest.approx(98 / sms)  # 7 x 14 = 98 full tiles in one wave


def test_lesson07_build_figure_with_and_without_a_recording():
    fig = figures.lesson07.build_figure(None, RECORDED["profile"], "no GPU")
    assert "no recording yet" in fig.layout.title.text
    assert_readable(fig)
    # the model bounds by hand, fp16 4096^3 with 128 x 128 tiles: no reuse 2N^3 loads of 2 bytes -> 0.5 FLOP/B;
    # tiled T / s = 64 FLOP/B; both below the ridge, so the bound is bandwidth x intensity
    bw = RECORDED["profile"]["copy_tbps"]
    bars = fig.data[-1]  # across: a step a row, its name one line beside its bar (upright, six ran together on a phone)
    assert bars.orientation == "h" and fig.layout.yaxis2.autorange == "reversed"  # the first step at the top
    assert list(bars.y[:4]) == ["no reuse", "tiled", "grouped", "pipelined"]
    assert bars.x[0] == pytest.approx(0.5 * bw) and bars.x[1] == pytest.approx(64 * bw)
    # with lesson 00's L2 bandwidth the steps' bounds take the L2 roof; the fast path and torch keep HBM's
    peak = RECORDED["profile"]["matmul_tflops"]["fp16"]
    bars = figures.lesson07.build_figure(None, RECORDED["profile"], "no GPU", l2_tbps=8.0).data[-1]
    assert bars.x[0] == pytest.approx(0.5 * 8.0) and bars.x[1] == pytest.approx(min(peak, 64 * 8.0))
    assert bars.x[4] == pytest.approx(min(peak, bw * 4096 / 3))  # 2N^3 / (3 N^2 2 B) = N/3 FLOP/B, from HBM
    made_up = {
        "build": [
            dict(step=s, n=4096, dtype="fp16", tflops=t)
            for s, t in zip(
                ["no reuse", "tiled", "grouped", "pipelined", "fast path", "torch"], [2, 200, 220, 400, 700, 720]
            )
        ]
    }
    fig = figures.lesson07.build_figure(made_up, RECORDED["profile"], "made up")
    assert "no recording" not in fig.layout.title.text and list(fig.data[-1].x) == [2, 200, 220, 400, 700, 720]
    assert_readable(fig)
    # the roofline above the bars (side by side, each was too narrow in a notebook column); each step's mark named
    # under its bar in its colour, not in the legend; the measured roof under the others and 2 px wider
    fig = figures.lesson07.build_figure(made_up, RECORDED["profile"], "made up", l2_tbps=8.0)
    assert fig.layout.yaxis.domain[0] > fig.layout.yaxis2.domain[1]
    marks = [tr for tr in fig.data if tr.type == "scatter" and tr.mode == "markers"]
    glyphs = figures.lesson07.GLYPHS
    assert [tr.name for tr in marks] == list(fig.layout.yaxis2.tickvals) and not any(tr.showlegend for tr in marks)
    for tr, text in zip(marks, fig.layout.yaxis2.ticktext):
        assert text == f"<span style='color:{tr.marker.color}'>{glyphs[tr.marker.symbol]}</span> {tr.name}"
    roofs = [tr for tr in fig.data if tr.type == "scatter" and tr.mode == "lines"]
    assert roofs[0].name.startswith("measured") and len(roofs) == 3
    assert all(roofs[0].line.width - r.line.width >= 2 for r in roofs[1:])
    rec = RECORDED["lesson07"]
    assert_readable(figures.lesson07.build_figure(rec if "build" in rec else None, RECORDED["profile"], "recorded"))


def test_lesson07_wave_explorer_follows_its_slider():
    waves = figures.lesson07.WaveExplorer(n=1793, tile=(256, 128), sms=108)
    waves.n.value = 1792  # seed: 7 x 14 = 98 tiles, one wave on 108 SMs
    assert waves.plan.waves == 1 and list(waves.live.fig.data[3].y) == [98]
    waves.n.value = 1793  # seed: 8 x 15 = 120 tiles, a second wave with 12 busy SMs
    assert waves.plan.waves == 2 and list(waves.live.fig.data[3].y) == [108, 12]
    assert list(waves.live.fig.data[4].y) == [0, 96]
    waves.sms.value = 1  # 120 waves: the full ones share one bar, the last has its own
    assert list(waves.live.fig.data[3].x) == ["1-119<br>(each)", "120"] and list(waves.live.fig.data[3].y) == [1, 1]


@pytest.mark.parametrize("end", ["min", "max"])
def test_lesson07_explorers_at_both_ends_of_every_slider(end):
    tiles = figures.lesson07.TileExplorer()
    for w in (tiles.T, tiles.stages):
        w.value = w.options[0 if end == "min" else -1] if w is tiles.T else getattr(w, end)
        assert_readable(tiles.live.fig)  # per axis: these figures have two panels (check_figure reads one)
    for dtype in tiles.dtype.options:
        tiles.dtype.value = dtype
        assert_readable(tiles.live.fig)
    # the intensity line has its own panel: it never shares an axis with the footprint line
    assert tiles.live.fig.data[2].yaxis != tiles.live.fig.data[0].yaxis
    T = tiles.T.value
    assert tiles.live.fig.data[4].y[0] == pytest.approx(T / {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}[dtype])
    waves = figures.lesson07.WaveExplorer()
    for w in (waves.n, waves.tile_m, waves.tile_n, waves.sms):
        w.value = getattr(w, end)
        assert_readable(waves.live.fig)


def test_lesson08_figures_and_points():
    rec = RECORDED["lesson08"]
    model_only = figures.lesson08.naive_flash_figure(None)
    assert len(model_only.data) == 2 and "model only" in model_only.layout.title.text
    assert "xaxis2" not in model_only.layout.to_plotly_json()  # no empty time panel beside the memory model
    _traces_ok(figures.lesson08.naive_flash_figure(rec["sweep"], "recorded"))
    fig = figures.lesson08.headline_figure(rec["headline"], "recorded")
    assert len(fig.data) == 6 and len(fig.data[0].y) == len(rec["headline"])
    points = lesson08.roofline_points(rec)
    fig = figures.lesson08.roofline_figure(points, RECORDED["profile"], "recorded")
    _traces_ok(fig)
    # lengths in thousands of 1024, short enough beside close points on a phone; L2's d=64 group, close together
    # above the HBM slope, labelled on its left (on its right the label ran under d=128's points)
    labels = {tr.name: [(t, pos) for t, pos in zip(tr.text, tr.textposition) if t] for tr in fig.data[1:]}
    assert labels["flash L2 d=64"] == [("L=16k", "middle left")] and labels["naive fwd d=128"][0][0] == "L=32k"
    assert [t for t, _ in labels["flash DRAM d=64"]] == ["L=1k", "L=16k"]
    assert lesson08.roofline_points(None) == []


def test_lesson08_every_figure_is_readable():
    rec, profile = RECORDED["lesson08"], RECORDED["profile"]
    built = {
        "naive_flash model": figures.lesson08.naive_flash_figure(None),
        "naive_flash": figures.lesson08.naive_flash_figure(rec["sweep"], "recorded"),
        "headline": figures.lesson08.headline_figure(rec["headline"], "recorded"),
        "roofline": figures.lesson08.roofline_figure(lesson08.roofline_points(rec), profile, "recorded"),
        "roofline, ceilings only": figures.lesson08.roofline_figure([], profile, "ceilings only"),
    }
    for what, fig in built.items():
        check_figure(fig, what)
        assert_readable(fig)


def test_lesson08_headline_names_each_setting_once_in_one_line():
    headline = RECORDED["lesson08"]["headline"]
    fig = figures.lesson08.headline_figure(headline, "recorded")
    assert {tr.orientation for tr in fig.data} == {"h"}  # names read across: none turns or runs into the next
    assert fig.layout.yaxis2.matches == "y" and fig.layout.yaxis2.showticklabels is False  # named at the left only
    names = list(fig.data[0].y)
    assert len(set(names)) == len(headline) and not any("<br>" in n for n in names)
    r = headline[0]
    assert names[0] == f"d={r['d']}, L={r['L'] // 1024}k, {'causal' if r['causal'] else 'full'}"


def test_lesson08_roofline_axes_span_the_points_not_ten_decades():
    # made-up points at 50 and 120 FLOP/B, 100 and 500 TFLOP/s; roof 600 TFLOP/s, 4 TB/s: ridge 150 FLOP/B
    pts = [
        KernelPoint("naive fwd d=128 L=1024", 5e12, 1e11, 50.0, dtype="bf16", op_kind="matmul"),
        KernelPoint("flash fwd d=128 L=1024", 1.2e13, 1e11, 24.0, dtype="bf16", op_kind="matmul"),
    ]
    fig = figures.lesson08.roofline_figure(pts, {"matmul_tflops": {"bf16": 600.0}, "copy_tbps": 4.0})
    assert fig.layout.xaxis.range == pytest.approx([math.log10(50 / 3), math.log10(150 * 1.5)])  # room for labels
    assert fig.layout.yaxis.range == pytest.approx([math.log10(100 / 1.5), math.log10(600 * 1.3)])
    assert [tr.name for tr in fig.data[1:]] == ["naive fwd d=128", "flash fwd d=128"]  # one series each
    check_figure(fig, "made-up roofline")
    fig = figures.lesson08.roofline_figure(pts, {"matmul_tflops": {"bf16": 600.0}, "copy_tbps": 4.0}, l2_tbps=10.0)
    roof = next(tr for tr in fig.data if tr.name.startswith("L2 roof"))  # dashed, meeting the peak at 60 FLOP/B
    assert roof.line.dash == "dash" and list(roof.x)[-1] == pytest.approx(60) and list(roof.y)[-1] == 600


def test_lesson08_explorers_at_both_ends_of_each_slider():
    rec = RECORDED["lesson08"]["sweep"]
    for data in (rec, None):
        ex = figures.lesson08.NaiveVsFlashExplorer(data, where="recorded")
        measured = sorted({r["L"] for r in rec["rows"]})
        if data:  # the slider spans the recorded lengths: no end with an empty time panel
            assert (2**ex.k.min, 2**ex.k.max) == (measured[0], measured[-1])
            layout = ex.live.fig.layout  # memory above time: side by side, a phone's panels were 120 px wide
            assert layout.yaxis.domain[0] > layout.yaxis2.domain[1] and layout.xaxis2.domain == layout.xaxis.domain
        for k in (ex.k.min, ex.k.max):
            ex.k.value = k
            check_figure(ex.live.fig, f"NaiveVsFlashExplorer k={k}, {'recorded' if data else 'model only'}")
            assert_readable(ex.live.fig)
        if data is None:
            assert len(ex.live.fig.data) == 1 and "no recording yet" in ex.live.fig.layout.title.text
    walk = figures.lesson08.RowWalkExplorer()
    for t in (walk.tile.min, walk.tile.max):
        walk.tile.value = t
        check_figure(walk.live.fig, f"RowWalkExplorer tile={t}")
        assert_readable(walk.live.fig)


def test_roofline_points_leave_out_causal_rows_and_oom():
    made_up = dict(
        headline=[
            dict(d=64, L=1024, B=16, H=32, causal=False, fwd_flops=1e12, ours=dict(fwd_ms=2.0)),
            dict(d=64, L=1024, B=16, H=32, causal=True, fwd_flops=5e11, ours=dict(fwd_ms=1.0)),
        ],
        sweep=dict(
            B=1,
            H=16,
            d=128,
            rows=[
                dict(L=1024, method="naive", oom=False, flops=1e10, ms=0.1),
                dict(L=65536, method="naive", oom=True, flops=1e13, ms=None),
                dict(L=1024, method="flash", oom=False, flops=1e10, ms=0.2),
            ],
        ),
    )
    points = lesson08.roofline_points(made_up)
    assert [p.name for p in points] == ["flash L2 d=64 L=1024", "flash DRAM d=64 L=1024", "naive fwd d=128 L=1024"]
    assert points[0].tflops == pytest.approx(1e12 / 2e-3 / 1e12)  # 1e12 FLOPs in 2 ms = 500 TFLOP/s
    assert points[0].bytes_moved == attention.flash_l2_bytes(
        16, 32, 1024, 64, 2, block_m=128
    )  # no config recorded: 128
    assert points[1].bytes_moved == attention.flash_dram_bytes(16, 32, 1024, 64, 2)


def test_lesson02_summary_is_short_and_reads_the_record():
    rec = RECORDED["lesson02"]
    text = figures.lesson02.summary(rec)
    assert len(text.splitlines()) <= 15
    t_a, t_b = rec["path_a"]["median_ms"], rec["path_b"]["median_ms"]
    assert f"model t_A + t_B = {t_a + t_b:.4g} ms" in text and f"{rec['loop']['sort_ms']:.4g} ms" in text


def test_figurewidget_takes_the_cells_width_once_drawn():
    from pathlib import Path

    import plotly
    import plotly.graph_objects as go

    from gpulab.figures import widgets

    lf = widgets.LiveFigure(go.Figure(go.Scatter(x=[1, 2], y=[1, 2])))
    if lf.static:
        pytest.skip("figures are static here: no FigureWidget to size")
    sent = []
    lf.fig.observe(lambda c: sent.append(c["new"]), names="_py2js_relayout")
    # the front end drew the figure (at plotly.js's default 700 px) and reports its traces: one autosize relayout
    for edit in (0, 1):  # the first draw, then the echo of the relayout
        deltas = [{"uid": tr.uid, "visible": True} for tr in lf.fig.data]  # as plotly.js reports them
        lf.fig._js2py_traceDeltas = {"trace_deltas": deltas, "trace_edit_id": edit}
    relayouts = [m["relayout_data"] for m in sent if m]
    assert relayouts == [{"autosize": True}]
    # the message the observer waits for is one that plotly's front end sends after its first draw
    bundle = (Path(plotly.__file__).parent / "package_data" / "widgetbundle.js").read_text(errors="replace")
    assert '"_js2py_traceDeltas"' in bundle


def test_row_walk_draws_the_masked_scores_and_shades_the_skipped_tiles():
    walk = figures.lesson08.RowWalkExplorer(tile=4)  # the default row: its first 4 keys masked
    masked = [j for j, s in enumerate(walk.scores) if not math.isfinite(s)]
    crosses = next(tr for tr in walk.live.fig.data if tr.name == "masked score (-inf)")
    assert list(crosses.x) == masked == [0, 1, 2, 3]
    skipped = [(st.start - 0.5, st.stop - 0.5) for st in walk.steps if st.skipped]
    assert [(s.x0, s.x1) for s in walk.live.fig.layout.shapes] == skipped == [(-0.5, 3.5)]
    walk.tile.value = 3  # keys 0-2 a skipped tile; key 3 masked inside a tile that runs
    assert [(s.x0, s.x1) for s in walk.live.fig.layout.shapes] == [(-0.5, 2.5)]


def test_tile_explorer_slider_reads_the_tile_side():
    e = figures.lesson07.TileExplorer(T=32)
    assert e.T.description == "T" and list(e.T.options) == [2**k for k in range(10)] and e.T.value == 32
    with pytest.raises(ValueError, match="T must be one of"):
        figures.lesson07.TileExplorer(T=48)
