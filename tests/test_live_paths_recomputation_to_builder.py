"""Every suite of lessons 05 (recomputation) to 09 (the builder test) runs its GPU-only ``run()`` on the CPU under the
labelled test clock (``gpulab.core.timing.test_clock``), kernels in the interpreter, at its smallest sizes: the
record has the keys the notebooks, reports and figures read, says it is fake, holds the clock's times and finite
numbers, and the figures build from it. Each notebook's live cell is
``live.measure_or_recall(KEY, lambda: run(**LIVE))``: the same call, so these tests run the code the notebooks run
live."""

import inspect
import json
import math
import pathlib
import statistics

import pytest

import gpulab
from gpulab import figures
from gpulab.bench import lesson05, lesson06, lesson07, lesson08, lesson09
from gpulab.core import hardware, plan, timing, tolerances
from gpulab.measure import live

pytestmark = [
    pytest.mark.skipif(gpulab.ON_GPU, reason="the test clock is for the CPU; on a GPU the real paths run"),
    pytest.mark.usefixtures("seed"),
]

MS = 2.5  # the clock's fake median: every timed number of a record comes from it


def _numbers(x):
    """Every int and float in a JSON-able record."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return []
    if isinstance(x, (int, float)):
        return [x]
    if isinstance(x, dict):
        return [n for v in x.values() for n in _numbers(v)]
    return [n for v in x for n in _numbers(v)]


def _measured(key, run):
    """``run`` through the notebooks' one call, under the test clock; checks the label, the stamp, that the record
    is JSON (as ``--record`` writes it) and that every number in it is finite."""
    with timing.test_clock(ms=MS) as clock:
        shown = live.measure_or_recall(key, run)
    assert shown.live and shown.where == timing.FAKE_LABEL and timing.is_fake_record(shown.data)
    assert clock.calls > 0
    data = json.loads(json.dumps(shown.data))
    assert all(math.isfinite(n) for n in _numbers(data))
    return data


def test_lesson05_run_under_the_clock():
    data = _measured(lesson05.KEY, lambda: lesson05.run(progress=False, sizes=(2**10, 2**12), teaching_n=2**12))
    assert {r["way"] for r in data["rows"]} == set(gpulab.models.recompute.WAYS) and data["n_ratio"] == 2**12
    assert all(r["ms"] == MS for r in data["rows"]) and all(r["ms"] == MS for r in data["teaching"])
    assert all(
        r["bytes_moved"] == gpulab.models.recompute.counts(r["way"], r["n"], 4).bytes_moved for r in data["rows"]
    )  # notebook 05's check cell
    assert max(data["grad_vs_eager"].values()) < 1e-5  # the gradients are really computed, fp32
    assert data["peak_ratio_fused_over_eager"] is None  # no memory read under the clock: no ratio made up
    assert "extra memory not measured" in lesson05.report(data)
    assert "teaching" in lesson05.teaching_report(data["teaching"])
    figures.lesson05.time_figure(data, 4.0, timing.FAKE_LABEL)
    figures.lesson05.SizeExplorer(data, where=timing.FAKE_LABEL)


def test_lesson05_live_runs_both_steps_at_both_ends_of_the_sizes_and_gpu_check_runs_the_ways():
    live_ = lesson05.LIVE
    assert set(live_["sizes"]) < set(lesson05.SIZES) and len(live_["sizes"]) >= 3
    assert min(live_["sizes"]) == min(lesson05.SIZES) and max(live_["sizes"]) == max(lesson05.SIZES)
    assert "steps" not in live_ and lesson05.HEADLINE_STEPS == ("ways",)
    inspect.signature(lesson05.run).bind(**live_)


def test_lesson06_run_under_the_clock():
    kw = dict(n=2**10, sweep_n=2**8, strides=(1, 2), offsets=(0, 1), side=64, copy_bytes=4 * 2**10)
    data = _measured(lesson06.KEY, lambda: lesson06.run(progress=False, **kw))
    assert set(data) >= {"copy_tbps", "headline", "stride", "traversal", "transpose"}
    assert [r["stride"] for r in data["stride"]["rows"]] == [1, 2] and data["headline"]["ours_ms"] == MS
    assert {r["dtype"] for r in data["transpose"]["rows"]} == {"fp32", "fp16"}
    assert "transpose" in lesson06.report(data, full=True)
    assert "stride" in figures.lesson06.stride_table(data)


def test_lesson07_run_under_the_clock():
    kw = dict(
        headline_ns=(32,),
        awkward_ns=(33,),
        sweep=(32, 48),
        sweep_ns=(32, 40, 48),
        tile_ts=(16, 32),
        tile_n=32,
        noreuse_n=32,
        fp32_n=32,
        correctness_shape=(33, 31, 35),
        build_n=32,
        alignment_ns=(32, 33),
    )
    data = _measured(lesson07.KEY, lambda: lesson07.run(progress=False, **kw))
    assert set(data) >= {"headline", "awkward", "correctness", "fp32", "tiles", "noreuse", "build", "alignment"}
    s = data["sweep"]
    assert s["ns"] == [32, 40, 48] and s["torch_ms"] == s["gpulab_ms"] == [MS] * 3 and not s["errors"]
    assert [r["step"] for r in data["build"]][-2:] == ["fast path", "torch"]
    assert data["correctness"]["gpulab"]["rel_error"] < 1e-3  # fp16 inputs, fp32 accumulation over K = 35
    assert all(r["ptx"] is None for r in data["alignment"])  # the interpreter compiles no PTX
    assert "fast path" in lesson07.report(data, full=True)
    figures.lesson07.sweep_figure(live.recall(lesson07.KEY).data["sweep"], "recorded", live=s, live_where="now")
    figures.lesson07.build_figure(data, live.recall(None).data["profile"], timing.FAKE_LABEL)


def test_the_live_sweep_is_short_and_straddles_the_h200_wave_step():
    """Notebook 07b's live points: a few N (each a CUDA-graph capture and a do_bench), among them the last N of
    one wave and the next aligned N of two waves with the recorded sweep's tile on the H200."""
    from gpulab.models import waves

    rec = live.recall(lesson07.KEY).data["sweep"]
    ns = lesson07.LIVE["sweep_ns"]
    assert len(ns) <= 4 and lesson07.LIVE["steps"] == ("sweep",)
    w = {n: waves.wave_plan(n, tile=tuple(rec["tile"]), sms=rec["sms"]).waves for n in ns}
    assert w[2048] == 1 and w[2056] == 2
    fig = figures.lesson07.sweep_figure(
        rec, "recorded", live=rec | {"ns": ns, "torch_ms": [1.0] * 4, "gpulab_ms": [1.0] * 4}
    )
    assert sum("measured now" in t.name for t in fig.data) == 2


