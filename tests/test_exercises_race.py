"""The race after a checker passes (gpulab.exercises.race): without a GPU it times nothing, says timing needs one
and shows gpulab's recorded point; its GPU path runs on the CPU under the labelled test clock (every time fake,
the record refused by --record, the clock refused in a Jupyter kernel); a kernel that fails its checker, raises
or computes wrongly on the large inputs is never reported as a fair time."""

import re

import pytest

import gpulab
from gpulab.core import reference, timing
from gpulab.exercises import ex00_solutions, ex01_solutions, ex02_solutions, ex03_solutions, ex04_solutions, race
from gpulab.measure import live

pytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="the CPU paths: on a GPU the real clock times these")

REC = reference.load("h200")
SOLUTIONS = {
    "00b": ex00_solutions.add,
    "01": ex01_solutions.scale_add,
    "02": ex02_solutions.loop_grouped,
    "03": ex03_solutions.relu_cast,
    "04": ex04_solutions.sincos_fused,
}
# gpulab's and torch's recorded ms per lesson, and the model's, read from the reference file here (the suite's keys)
_ADD00 = next(r for r in REC["vendor_ratios"] if r["name"] == "vector add fp32")
_RELU01 = next(r for r in REC["vendor_ratios"] if r["name"] == "relu fp32")
_LOOP02 = next(r for r in REC["lesson02"]["loop"]["rows"] if r["frac_expensive"] == 1 / 64 and r["layout"] == "sorted")
_RELU03 = next(r for r in REC["lesson03"]["relu"] if r["dtype"] == "fp32")
_MS04 = {r["method"]: r["ms"] for r in REC["lesson04"]["headline"]}
RECORDED = {
    "00b": (_ADD00["gpulab_ms"], _ADD00["torch_ms"], 12 * 2**28 / (REC["profile"]["copy_tbps"] * 1e9)),
    "01": (_RELU01["gpulab_ms"], _RELU01["torch_ms"], 2**31 / (REC["profile"]["copy_tbps"] * 1e9)),
    "02": (_LOOP02["measured_ms"], None, _LOOP02["predicted_ms"]),
    "03": (_RELU03["gpulab_ms"], _RELU03["torch_ms"], 2**31 / (REC["profile"]["copy_tbps"] * 1e9)),
    "04": (_MS04["fused"], _MS04["eager"], 2**31 / (REC["lesson04"]["copy_tbps"] * 1e9)),
}


def _named(name, fn):
    """A new function calling ``fn`` under the name ``name`` (``fn`` itself keeps its own name)."""

    def named(*args, **kwargs):
        return fn(*args, **kwargs)

    named.__name__ = name
    return named


def _never_called(*args):
    pytest.fail("race launched the learner's kernel without a GPU")


@pytest.mark.parametrize("lesson", sorted(SOLUTIONS))
def test_without_a_gpu_it_says_timing_needs_one_and_shows_the_recorded_point(lesson):
    r = race.race(_named(SOLUTIONS[lesson].__name__, _never_called), show=False)
    g_ms, t_ms, model_ms = RECORDED[lesson]
    assert not r.live and r.lesson == lesson and r.message.startswith("timing needs a GPU")
    assert r.where.startswith("no GPU here: recorded on NVIDIA H200")
    assert r.ms("yours") is None and r.ms("gpulab") == g_ms and r.ms("torch") == t_ms
    assert r.model_ms == pytest.approx(model_ms) and r.n in (2**24, 2**28)
    assert "needs a GPU" in str(r) and len(str(r).splitlines()) <= 8
    bars = r.figure.data[0]
    assert list(bars.x) == [None, g_ms, t_ms] and r.where in _said(r.figure.layout.title.text)
    assert r.figure.layout.xaxis.range[1] >= max(v for v in (g_ms, t_ms, model_ms) if v)


def test_without_a_recording_it_says_so(monkeypatch):
    monkeypatch.setitem(live._LOADED, reference.DEFAULT_GPU, {k: v for k, v in REC.items() if k != "lesson04"})
    r = race.race(_named("sincos_fused", _never_called), show=False)
    assert not r.live and "nothing is recorded yet" in r.message and "no recording yet" in r.where
    assert [e.who for e in r.entries] == ["yours"] and r.model_ms is None


@pytest.mark.parametrize("lesson, calls", [("00b", 4), ("01", 4), ("02", 5), ("03", 4), ("04", 4)])
def test_under_the_test_clock_the_gpu_path_runs_the_learners_kernel_and_says_fake(lesson, calls):
    launched = []

    def mine(*args):
        launched.append(args[0].numel())
        return SOLUTIONS[lesson](*args)

    with timing.test_clock(ms=0.5) as clock:
        r = race.race(_named(SOLUTIONS[lesson].__name__, mine), show=False)
    assert r.live and r.where == timing.FAKE_LABEL and r.n == race.FAKE_N and not r.message
    assert [e.ms for e in r.entries] == [0.5, 0.5, 0.5] and [e.who for e in r.entries] == ["yours", "gpulab", "torch"]
    # copy-bound models: bytes / (8n / t), 12n for 00b's add, 8n for the others; the loop model: t0 = tfull
    assert r.model_ms == pytest.approx(0.75 if lesson == "00b" else 0.5)
    assert clock.calls == calls  # yours, gpulab's, torch's, and the model's copy (02: its zero- and full-trip loops)
    # the checker runs its cases in a child process where it can fork; the race's own calls run here, at FAKE_N
    assert race.FAKE_N in launched
    assert timing.is_fake_record(r.asdict()) and "FAKE" in str(r)


