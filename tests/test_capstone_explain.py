"""Lesson 09 explains its own numbers (gpulab.capstone.explain): MFU by hand, the doubled-batch test, the measured
ceilings and launch cost the prediction uses, the gaps read from a record (CPU-bound, GPU-bound, slower rungs,
missing fields); the suite's new fields under the test clock; ex09's named habit, launch cost and hints; the
race of the learner's bias_gelu."""

import dataclasses
from types import SimpleNamespace as E

import pytest
from torch.autograd import DeviceType

import gpulab
from gpulab.bench import lesson09
from gpulab.capstone import explain, ladder
from gpulab.capstone.gpt import GPT2_SMALL, GPTConfig
from gpulab.core import reference, timing
from gpulab.exercises import ex09, ex09_solutions, race
from gpulab.measure import live
from gpulab.models import fusion

SMALL = GPTConfig(n_layer=1, d_model=32, n_head=2, vocab_size=100, seq_len=16, batch=1)
cpu_only = pytest.mark.skipif(gpulab.ON_GPU, reason="the test clock and the recorded paths are for the CPU")


def test_model_flops_and_mfu_by_hand():
    # N = 124,439,808 parameters less the position embedding 1024 x 768 = 123,653,376;
    # 6N = 741,920,256; attention 12 x 12 layers x 768 x 1024 = 113,246,208; per token 855,166,464.
    assert explain.model_flops_per_token(GPT2_SMALL) == 855_166_464
    # 8192 tokens in 100 ms at a 1000 TFLOP/s peak: 8192 x 855,166,464 / 0.1 / 1e15
    assert explain.mfu(GPT2_SMALL, 100.0, 1000.0) == pytest.approx(8192 * 855_166_464 / 0.1 / 1e15)
    with pytest.raises(ValueError, match="ms"):
        explain.mfu(GPT2_SMALL, 0.0, 1000.0)


@pytest.mark.parametrize(
    "ms, twice, word", [(10.0, 10.5, "flat"), (10.0, 12.9, "flat"), (10.0, 15.0, "partly"), (10.0, 19.0, "doubles")]
)
def test_doubling_the_batch_says_flat_partly_or_doubles(ms, twice, word):
    v = explain.doubling_verdict(ms, twice)
    assert v["ratio"] == pytest.approx(twice / ms) and v["verdict"].startswith(word)


def test_doubling_refuses_a_non_positive_time():
    with pytest.raises(ValueError, match="positive"):
        explain.doubling_verdict(10.0, -1.0)


def test_ceilings_are_the_measured_profile_and_the_launch_cost_lesson_04s(monkeypatch):
    prof = reference.load()["profile"]
    given = explain.ceilings(profile=prof)
    assert given.data.peak("bf16") == prof["matmul_tflops"]["bf16"] and given.data.hbm_tbps == pytest.approx(
        prof["copy_tbps"]
    )
    assert given.where == "the profile given" and not given.live
    if not gpulab.ON_GPU:  # here the recorded profile, labelled
        rec = explain.ceilings()
        assert rec.data.peak("fp32") == prof["matmul_tflops"]["fp32"] and "recorded" in rec.where and not rec.live
        monkeypatch.setattr(explain, "_recorded", lambda gpu: {})
        sheet = explain.ceilings("h200")
        assert sheet.data.peak("bf16") == 989.5 and "datasheet" in sheet.where  # the H200's dense bf16 (hardware.py)
        monkeypatch.undo()
    assert explain.launch_us(record={"launch": {"torch_us": 3.25}}).data == 3.25
    default = explain.launch_us(record={})
    assert default.data == fusion.LAUNCH_OVERHEAD_US and "not recorded" in default.where and not default.live