def _t4_plan(monkeypatch):
    # fp16 as a T4 chooses: the interpreter's bf16 tl.dot is wrong (flash_teaching refuses it), fp16's is right
    monkeypatch.setattr(lesson08, "_plan", lambda: plan.for_gpu(hardware.get("T4")))


def test_lesson08_run_under_the_clock(monkeypatch):
    _t4_plan(monkeypatch)
    kw = dict(head_dims=(16,), lengths=(16,), sweep_lengths=(16, 32), memory_lengths=(16, 32), tokens=16, hidden=32)
    kw.update(shape=dict(B=1, H=1, d=16), teaching_settings=((16, 16),))
    monkeypatch.setattr(lesson08, "TARGET", dict(head_dims=(16,), lengths=(16,), causals=(False, True)))
    data = _measured(lesson08.KEY, lambda: lesson08.run(progress=False, **kw))
    steps = {"headline", "sweep", "memory", "teaching", "target"}
    assert data["dtype"] == "fp16" and set(data) - {"clock"} == {"dtype", "tuning", *steps}
    assert data["target"] == [r for r in data["headline"] if (r["d"], r["L"]) == (16, 16)]  # read, not measured
    h = data["headline"]
    assert [(r["L"], r["causal"]) for r in h] == [(16, False), (16, True)]
    assert all(r["ours"]["fwd_ms"] == MS and r["config_fwd"] for r in h)
    import torch

    assert all(max(r["diff_vs_flash"].values()) < tolerances.ATTENTION_GRAD_REL[torch.float16] for r in h)
    assert {(r["L"], r["method"]) for r in data["sweep"]["rows"]} == {
        (L, m) for L in (16, 32) for m in ("naive", "flash")
    }
    assert [r["L"] for r in data["memory"]["rows"]] == [16, 32]
    assert all(r["graph_ms"] == MS for r in data["sweep"]["rows"])  # eager beside CUDA-graph replay
    assert "graph 2.500 ms" in lesson08.launch_report(data["sweep"])
    assert set(data["teaching"][0]["fwd_ms"]) == {k for k, _ in lesson08.TEACHING_STEPS["fwd"]}
    assert "naive" in lesson08.report(data, full=True)
    figures.lesson08.naive_flash_figure(data["sweep"], timing.FAKE_LABEL)
    figures.lesson08.headline_figure(data["headline"], timing.FAKE_LABEL)
    lesson08.roofline_points(data)


