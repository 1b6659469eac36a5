"""Every lesson figure as a learner without a GPU sees it: built from the H200 reference recording with the
notebooks' own labels (``live.recall``'s "no GPU here: recorded on ..."), each explorer at both ends of every
slider (its ``gpulab-slider`` widgets, found on the explorer, so a new slider is covered); lesson 10's collectives
from a made-up gloo run (``gloo_collectives``: the notebook measures them live), and the exercises' race figures
under "races". Left out: lesson 09's op roofline (it needs a recorded training step) and lesson 04's second
time view (its dropdown: tests/test_figures.py's lesson 04 browser test draws it).

``lesson_figures(lessons)`` yields ``(name, figure)``; the layout checks (``tests/figure_checks.py``) and the
in-browser geometry check (``tests/test_figures_geometry.py``) both walk it.
"""

from __future__ import annotations

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go

import gpulab  # noqa: F401  (first: it picks the mode)
from gpulab import figures
from gpulab.bench import lesson04 as bench_lesson04
from gpulab.bench import lesson07, lesson08
from gpulab.core import hardware, reference
from gpulab.measure import live
from gpulab.models import simt
from gpulab.models.roofline import KernelPoint

RECORDED = reference.load("h200")
#: What a notebook without a GPU passes its figures as ``where``: the longest subtitle they draw.
WHERE = live.recall("lesson04").where


def slider_ends(slider) -> list:
    """The values at the two ends of an ipywidgets slider (an option for a selection slider, base**exponent for
    a log slider)."""
    if hasattr(slider, "options"):
        return [slider.options[0], slider.options[-1]]
    if hasattr(slider, "base"):
        return [slider.base**slider.min, slider.base**slider.max]
    return [slider.min, slider.max]


def sliders(explorer) -> dict:
    """The explorer's sliders by attribute name: its widgets tagged ``gpulab-slider``."""
    return {k: v for k, v in vars(explorer).items() if isinstance(v, W.DOMWidget) and "gpulab-slider" in v._dom_classes}


def explorer_states(name: str, make):
    """``(name at slider=end, figure)`` for the explorer ``make()`` builds, at its start and at both ends of each
    slider in turn (the slider then back to its start value, the others at theirs); each figure is a copy, so
    later moves leave it as it was."""
    e = make()
    yield f"{name} (start)", go.Figure(e.live.fig)
    for attr, s in sliders(e).items():
        start = s.value
        for end in slider_ends(s):
            s.value = end
            yield (
                f"{name} at {attr}={end:g}" if isinstance(end, (int, float)) else f"{name} at {attr}={end}",
                (go.Figure(e.live.fig)),
            )
        s.value = start


def _lesson07():
    rec = live.recall(lesson07.KEY)
    roofs = lesson07.roofs()
    profile, l2 = roofs.data["profile"], roofs.data["l2_tbps"]
    build = lesson07.build_now_or_recorded()
    yield "07 tiles_figure", figures.lesson07.tiles_figure(rec.data, rec.where)
    yield "07 build_figure", figures.lesson07.build_figure(build.data, profile, build.where, l2_tbps=l2)
    yield "07 build_figure (no recording)", figures.lesson07.build_figure(None, profile, "no GPU", l2_tbps=l2)
    yield "07 sweep_figure", figures.lesson07.sweep_figure(rec.data["sweep"], rec.where)
    yield "07 wave_model_figure", figures.lesson07.wave_model_figure(range(1024, 4353, 8), (256, 128))
    yield from explorer_states("07 TileExplorer", lambda: figures.lesson07.TileExplorer(T=32, dtype="fp32", gpu="H200"))
    yield from explorer_states(
        "07 WaveExplorer",
        lambda: figures.lesson07.WaveExplorer(
            n=1793, tile=(256, 128), sms=108, title="tiles and waves (seed: 256 x 128 tiles, 108 SMs)"
        ),
    )


def _lesson08():
    shown = live.recall(lesson08.KEY)
    rec, where = shown.data, shown.where
    profile = RECORDED["profile"]
    yield "08 naive_flash_figure", figures.lesson08.naive_flash_figure(rec["sweep"], where)
    yield "08 naive_flash_figure (model)", figures.lesson08.naive_flash_figure(None)
    yield "08 headline_figure", figures.lesson08.headline_figure(rec["headline"], where)
    yield "08 roofline_figure", figures.lesson08.roofline_figure(lesson08.roofline_points(rec), profile, where)
    yield from explorer_states("08 RowWalkExplorer", lambda: figures.lesson08.RowWalkExplorer(tile=4))
    yield from explorer_states(
        "08 NaiveVsFlashExplorer",
        lambda: figures.lesson08.NaiveVsFlashExplorer(rec["sweep"], where=where, log2_l=14),
    )
    yield from explorer_states("08 NaiveVsFlashExplorer (model)", lambda: figures.lesson08.NaiveVsFlashExplorer(None))


