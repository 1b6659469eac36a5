"""python -m gpulab.measure.targets on a CPU: kernels compile for GPU targets, and each cell says what is taken where.

The reason cells are checked against what the compiler does: fp8e4nv is refused for sm_80, the TMA kernel
compiles to wgmma on sm_90, and an fp16 tl.dot has tensor-core mma on sm_80 but none on sm_75."""

import json

import pytest
import torch

from gpulab.measure import target_kernels, targets
from gpulab.measure.target_kernels import LESSON_KERNELS, Launch


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(targets, "cache_path", lambda: tmp_path / "targets")


def _rows(name):
    rows, _ = targets.plan_rows(targets.CCS, (name,))
    return {r.cc: r for r in rows if r.lesson_kernel.name == name}


def test_reason_cells():
    tma = _rows("matmul bf16 (TMA)")
    for cc in (75, 80, 86, 89):
        assert tma[cc].status.startswith("not taken: TMA") and tma[cc].instead == "matmul bf16 (pointer)"
        assert not tma[cc].configs  # nothing compiled for a path that is not taken
    assert tma[90].status == "ok"
    fp8 = _rows("matmul fp8 e4m3 (pointer)")
    for cc in (75, 80, 86):
        assert fp8[cc].dtype == "fp16" and fp8[cc].status.startswith("fp16 instead of fp8")
    assert fp8[89].status == fp8[90].status == "ok" and fp8[89].dtype == "fp8"
    bf16 = _rows("matmul bf16 (pointer)")
    assert bf16[75].dtype == "fp16" and bf16[80].dtype == "bf16" and bf16[80].status == "ok"
    fp32 = _rows("matmul fp32 (pointer)")
    assert fp32[75].status.startswith("ieee instead of tf32") and fp32[80].status == "ok"
    fwd = _rows("attention forward (TMA)")
    assert fwd[80].status.startswith("not taken") and fwd[80].instead == "attention forward (pointer)"


def test_every_lesson_kernel_names_a_real_kernel_and_fallback():
    names = [lk.name for lk in LESSON_KERNELS]
    assert len(set(names)) == len(names) == len(target_kernels.names())
    for lk in LESSON_KERNELS:
        kernel = getattr(targets._kernel_module(lk.module), lk.kernel)
        assert callable(kernel), lk.name
        assert not lk.needs or lk.instead in names, lk.name


def test_elementwise_compiles_for_every_target():
    rows = [r for r in targets.run(targets.CCS, ("vector add",), jobs=2) if r.dtype == "fp32"]
    assert [r.cc for r in rows] == list(targets.CCS)
    for r in rows:
        (c,) = r.configs
        assert r.status == "ok" and not c.get("error"), c
        assert c["mma"] == 0 and c["spill_bytes"] == 0 and 8 <= c["regs"] <= 255 and c["fits"]
    again = [r for r in targets.run(targets.CCS, ("vector add",), jobs=2) if r.dtype == "fp32"]  # from the cache
    assert [r.configs for r in again] == [r.configs for r in rows]
    assert "vector add" in targets.table(rows)


def test_what_the_compiler_does_matches_the_cells():
    (fp8_80,) = [r for r in targets.plan_rows((89,), ("matmul fp8",))[0]]
    tile = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}
    fp8_job = targets._job(
        fp8_80.lesson_kernel, 80, "fp8", Launch({**tile, "INPUT_PRECISION": "tf32", "UPCAST": False}, 4, 2)
    )
    (mm,) = [lk for lk in LESSON_KERNELS if lk.name == "matmul bf16 (pointer)"]
    small = Launch({**tile, "INPUT_PRECISION": "tf32", "UPCAST": False}, 4, 2)
    (tma,) = [lk for lk in LESSON_KERNELS if lk.name == "matmul bf16 (TMA)"]
    tma_launch = Launch({**tile, "FLATTEN": False, "WARP_SPECIALIZE": False, "UPCAST": False}, 4, 2)
    jobs = {
        "fp8@80": fp8_job,
        "fp16@75": targets._job(mm, 75, "fp16", small),
        "fp16@80": targets._job(mm, 80, "fp16", small),
        "tma@90": targets._job(tma, 90, "bf16", tma_launch),
    }
    got = targets._run_workers(jobs, 2)
    assert "fp8e4nv" in got["fp8@80"]["error"]
    assert got["fp16@75"]["mma"] == 0 and got["fp16@80"]["mma"] > 0  # Triton's tensor-core dot from 8.0
    assert got["tma@90"]["mma"] > 0 and not got["tma@90"].get("error")