def test_the_fake_clock_cannot_reach_a_notebook_so_a_notebook_never_races_fake(monkeypatch):
    monkeypatch.setattr(timing, "_in_jupyter_kernel", lambda: True)
    with pytest.raises(RuntimeError, match="notebook"):
        with timing.test_clock():
            pass
    r = race.race(_named("relu_cast", _never_called), show=False)
    assert not r.live and not timing.is_fake_record(r.asdict())


def _said(html: str) -> str:
    """A figure text as read: plotly's line breaks and small type (``plots.title`` wraps long lines) as spaces."""
    return " ".join(re.sub(r"<br>|</?sup>", " ", html).split())


def test_race_figure_names_each_time_in_its_row_and_the_model_in_the_subtitle():
    """Every contender's row names its median time (a bar carries no number for the model's line to cross), the
    model's line is what the subtitle says, and the x axis' title is the time alone (the model's words there were
    cut at 570 px). gpulab's kernel goes by a reader's name, not its solution module's."""
    for key in ("00b", "09"):
        r = race._recorded_race(key, race.LESSONS[key])
        fig = race.race_figure(r)
        bars = fig.data[0]
        assert bars.text is None and fig.layout.xaxis.title.text == "median time (ms)"
        for e, label in zip(r.entries, bars.y):
            assert label.endswith(f"<br>{e.ms:.4g} ms" if e.ms is not None else f"<br>{e.note}"), label
        said = _said(fig.layout.title.text)
        assert f"dashed: the model, {r.model}: {r.model_ms:.4g} ms" in said and r.where in said
        assert "_solutions" not in " ".join(bars.y) + said
    assert race.LESSONS["09"].what[0] == "gpulab's bias_gelu, one fused kernel"


def test_a_kernel_that_fails_its_checker_times_nothing_and_shows_the_recording():
    def scale_add(x, a, b, out):
        raise NotImplementedError

    with timing.test_clock(ms=0.5) as clock:
        r = race.race(scale_add, show=False)
    recorded = race._recorded_race("01", race.LESSONS["01"])
    assert clock.calls == 0 and not r.live and r.ms("yours") is None
    assert r.ms("gpulab") == recorded.ms("gpulab") is not None and r.ms("torch") == recorded.ms("torch")
    assert (r.op, r.n) == (recorded.op, recorded.n) and "recorded on" in r.where
    assert "does not pass ex01.check_scale_add" in r.message and "not attempted" in r.message
    assert "nothing is timed until it does" in r.message and "needs a GPU" not in r.message
    assert r.entries[0].note == "not timed" and r.figure.data[0].y[0].endswith("<br>not timed")  # its row says why


def test_a_kernel_wrong_or_raising_only_on_the_race_inputs_is_flagged():
    n = 12345  # no size of the checker's

    def scale_add(x, a, b, out):  # right on the checker's sizes, a wrong a at n
        ex01_solutions.scale_add(x, a + (x.numel() == n), b, out)

    def sincos_fused(x, out):
        if x.numel() == n:
            raise MemoryError("out of memory")
        ex04_solutions.sincos_fused(x, out)

    with timing.test_clock():
        wrong = race.race(scale_add, n=n, show=False)
        raising = race.race(sincos_fused, n=n, show=False)
    assert wrong.ms("yours") == 1.0 and f"at n = {n:,} differs from torch's" in wrong.message
    assert raising.ms("yours") is None and "raised MemoryError: out of memory" in raising.entries[0].note
    assert raising.ms("gpulab") == 1.0 and not raising.message


def test_the_lesson_is_named_or_found_and_bad_arguments_are_refused():
    with timing.test_clock():
        assert race.race(ex04_solutions.sincos_fused, lesson=4, n=1000, show=False).lesson == "04"
        assert race.race(_named("anything", ex04_solutions.sincos_fused), lesson="04_fusion", show=False).lesson == "04"
    with pytest.raises(ValueError, match="no exercise it knows.*scale_add \\(lesson 01\\).*pass lesson="):
        race.race(_named("my_kernel", _never_called))
    with pytest.raises(ValueError, match="lesson must be one of"):
        race.race(_never_called, lesson="99")
    with pytest.raises(ValueError, match="lesson must be one of"):
        race.race(_never_called, lesson=True)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n must be a positive int"):
            race.race(_never_called, lesson="01", n=bad)