def _lesson01():
    points = [KernelPoint(**p) for p in RECORDED["roofline_points"]]
    yield "01 measured_roofline_figure", figures.lesson01.measured_roofline_figure(RECORDED["profile"], points, "r")
    yield from explorer_states(
        "01 InteractiveRoofline", lambda: figures.lesson01.InteractiveRoofline(flops=1e12, bytes_moved=100e9)
    )


def _lane_stand_in(trips: int = 256) -> dict:
    """A lesson02 ``lane_branch`` record shaped as the H200's is expected to be (a divergent warp a little under
    twice the time, a little over 16 active lanes): the figure's layout with points, until the recording exists."""
    model = simt.boundary_sweep(trips, trips)
    rows = [dict(b=r["b"], time_ratio=0.98 * r["time_ratio"] if r["divergent"] else 1.0) for r in model]
    comparison = [dict(label=f"b{r['b']}", quantity="threads/inst", counter=32 * r["efficiency"] + 0.3) for r in model]
    return dict(trips=trips, rows=rows, counters=dict(comparison=comparison), counters_note="read with Nsight Compute")


def _lesson02():
    # the notebook's three branch figures, with its titles and heights
    yield (
        "02 branch_figure",
        figures.lesson02.branch_figure(simt.branch(lambda t: t < 4, 3, 2), title="if thread_id < 4"),
    )
    uniform = simt.branch(lambda t: True, cost_a=3, cost_b=2)
    data_dependent = simt.branch(np.random.default_rng(0).standard_normal(32) > 0, cost_a=3, cost_b=2)
    yield (
        "02 branch_figure (uniform)",
        figures.lesson02.branch_figure(uniform, title="uniform: if block_id % 2 == 0", height=280),
    )
    yield (
        "02 branch_figure (data-dependent)",
        figures.lesson02.branch_figure(data_dependent, title="data-dependent: if x[lane] > 0", height=280),
    )
    shown02 = live.recall("lesson02")
    rec02, where02 = shown02.data, shown02.where
    lane = rec02.get("lane_branch")
    yield "02 lane_branch_figure (no recording)", figures.lesson02.lane_branch_figure(None, where02)
    if lane is not None:
        yield "02 lane_branch_figure", figures.lesson02.lane_branch_figure(lane, where02)
    yield "02 lane_branch_figure (stand-in record)", figures.lesson02.lane_branch_figure(_lane_stand_in(), where02)
    yield "02 variants_figure", figures.lesson02.variants_figure(RECORDED["lesson02"], WHERE)
    yield from explorer_states("02 BoundaryExplorer", lambda: figures.lesson02.BoundaryExplorer(4, 3, 2))
    yield from explorer_states(
        "02 LoopSweepExplorer", lambda: figures.lesson02.LoopSweepExplorer(RECORDED["lesson02"], group=32)
    )


def _lesson05():
    rec = RECORDED["lesson05"]
    yield "05 memory_steps_figure", figures.lesson05.memory_steps_figure(n=2**28, itemsize=4)
    yield "05 time_figure", figures.lesson05.time_figure(rec, RECORDED["profile"]["copy_tbps"], WHERE)
    yield from explorer_states("05 SizeExplorer", lambda: figures.lesson05.SizeExplorer(rec, where=WHERE))


def _lesson06():
    rec = RECORDED["lesson06"]
    yield "06 stride_figure", figures.lesson06.stride_figure((1, 2, 4, 8, 16, 32, 64), 4.3, rec, WHERE)
    bounds = {"by rows": (1.0, 1.0), "by columns": (0.125, 1.0), "torch": (None, 1.0)}
    yield "06 traversal_figure", figures.lesson06.traversal_figure(rec, bounds, 4.0, WHERE)
    yield from explorer_states("06 SectorExplorer", lambda: figures.lesson06.SectorExplorer(1, 0, 4, copy_tbps=4.3))


def _lesson00():
    spec = hardware.get("H200")
    mem = live.recall("lesson00")
    yield "00 hierarchy_figure", figures.lesson00.hierarchy_figure(spec, mem.data)
    yield "00 hierarchy_figure (no recording)", figures.lesson00.hierarchy_figure(spec)
    yield "00 staircase_figure", figures.lesson00.staircase_figure(mem.data, spec, where=mem.where)
    yield "00 staircase_figure (no recording)", figures.lesson00.staircase_figure(None, spec)
    yield "00 little_figure", figures.lesson00.little_figure(mem.data, spec, where=mem.where)
    yield "00 little_figure (no recording)", figures.lesson00.little_figure(None, spec)
    yield "00 ridge_generations_figure", figures.lesson00.ridge_generations_figure()


def _lesson00b():
    shown = live.profile()
    spec = hardware.find(shown.data["gpu"])
    yield "00b ceilings_figure", figures.lesson00.ceilings_figure(shown.data, spec, shown.where)
    yield "00b ceilings_figure (no datasheet)", figures.lesson00.ceilings_figure(shown.data, None, shown.where)