def test_rows_compile_what_the_kernels_choose():
    """The table's configurations are the kernels' own planned lists: the T4's small matmul tiles, the L4's
    pointer list less the tile over its 99 KiB, the fp32 lists' small tiles for the T4's attention."""
    from gpulab.core import plan
    from gpulab.kernels import flash_attention as fa
    from gpulab.kernels import matmul as mm

    rows, _ = targets.plan_rows((75, 89), ("matmul bf16 (pointer)", "attention forward (pointer)"), all_configs=True)
    got = {(r.lesson_kernel.name, r.cc): [c["config"] for c in r.configs] for r in rows if r.dtype != "fp32"}

    def short(c):
        return f"{c.BLOCK_M}x{c.BLOCK_N}x{c.BLOCK_K} w{c.num_warps} s{c.num_stages}"

    assert got["matmul bf16 (pointer)", 75] == [short(c) for c in mm.CONFIGS["pointer_small"]]
    l4 = plan.for_gpu(plan.as_gpu_spec("L4"))
    assert got["matmul bf16 (pointer)", 89] == [short(c) for c in mm.CONFIGS["pointer"][1:]]
    assert [short(c) for c in mm.candidates("pointer", torch.bfloat16, l4)] == got["matmul bf16 (pointer)", 89]
    # the T4's small tiles at each of lesson 08's head dimensions, the smallest first
    small = [fa.config_label(c) for c in fa.FP32_FWD_CONFIGS]
    assert got["attention forward (pointer)", 75] == small * len(target_kernels.HEAD_DIMS)
    t4_fwd, _ = [
        r for r in rows if r.cc == 75 and r.lesson_kernel.name == "attention forward (pointer)" and r.dtype == "fp16"
    ]
    assert [c["launch"].split("HEAD_DIM=")[1].split(",")[0] for c in t4_fwd.configs] == [
        str(d) for d in sorted(target_kernels.HEAD_DIMS) for _ in small
    ]


def test_bad_target_is_refused():
    with pytest.raises(ValueError, match="ccs must be among"):
        targets.run((70,))


def _teaching_rows(ccs=targets.CCS) -> tuple[dict, dict]:
    rows, jobs = targets.plan_rows(ccs, ("matmul step", "teaching attention"))
    return {(r.lesson_kernel.name, r.cc): r for r in rows}, jobs


def _launch(row, jobs) -> tuple:
    (c,) = row.configs
    job = jobs[c["key"]]
    return job["kernel"], job["constexprs"], job["num_warps"], job["num_stages"]


def test_teaching_kernels_are_rows_as_the_lessons_launch_them():
    from gpulab.bench import lesson07, lesson08
    from gpulab.core import hardware, plan
    from gpulab.kernels import flash_teaching, matmul_steps

    rows, jobs = _teaching_rows()
    steps = [lk.name.removeprefix("matmul step: ") for lk in LESSON_KERNELS if lk.name.startswith("matmul step: ")]
    assert steps == list(matmul_steps.STEPS)
    (teaching_d,) = {d for d, _ in lesson08.TEACHING_SETTINGS}
    cfg = matmul_steps.StepConfig()
    tile = {"BLOCK_M": cfg.BLOCK_M, "BLOCK_N": cfg.BLOCK_N, "BLOCK_K": cfg.BLOCK_K}
    for cc in targets.CCS:
        p = plan.for_gpu(hardware.get(targets.PLANNED[cc]))
        for step, launch in matmul_steps.STEP_LAUNCH.items():
            r = rows[(f"matmul step: {step}", cc)]
            assert r.status == "ok" and r.dtype == lesson07.BUILD_DTYPE
            if launch is None:  # Triton's default warps and stages
                want = ("naive_kernel", {"BLOCK": cfg.BLOCK, "BLOCK_K": cfg.BLOCK_K}, 4, 3)
            else:
                want = ("tiled_kernel", {**tile, "GROUP_M": launch[0]}, cfg.num_warps, launch[1])
            assert _launch(r, jobs) == want, step
        for kernel, name, part in (
            ("flash_fwd_kernel", "forward", "fwd"),
            ("flash_bwd_dkdv_kernel", "bwd dk, dv", "dkdv"),
        ) + (("flash_bwd_dq_kernel", "bwd dq", "dq"),):
            for causal in (False, True):
                r = rows[(f"teaching attention {name}{' causal' if causal else ''}", cc)]
                bm, bn = flash_teaching.planned_blocks(teaching_d, 2, part, p)
                want = dict(BLOCK_M=bm, BLOCK_N=bn, D=teaching_d, CAUSAL=causal, DOT_PREC="tf32")
                assert _launch(r, jobs) == (kernel, want, 4, 3)
                if cc < 80:  # no bf16 tensor cores: the plan's fp16
                    assert r.dtype == "fp16" and r.status.startswith("fp16 instead of bf16"), r.status
                else:
                    assert r.dtype == "bf16" and r.status == "ok"


