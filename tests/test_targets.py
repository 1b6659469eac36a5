"""python -m gpulab.targets on a CPU: kernels compile for GPU targets, and each cell says what is taken where.

The reason cells are checked against what the compiler does: fp8e4nv is refused for sm_80, the TMA kernel
compiles to wgmma on sm_90, and an fp16 tl.dot has tensor-core mma on sm_80 but none on sm_75."""

import pytest
import torch

from gpulab import targets


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(targets, "cache_path", lambda: tmp_path / "targets")


def _rows(name):
    rows, _ = targets.plan_rows(targets.CCS, (name,))
    return {r.cc: r for r in rows if r.case.name == name}


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


def test_every_case_names_a_real_kernel_and_fallback():
    names = {c.name for c in targets.CASES}
    for case in targets.CASES:
        kernel = getattr(targets._kernel_module(case.module), case.kernel)
        assert callable(kernel), case.name
        assert not case.needs or case.instead in names, case.name


def test_elementwise_compiles_for_every_target():
    rows = targets.run(targets.CCS, ("vector add",), jobs=2)
    assert [r.cc for r in rows] == list(targets.CCS)
    for r in rows:
        (c,) = r.configs
        assert r.status == "ok" and not c.get("error"), c
        assert c["mma"] == 0 and c["spill_bytes"] == 0 and 8 <= c["regs"] <= 255 and c["fits"]
    again = targets.run(targets.CCS, ("vector add",), jobs=2)  # from the cache: the same numbers
    assert [r.configs for r in again] == [r.configs for r in rows]
    assert "vector add" in targets.table(rows)


def test_what_the_compiler_does_matches_the_cells():
    (fp8_80,) = [r for r in targets.plan_rows((89,), ("fp8",))[0]]
    tile = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}
    fp8_job = targets._job(
        fp8_80.case, 80, "fp8", targets.Launch({**tile, "INPUT_PRECISION": "tf32", "UPCAST": False}, 4, 2)
    )
    (mm,) = [c for c in targets.CASES if c.name == "matmul bf16 (pointer)"]
    small = targets.Launch({**tile, "INPUT_PRECISION": "tf32", "UPCAST": False}, 4, 2)
    (tma,) = [c for c in targets.CASES if c.name == "matmul bf16 (TMA)"]
    tma_launch = targets.Launch({**tile, "FLATTEN": False, "WARP_SPECIALIZE": False}, 4, 2)
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
    from gpulab import plan
    from gpulab.kernels import flash_attention as fa
    from gpulab.kernels import matmul as mm

    rows, _ = targets.plan_rows((75, 89), ("matmul bf16 (pointer)", "attention forward (pointer)"), all_configs=True)
    got = {(r.case.name, r.cc): [c["config"] for c in r.configs] for r in rows}

    def short(c):
        return f"{c.BLOCK_M}x{c.BLOCK_N}x{c.BLOCK_K} w{c.num_warps} s{c.num_stages}"

    assert got["matmul bf16 (pointer)", 75] == [short(c) for c in mm.CONFIGS["pointer_small"]]
    l4 = plan.for_gpu(plan.as_gpu_spec("L4"))
    assert got["matmul bf16 (pointer)", 89] == [short(c) for c in mm.CONFIGS["pointer"][1:]]
    assert [short(c) for c in mm.candidates("pointer", torch.bfloat16, l4)] == got["matmul bf16 (pointer)", 89]
    assert got["attention forward (pointer)", 75] == [fa.config_label(c) for c in fa.FP32_FWD_CONFIGS]


def test_bad_target_is_refused():
    with pytest.raises(ValueError, match="ccs must be among"):
        targets.run((70,))


def _teaching_rows(ccs=targets.CCS) -> tuple[dict, dict]:
    rows, jobs = targets.plan_rows(ccs, ("matmul step", "teaching attention"))
    return {(r.case.name, r.cc): r for r in rows}, jobs


def _launch(row, jobs) -> tuple:
    (c,) = row.configs
    job = jobs[c["key"]]
    return job["kernel"], job["constexprs"], job["num_warps"], job["num_stages"]


def test_teaching_kernels_are_rows_as_the_lessons_launch_them():
    from gpulab import hardware, plan
    from gpulab.bench import lesson07, lesson08
    from gpulab.kernels import flash_teaching, matmul_steps

    rows, jobs = _teaching_rows()
    steps = [c.name.removeprefix("matmul step: ") for c in targets.CASES if c.name.startswith("matmul step: ")]
    assert steps == list(matmul_steps.STEPS)
    assert targets.STEP_DTYPE == lesson07.BUILD_DTYPE
    assert targets.TEACHING_HEAD_DIM in {d for d, _ in lesson08.TEACHING_SETTINGS}
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
                bm, bn = flash_teaching.planned_blocks(targets.TEACHING_HEAD_DIM, 2, part, p)
                want = dict(BLOCK_M=bm, BLOCK_N=bn, D=targets.TEACHING_HEAD_DIM, CAUSAL=causal, DOT_PREC="tf32")
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
