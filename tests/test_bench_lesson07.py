"""The lesson07 suite's logic, run in the interpreter on tiny sizes with a fake clock (no GPU numbers): every
step runs, the record is JSON-able, the report reads it; and the PTX reader on real Triton PTX lines."""

import json

import pytest

import gpulab
from gpulab.bench import lesson07
from gpulab.core.timing import Timing
from gpulab.models import waves

# lines as Triton 3.9 wrote them for gpulab's pointer kernel compiled for sm_90 (aligned and odd N) and TMA path
PTX = """
	cp.async.cg.shared.global [ %r21 + 0 ], [ %rd33 + 0 ], 0x10, %r22;
	cp.async.cg.shared.global [ %r23 + 0 ], [ %rd34 + 0 ], 0x10, %r24;
	cp.async.commit_group;
	@%p1 ld.global.b16 { %rs1 }, [ %rd1 + 0 ];
	@%p2 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd2 + 0 ];
	cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [%r5], [%rd3, {%r6, %r7}], [%r8];
"""


def test_ptx_loads_reads_widths():
    got = lesson07.ptx_loads(PTX)
    assert got["ld.global bytes per instruction"] == {"2": 1, "16": 1}
    assert got["cp.async bytes per instruction"] == {"16": 2} and got["cp.async"] == 2
    assert got["cp.async.bulk.tensor"] == 1


@pytest.mark.skipif(gpulab.ON_GPU, reason="the fake clock is for the interpreter; on a GPU the suite itself runs")
def test_suite_runs_end_to_end_on_tiny_sizes(monkeypatch):
    import gpulab.core.timing as timing

    calls = []

    def fake_time_ms(fn, warmup_ms=0, rep_ms=0, graph=False):
        fn()
        calls.append(graph)
        return Timing(1.0 + len(calls) % 3, 1.0, 3.0)  # not a measurement: the logic needs some numbers

    monkeypatch.setattr(timing, "require_gpu", lambda what="": None)
    monkeypatch.setattr(timing, "time_ms", fake_time_ms)
    monkeypatch.setattr(lesson07, "_gpu_name", lambda: "NVIDIA H200")  # its shared memory decides what is skipped
    monkeypatch.setattr(
        lesson07, "alignment", lambda ns=None, dtype="bf16": [{"n": 4096, "config": "x", **lesson07.ptx_loads(PTX)}]
    )
    data = lesson07.run(
        progress=False,
        headline_ns=(48,),
        awkward_ns=(33,),
        sweep=(40, 45),
        tile_ts=(16, 32, 256),
        tile_n=48,
        noreuse_n=24,
        fp32_n=32,
        correctness_shape=(20, 19, 21),
        build_n=40,
    )
    json.dumps(data)
    assert {r["method"] for r in data["awkward"]} >= {"torch", "torch zero-padded", "gpulab", "row-pad copy of A and B"}
    by = {r["method"]: r for r in data["awkward"]}
    assert all("graph_ms" in by[m] for m in ("torch", "torch zero-padded", "gpulab", "row-pad copy of A and B"))
    assert by["gpulab"]["graph_ratio"] == by["torch"]["graph_ms"] / by["gpulab"]["graph_ms"]
    copy = by["row-pad copy of A and B"]  # a copy: bytes per second, no FLOP rate or speed-up
    assert "ratio" not in copy and "tflops" not in copy and copy["tbps"] == lesson07.copy_bytes(33) / copy["ms"] / 1e9
    assert (
        copy["graph_tbps"] == lesson07.copy_bytes(33) / copy["graph_ms"] / 1e9
        and "CUDA graph"
        in [line for line in lesson07.report(data, full=True).splitlines() if "row-pad copy" in line][0]
    )
    assert data["sweep"]["ns"] == list(range(40, 46)) and None not in data["sweep"]["gpulab_ms"]
    skipped = [r for r in data["tiles"] if "skipped" in r]
    assert [(r["dtype"], r["T"]) for r in skipped] == [("fp32", 256), ("bf16", 256)]  # 2 T^2 s > 228 KiB
    assert data["correctness"]["gpulab"]["rel_error"] < 1e-3
    text = lesson07.report(data, full=True)
    assert "dense sweep" in text and "target" in text.lower()
    assert len(waves.wave_model(data["sweep"])) == 6
    steps = [r["step"] for r in data["build"]]
    assert steps == ["no reuse", "tiled", "grouped", "pipelined", "fast path", "torch"]
    by_step = {r["step"]: r for r in data["build"]}
    # hand counts at N = 40 with 128 x 128 tiles (one tile covers C): no reuse 2 N^3 elements of 2 bytes;
    # tiled: one strip of A and one of B, (40 * 40 + 40 * 40) elements
    assert by_step["no reuse"]["model_bytes"] == 2 * 40**3 * 2
    assert by_step["grouped"]["model_bytes"] == 2 * 40 * 40 * 2 and by_step["grouped"]["intensity"] == 40 / 2
    assert "intensity" not in by_step["torch"] and "the build, fp16 40^3" in text
    short = lesson07.report(data)
    assert len(short.splitlines()) <= 15 and "pipelined" in short and "CUDA graph" in short, short