def test_ceilings_on_a_gpu_are_its_saved_profile(monkeypatch):
    """The GPU branch, run on the CPU: with gpulab on a GPU, the profile saved in the cache wins over the
    recording, labelled as this GPU's."""
    import types

    from gpulab.measure import device

    mine = dict(reference.load()["profile"], gpu="NVIDIA H100 80GB HBM3", copy_tbps=3.0)
    monkeypatch.setattr(explain, "gpulab", types.SimpleNamespace(ON_GPU=True))
    monkeypatch.setattr(device, "load_profile", lambda: device.DeviceProfile.from_json(mine))
    shown = explain.ceilings()
    assert shown.live and shown.where == "this GPU's saved profile (lesson 00)"
    assert shown.data.hbm_tbps == pytest.approx(3.0)
    monkeypatch.setattr(device, "load_profile", lambda: None)  # none saved yet: the recording
    assert not explain.ceilings().live and "recorded" in explain.ceilings().where


def _record(over=None):
    """A lesson09 record of SMALL's rungs, every field set by hand; ``over``: {rung index: fields}."""
    rows = []
    for i, r in enumerate(ladder.RUNGS):
        row = dict(rung=r.name, ms=10.0, p20_ms=9.9, p80_ms=10.1, peak_mem_gib=1.0, predicted_ms=1.0)
        row.update(gpu_busy_ms=9.5, kernels=100.0, ms_2x=19.0, predicted_profile_ms=1.0)
        row.update((over or {}).get(i, {}))
        rows.append(row)
    return dict(config=dataclasses.asdict(SMALL), spec="H200", ladder=rows, ops={})


def test_gaps_say_cpu_bound_from_wall_against_gpu_busy():
    data = _record({1: dict(gpu_busy_ms=3.0, ms=10.0)})
    rows = explain.gaps(data)
    assert rows[0]["verdict"].startswith("GPU-bound") and rows[1]["verdict"].startswith("CPU-bound")
    assert rows[1]["cpu_wait_ms"] == pytest.approx(7.0) and "waits 7.0 ms" in rows[1]["verdict"]
    assert rows[0]["ratio_2x"] == pytest.approx(1.9) and rows[0]["missing"] == []


def test_gaps_explain_a_slower_rung_by_its_flops_or_its_spread():
    rec = ladder.RUNGS.index(next(r for r in ladder.RUNGS if r.options.recompute and not r.options.pad_vocab))
    slower = dict(ms=20.0, p20_ms=19.5, p80_ms=20.5)
    rows = explain.gaps(_record({rec: slower}))
    assert "TFLOP by design" in rows[rec]["slower"] and rows[rec - 1]["slower"] == ""
    # busy 9.5 -> 12.0 ms, wall 10 -> 20 ms: the GPU's work +2.5 ms, the CPU's wait 0.5 -> 8.0 ms (+7.5)
    rows = explain.gaps(_record({rec: dict(slower, gpu_busy_ms=12.0)}))
    assert "GPU busy +2.5 ms, CPU wait +7.5 ms" in rows[rec]["slower"]
    rows = explain.gaps(_record({rec: dict(ms=10.05, p20_ms=10.0, p80_ms=10.2)}))
    assert "within the spread" in rows[rec]["slower"]


def test_gaps_read_busy_from_the_profiled_groups_and_name_what_is_missing():
    data = _record({0: dict(gpu_busy_ms=None, ms_2x=None, kernels=None)})
    data["ops"] = {ladder.RUNGS[0].name: {"matmuls": 6.0, "attention": 3.5}}
    g = explain.gaps(data)[0]
    assert g["gpu_busy_ms"] == pytest.approx(9.5) and g["busy_source"] == "profiled groups"
    assert g["missing"] == ["gpu_busy_ms", "kernels", "ms_2x"] and g["ratio_2x"] is None
    assert "most in matmuls" in g["verdict"]
    assert explain.gaps(None) == [] and len(explain.report(explain.gaps(data)).splitlines()) <= 15


