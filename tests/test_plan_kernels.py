"""The kernels' automatic choices follow gpulab.core.plan: matmul's path and autotuning candidates, FlashAttention's TMA
default and candidates, for a T4, an L4, an A100 and an H200, planned on a CPU.

Expected values by hand: shared memory per block 64 KiB on compute capability 7.5 (T4), 99 KiB on 8.9 (L4),
163 KiB on 8.0 (A100), 227 KiB on 9.0 (H200) (CUDA C++ Programming Guide, per-compute-capability limits); TMA
from 9.0; below 8.0 a tl.dot is FMA, so the small tiles. On the H200 (the GPU of the reference recordings) the
choices must be exactly the lists as they stand, untouched by the plan."""

import gpulab  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import math
import os
import subprocess
import sys

import pytest
import torch

from gpulab.core import plan
from gpulab.core.tolerances import (
    ATTENTION_GRAD_REL,
    ATTENTION_REL,
    declares_tf32,
    matmul_mismatch,
    matmul_rel_bound,
    max_rel_error,
    relative_error,
)
from gpulab.kernels import flash_attention as F
from gpulab.kernels import matmul as mm
from gpulab.kernels import matmul_precision as mp

pytestmark = pytest.mark.usefixtures("seed")

GPUS = ("T4", "L4", "A100", "H200")
SMEM_KIB = {"T4": 64, "L4": 99, "A100": 163, "H200": 227}
HALF = (torch.float16, torch.bfloat16)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _plan(name):
    return plan.for_gpu(plan.as_gpu_spec(name))


def _mm_bytes(c, dtype):  # an A tile and a B tile per pipeline stage
    return (c.BLOCK_M + c.BLOCK_N) * c.BLOCK_K * c.num_stages * dtype.itemsize


def _fwd_bytes(c, d, dtype):  # the Q tile once, a K and a V tile per pipeline stage
    return (c.kwargs["BLOCK_M"] + 2 * c.kwargs["BLOCK_N"] * c.num_stages) * d * dtype.itemsize


# ---- matmul ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GPUS)
def test_matmul_path_follows_the_plan(name):
    p = _plan(name)
    half = "tma" if name == "H200" else "pointer"
    assert [mm.planned_path(d, p) for d in HALF] == [half, half]
    assert mm.planned_path(torch.float32, p) == "pointer"


