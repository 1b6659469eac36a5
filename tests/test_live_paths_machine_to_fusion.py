"""The GPU-only paths of lessons 00 (the machine) to 04 (fusion): their suites' ``run``, the roofline points, the
device profile, and the functions the notebooks' live cells call, run on the CPU under the test clock at their
smallest sizes: the record has the recorded one's keys, says it is fake, and can reach neither the profile cache
nor a reference file."""

import inspect
import json
import math
import pathlib
from dataclasses import replace

import pytest
import torch

import gpulab
from gpulab.bench import lesson00, lesson02, lesson03, lesson04, suite
from gpulab.core import hardware, plan, reference, settings, timing
from gpulab.kernels import sincos as S
from gpulab.measure import device, live
from gpulab.models import precision as P
from gpulab.models.roofline import KernelPoint

pytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="the test clock is for the CPU; on a GPU the real paths run")

RECORDED = reference.load("h200")
# each suite's smallest sizes (inductor's C++ build on a CPU takes longer than a test: torch.compile runs "eager")
TINY_ARGS = {
    "lesson00": dict(
        progress=False, sizes=(4096, 8192, 512 * 1024), copy_programs=(1, 2, 4), copy_n=8192, target_bytes=1
    ),
    "lesson02": dict(
        progress=False, n=2048, fractions_a=(0.0, 1.0), fracs_expensive=(0.25,), lane_n=2048, lane_trips=4
    ),
    "lesson03": dict(
        progress=False, relu_n=1024, relu_sweep=(1024,), matmul_n=32, error_n=32, triton_n=32, acc_ks=(16, 32), acc_m=16
    ),
    "lesson04": dict(
        progress=False,
        n=4096,
        sweep=(1024,),
        accuracy_n=1024,
        blocks=(1024,),
        repeats=(1, 2),
        copy_bytes=4096,
        launches=3,
        compile_backend="eager",
    ),
}
MODULE_OF = {"lesson00": lesson00, "lesson02": lesson02, "lesson03": lesson03, "lesson04": lesson04}
TINY = {k: (lambda k=k: MODULE_OF[k].run(**TINY_ARGS[k])) for k in TINY_ARGS}


@pytest.fixture(autouse=True)
def _seeded_and_no_profile_cache(monkeypatch, tmp_path):
    torch.manual_seed(0)
    monkeypatch.setattr(settings, "SETTINGS", replace(settings.SETTINGS, cache_dir=str(tmp_path / "cache")))
    yield
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir()), "a fake profile was saved"


