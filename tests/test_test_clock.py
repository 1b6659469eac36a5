"""The labelled test clock (gpulab.core.timing.test_clock): GPU-only paths run on the CPU, every number it makes says
it is fake, and it can reach neither a notebook nor a recording."""

import pytest

import gpulab
from gpulab.bench import __main__ as cli
from gpulab.core import timing
from gpulab.measure import live

pytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="the test clock is for the CPU; on a GPU the real paths run")


def test_outside_the_clock_nothing_is_timed():
    assert not timing.live() and not timing.is_fake()
    with pytest.raises(timing.NoGPUTimingError):
        timing.time_ms(lambda: None)


def test_inside_the_clock_time_ms_runs_fn_once_and_says_fake():
    calls = []
    with timing.test_clock(ms=2.5) as clock:
        t = timing.time_ms(lambda: calls.append(1))
        g = timing.capture_graph(lambda: calls.append(2))
        g.replay()
        assert timing.live() and timing.where() == timing.FAKE_LABEL
        assert timing.stamp({"x": 1})["clock"] == timing.FAKE_LABEL
    assert calls == [1, 2, 2] and clock.calls == 1
    assert t.fake and t.median_ms == 2.5 and t.asdict()["fake"] is True
    assert "fake" not in timing.Timing(1.0, 1.0, 1.0).asdict()  # real timings keep their recorded form
    assert not timing.live()


def test_the_clock_refuses_nesting_a_bad_ms_and_a_jupyter_kernel(monkeypatch):
    with timing.test_clock():
        with pytest.raises(RuntimeError, match="already"):
            with timing.test_clock():
                pass
    with pytest.raises(ValueError, match="ms must be"):
        with timing.test_clock(ms=0):
            pass
    monkeypatch.setattr(timing, "_in_jupyter_kernel", lambda: True)
    with pytest.raises(RuntimeError, match="notebook"):
        with timing.test_clock():
            pass


def test_a_fake_record_is_found_anywhere_in_a_record():
    assert timing.is_fake_record({"lesson02": {"rows": [], "clock": timing.FAKE_LABEL}})
    assert not timing.is_fake_record({"lesson02": {"rows": []}})


def test_measure_or_recall_runs_live_under_the_clock_and_recalls_otherwise():
    with timing.test_clock():
        shown = live.measure_or_recall("lesson02", lambda: {"rows": [1]})
    assert shown.live and shown.where == timing.FAKE_LABEL and shown.data["clock"] == timing.FAKE_LABEL
    shown = live.measure_or_recall("lesson02", lambda: pytest.fail("ran without a GPU"))
    assert not shown.live and shown.where.startswith("no GPU here: recorded on")
    missing = live.recall("no-such-suite")
    assert missing.data is None and "no recording yet" in missing.where and not missing.live
    with pytest.raises(TypeError):
        data, where = missing  # read by name: a Shown is no tuple


def test_record_refuses_fake_numbers(monkeypatch, tmp_path):
    from gpulab.bench import lesson02

    monkeypatch.setattr(lesson02, "run", lambda progress=True: {"rows": []})
    monkeypatch.setattr(lesson02, "report", lambda data: "")
    before = {p: p.read_bytes() for p in (gpulab.core.reference.DATA_DIR).glob("*.json")}
    with timing.test_clock():
        with pytest.raises(SystemExit, match="test clock"):
            cli.main(["--only", "lesson02", "--record"])
    assert before == {p: p.read_bytes() for p in (gpulab.core.reference.DATA_DIR).glob("*.json")}