def test_lesson08_live_is_small():
    """Notebook 08's live cell: the headline at one non-causal setting (the sweep and the memory step are
    non-causal: one set of kernels compiles), the sweep at three lengths and the memory step at two, and no
    teaching step (the recording shows it)."""
    assert len(lesson08.LIVE["head_dims"]) * len(lesson08.LIVE["lengths"]) == 1
    assert lesson08.LIVE["causals"] == (False,)
    assert "teaching" not in lesson08.LIVE["steps"]
    assert len(lesson08.LIVE["sweep_lengths"]) == 3 and len(lesson08.LIVE["memory_lengths"]) == 2


def test_lesson08_target_alone_under_the_clock(monkeypatch):
    """``--steps target`` (the step tools/gpu_check.py runs): the target setting measured alone, both causal flags."""
    _t4_plan(monkeypatch)
    monkeypatch.setattr(lesson08, "TARGET", dict(head_dims=(16,), lengths=(16,), causals=(False, True)))
    data = _measured(lesson08.KEY, lambda: lesson08.run(progress=False, steps=["target"], tokens=16, hidden=32))
    assert set(data) - {"clock"} == {"dtype", "target", "tuning"}
    assert [(r["d"], r["L"], r["causal"]) for r in data["target"]] == [(16, 16, False), (16, 16, True)]
    assert all(r["ours"]["fwd_ms"] == MS for r in data["target"]) and "cuDNN" in lesson08.report(data)


def test_lesson08b_live_holds_what_notebook_08b_reads(monkeypatch):
    """Notebook 08b's live cell: the headline setting its reveal reads (d = 128, L = 4096, non-causal), the memory
    step at 16384 (its first reveal) and at two lengths from 4096 (its flatness check), no sweep; the roofline
    of such a record has the flash points and no naive ones."""
    live = lesson08.LIVE_BACKWARD
    assert (live["head_dims"], live["lengths"], live["causals"]) == ((128,), (4096,), (False,))
    assert set(live["steps"]) == {"headline", "memory"}
    assert 16384 in live["memory_lengths"] and sum(L >= 4096 for L in live["memory_lengths"]) >= 2
    _t4_plan(monkeypatch)
    kw = dict(head_dims=(16,), lengths=(16,), memory_lengths=(16, 32), tokens=16, hidden=32, shape=dict(B=1, H=1, d=16))
    data = _measured(lesson08.KEY, lambda: lesson08.run(progress=False, **{**live, **kw}))
    assert set(data) >= {"headline", "memory"} and "sweep" not in data
    names = [p.name for p in lesson08.roofline_points(data)]
    assert names and all(n.startswith("flash ") for n in names)


def test_lesson09_run_under_the_clock():
    from gpulab.capstone import ladder
    from gpulab.capstone.gpt import GPTConfig

    cfg = GPTConfig(n_layer=1, d_model=32, n_head=2, vocab_size=100, seq_len=16, batch=1)
    data = _measured(lesson09.KEY, lambda: lesson09.run(progress=False, cfg=cfg, rep_ms=1))
    assert [r["rung"] for r in data["ladder"]] == [r.name for r in ladder.RUNGS]
    assert all(r["ms"] == MS and r["predicted_ms"] > 0 and r["loss"] > 0 for r in data["ladder"])
    assert set(data["ops"]) == {ladder.RUNGS[0].name, ladder.RUNGS[-2].name}
    assert all("ms_2x" in r for r in data["ladder"])
    assert data["headline"] == data["ladder"][:2]  # read from the ladder, not measured again
    assert "predicted" in lesson09.report(data) and "headline: fp32 eager" in lesson09.report(data)