def _numbers(x):
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return
    if isinstance(x, (int, float)):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _numbers(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _numbers(v)


@pytest.mark.parametrize("key", sorted(TINY))
def test_a_suite_runs_under_the_clock_with_the_recorded_keys_and_says_fake(key):
    with timing.test_clock(ms=0.5) as clock:
        data = TINY[key]()
    assert data["clock"] == timing.FAKE_LABEL and timing.is_fake_record(data) and clock.calls > 0
    # provenance and step_provenance (a step recorded on its own) are the record's, not the run's; variants_tuned
    # (lesson04) is there when the record says its variants were not tuned
    assert set(RECORDED[key]) - {"provenance", "step_provenance", "variants_tuned"} == set(data) - {
        "clock",
        "variants_tuned",
    }
    assert all(math.isfinite(v) for v in _numbers(data))
    report = MODULE_OF[key].report(data)
    assert report and len(report.splitlines()) <= 15


def test_lesson00_reads_what_it_should_and_times_every_point():
    with timing.test_clock(ms=2.0):
        data = TINY["lesson00"]()
        info = lesson00.device_info()
    assert info == {k: device.FAKE_GPU[k] for k in lesson00.INFO_KEYS} == data["device"]
    st = data["staircase"]
    assert [r["working_set"] for r in st] == [4096, 8192, 512 * 1024]
    assert [r["l2_only"] for r in st] == [False, False, True]  # both branches of staircase_plan ran
    assert all(r["ms"] == 2.0 and r["tbps"] == pytest.approx(r["bytes_read"] / 2e-3 / 1e12) for r in st)
    assert [r["programs"] for r in data["latency"]["rows"]] == [1, 2, 4]
    assert "FAKE GPU" in lesson00.anatomy(info)


def test_lesson02_predicts_from_the_measured_paths():
    with timing.test_clock(ms=1.5):
        data = TINY["lesson02"]()
    assert data["path_a"]["median_ms"] == 1.5 and data["path_a"]["fake"] is True
    assert [r["median_ms"] for r in data["lane_branch"]["rows"]] == [1.5] * 33  # both steps by default
    assert [r["fraction_a"] for r in data["where"]] == [0.0, 1.0]
    assert all(r["predicted_ms"] == pytest.approx(3.0) for r in data["where"])  # t_A + t_B
    assert {(r["frac_expensive"], r["layout"]) for r in data["loop"]["rows"]} == {
        (0.25, "interleaved"),
        (0.25, "sorted"),
    }


def test_lesson03_rates_errors_and_the_notebook_steps():
    with timing.test_clock(ms=1.0):
        data = TINY["lesson03"]()
        relu = lesson03.relu_study(n=1024, sweep=(256, 512))
        rates = lesson03.rates_study(n=16)
        tri = lesson03.triton_rates(n=32)
    assert [r["dtype"] for r in data["relu"]] == list(lesson03.P.RELU_DTYPES)
    assert all(r["ratio"] == 1.0 and r["gpulab_gbps"] > 0 for r in data["relu"])
    assert {r["n"] for r in relu["relu_sweep"]} == {256, 512} and relu["clock"] == timing.FAKE_LABEL
    assert rates["n_rate"] == 16 and rates["tflops"]["bf16"] == pytest.approx(2 * 16**3 / 1e-3 / 1e12)
    assert set(rates["tflops"]) == set(lesson03.P.MATMUL_DTYPES)
    assert data["matmul"]["error"]["fp32"] < 1e-5 < data["matmul"]["error"]["bf16"]
    assert tri["tf32"]["tflops"] > 0 and 0 <= tri["ieee"]["error"] < 1e-5 and timing.is_fake_record(tri)
    assert data["triton_matmul"].keys() == {"n", "tf32", "ieee"}


def test_lesson03_runs_its_steps_alone_and_reports_what_it_holds():
    with timing.test_clock(ms=1.0):
        data = lesson03.run(**{**TINY_ARGS["lesson03"], "steps": lesson03.HEADLINE_STEPS})
    assert set(data) == {"relu", "clock"} and set(lesson03.HEADLINE_STEPS) <= set(lesson03.STEPS)
    assert lesson03.report(data).startswith("ReLU at n = 1,024") and "cuBLAS" not in lesson03.report(data)
    assert set(lesson03.STEPS) == set(RECORDED["lesson03"]) - {"provenance", "step_provenance"}
    with pytest.raises(ValueError, match="unknown"):
        lesson03.run(steps=("relu", "nope"))


def test_lesson04_headline_pressure_and_launch():
    with timing.test_clock(ms=1.0):
        data = TINY["lesson04"]()
    assert [r["method"] for r in data["headline"]] == [*lesson04.METHODS, "naive fused"]
    assert data["copy_tbps"] == pytest.approx(2 * 4096 / 1e-3 / 1e12)
    assert all(e < 1e-6 for e in data["accuracy"]["fp32_max_abs_error"].values())
    assert [(r["study"], r["block"], r["num_warps"], r["repeat"]) for r in data["pressure"]["rows"]] == [
        ("block", 1024, 4, 1),
        ("repeat", S.INTERPRETER_BLOCK, 4, 1),
        ("repeat", S.INTERPRETER_BLOCK, 4, 2),
    ]
    assert data["launch"]["triton_us"] == 1000.0 and data["launch"]["triton_cpu_us"] > 0
    ratios = lesson04.headline_ratios(data)
    assert ratios["fused"]["vs_compile"] == 1.0 and lesson04.report(data, full=True)


@pytest.mark.parametrize(
    "fn, live_kwargs",
    [
        (lesson00.run, lesson00.LIVE),
        (lesson02.run, lesson02.LIVE),
        (lesson03.relu_study, lesson03.LIVE_RELU),
        (lesson03.rates_study, lesson03.LIVE_RATES),
        (lesson03.triton_rates, lesson03.LIVE_TRITON),
        (lesson04.run, lesson04.LIVE),
        (suite.roofline, suite.LIVE),
    ],
)
def test_each_notebooks_live_arguments_are_arguments_of_the_function_it_calls(fn, live_kwargs):
    inspect.signature(fn).bind(**live_kwargs)


def test_lesson04_live_keeps_a_live_point_in_each_figure():
    live_ = lesson04.LIVE
    assert min(live_["sweep"]) < S.TUNE_MIN_N and max(live_["sweep"]) == lesson04.N
    assert live_["blocks"] and len(live_["repeats"]) >= 2 and set(live_["sweep"]) <= set(lesson04.SWEEP)
    # every size below N takes the autotuner's first config untimed: no benchmark of every config in the notebook
    assert all(n < S.TUNE_MIN_N for n in live_["sweep"][:-1]) and live_["accuracy_n"] < S.TUNE_MIN_N


def test_lesson04_runs_its_headline_alone_and_live_compiles_torch_compile_at_n_alone(monkeypatch):
    with timing.test_clock(ms=1.0):
        head = lesson04.run(**{**TINY_ARGS["lesson04"], "steps": lesson04.HEADLINE_STEPS})
    assert set(head) == {"n", "dtype", "copy_tbps", "headline", "best_config", "best_config_fast"} | {
        "best_config_shared",
        "variants_tuned",
        "clock",
    }
    assert "compile" in lesson04.report(head) and lesson04.report(head, full=True)
    shapes = []
    real = torch.compile

    def counting_compile(fn, **kw):  # the shapes torch.compile's function is called on: each new one compiles
        compiled = real(fn, **kw)
        return lambda x: shapes.append(x.numel()) or compiled(x)

    monkeypatch.setattr(torch, "compile", counting_compile)
    args = {**TINY_ARGS["lesson04"], "sweep": (1024, 4096), "accuracy_n": 2048}
    with timing.test_clock(ms=1.0):
        data = lesson04.run(**args, compile_at_n_only=True, accuracy_16bit=False)
    assert set(shapes) == {4096} and "compile" not in data["accuracy"]["fp32_max_abs_error"]
    assert {r["n"] for r in data["sweep"] if r["method"] == "compile"} == {4096} and "fp16" not in data["accuracy"]
    assert lesson04.LIVE["compile_at_n_only"] and not lesson04.LIVE["accuracy_16bit"]
    with pytest.raises(ValueError, match="unknown"):
        lesson04.run(steps=("headline", "nope"))


@pytest.mark.parametrize("tune", [True, False])
def test_lesson04_variants_tune_their_own_shape_or_take_the_fused_kernels(monkeypatch, tune):
    """Live (tune_variants=False) the shared and fast variants launch the fused kernel's tuned shape, never the
    autotuner; the full suite tunes each. The record says which."""
    calls, real = [], S.sincos

    def spy(x, fast=False, block=None, num_warps=None, repeat=1, shared=False):
        calls.append((fast or shared, block))
        return real(x, fast=fast, block=block, num_warps=num_warps, repeat=repeat, shared=shared)

    monkeypatch.setattr(lesson04.sincos, "sincos", spy)
    with timing.test_clock():
        data = lesson04.run(**{**TINY_ARGS["lesson04"], "tune_variants": tune})
    variant_blocks = {b for is_variant, b in calls if is_variant}
    assert data.get("variants_tuned", True) is tune and variant_blocks
    if tune:
        assert variant_blocks == {None}  # autotuned (the interpreter's BLOCK under the clock)
    else:
        assert None not in variant_blocks and data["best_config_shared"] == data["best_config"]
        assert "not tuned here" in lesson04.report(data, full=True)
    assert lesson04.LIVE["tune_variants"] is False


def test_the_roofline_and_the_profile_are_the_measuring_gpus_and_never_saved():
    with timing.test_clock(ms=1.0):
        data = suite.roofline(progress=False, vector_sizes=(1024,), matmul_sizes=(32,), matmul_n=32)
        with pytest.raises(ValueError, match="never saved"):
            device.save_profile(device.DeviceProfile.from_json(data["profile"]))
    profile = data["profile"]
    assert profile["gpu"] == device.FAKE_GPU["name"] and profile["provenance"]["clock"] == timing.FAKE_LABEL
    assert profile["copy_tbps"] > 0 and all(r > 0 for r in profile["matmul_tflops"].values())
    points = [KernelPoint(**p) for p in data["roofline_points"]]
    assert [p.name for p in points] == ["vector add fp32 n=2^10", "relu fp32 n=2^10", "matmul bf16 32^3"]
    assert suite.above_roof(profile, points, l2_bytes=0, slack=1e9) == []
    assert data["clock"] == timing.FAKE_LABEL


def test_the_copy_bandwidth_is_the_saved_profiles_else_measured_now_and_unsaved(monkeypatch):
    with timing.test_clock(ms=2.0):
        assert device.copy_bandwidth() == pytest.approx(2 * device.FAKE_COPY_BYTES / 2e-3 / 1e12)
        with monkeypatch.context() as m:  # as on a GPU, where a saved profile is read
            m.setattr(timing, "is_fake", lambda: False)
            m.setattr(timing, "live", lambda: True)
            m.setattr(device, "load_profile", lambda: device.DeviceProfile.from_json(RECORDED["profile"]))
            assert device.copy_bandwidth() == RECORDED["profile"]["copy_tbps"]
    with pytest.raises(timing.NoGPUTimingError):
        device.copy_bandwidth()


def test_the_profile_shown_is_this_gpus_saved_or_measured_now_and_else_the_recording(monkeypatch):
    """``live.profile``, the roofs a lesson's model reads: under the test clock measured now (the whole profile,
    or the copy and the matmul dtypes asked for) and never saved; as on a GPU with a saved profile, that profile,
    labelled with its date and path; without a GPU the recording's."""
    with timing.test_clock(ms=2.0):
        whole = live.profile()
        some = live.profile(matmul=("fp16",))
        copy = live.profile(matmul=())
    assert whole.live and whole.where == timing.FAKE_LABEL and whole.data["clock"] == timing.FAKE_LABEL
    assert (
        set(whole.data["matmul_tflops"]) == set(device.MATMUL_DTYPES) and whole.data["gpu"] == device.FAKE_GPU["name"]
    )
    assert set(some.data["matmul_tflops"]) == {"fp16"} and "the copy, the fp16 matmul alone, unsaved" in some.where
    assert copy.data["matmul_tflops"] == {} and copy.where.endswith("(the copy alone, unsaved)")
    assert copy.data["copy_tbps"] == pytest.approx(2 * device.FAKE_COPY_BYTES / 2e-3 / 1e12)
    assert live.profile() == live.Shown(RECORDED["profile"], live.recall("profile").where, False)
    saved = dict(RECORDED["profile"], gpu="NVIDIA H100 80GB HBM3", provenance={"date": "2026-12-01"})
    with timing.test_clock(), monkeypatch.context() as m:  # as on a GPU, where a saved profile is read
        m.setattr(timing, "is_fake", lambda: False)
        m.setattr(timing, "live", lambda: True)
        m.setattr(device, "load_profile", lambda: device.DeviceProfile.from_json(saved))
        m.setattr(device, "profile_path", lambda: "/cache/profile-h100.json")
        shown = live.profile(matmul=("fp16",))
    assert shown.live and shown.data["gpu"] == "NVIDIA H100 80GB HBM3" and shown.data["copy_tbps"] == saved["copy_tbps"]
    assert shown.where == "this GPU's profile (NVIDIA H100 80GB HBM3, measured 2026-12-01, /cache/profile-h100.json)"


def test_a_measured_point_is_drawn_against_the_gpu_that_measured_it(monkeypatch):
    """GPULAB_AS_GPU=T4 on an H200: the label names both, the profile is the H200's, and the H200's recorded
    points sit under its roof (a T4's roof is far below them: drawn against it, lesson 01 would assert falsely)."""
    t4 = plan.for_gpu(hardware.get("T4"), "GPULAB_AS_GPU=T4 (test)")
    monkeypatch.setattr(plan, "current", lambda: t4)
    with timing.test_clock():
        data = suite.roofline(progress=False, vector_sizes=(1024,), matmul_sizes=(32,), matmul_n=32)
    assert data["profile"]["gpu"] == device.FAKE_GPU["name"] != t4.gpu.name
    monkeypatch.setattr(gpulab, "ON_GPU", True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H200")
    assert timing.where() == "measured now on NVIDIA H200, choosing as a T4 would"
    points = [KernelPoint(**p) for p in RECORDED["roofline_points"]]
    assert suite.above_roof(RECORDED["profile"], points) == []
    t4_roof = dict(RECORDED["profile"], gpu="T4", copy_tbps=0.32, matmul_tflops={"fp32": 8.1, "bf16": 65.0})
    assert "matmul bf16 4096^3" in suite.above_roof(t4_roof, points)


def test_measure_or_recall_of_a_notebook_step_is_live_and_fake_under_the_clock_and_recorded_without():
    with timing.test_clock():
        shown = live.measure_or_recall(lesson03.KEY, lambda: lesson03.rates_study(n=16))
    assert shown.live and shown.where == timing.FAKE_LABEL and shown.data["n_rate"] == 16
    shown = live.measure_or_recall(lesson03.KEY, lambda: pytest.fail("measured without a GPU"))
    assert not shown.live and shown.data == RECORDED[lesson03.KEY] and shown.where.startswith("no GPU here: recorded")


# ---- the notebooks' live cells themselves, run under the clock with their LIVE arguments made tiny -----------

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


def _cell(notebook: str, cell_id: str) -> str:
    nb = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())
    return next(c["source"] for c in nb["cells"] if c.get("id") == cell_id)


@pytest.fixture
def no_show(monkeypatch):
    import plotly.basedatatypes

    shown = []
    monkeypatch.setattr(plotly.basedatatypes.BaseFigure, "show", lambda self, *a, **k: shown.append(self))
    return shown


@pytest.mark.parametrize(
    "notebook, cell_id, module, name, tiny, reads",
    [
        ("00_the_machine", "461b4fcc", lesson00, "LIVE", dict(TINY_ARGS["lesson00"]), "mem"),
        (
            "01_roofline",
            "779fdb2a",
            suite,
            "LIVE",
            dict(vector_sizes=(1024,), matmul_sizes=(32,), matmul_n=32),
            "points",
        ),
        ("02_warp_divergence", "257cc8d6", lesson02, "LIVE", dict(TINY_ARGS["lesson02"]), "measured"),
        ("03_precision", "1c320343", lesson03, "LIVE_RELU", dict(n=1024, sweep=(256,)), "relu_rows"),
        ("03_precision", "b8782fd3", lesson03, "LIVE_TRITON", dict(n=32), "t"),
        ("03_precision", "30ee29ab", lesson03, "LIVE_RATES", dict(n=32), "rates"),
        ("04_fusion", "81f7ef72", lesson04, "LIVE", dict(TINY_ARGS["lesson04"]), "data"),
    ],
)
def test_a_notebooks_live_cell_runs_its_live_branch_under_the_clock(
    monkeypatch, capsys, no_show, notebook, cell_id, module, name, tiny, reads
):
    monkeypatch.setattr(module, name, tiny)
    ns = {"gpulab": gpulab, "hardware": hardware, "live": live, "spec": hardware.get("H200"), "copy_tbps": 1.0}
    ns["figures"] = __import__("gpulab.figures", fromlist=["lesson01"])
    ns.update(lesson00=lesson00, lesson03=lesson03, precision=P)  # imported by earlier cells of their notebooks
    with timing.test_clock():
        exec(compile(_cell(notebook, cell_id), f"{notebook}:{cell_id}", "exec"), ns)
    out = capsys.readouterr().out
    assert timing.FAKE_LABEL in out or any(timing.FAKE_LABEL in str(f.layout.title.text) for f in no_show)
    assert ns[reads] and "recorded on" not in out and len(out.splitlines()) <= 15


def test_notebook_03s_rates_are_read_against_the_dtypes_of_the_gpu_that_timed_them(monkeypatch, capsys):
    """Cell 30ee29ab with no GPU: the recording's rates beside the recording GPU's dtypes (an H200's: every one),
    where the plan is a T4's; under the clock, the T4's, the GPU planned for, and its rates only."""
    t4 = plan.for_gpu(hardware.get("T4"), "GPULAB_AS_GPU=T4 (test)")
    monkeypatch.setattr(plan, "current", lambda: t4)
    monkeypatch.setattr(lesson03, "LIVE_RATES", dict(n=32))
    ns = {"gpulab": gpulab, "live": live, "lesson03": lesson03, "precision": P}
    exec(compile(_cell("03_precision", "30ee29ab"), "03:30ee29ab", "exec"), ns)
    assert not ns["matmul"].live and ns["feats"].name == RECORDED["profile"]["gpu"] and ns["feats"].has("bf16")
    assert ns["errors"]["bf16"] is None  # computed for the plan: a T4 has no bf16
    assert "recorded on" in capsys.readouterr().out
    with timing.test_clock():
        exec(compile(_cell("03_precision", "30ee29ab"), "03:30ee29ab", "exec"), ns)
    assert ns["matmul"].live and ns["feats"].name == "T4" and not ns["feats"].has("bf16")
    assert {d for d, r in ns["rates"].items() if r} == {"fp32", "fp16"} and "recorded on" not in capsys.readouterr().out


def test_notebook_00bs_profile_cells_run_on_the_gpus_path_under_the_clock(capsys, no_show):
    """The profile cells of notebook 00b (the measurement, the datasheet check, the figure) under the clock: the
    profile is this (fake) GPU's, measured now and labelled fake, never the recording, and never saved (the
    fixture checks the cache)."""
    ns = {"gpulab": gpulab, "hardware": hardware, "figures": __import__("gpulab.figures", fromlist=["lesson00"])}
    with timing.test_clock():
        for cell_id in ("4a986a94", "894d1189", "7c21bf98"):
            exec(compile(_cell("00b_first_kernel", cell_id), f"00b:{cell_id}", "exec"), ns)
    out = capsys.readouterr().out
    assert out.splitlines()[0] == timing.FAKE_LABEL and "recorded on" not in out
    assert ns["profile"]["gpu"] == device.FAKE_GPU["name"] and ns["ceilings"].live
    assert "not in gpulab.hardware's table" in out and timing.FAKE_LABEL in no_show[0].layout.title.text


def test_lesson04_reads_the_launch_model_from_a_record_or_from_the_roofline_points(monkeypatch):
    data = {"launch": {"triton_us": 3.0}, "copy_tbps": 2.0, "sweep": [{"method": "fused"}, {"method": "eager"}]}
    assert lesson04.launch_and_copy(data) == (3.0, 2.0)
    got = lesson04.launch_model_inputs(live.Shown(data, "here", True))
    assert got == live.Shown(dict(overhead_us=3.0, tbps=2.0, measured=[{"method": "fused"}]), "here", True)
    points = [
        {"name": "vector add big", "bytes_moved": 100, "time_ms": 0.5},
        {"name": "vector add small", "bytes_moved": 10, "time_ms": 0.004},
        {"name": "relu tiny", "bytes_moved": 1, "time_ms": 9.0},
    ]
    fake = {"provenance": {"gpu": "G"}, "profile": {"copy_tbps": 4.5}, "roofline_points": points}
    monkeypatch.setitem(live._LOADED, reference.DEFAULT_GPU, fake)
    got = lesson04.launch_model_inputs(live.Shown(None, "no recording yet for lesson04", False))
    assert got.data == dict(overhead_us=4.0, tbps=4.5, measured=[]) and not got.live  # 0.004 ms: the smallest add
    assert got.where.startswith("overhead = vector add small time") and "recorded on G" in got.where


def test_lesson04_steps_table_against_the_copy_bound():
    ms = {"naive fused": 4.0, "fused": 2.0, "fused shared": 1.0, "fused fast": 1.0, "compile": 2.0}
    data = {
        "n": 2**20,
        "copy_tbps": 8 * 2**20 / 1e9,  # 8n bytes in 1 ms
        "headline": [{"method": m, "ms": v} for m, v in ms.items()],
        "accuracy": {"fp32_max_abs_error": {"fused": 1e-7}},
    }
    lines = lesson04.steps_table(data).splitlines()
    assert len(lines) == 2 + len(lesson04.BUILD_STEPS) and lines[-1].split()[-1] == "1.000"
    fused = next(line for line in lines if line.startswith("+ autotuned"))
    assert fused.split()[-4:] == ["2.000", "1.00", "0.50", "1.0e-07"]  # compile/ours 2/2, copy/ours 1/2


def test_lesson01_reads_lesson04s_record_and_sass_counts_by_hand():
    """01's second roof from a lesson04 record: the room a time leaves (FP32 instructions per element) and the
    instructions issued at the autotuner's shape, counted by hand on a record of two elements' worth."""
    from gpulab.core import reference

    rec = {
        "n": 1000,
        "copy_tbps": 2.0,  # 8000 bytes at 2 TB/s: 4e-6 ms
        "headline": [
            {"method": "fused", "ms": 8e-6},
            {"method": "fused shared", "ms": 4e-6},
            {"method": "fused fast", "ms": 2e-6},
            {"method": "compile", "ms": 1.0},
        ],
        "best_config": {"BLOCK": 512, "num_warps": 2},
        "best_config_shared": {"BLOCK": 512, "num_warps": 2},
        "best_config_fast": {"BLOCK": 1024, "num_warps": 4},
    }
    room = lesson04.instruction_room(rec, fp32_tflops=10.0)  # 1e13/s x 8e-9 s / 1000 elements = 80
    assert room["copy_ms"] == pytest.approx(4e-6) and [r["method"] for r in room["rows"]] == [
        "fused",
        "fused shared",
        "fused fast",
    ]
    assert [r["room"] for r in room["rows"]] == pytest.approx([80.0, 40.0, 20.0])
    assert [r["of_copy"] for r in room["rows"]] == pytest.approx([0.5, 1.0, 2.0])
    row = lambda v, b, w, per, mufu, ept: dict(
        variant=v,
        block=b,
        num_warps=w,
        per_element=per,  # noqa: E731
        by_opcode={"MUFU": mufu},
        elements_per_thread=ept,
    )
    sass = {
        "rows": [
            row("precise", 512, 2, 58.0, 0, 4),
            row("precise", 1024, 4, 99.0, 0, 8),
            row("shared", 512, 2, 38.0, 0, 4),
            row("fast", 1024, 4, 11.0, 16, 8),
        ]
    }
    got = lesson04.issued_per_element(rec, sass)
    assert [(r["variant"], r["per_element"], r["sfu_per_element"]) for r in got] == [
        ("precise", 58.0, 0.0),
        ("shared", 38.0, 0.0),
        ("fast", 11.0, 2.0),
    ]
    rec["best_config_fast"] = {"BLOCK": 256, "num_warps": 1}
    with pytest.raises(KeyError, match="fast at BLOCK 256, 1 warps"):
        lesson04.issued_per_element(rec, sass)
    assert reference.sass("sm90")["rows"]  # the shipped counts load
    with pytest.raises(FileNotFoundError, match="count_sass.py --write"):
        reference.sass("sm_nope")
