"""Each suite's choices on a T4, an L4, an A100 and an H200 (``choices(plan)``, pure: no GPU needed)."""

import pytest

import gpulab
from gpulab.bench import lesson03, lesson05, lesson06, lesson07, lesson08, planned
from gpulab.core import plan

GPUS = ("T4", "L4", "A100", "H200")


def plan_for(name):
    return plan.for_gpu(plan.as_gpu_spec(name))


def test_split_marks_what_does_not_fit():
    t4 = plan_for("T4")  # 16 GB: 8 GB of buffers
    kept, skipped = planned.split(t4, [1, 2, 3], lambda n: n * 3_000_000_000, key="k")
    assert kept == [1, 2]
    assert skipped == [{"k": 3, "skipped": "needs 9.0 GB; the T4 plan allows 8.0 GB (50% of its 16 GB)"}]


@pytest.mark.parametrize("gpu", GPUS)
def test_lesson08_choices(gpu):
    ch = lesson08.choices(plan_for(gpu))
    assert ch["dtype"] == ("fp16" if gpu == "T4" else "bf16")
    assert ch["tma"] == (gpu == "H200") and (ch["tma_skip"] is None) == (gpu == "H200")
    skipped = [r["L"] for r in ch["naive_skipped"]]
    assert ch["naive_kept"] + skipped == list(lesson08.SWEEP)  # every length is either run or marked
    # naive at L = 16384 holds S and P, 2 * 16 * 16384^2 * 2 B = 17.2 GB: too much for a T4 or an L4
    assert {"T4": 16384, "L4": 16384, "A100": 32768, "H200": 65536}[gpu] == skipped[0]
    assert all(gpu in r["skipped"] for r in ch["naive_skipped"])
    assert ch["memory_skipped"] == []  # flash is O(L): every length fits every GPU


@pytest.mark.parametrize("gpu", GPUS)
def test_lesson07_choices(gpu):
    ch = lesson07.choices(plan_for(gpu))
    assert ch["dtype"] == ("fp16" if gpu == "T4" else "bf16")
    assert ch["headline_dtypes"] == (("fp16",) if gpu == "T4" else ("bf16", "fp16"))
    assert ch["tile_dtypes"] == ("fp32", ch["dtype"])
    assert ch["headline_kept"] == list(lesson07.HEADLINE_NS)  # 3 x 8192^2 x 2 B = 0.4 GB fits everywhere
    # fp32 128 x 128 tiles need 128 KiB of shared memory: not on a T4 (64 KiB) or an L4 (99 KiB)
    assert (("fp32", 128) in ch["tiles_skipped"]) == (gpu in ("T4", "L4"))
    assert (ch["dtype"], 256) in ch["tiles_skipped"]  # 256 KiB fits no GPU of the table


@pytest.mark.parametrize("gpu", GPUS)
def test_lesson06_choices(gpu):
    ch = lesson06.choices(plan_for(gpu))
    # stride 64 reads an 8 GiB input (8.7 GB with y): past the 8 GB a T4's plan allows
    assert [r["stride"] for r in ch["strides_skipped"]] == ([64] if gpu == "T4" else [])
    assert ch["strides_kept"] == [s for s in lesson06.STRIDES if gpu != "T4" or s != 64]


@pytest.mark.parametrize("gpu", GPUS)
def test_lesson03_choices(gpu):
    ch = lesson03.choices(plan_for(gpu))
    missing = {"T4": {"tf32", "bf16", "fp8"}, "A100": {"fp8"}}.get(gpu, set())
    assert set(ch["matmul_skipped"]) == missing
    assert all(r.startswith(f"skipped {d}:") for d, r in ch["matmul_skipped"].items())
    assert set(ch["matmul_dtypes"]) == set(lesson03.P.MATMUL_DTYPES) - missing


@pytest.mark.parametrize("gpu", GPUS)
def test_lesson05_choices(gpu):
    p = plan_for(gpu)
    ch = lesson05.choices(p)
    assert ch["sizes_kept"] + [r["n"] for r in ch["sizes_skipped"]] == list(lesson05.SIZES)
    assert all(p.fits(lesson05.point_bytes(n)) for n in ch["sizes_kept"])
    # a sweep past the T4's memory: 2^30 fp32 elements need far more than its 8 GB
    big = lesson05.choices(plan_for("T4"), sizes=(2**20, 2**30))
    assert big["sizes_kept"] == [2**20] and big["sizes_skipped"][0]["n"] == 2**30


@pytest.mark.skipif(gpulab.ON_GPU, reason="on a GPU the plan is that GPU's; this checks the interpreter's")
def test_interpreter_plans_as_the_h200():
    # the recorded reference data was made on an H200: the interpreter's choices are the H200's
    assert plan.current().gpu.name == "H200"
    assert lesson08.choices(plan.current()) == lesson08.choices(plan_for("H200"))
