"""Lesson 10's suite: the one-GPU paths (link, overlap, run, report) on the CPU under the labelled test clock;
the collectives measured for real on gloo CPU processes, their bandwidths by nccl-tests' formulas; NCCL refused
without GPUs."""

import pytest

import gpulab
from gpulab.bench import lesson10
from gpulab.core import timing
from gpulab.models import comm

pytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="the test clock runs only without a GPU")


def test_run_under_the_test_clock():
    with timing.test_clock(ms=0.5) as clock:
        rec = lesson10.run(progress=False, link_sizes=(1024, 4096), overlap_bytes=4096, nccl=False)
    assert rec["clock"] == timing.FAKE_LABEL and timing.is_fake_record(rec)
    assert len(rec["link"]) == 2 * 2 * 2  # sizes x pinned/pageable x H2D/D2H
    assert {(r["direction"], r["pinned"]) for r in rec["link"]} == {(d, p) for d in ("H2D", "D2H") for p in (1, 0)}
    big = [r for r in rec["link"] if r["n_bytes"] == 4096]
    assert all(r["gbps"] == pytest.approx(4096 / 0.5e-3 / 1e9) for r in big)
    o = rec["overlap"]
    assert o["serial_ms"] == 1.0 and o["both_ms"] == 0.5 and o["hidden"] == pytest.approx(1.0)
    assert clock.calls == 8 + 3
    text = lesson10.report(rec)
    assert "H2D pinned" in text and "overlap" in text and len(text.splitlines()) <= 15


def test_the_gpu_paths_refuse_without_a_gpu_or_clock():
    with pytest.raises(timing.NoGPUTimingError):
        lesson10.link((1024,))
    with pytest.raises(RuntimeError, match="nccl"):
        lesson10.collectives(ps=(2,), backend="nccl")


def test_collectives_on_gloo_processes():
    shown = lesson10.collectives(ps=(2, 3), sizes=(4096, 65536), reps=2)
    assert shown.live and shown.where == "measured now: gloo on 2, 3 CPU processes of this machine"
    assert (shown.data["backend"], shown.data["ps"], shown.data["device"]) == ("gloo", [2, 3], "CPU processes")
    rows = shown.data["rows"]
    assert len(rows) == 2 * 4 * 2
    for r in rows:
        assert r["t_s"] > 0 and r["n_bytes"] % (4 * r["p"]) == 0
        factor = {"all_reduce": 2 * (r["p"] - 1) / r["p"], "broadcast": 1.0}.get(r["collective"], (r["p"] - 1) / r["p"])
        assert r["busbw"] == pytest.approx(r["n_bytes"] / r["t_s"] * factor)
        assert r["model_bytes_per_rank"] == comm.bytes_per_rank(r["collective"], r["p"], r["n_bytes"])


def test_the_notebooks_live_call_under_the_test_clock():
    with timing.test_clock(ms=1.0):
        rec = lesson10.run(progress=False, **{**lesson10.LIVE, "link_sizes": (1024,), "overlap_bytes": 1024})
    assert "collectives" not in rec and len(rec["link"]) == 4


def test_steps_run_apart_and_every_copy_takes_the_short_budgets(monkeypatch):
    """``--steps link`` (the step tools/gpu_check.py runs) times the copies alone; each timing asks do_bench for
    ``TIMING``'s budgets; an unknown step is refused by name."""
    budgets = []
    real = timing.time_ms

    def time_ms(fn, **kw):
        budgets.append(kw)
        return real(fn, **kw)

    monkeypatch.setattr(timing, "time_ms", time_ms)
    with timing.test_clock(ms=1.0):
        rec = lesson10.run(progress=False, link_sizes=(1024,), overlap_bytes=1024, steps=["link"])
        assert set(rec) == {"gpu", "link", "clock"} and len(rec["link"]) == 4
        assert budgets == [lesson10.TIMING] * 4 and lesson10.HEADLINE_STEPS == ("link",)
        text = lesson10.report(rec)
        assert "H2D pinned" in text and "overlap" not in text
        rec = lesson10.run(progress=False, link_sizes=(1024,), overlap_bytes=1024, steps=["overlap"])
        assert "link" not in rec and "overlap" in lesson10.report(rec)
        assert budgets[4:] == [lesson10.TIMING] * 3  # the copy, the matmul, both at once (matmul_n given here: 64)
        with pytest.raises(ValueError, match="unknown"):
            lesson10.run(progress=False, steps=["links"])


def test_an_nccl_record_is_labelled_by_what_measured_it_wherever_it_is_read():
    """A lesson10 record with NCCL collectives (made up: the CPU has no NCCL): the report and ``multi_gpu`` name the
    backend, the GPU count and the GPU from the record, and ``multi_gpu`` adds the label of the result it came in."""
    from gpulab.measure import live

    rec = dict(gpu="G", collectives=dict(backend="nccl", ps=[2, 4], device="NVIDIA H200", rows=[]))
    assert "collectives: NCCL on 2, 4 GPUs (NVIDIA H200)" in lesson10.report(rec)
    multi = lesson10.multi_gpu(live.Shown(rec, "recorded on NVIDIA H200 (d)", False))
    assert multi.data is rec["collectives"] and not multi.live
    assert multi.where == "NCCL on 2, 4 GPUs (NVIDIA H200); recorded on NVIDIA H200 (d)"
    assert lesson10.multi_gpu(live.Shown({"gpu": "G"}, "x", True)) is None
    assert lesson10.multi_gpu(live.Shown(None, "no recording yet", False)) is None