def test_teaching_kernels_compile():
    """The pipelined teaching matmul and each teaching attention kernel compile for 8.0 with their signatures,
    on tensor cores, with registers, spills and shared memory reported (one target: the table compiles the
    rest; test_what_the_compiler_does_matches_the_cells shows the fp16 dot without mma on 7.5)."""
    rows, jobs = _teaching_rows((80,))
    names = ["matmul step: pipelined", "teaching attention forward", "teaching attention bwd dk, dv"]
    names.append("teaching attention bwd dq")
    keys = {name: rows[(name, 80)].configs[0]["key"] for name in names}
    got = targets._run_workers({k: jobs[k] for k in keys.values()}, 2)
    for name, key in keys.items():
        r = got[key]
        assert not r.get("error"), (name, r)
        assert r["mma"] > 0 and 8 <= r["regs"] <= 255 and r["spill_bytes"] >= 0 and r["smem"] > 0, (name, r)


def test_teaching_backward_fits_a_t4():
    """The dK/dV kernel, the teaching kernel needing the most shared memory, compiled for 7.5 with the T4's
    planned tiles at lesson 08's d=128: what the compiler allocates fits the T4's 64 KiB per block."""
    rows, jobs = _teaching_rows((75,))
    row = rows[("teaching attention bwd dk, dv", 75)]
    (c,) = row.configs
    assert jobs[c["key"]]["constexprs"]["D"] == 128 and row.dtype == "fp16"
    assert c["config"].split()[0] != "64x64"  # 128 KiB there: the plan took smaller tiles
    got = targets._run_workers({c["key"]: jobs[c["key"]]}, 1)[c["key"]]
    assert not got.get("error"), got
    assert 0 < got["smem"] <= 64 * 1024 == c["limit"], got


# ---- the command line and the cache: bad input refused by name, the cache never in the way ---------------------

FAKE_RESULT = {"mma": 3, "regs": 77, "spill_bytes": 5, "smem": 12288}  # not what any kernel compiles to


@pytest.fixture
def fake_workers(monkeypatch):
    """Stands in for the compile workers: every job gets FAKE_RESULT; ``calls`` records the jobs asked for."""
    calls = []

    def run_workers(jobs, n_workers):
        calls.append(sorted(jobs))
        return {k: dict(FAKE_RESULT) for k in jobs}

    monkeypatch.setattr(targets, "_run_workers", run_workers)
    return calls


def _one_key(cc=90):
    _, jobs = targets.plan_rows((cc,), ("ex01 scale add",))
    (key,) = jobs
    return key


def test_a_cache_that_cannot_be_written_warns_and_keeps_the_results(monkeypatch, tmp_path, capsys, fake_workers):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(targets, "cache_path", lambda: blocker / "targets")
    (row,) = targets.run((90,), ("ex01 scale add",))
    assert row.configs[0]["regs"] == 77 and row.configs[0]["smem"] == 12288
    err = capsys.readouterr().err
    assert f"cannot write the compile cache in {blocker / 'targets'}" in err and "--no-cache" in err
    (row,) = targets.run((90,), ("ex01 scale add",), use_cache=False)  # --no-cache: the cache is never touched
    assert row.configs[0]["regs"] == 77 and capsys.readouterr().err == ""
    assert targets.main(["--cc", "90", "--only", "ex01 scale add", "--no-cache"]) == 0
    out, err = capsys.readouterr()
    assert "ex01 scale add" in out and err == ""


