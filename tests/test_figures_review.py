"""What the figures show where a point was skipped or a dtype fell back (a T4's plan), checked on records made up
from the H200 recording: each skipped point is named inside the plot, each title names what ran."""

import copy
import math

import pytest

import gpulab  # noqa: F401  (first: it picks the mode)
from gpulab import figures
from gpulab.bench import lesson06, lesson08
from gpulab.capstone import ladder
from gpulab.capstone.gpt import GPTConfig
from gpulab.core import plan, reference
from gpulab.figures import lesson09 as fig09
from tests.figure_checks import assert_readable, check_figure

RECORDED = reference.load("h200")
T4 = plan.for_gpu(plan.as_gpu_spec("T4"))


def test_stride_figure_names_the_skipped_stride_inside_the_plot():
    data = copy.deepcopy(RECORDED["lesson06"])
    skipped = lesson06.choices(T4)["strides_skipped"]  # stride 64: its input does not fit a T4's plan
    data["stride"]["rows"] = [r for r in data["stride"]["rows"] if r["stride"] not in [s["stride"] for s in skipped]]
    data["stride"]["skipped"] = skipped
    fig = figures.lesson06.stride_figure((1, 2, 4, 8, 16, 32, 64), 4.3, data, "made up")
    (note,) = fig.layout.annotations
    assert note.text == "stride 64: out of memory, skipped" and note.xanchor == "right"  # left of the last tick
    assert 0.5 in fig.layout.yaxis.tickvals and 0.3 not in fig.layout.yaxis.tickvals  # 1-2-5, no bare "3"
    assert_readable(fig)
    check_figure(fig, "stride figure, T4 plan")


def test_naive_flash_names_its_dtype_and_labels_the_out_of_memory_slot():
    sweep = copy.deepcopy(RECORDED["lesson08"]["sweep"])
    too_big = {r["L"] for r in lesson08.choices(T4)["naive_skipped"]}
    for r in sweep["rows"]:
        if r["method"] == "naive" and r["L"] in too_big:
            r.update(oom=True, ms=None, peak_bytes=None)
    sweep["dtype"] = "fp16"
    fig = figures.lesson08.naive_flash_figure(sweep, "made up")
    assert ", fp16<br>" in fig.layout.title.text and list(fig.layout.xaxis.ticktext)[:2] == ["1k", "4k"]  # every other
    assert_readable(fig)
    ex = figures.lesson08.NaiveVsFlashExplorer(sweep, where="made up")
    ex.k.value = ex.k.max  # naive did not fit
    assert all(list(tr.x) == ["naive<br>(out of memory)", "flash"] for tr in ex.live.fig.data)
    ex.k.value = ex.k.min  # both ran: plain names again
    assert all(list(tr.x) == ["naive", "flash"] for tr in ex.live.fig.data)


def test_build_roof_is_the_builds_dtype():
    profile = RECORDED["profile"]
    build = {"build": [dict(step="tiled", n=4096, dtype="fp16", tflops=200.0)]}
    fig = figures.lesson07.build_figure(build, profile, "made up")
    assert fig.data[0].name.startswith(f"measured ({profile['gpu']}): fp16 {profile['matmul_tflops']['fp16']:.0f}")
    assert max(fig.data[0].y) == pytest.approx(profile["matmul_tflops"]["fp16"])


def test_attention_roofline_on_a_profile_without_bf16():
    profile = copy.deepcopy(RECORDED["profile"])
    profile["matmul_tflops"]["bf16"] = None  # a T4: no bf16 tensor cores
    fig = figures.lesson08.roofline_figure([], profile, "made up")
    assert any(str(tr.name).startswith("measured fp16 roof") for tr in fig.data)


def test_lesson09_unprofiled_rung_and_ladder_bars():
    data = fig09.recorded().data
    if data is None:
        pytest.skip("no lesson 09 recording")
    unprofiled = next(i for i, r in enumerate(ladder.RUNGS) if r.name not in data.get("ops", {}))
    title = fig09.breakdown(GPTConfig(n_layer=1), "H200", rung=unprofiled).layout.title.text
    assert "no recording" not in title and "not profiled by group" in title, title
    fig = fig09.ladder_figure(GPTConfig(n_layer=1), "H200")
    lowest = min(v for tr in fig.data for v in tr.x)  # the bars read across
    assert fig.layout.xaxis.range[0] <= math.log10(lowest) - 0.5 + 1e-9  # the shortest bar rises half a decade