def gloo_collectives(seed: int = 10) -> live.Shown:
    """A lesson 10 ``collectives`` result as gloo on 2 and 4 CPU processes gives it (``bench.lesson10.LIVE_COLLECTIVES``'
    sizes): the ring model at α = 100 µs, β = 1 GB/s, each time scattered by a seeded factor of 0.5 to 2 (a busy
    CPU's spread)."""
    import random

    from gpulab.bench import lesson10
    from gpulab.models import comm

    rng = random.Random(seed)
    rows = [
        dict(collective=c, p=p, n_bytes=s, t_s=comm.ring_time_s(c, p, s, 1e-4, 1e9) * 2 ** rng.uniform(-1, 1))
        for p in (2, 4)
        for c in comm.COLLECTIVES
        for s in lesson10.COLLECTIVE_SIZES
    ]
    data = dict(backend="gloo", ps=[2, 4], device="CPU processes", rows=rows)
    return live.Shown(data, f"measured now: {lesson10.collectives_label(data)}", True)


def _lesson10():
    from gpulab.bench import lesson10

    fig10 = figures.lesson10
    shown = live.recall(lesson10.KEY)
    yield "10 links_figure", fig10.links_figure()
    yield "10 link_figure", fig10.link_figure(shown.data, shown.where)
    yield "10 link_figure (no recording)", fig10.link_figure(None, fig10.NO_LINK_RECORDING)

    def collectives():
        return fig10.CollectiveExplorer(gloo_collectives(), multi_gpu=lesson10.multi_gpu(shown))

    yield from explorer_states("10 CollectiveExplorer", collectives)
    e = collectives()
    e.p.value = 7  # no measurement at p = 7: the model alone over p = 4's points
    yield "10 CollectiveExplorer at p=7", go.Figure(e.fig)
    yield from explorer_states(
        "10 ZeroExplorer", lambda: fig10.ZeroExplorer(n_params=7_500_000_000, activation_bytes=8e9, p=8)
    )
    yield from explorer_states("10 TensorParallelExplorer", lambda: fig10.TensorParallelExplorer(t=8))


def _lesson03():
    rec = RECORDED["lesson03"]
    m = rec["matmul"]
    yield (
        "03 relu_sweep_figure",
        figures.lesson03.relu_sweep_figure(rec["relu_sweep"], RECORDED["profile"]["copy_tbps"], "r"),
    )
    yield "03 rate_vs_error_figure", figures.lesson03.rate_vs_error_figure({**m["error"]}, m["tflops"], WHERE)
    yield "03 accumulation_figure", figures.lesson03.accumulation_figure(rec["accumulation"], WHERE)
    yield from explorer_states("03 FormatsExplorer", lambda: figures.lesson03.FormatsExplorer(mx_block=32, nv_block=16))


def _lesson04():
    """The time figure as first drawn (its dropdown's other view: tests/test_figures.py's lesson 04 test), the
    launch explorer, the pressure figure."""
    rec = RECORDED["lesson04"]
    yield "04 time_figure", figures.lesson04.time_figure(rec, WHERE)
    d = (model_in := bench_lesson04.launch_model_inputs(live.recall(bench_lesson04.KEY))).data
    yield from explorer_states(
        "04 LaunchModelExplorer",
        lambda: figures.lesson04.LaunchModelExplorer(
            d["overhead_us"],
            d["tbps"],
            measured=d["measured"],
            title="model time against n",
            where=model_in.where,
        ),
    )
    yield "04 pressure_figure", figures.lesson04.pressure_figure(rec["pressure"]["rows"], WHERE)


def _lesson09():
    """The ladder, the breakdown and the model-size explorer (the op roofline needs a recorded training step)."""
    from gpulab.capstone.gpt import GPT2_SMALL

    yield "09 ladder_figure", figures.lesson09.ladder_figure(GPT2_SMALL, "H200")
    yield "09 breakdown", figures.lesson09.breakdown(GPT2_SMALL, "H200", rung=0)
    yield from explorer_states("09 ModelSizeExplorer", lambda: figures.lesson09.ModelSizeExplorer("H200"))


def _races():
    """The race figure of every lesson with a kernel exercise (``exercises.race``), as a learner without a GPU sees
    it: the recorded gpulab and torch times beside the empty bar of theirs."""
    from gpulab.exercises import race

    for key, spec in race.LESSONS.items():
        yield f"race {key} race_figure", race.race_figure(race._recorded_race(key, spec))


LESSONS = {"00": _lesson00, "00b": _lesson00b, "01": _lesson01, "02": _lesson02, "03": _lesson03, "04": _lesson04}
LESSONS |= {"05": _lesson05, "06": _lesson06, "07": _lesson07, "08": _lesson08, "09": _lesson09, "10": _lesson10}
LESSONS["races"] = _races


def lesson_figures(lessons=tuple(LESSONS)):
    """``(name, figure)`` for every figure of the given lessons (see the module docstring)."""
    for k in lessons:
        yield from LESSONS[k]()
