"""Lesson 05's figures: the live-memory steps agree with the memory model (held and peak counted by hand), the
size explorer at both ends of its slider with the recording and without, and the time figure's model line."""

import math

import gpulab
from gpulab import figures
from gpulab.core import reference
from gpulab.figures.lesson05 import MEMORY_STEPS
from tests.figure_checks import assert_readable, check_figure

RECORDED = reference.load("h200")


def test_memory_steps_peak_and_held_match_the_counts_by_hand():
    # by hand (training, loss = y.sum()): eager holds s1, s2, s3 and peaks at 4 (g2 beside them); checkpoint holds
    # nothing and peaks at 4 in its backward; fused holds nothing and never has more than y or dx: 1
    by_hand = {"eager": (3, 4), "checkpoint": (0, 4), "fused": (0, 1)}
    for way, steps in MEMORY_STEPS.items():
        held = next(len(live) for _, what, live in steps if what == "loss = y.sum()")
        peak = max(len(live) for *_, live in steps)
        assert (held, peak) == by_hand[way], way
        phases = [p for p, *_ in steps]
        assert steps[-1][2] == ["dx"] and phases == sorted(phases, reverse=True), way  # forward, then backward
        m = gpulab.models.recompute.memory_model(way, 1, 4, "loss")
        assert (m["held_tensors"], m["peak_tensors"]) == (held, peak), way


def test_memory_steps_figure_draws_every_step_at_its_size():
    fig = figures.lesson05.memory_steps_figure(n=2**28, itemsize=4)  # 2^28 x 4 B = 1 GiB a tensor
    assert_readable(fig)
    check_figure(fig, "memory steps")
    bars = {(tr.yaxis, tr.name): list(tr.x) for tr in fig.data}  # across: a step's name on one line beside it
    assert all(tr.orientation == "h" for tr in fig.data)
    assert bars[("y", "backward")] == [4.0, 4.0, 3.0, 1.0]  # eager: g2, g1, dx, done
    assert max(bars[("y3", "forward")] + bars[("y3", "backward")]) == 1.0  # fused
    assert list(fig.layout.yaxis2.categoryarray) == [what for _, what, _ in MEMORY_STEPS["checkpoint"]]
    assert fig.layout.yaxis2.autorange == "reversed"  # the first step at the top
    assert "peak 4" in fig.layout.annotations[0].text and "peak 1" in fig.layout.annotations[2].text


def test_size_explorer_at_both_ends_of_its_slider_never_leaves_a_panel_empty():
    rec = RECORDED["lesson05"]
    e = figures.lesson05.SizeExplorer(rec, where="recorded")
    assert e.k.value == e.k.min == 16 and e.k.max == 28  # the recorded sizes, from the small end
    for k in (e.k.min, e.k.max, e.k.min):
        e.k.value = k
        assert_readable(e.live.fig)
        check_figure(e.live.fig, f"size explorer at k = {k}")
        rows = {r["way"]: r["ms"] for r in rec["rows"] if r["n"] == 2**k}
        assert list(e.live.fig.data[2].y) == [rows[w] for w in ("eager", "checkpoint", "fused")]
    assert "fastest here: eager" in e.live.fig.layout.title.text  # 2^16: the fused way loses
    e.k.value = 28
    assert "fastest here: fused" in e.live.fig.layout.title.text
    assert e.live.fig.layout.yaxis.title.text.startswith("GiB") and list(e.live.fig.data[0].y) == [4.0, 4.0, 1.0]


def test_size_explorer_without_a_recording_draws_the_model_and_says_so():
    e = figures.lesson05.SizeExplorer(None)
    for k in (e.k.min, e.k.max):
        e.k.value = k
        assert_readable(e.live.fig)
        assert len(e.live.fig.data) == 1 and "no recording yet" in e.live.fig.layout.title.text
    assert list(e.live.fig.data[0].y) == [16.0, 16.0, 4.0] and e.k.max == 30  # 2^30 x 4 B = 4 GiB a tensor


def test_time_figure_model_line_by_hand():
    data = dict(rows=[dict(way=w, n=2**28, ms=1.0, bytes_moved=8 * 10**9) for w in ("eager", "checkpoint", "fused")])
    fig = figures.lesson05.time_figure(data, 4.0, "made up")
    assert len(fig.data) == 6 and math.isclose(fig.data[1].y[0], 2.0)  # 8e9 bytes at 4 TB/s = 2 ms
    fig = figures.lesson05.time_figure(RECORDED["lesson05"], RECORDED["profile"]["copy_tbps"], "recorded")
    assert_readable(fig)
    check_figure(fig, "time figure")