def test_device_totals_count_only_device_events_and_op_times_only_operators():
    events = [
        E(key="aten::mm", device_type=DeviceType.CPU, self_device_time_total=3000.0, count=6),
        E(key="sm90_gemm", device_type=DeviceType.CUDA, device_time_total=3000.0, count=6),
        E(key="aten::triu", device_type=DeviceType.CPU, self_device_time_total=30.0, count=24),
        E(key="triu_kernel", device_type=DeviceType.CUDA, device_time_total=30.0, count=24),
    ]
    busy, kernels = lesson09.device_totals(events, steps=3)
    assert busy == pytest.approx(3.03 / 3) and kernels == pytest.approx(10.0)
    ops = lesson09.op_times(events, steps=3)
    assert [o["op"] for o in ops] == ["aten::mm", "aten::triu"]
    assert ops[1]["calls"] == 8 and ops[1]["us_per_call"] == pytest.approx(30.0 / 24)


@cpu_only
def test_the_suite_records_busy_kernels_and_the_doubled_batch_under_the_clock(monkeypatch):
    batches = []
    measure = ladder.measure

    def spy(cfg, opts, **kw):
        batches.append(cfg.batch)
        return measure(cfg, opts, **kw)

    monkeypatch.setattr(ladder, "measure", spy)
    with timing.test_clock(ms=2.0):
        data = lesson09.run(progress=False, cfg=SMALL, rep_ms=1, rungs=lesson09.LIVE["rungs"], bias_gelu=True)
    assert batches == [1, 2, 1, 2]  # each rung at its batch, then at twice it
    row = data["ladder"][1]
    assert row["gpu_busy_ms"] == 2.0 and row["ms_2x"] == 2.0 and row["predicted_profile_ms"] > 0
    assert data["launch_us"] == explain.launch_us().data and data["bias_gelu"]["N"] == 4 * SMALL.d_model
    assert "GPU busy" in lesson09.report(data)


def test_ex09_residual_layer_norm_stays_fp32_and_the_launch_cost_is_the_ops():
    ops = {o["name"].split(" as ")[0]: o for o in ex09.builder_ops()}
    ln = ops["residual add + layer norm"]
    assert ln["fp32_only"] and ex09._reference(ln)[0] == ex09._builder_solution(ln)[0] == "fusion"
    assert all(o["launch_us"] == ex09.LAUNCH_US == explain.launch_us().data for o in ops.values())
    tiny = dict(ops["bias gradient of a 64-wide head, one sequence"])
    assert ex09._reference(tiny) == ex09._builder_solution(tiny) == ("none", 1.0)
    tiny["launch_us"] = 1e-6  # with no launch cost, the tiny op is bound by its bytes: precision halves them
    assert ex09._habit_factors(tiny)["precision"] == pytest.approx(2.0)


def test_named_habit_and_the_hints():
    assert ex09.check_named_habit("fusion").ok
    for wrong in ("flash", "none", None, "speed"):
        assert not ex09.check_named_habit(wrong).ok
    with pytest.raises(ValueError, match="op_name"):
        ex09.check_named_habit("fusion", op_name="no such op")
    for checker in (ex09.check_builder_test, ex09.check_bias_gelu):
        assert len(checker.hints) >= 2 and not any("tl." in h or "def " in h for h in checker.hints)


@cpu_only
def test_race_times_the_learners_bias_gelu_under_the_clock_and_recalls_it_without():
    def bias_gelu(x, b, out):
        return ex09_solutions.bias_gelu(x, b, out)

    with timing.test_clock(ms=0.5):
        r = race.race(bias_gelu, show=False)
    assert r.live and r.lesson == "09" and [e.ms for e in r.entries] == [0.5, 0.5, 0.5]
    rec = {
        **live.recorded(),
        "lesson09": {"bias_gelu": dict(M=8192, N=3072, gpulab_ms=0.1, torch_ms=0.2, copy_tbps=4.0)},
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(live._LOADED, reference.DEFAULT_GPU, rec)
        r = race.race(bias_gelu, show=False)
    assert not r.live and r.ms("gpulab") == 0.1 and r.ms("torch") == 0.2
    assert r.model_ms == pytest.approx(8 * 8192 * 3072 / 4e9)
