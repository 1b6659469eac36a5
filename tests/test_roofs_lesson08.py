"""The roofs notebook 08b puts the attention forward under (``bench.lesson08.roofs``, on ``bench.lesson00.roofs``,
which notebook 07's ``lesson07.roofs`` shares): without a GPU the recording's profile and lesson 00's L2 plateau;
under the test clock, as on a GPU, this GPU's profile measured now and an L2 plateau only where gpulab's hardware
table knows the GPU's caches. Notebook 08b's roofline cell runs on both paths, with no branch of its own."""

import json
import pathlib

import plotly.basedatatypes
import pytest

import gpulab
from gpulab import figures
from gpulab.bench import lesson08
from gpulab.core import hardware, timing
from gpulab.measure import device, live
from gpulab.models import memory

pytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="the recorded path and the test clock are the CPU's paths")


def test_without_a_gpu_the_roofs_are_the_recordings():
    roofs = lesson08.roofs()
    rec = live.recorded()
    assert not roofs.live and roofs.where.startswith("no GPU here: recorded on")
    assert roofs.data["profile"] == rec["profile"]
    mem = rec["lesson00"]
    l2 = memory.fit_record(mem, hardware.get(mem["device"]["name"]))["plateaus"]["L2"]
    peak = rec["profile"]["matmul_tflops"]["bf16"]
    assert roofs.data["l2_tbps"] == l2 > 0 and roofs.data["peak_tflops"] == peak > 0
    assert roofs.data["ridges"] == {"HBM": peak / rec["profile"]["copy_tbps"], "L2": peak / l2}


def test_under_the_clock_the_roofs_are_this_gpus(monkeypatch):
    monkeypatch.setitem(live._LOADED, "h200", {"provenance": {}})  # a recording read here would fail below
    with timing.test_clock(ms=2.5):
        roofs = lesson08.roofs()
    profile = roofs.data["profile"]
    assert roofs.live and roofs.where.startswith(timing.FAKE_LABEL) and profile["provenance"]["clock"]
    assert profile["gpu"] == device.FAKE_GPU["name"]
    # the whole profile, as notebook 08b read it before: every matmul dtype measured
    assert set(profile["matmul_tflops"]) >= {"bf16", "fp16"}
    # the table does not know the fake GPU's caches: no L2 roof, and the label says so
    assert roofs.data["l2_tbps"] is None and "no L2 plateau for this GPU" in roofs.where
    assert roofs.data["ridges"] == {"HBM": roofs.data["peak_tflops"] / profile["copy_tbps"]}
    assert roofs.data["peak_tflops"] == profile["matmul_tflops"]["bf16"]


def _roofline_cell() -> str:
    nb = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "08b_flash_backward.ipynb"
    return next(c["source"] for c in json.loads(nb.read_text())["cells"] if c.get("id") == "c50")


@pytest.mark.parametrize("clock", [False, True])
def test_notebook_roofline_cell_runs_with_the_recording_and_under_the_clock(clock, monkeypatch, capsys):
    shown = []
    monkeypatch.setattr(plotly.basedatatypes.BaseFigure, "show", lambda self, *a, **k: shown.append(self))
    cell = _roofline_cell()
    assert "ON_GPU" not in cell and "profile()" not in cell and len(cell.splitlines()) <= 25
    rec = live.recall(lesson08.KEY)
    names = dict(lesson08=lesson08, figures=figures, measured=rec.data, where=rec.where)
    if clock:
        with timing.test_clock(ms=2.5):
            exec(cell, names)
    else:
        exec(cell, names)
    out = capsys.readouterr().out
    (fig,) = shown
    roofs = [t.name for t in fig.data if t.mode == "lines"]
    assert ("L2 roof" in " ".join(roofs)) == (not clock)  # the fake GPU has no L2 plateau
    assert "roofs: " in out and "ridges: HBM " in out and ("L2 " in out.split("ridges:")[1]) == (not clock)
    assert any(t.name.startswith("flash L2") for t in fig.data)  # the recording's forward points drawn