@pytest.mark.parametrize("name", GPUS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_candidates_fit_the_gpu(name, dtype):
    """Every kept candidate fits one block's shared memory; none that fits is dropped; the T4 takes the small
    tiles whatever the dtype."""
    p = _plan(name)
    path = mm.planned_path(dtype, p)
    key = "pointer_small" if name == "T4" else ("pointer_fp32" if dtype == torch.float32 else path)
    got = mm.candidates(path, dtype, p)
    limit = SMEM_KIB[name] * 1024
    assert got == [c for c in mm.CONFIGS[key] if _mm_bytes(c, dtype) <= limit] and got
    assert mm.heuristic_config(64, 64, 64, dtype, path, p) == (got[0] if gpulab.ON_GPU else mm.INTERPRETER_CONFIG)


def test_matmul_lists_by_hand():
    """(128 + 256) * 64 * 3 * 2 B = 144 KiB does not fit the L4's 99 KiB; (128 + 128) * 64 * 3 * 2 B = 96 KiB does."""
    assert mm.candidates("pointer", torch.bfloat16, _plan("L4")) == mm.CONFIGS["pointer"][1:]
    assert mm.candidates("pointer", torch.bfloat16, _plan("A100")) == mm.CONFIGS["pointer"]
    for dtype in DTYPES:
        assert mm.candidates("pointer", dtype, _plan("T4")) == mm.CONFIGS["pointer_small"]
    # the T4's small tiles: at most 64 x 128 outputs per program (the FMA accumulator lives in registers)
    assert all(c.BLOCK_M * c.BLOCK_N <= 64 * 128 for c in mm.CONFIGS["pointer_small"])
    with pytest.raises(ValueError, match="path must be"):
        mm.candidates("auto", torch.float16, _plan("T4"))


def test_h200_matmul_choices_are_unchanged():
    h200 = _plan("H200")
    for dtype in HALF:
        assert mm.planned_path(dtype, h200) == "tma"
        assert mm.candidates("tma", dtype, h200) == mm.CONFIGS["tma"]
        assert mm.candidates("pointer", dtype, h200) == mm.CONFIGS["pointer"]
    assert mm.candidates("pointer", torch.float32, h200) == mm.CONFIGS["pointer_fp32"]


@pytest.mark.parametrize("name", GPUS)
def test_matmul_precision_blocks_follow_the_plan(name):
    """Lesson 03's kernel: 128 x 128 x 32 with 8 warps wherever Triton's dot has tensor cores (the H200's as
    before), a 64 x 64 x 16 tile with 4 warps on the T4."""
    bm, bn, bk = mp.planned_blocks(_plan(name))
    assert (bm, bn, bk, mp.num_warps_for(bm, bn)) == ((64, 64, 16, 4) if name == "T4" else (128, 128, 32, 8))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_t4_matmul_precision_blocks_compute_correctly(dtype):
    a = torch.randn(70, 45, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)
    b = torch.randn(45, 99, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)
    c = mp.matmul_precision(a, b, "ieee", blocks=mp.planned_blocks(_plan("T4")))
    err = relative_error(mp.matmul_precision_ref(a, b), c, kind="norm")  # the bound is on the Frobenius norm
    assert err < matmul_rel_bound(dtype, "ieee"), err


# ---- FlashAttention ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GPUS)
def test_flash_tma_default_follows_the_plan(name):
    p = _plan(name)
    assert F.planned_tma(F.DEFAULT_FWD_TMA, p) is (name == "H200")
    assert F.planned_tma(False, p) is False


@pytest.mark.parametrize("name", GPUS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_candidates_fit_the_gpu(name, dtype):
    """Forward: every kept candidate fits (or, when none does, only the smallest is kept), none that fits is
    dropped, causal keeps BLOCK_M % BLOCK_N == 0; the T4 takes the fp32 lists' small tiles. Backward: the T4 and
    fp32 take ``FP32_BWD_CONFIGS``."""
    p = _plan(name)
    small = dtype == torch.float32 or name == "T4"
    limit = SMEM_KIB[name] * 1024
    for d in F.HEAD_DIMS:
        for causal in (False, True):
            base = [
                c
                for c in (F.FP32_FWD_CONFIGS if small else F.FWD_CONFIGS)
                if not causal or c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0
            ]
            fitting = [c for c in base if _fwd_bytes(c, d, dtype) <= limit]
            smallest = [min(base, key=lambda c: _fwd_bytes(c, d, dtype))]
            assert F.fwd_candidates(dtype, causal, d, p) == (fitting or smallest), (d, causal)
    for part in F.BWD_PARTS:
        assert F.bwd_candidates(part, dtype, p) == (F.FP32_BWD_CONFIGS if small else F.BWD_CONFIGS[part])


def test_flash_lists_by_hand():
    """d = 128, 2-byte: 128x128 with 3 stages needs (128 + 2*128*3) * 128 * 2 B = 224 KiB (only the H200 has it);
    64x64 s3 needs 112 KiB and 64x128 s2 144 KiB (over the L4's 99 KiB). fp32 on a T4: both small tiles need
    more than 64 KiB at d = 128 (96 and 80 KiB), so the smaller one is kept."""
    bf = torch.bfloat16
    assert F.fwd_candidates(bf, False, 128, _plan("H200")) == F.FWD_CONFIGS
    assert F.fwd_candidates(bf, False, 128, _plan("A100")) == F.FWD_CONFIGS[:4]
    assert F.fwd_candidates(bf, False, 128, _plan("L4")) == [F.FWD_CONFIGS[0], F.FWD_CONFIGS[3]]
    assert F.fwd_candidates(bf, False, 128, _plan("T4")) == F.FP32_FWD_CONFIGS
    assert F.fwd_candidates(torch.float32, False, 128, _plan("T4")) == [F.FP32_FWD_CONFIGS[1]]
    with pytest.raises(ValueError, match="head_dim must be"):
        F.fwd_candidates(bf, False, 48, _plan("T4"))
    with pytest.raises(ValueError, match="part must be"):
        F.bwd_candidates("both", bf, _plan("T4"))


def test_h200_flash_choices_are_unchanged():
    h200 = _plan("H200")
    assert F.planned_tma(F.DEFAULT_FWD_TMA, h200) is True and F.planned_tma(F.DEFAULT_BWD_TMA, h200) is False
    for dtype in DTYPES:
        lists = F.FP32_FWD_CONFIGS if dtype == torch.float32 else F.FWD_CONFIGS
        for d in F.HEAD_DIMS:
            assert F.fwd_candidates(dtype, False, d, h200) == lists
            assert F.fwd_candidates(dtype, True, d, h200) == [
                c for c in lists if c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0
            ]
        for part in F.BWD_PARTS:
            want = F.FP32_BWD_CONFIGS if dtype == torch.float32 else F.BWD_CONFIGS[part]
            assert F.bwd_candidates(part, dtype, h200) == want


# ---- the launchers: the plan decides, the GPU gates --------------------------------------------------------


@pytest.mark.parametrize("name", ["T4", "H200"])
def test_launcher_defaults_take_the_current_plan(name, monkeypatch):
    """As on an H200 with GPULAB_AS_GPU=T4: a GPU that has TMA (pretended), the T4's plan: the launchers' defaults
    are the T4's (pointer path, small tiles, no TMA loads); with the H200's plan, the H200's."""
    p = _plan(name)
    monkeypatch.setattr(plan, "current", lambda: p)
    monkeypatch.setattr(gpulab, "ON_GPU", True)
    monkeypatch.setattr(mm, "tma_available", lambda: True)
    monkeypatch.setattr(F, "tma_available", lambda: True)
    path = "tma" if name == "H200" else "pointer"
    assert mm.choose_path(torch.bfloat16) == path and mm.choose_path(torch.float32) == "pointer"
    first = mm.CONFIGS["tma" if name == "H200" else "pointer_small"][0]
    assert mm.heuristic_config(4096, 4096, 4096, torch.bfloat16, path) == first
    assert mm.candidates("pointer", torch.float16) == mm.CONFIGS["pointer_small" if name == "T4" else "pointer"]
    q = torch.zeros(1, 1, 128, 64, dtype=torch.float16)
    assert F._use_tma(None, F.DEFAULT_FWD_TMA, (q, q, q), 128, 128) is (name == "H200")
    assert F.fwd_candidates(torch.float16, False, 64) == (F.FWD_CONFIGS if name == "H200" else F.FP32_FWD_CONFIGS)


def test_interpreter_keeps_its_own_choices():
    """In the interpreter the plan does not reach the launchers: pointer loads, the interpreter's configs."""
    if gpulab.ON_GPU:
        pytest.skip("the interpreter's choices")
    t4 = _plan("T4")
    assert mm.choose_path(torch.bfloat16, t4) == "pointer" == mm.choose_path(torch.bfloat16, _plan("H200"))
    assert mm.heuristic_config(64, 64, 64, torch.float16, "pointer", t4) == mm.INTERPRETER_CONFIG


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_t4_matmul_candidates_compute_correctly(dtype):
    """Every small-tile candidate a T4 may tune over, on an awkward shape (masks at every edge), within
    gpulab.core.tolerances' matmul bound of float64."""
    a = torch.randn(70, 45, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)
    b = torch.randn(45, 99, dtype=torch.float64).to(dtype).to(gpulab.DEVICE)
    ref = mm.matmul_ref(a, b).cpu()
    t4 = _plan("T4")
    for cfg in mm.candidates(mm.planned_path(dtype, t4), dtype, t4):
        prec = t4.input_precision("tf32")  # "ieee": a T4 has no TF32 tensor cores
        c = mm.matmul(a, b, path="pointer", config=cfg, input_precision=prec)
        msg = matmul_mismatch(c, a, b, ref, declares_tf32(dtype, prec))
        assert msg is None, f"{mm.config_label(cfg)}: {msg}"


def test_t4_flash_candidates_compute_correctly():
    """The T4's first forward and backward candidates in fp16 (the fp32 lists' small tiles), causal and not,
    against float64 within gpulab.core.tolerances' attention bounds."""
    t4 = _plan("T4")
    dt = torch.float16
    q, k, v, do = (torch.randn(1, 2, 70, 32, dtype=torch.float64).to(dt).to(gpulab.DEVICE) for _ in range(4))
    for causal in (False, True):
        fwd = F.fwd_candidates(dt, causal, 32, t4)[0]
        bwd = F.bwd_candidates("fused", dt, t4)[0]
        out, lse = F.flash_attention_forward(q, k, v, causal, config=fwd)
        grads = F.flash_attention_backward(q, k, v, out, lse, do, causal, mode="fused", config=bwd)
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        r_out, _ = F.flash_attention_ref(q64, k64, v64, causal)
        r_grads = torch.autograd.grad(r_out, (q64, k64, v64), do.double())
        err = max_rel_error(out, r_out.detach())
        assert err <= ATTENTION_REL[dt], f"out: {err:.3g} causal={causal} {F.config_label(fwd)}"
        for name, g, r in zip(("dq", "dk", "dv"), grads, r_grads):
            err = max_rel_error(g, r)
            assert err <= ATTENTION_GRAD_REL[dt] and not math.isnan(err), f"{name}: {err:.3g} causal={causal}"


def test_as_gpu_t4_reaches_the_kernels():
    """GPULAB_AS_GPU=T4 (no GPU: the interpreter) makes the kernels' default choices the T4's."""
    code = (
        "import torch; from gpulab.kernels import matmul as mm, flash_attention as F;"
        "print(mm.planned_path(torch.bfloat16), mm.candidates('pointer', torch.float16) == "
        "mm.CONFIGS['pointer_small'], F.planned_tma(True), F.bwd_candidates('fused', torch.float16) == "
        "F.FP32_BWD_CONFIGS)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPULAB_", "TRITON_INTERPRET"))}
    env.update(GPULAB_AS_GPU="T4", GPULAB_MODE="interpreter")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["pointer", "True", "False", "True"]