def test_lesson09_headline_alone_measures_the_ladders_first_step(monkeypatch):
    """``--steps headline`` (the step tools/gpu_check.py runs): the baseline and bf16 autocast, profiled, no doubled
    batch, no ladder; an unknown step is refused by name."""
    from gpulab.capstone import ladder
    from gpulab.capstone.gpt import GPTConfig

    cfg = GPTConfig(n_layer=1, d_model=32, n_head=2, vocab_size=100, seq_len=16, batch=1)
    measured = []
    real = ladder.measure
    monkeypatch.setattr(
        ladder, "measure", lambda c, o, **kw: measured.append((c.batch, o, kw["probe"])) or real(c, o, **kw)
    )
    data = _measured(lesson09.KEY, lambda: lesson09.run(progress=False, cfg=cfg, rep_ms=1, steps=["headline"]))
    assert "ladder" not in data and "bias_gelu" not in data
    assert [r["rung"] for r in data["headline"]] == list(lesson09.HEADLINE_RUNGS)
    assert lesson09.HEADLINE_RUNGS == (ladder.RUNGS[0].name, ladder.RUNGS[1].name)
    probe = lesson09.profile_step
    assert measured == [(1, ladder.RUNGS[0].options, probe), (1, ladder.RUNGS[1].options, probe)]
    assert all(r["gpu_busy_ms"] == MS for r in data["headline"])
    text = lesson09.report(data)
    assert ladder.RUNGS[1].name in text and "x1.00 measured" in text  # the clock's one time for both
    with timing.test_clock(), pytest.raises(ValueError, match="unknown"):
        lesson09.run(progress=False, cfg=cfg, steps=["ladders"])


def test_lesson09_live_skips_a_rung_that_does_not_fit():
    from gpulab.capstone.gpt import GPTConfig

    cfg = GPTConfig(n_layer=1, d_model=32, n_head=2, vocab_size=100, seq_len=16, batch=1)
    first, second = lesson09.LIVE["rungs"]
    data = _measured(
        lesson09.KEY, lambda: lesson09.run(progress=False, cfg=cfg, **lesson09.LIVE, need_bytes={second: 2**60})
    )
    assert [r["rung"] for r in data["ladder"]] == [first, second] and data["ops"] == {}
    assert "skipped" in data["ladder"][1] and "out of memory" in lesson09.report(data)
    assert data["headline"] == data["ladder"] and "headline:" not in lesson09.report(data)  # one rung skipped
    data = _measured(lesson09.KEY, lambda: lesson09.run(progress=False, cfg=cfg, **lesson09.LIVE))
    assert [("ms_2x" in r) for r in data["ladder"]] == [False, True]  # the overhead test on the bf16 rung only


def test_untimed_takes_the_first_candidate_and_caches_nothing(monkeypatch):
    from gpulab.kernels import _autotune

    monkeypatch.setattr(_autotune, "_CACHE", {})
    with _autotune.untimed():
        assert _autotune.pick(("k", 1), ["a", "b"], lambda: pytest.fail("timed a candidate")) == "a"
    assert _autotune.cached(("k", 1)) is None


# ---- what notebooks 07 and 07b print from a record: read in lesson07, labelled by live.recall ----------------

MADE_UP_07 = {
    "provenance": {"date": "d-record"},
    "headline": [
        {"method": "gpulab pointer", "n": 64, "dtype": "bf16", "ratio": 0.5, "config": "cfg-a"},
        {"method": "gpulab", "n": 64, "dtype": "bf16", "ratio": 0.75},
        {"method": "gpulab", "n": 64, "dtype": "fp16", "ratio": 9.0},
        {"method": "torch", "n": 64, "dtype": "fp16", "tflops": 123.0},
    ],
    "awkward": [
        {"method": "gpulab", "n": 7, "ms": 0.004, "graph_ms": 0.001, "ratio": 1.5, "graph_ratio": 3.0},
        {"method": "gpulab pointer (masked)", "n": 7, "ms": 0.008, "ratio": 0.25},
        {"method": lesson07.COPY_METHOD, "n": 7, "ms": 0.002},
    ],
    "sweep": {
        "ns": [7, 8, 16, 24],
        "torch_ms": [2.0, 1.0, 1.0, 1.0],
        "gpulab_ms": [0.5, 1.0, 1.0, 1.0],
        "tile": [8, 8],
        "sms": 4,
        "timing": "CUDA graph replay",
    },
}