def test_cache_writes_are_atomic(monkeypatch, tmp_path, capsys, fake_workers):
    """A write interrupted before the file is complete (here: the rename that completes it fails) leaves no
    file behind, neither a partial result nor a temporary file, and the results are still returned."""
    import os

    def interrupted(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", interrupted)
    (row,) = targets.run((90,), ("ex01 scale add",))
    assert row.configs[0]["regs"] == 77
    assert list((tmp_path / "targets").iterdir()) == []
    assert "No space left on device" in capsys.readouterr().err


@pytest.mark.parametrize("content", ['{"mma": 0, "regs"', "", "[1, 2]", '{"regs": 1}', "\xff\xfe"])
def test_an_unreadable_cache_file_is_compiled_again_with_a_warning(tmp_path, capsys, fake_workers, content):
    key = _one_key()
    path = tmp_path / "targets" / f"{key}.json"
    path.parent.mkdir()
    path.write_bytes(content.encode("latin-1"))
    (row,) = targets.run((90,), ("ex01 scale add",))
    assert fake_workers == [[key]] and row.configs[0]["regs"] == 77
    err = capsys.readouterr().err
    assert f"the cache file {path}" in err and "compiling it again" in err
    assert json.loads(path.read_text()) == FAKE_RESULT  # replaced by the fresh result
    targets.run((90,), ("ex01 scale add",))  # and read back from the cache, without a warning
    assert len(fake_workers) == 1 and capsys.readouterr().err == ""


def test_parse_ccs_takes_both_spellings():
    assert targets.parse_ccs("7.5,90, 8.9,75") == (75, 90, 89)
    assert targets.parse_ccs(",".join(str(c) for c in targets.CCS)) == targets.CCS


@pytest.mark.parametrize("cc", ["junk", "7.5x", "100", "70", "7.0", "9", "", " , ", "75,junk"])
def test_cli_refuses_a_target_it_does_not_know_listing_the_targets(capsys, fake_workers, cc):
    with pytest.raises(SystemExit) as e:
        targets.main(["--cc", cc, "--only", "ex01 scale add"])
    assert e.value.code == 2 and fake_workers == []  # nothing compiled
    err = capsys.readouterr().err
    assert "argument --cc" in err and "accepted: 75, 80, 86, 89, 90 (or 7.5, 8.0, 8.6, 8.9, 9.0)" in err


def test_cli_compiles_for_a_dotted_target(capsys, fake_workers):
    assert targets.main(["--cc", "9.0", "--only", "ex01 scale add"]) == 0
    assert fake_workers == [[_one_key(90)]]
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "ex01 scale add" in ln]
    assert " 9.0 " in line and " 77 " in line


@pytest.mark.parametrize("only", ["nosuchkernel", "vector add,nosuch"])
def test_cli_refuses_a_kernel_name_that_matches_nothing_listing_the_names(capsys, fake_workers, only):
    with pytest.raises(SystemExit) as e:
        targets.main(["--cc", "90", "--only", only])
    assert e.value.code == 2 and fake_workers == []
    err = capsys.readouterr().err
    assert f"['{only.split(',')[-1]}'] match no kernel" in err
    assert all(repr(name) in err for name in target_kernels.names())


def test_strided_layouts_compile_the_coalescing_cases_launch(monkeypatch):
    """The strided layout compiled by default is lesson 06's coalescing case's launch, contiguous and strided."""
    from gpulab.measure.counter_cases import COALESCING_LAUNCH

    launch = (COALESCING_LAUNCH["block"], COALESCING_LAUNCH["num_warps"])
    assert sorted(target_kernels.STRIDED_VARIANTS) == [(*launch, "fp32", False), (*launch, "fp32", True)]
    seen = []

    def fake_run(cmd, **kw):
        seen.append(json.loads(cmd[cmd.index("--layout-worker") + 1]))
        raise RuntimeError("stop")

    monkeypatch.setattr(targets.subprocess, "run", fake_run)
    with pytest.raises(RuntimeError, match="stop"):
        targets.strided_layouts(cc=80)
    assert seen == [[[*launch, "fp32", c, 80] for c in (True, False)]]