@pytest.mark.skipif(gpulab.ON_GPU, reason="the GPU check is bypassed for the interpreter; on a GPU the suite runs")
def test_partial_run_reports_and_merges_into_an_older_record(monkeypatch):
    """``run(steps=...)`` records only those steps; ``report`` reads the partial record, and after the CLI's
    ``merge_record`` into an older one says when each kept step was recorded."""
    import gpulab.core.timing as timing
    from gpulab.bench.__main__ import merge_record

    monkeypatch.setattr(timing, "require_gpu", lambda what="": None)
    data = lesson07.run(progress=False, steps=["correctness"], correctness_shape=(20, 19, 21))
    assert "correctness" in data and not {"headline", "awkward", "sweep", "tiles", "noreuse"} & set(data)
    text = lesson07.report(data, full=True)
    assert "correctness fp16 M, N, K = (20, 19, 21)" in text and "dense sweep" not in text
    old = {
        "gpu": "NVIDIA H200",
        "sms": 132,
        "targets": data["targets"],
        "correctness": {"old": True},
        "sweep": {
            "ns": [1792, 1793],
            "torch_ms": [1.0, 1.0],
            "gpulab_ms": [1.0, 2.0],
            "dtype": "bf16",
            "path": "tma",
            "config": "c",
            "tile": [256, 128],
            "sms": 132,
        },
        "step_provenance": {"sweep": {"date": "2026-01-02"}},
        "provenance": {"date": "2026-03-04"},
    }
    merged = merge_record(old, {**data, "provenance": {"date": "2026-05-06"}})
    assert merged["correctness"] == data["correctness"] and merged["sweep"] == old["sweep"]
    assert merged["provenance"] == {"date": "2026-05-06"} and merged["step_provenance"] == {
        "sweep": {"date": "2026-01-02"}
    }
    text = lesson07.report(merged, full=True)
    assert "correctness fp16" in text and "(recorded 2026-01-02); mean TFLOP/s" in text


def test_merge_record_keeps_the_provenance_of_what_was_not_run():
    from gpulab.bench.__main__ import merge_record

    old = {"a": 1, "b": 2, "c": 3, "step_provenance": {"c": "p0"}, "provenance": "p1"}
    got = merge_record(old, {"a": 10, "provenance": "p2"})
    assert got == {"a": 10, "b": 2, "c": 3, "step_provenance": {"b": "p1", "c": "p0"}, "provenance": "p2"}
    assert merge_record(old, {"a": 0, "b": 0, "c": 0, "provenance": "p3"}) == {
        "a": 0,
        "b": 0,
        "c": 0,
        "provenance": "p3",
    }


def test_tflops_of_an_n_cubed_matmul():
    assert waves.matmul_tflops(1000, 2.0) == pytest.approx(1.0)  # 2e9 FLOPs in 2 ms: 1e12 FLOP/s
    assert waves.matmul_tflops(4096, 1.0) == pytest.approx(137.438953472)


def test_sweep_helpers_on_a_made_up_record():
    s = {
        "ns": [1792, 1793, 1800],
        "torch_ms": [1.0, 4.0, None],
        "gpulab_ms": [1.0, 1.0, 1.0],
        "tile": [256, 128],
        "sms": 108,
    }
    rates = waves.sweep_rates(s, "torch")
    assert rates[0] == pytest.approx(2 * 1792**3 / 1e9) and rates[2] is None
    split = waves.alignment_split(s, "torch")
    assert split["failed"] == 1 and split["aligned_mean_tflops"] == pytest.approx(rates[0])
    assert split["misaligned_mean_tflops"] == pytest.approx(rates[1])
    assert waves.wave_model(s)[0] == pytest.approx(98 / 108)


def test_merge_record_adds_the_autotuners_choices_instead_of_replacing_them():
    from gpulab.bench.__main__ import merge_record

    old = {"tuned_configs": {"a": "x", "b": "y"}, "provenance": "p1"}
    got = merge_record(old, {"tuned_configs": {"b": "z", "c": "w"}, "provenance": "p2"})
    assert got["tuned_configs"] == {"a": "x", "b": "z", "c": "w"}


def test_sweep_timing_reads_old_and_new_records():
    assert waves.sweep_timing({"timing": "CUDA graph replay"}) == "CUDA graph replay"
    assert waves.sweep_timing({}).startswith("eager calls")