def test_lesson07_reads_the_lines_notebook_07_prints_from_a_record():
    ratios = lesson07.kernel_ratios(MADE_UP_07, awkward_n=7).splitlines()
    assert ratios == [
        "64³: tuned pointer kernel 0.50 (cfg-a); + TMA and persistent loop 0.75",
        "7³ (odd rows): masked pointer kernel 0.25 eager; padded TMA 1.50 eager, 3.00 in a CUDA graph",
    ]
    assert lesson07.cublas_rates(MADE_UP_07) == "cuBLAS fp16: 123 TFLOP/s at 64³ (recorded headline)"
    # eager 4 us - graph 1 us = 3 us per call, 75 % of the eager call; the copy row has no rate: left out
    assert "eager - graph =   3.0 us" in lesson07.graph_and_eager(MADE_UP_07) and "(75% of" in lesson07.graph_and_eager(
        MADE_UP_07
    )
    table = lesson07.awkward_table(MADE_UP_07).splitlines()
    assert len(table) == 3 and not any(lesson07.COPY_METHOD in line for line in table)
    first = lesson07.sweep_lines(MADE_UP_07, n=7).splitlines()[0]
    assert "4.00x cuBLAS" in first and "CUDA graph replay, d-record" in first and "3.00x and 1.50x" in first


def test_the_roofs_and_the_build_say_where_they_come_from(monkeypatch):
    roofs = lesson07.roofs()
    assert roofs.where.startswith("no GPU here: recorded on") and not roofs.live
    assert roofs.data["fp16_tflops"] == live.recorded()["profile"]["matmul_tflops"]["fp16"] > 0
    assert 0 < roofs.data["l2_tbps"]
    build = lesson07.build_now_or_recorded()
    assert build.data is live.recorded()[lesson07.KEY] and build.where.startswith("no GPU here: recorded on")
    monkeypatch.setitem(live._LOADED, "h200", {k: v for k, v in live.recorded().items() if k != "lesson00"})
    with pytest.raises(KeyError, match="lesson00"):
        lesson07.roofs()
    monkeypatch.setitem(live._LOADED, "h200", {"provenance": {}, lesson07.KEY: {"headline": []}})
    assert lesson07.build_now_or_recorded() == live.Shown(None, "no GPU recording of the build yet", False)


def test_on_a_gpu_the_roofs_are_this_gpus_profile_and_its_l2_measured_now(monkeypatch):
    """Notebook 07's roofs under the test clock, as on a GPU: the fp16 rate and the copy from this GPU's profile
    (``live.profile``, measured now), never the recording's; the L2 plateau measured now by lesson 00's staircase
    where the hardware table knows the GPU's caches, else the copy standing in, and the label says which."""
    from dataclasses import replace

    from gpulab.bench import lesson00

    with timing.test_clock(ms=MS):
        roofs = lesson07.roofs()
    assert roofs.live and roofs.where.startswith(timing.FAKE_LABEL) and "the copy stands in" in roofs.where
    profile = roofs.data["profile"]
    assert profile["gpu"] == gpulab.measure.device.FAKE_GPU["name"] and profile["provenance"]["clock"]
    assert (
        roofs.data["fp16_tflops"]
        == profile["matmul_tflops"]["fp16"]
        != live.recorded()["profile"]["matmul_tflops"]["fp16"]
    )
    assert roofs.data["l2_tbps"] == profile["copy_tbps"]
    # a GPU the table knows (made small: an L2 of 2 MiB, an L1 of 64 KiB): its L2 window is read now
    small = replace(hardware.get("H200"), l2_kib=2048, l1_smem_per_sm_kib=64)
    monkeypatch.setattr(lesson00.hardware, "find", lambda name: small)
    monkeypatch.setattr(lesson00, "TARGET_BYTES", 1)  # one pass over each working set in the interpreter
    timed = []
    real = lesson00._run
    monkeypatch.setattr(lesson00, "_run", lambda *a: timed.append(a[4]) or real(*a))
    with timing.test_clock(ms=MS):
        roofs = lesson07.roofs()
    assert timed == [lesson00.l2_sizes(small, gpulab.measure.device.FAKE_GPU)] and timed[0]
    assert "L2 (lesson 00's staircase) measured now" in roofs.where
    bytes_read = [lesson00.staircase_plan(w, 2, 1 << 20, 1)["bytes_read"] for w in timed[0]]
    assert roofs.data["l2_tbps"] == pytest.approx(statistics.median(b / (MS * 1e-3) / 1e12 for b in bytes_read))


def test_the_build_figure_reads_the_records_intensity():
    """A made-up fp32 build whose steps carry intensities the default tiles would not give: the figure places
    each teaching step at the record's ``intensity`` and the fast path and torch at the least bytes of fp32
    (4 bytes an element), not of a 16-bit dtype."""
    from gpulab.kernels.matmul import counts

    n = 64
    rows = [
        dict(step=st, n=n, dtype="fp32", tflops=1.0 + i, intensity=3.0 + i)
        for i, st in enumerate(("no reuse", "tiled", "grouped", "pipelined"))
    ]
    rows += [dict(step=st, n=n, dtype="fp32", tflops=9.0) for st in ("fast path", "torch")]
    fig = figures.lesson07.build_figure({"build": rows}, live.recorded()["profile"], "made up")
    at = {tr.name: tr.customdata[0] for tr in fig.data if tr.customdata is not None}
    flops, nbytes = counts(n, n, n, 4)
    assert at == {
        "no reuse": 3.0,
        "tiled": 4.0,
        "grouped": 5.0,
        "pipelined": 6.0,
        "fast path": flops / nbytes,
        "torch": flops / nbytes,
    }


def _cell(notebook: str, cell_id: str) -> str:
    nb = json.loads((pathlib.Path(__file__).resolve().parents[1] / "notebooks" / f"{notebook}.ipynb").read_text())
    return next(c["source"] for c in nb["cells"] if c.get("id") == cell_id)


def test_the_roofs_cells_of_notebooks_05_and_07_read_this_gpus_profile_under_the_clock(monkeypatch, capsys):
    """Notebook 05's matmul-recompute cell and notebook 07's roofs and build cells under the clock: the roofs are
    this (fake) GPU's, labelled fake, never the recording's; 07's build runs now (at a tiny N) and its figure is
    drawn on those roofs."""
    import plotly.basedatatypes

    drawn = []
    monkeypatch.setattr(plotly.basedatatypes.BaseFigure, "show", lambda self, *a, **k: drawn.append(self))
    monkeypatch.setattr(lesson07, "LIVE_BUILD", dict(steps=("build",), build_n=32, progress=False))
    hw = gpulab.core.hardware
    ns = {"live": live, "recompute": gpulab.models.recompute, "n": 1024, "figures": figures}
    ns |= {"hardware": hw, "roofline": gpulab.models.roofline, "h200": hw.get("H200")}  # the lesson's earlier cells
    with timing.test_clock(ms=MS):
        exec(compile(_cell("05_recomputation", "l05-matmul"), "05:l05-matmul", "exec"), ns)
        assert ns["roofs"].live and ns["B"] == ns["roofs"].data["copy_tbps"] * 1e12
        for cell_id in ("l07a-09", "l07a-21"):
            exec(compile(_cell("07_tiling", cell_id), f"07:{cell_id}", "exec"), ns)
    out = capsys.readouterr().out
    assert out.count(timing.FAKE_LABEL) == 2 and "recorded on" not in out
    assert ns["profile"]["gpu"] == gpulab.measure.device.FAKE_GPU["name"] and ns["build"].live
    assert timing.FAKE_LABEL in drawn[0].layout.title.text and [r["n"] for r in ns["build"].data["build"]][0] == 32
