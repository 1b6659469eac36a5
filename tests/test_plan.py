"""The per-GPU choices of gpulab.core.plan for a T4, an L4, an A100 and an H200, on a CPU.

Expected values come from the datasheets and the CUDA guide's per-compute-capability limits, by hand: shared
memory per block 64 KiB on 7.5, 163 KiB on 8.0, 99 KiB on 8.9, 227 KiB on 9.0; bf16 and tf32 from 8.0, fp8
from 8.9, TMA from 9.0."""

import os
import subprocess
import sys
from collections import namedtuple

import pytest

from gpulab.core import hardware, plan

EXPECTED = {  # GPU: (bf16 ->, fp8 ->, tf32 ->, path, attention TMA, smem KiB per block, memory GB, small tiles)
    "T4": ("fp16", "fp16", "ieee", "pointer", False, 64, 16, True),
    "L4": ("bf16", "fp8", "tf32", "pointer", False, 99, 24, False),
    "A100": ("bf16", "fp16", "tf32", "pointer", False, 163, 40, False),
    "H200": ("bf16", "fp8", "tf32", "tma", True, 227, 141, False),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_choices_per_gpu(name):
    bf16, fp8, tf32, path, tma, smem_kib, mem_gb, small = EXPECTED[name]
    p = plan.for_gpu(plan.as_gpu_spec(name))
    assert (p.dtype("bf16"), p.dtype("fp8"), p.input_precision("tf32")) == (bf16, fp8, tf32)
    assert p.dtype("fp32") == "fp32" and p.dtype("fp16") == "fp16" and p.input_precision("ieee") == "ieee"
    assert (p.matmul_path, p.attention_tma, p.small_tiles) == (path, tma, small)
    assert p.smem_per_block_bytes == smem_kib * 1024
    assert p.memory_bytes == mem_gb * 10**9
    assert f"plans for: {p.gpu.name}" in p.describe()


def test_t4_entry_matches_its_datasheet():  # 40 SMs, 16 GB, compute capability 7.5, no bf16 or fp8
    t4 = hardware.get("T4")
    assert (t4.compute_capability, t4.sms, t4.hbm_gb) == ((7, 5), 40, 16)
    assert t4.peak_tflops["bf16"] is None and t4.peak_tflops["fp8"] is None
    assert not plan.has(t4, "tma") and not plan.has(t4, "bf16") and not plan.has(t4, "fp8")


Cfg = namedtuple("Cfg", "bm bn bk stages")
# (128+256)*64*3*2 = 147456 B, (128+128)*64*3*2 = 98304 B, (128+128)*32*4*2 = 65536 B
CANDIDATES = [Cfg(128, 256, 64, 3), Cfg(128, 128, 64, 3), Cfg(128, 128, 32, 4)]


def _smem(c):
    return plan.matmul_smem_bytes(c.bm, c.bn, c.bk, c.stages, 2)


@pytest.mark.parametrize(
    "name, kept", [("T4", [CANDIDATES[2]]), ("L4", CANDIDATES[1:]), ("A100", CANDIDATES), ("H200", CANDIDATES)]
)
def test_autotuning_lists_fit_shared_memory(name, kept):
    assert plan.for_gpu(plan.as_gpu_spec(name)).keep_fitting(CANDIDATES, _smem) == kept


def test_when_nothing_fits_the_smallest_is_kept():
    p = plan.for_gpu(plan.as_gpu_spec("T4"))
    assert p.keep_fitting(CANDIDATES[:2], _smem) == [CANDIDATES[1]]
    assert p.keep_fitting([], _smem) == []


def test_sizes_scale_to_memory():
    t4, h200 = (plan.for_gpu(plan.as_gpu_spec(n)) for n in ("T4", "H200"))
    # half of 16 GB is 8e9 bytes: 2e9 fp32 elements fit exactly, 3e9 do not
    assert t4.sizes_that_fit([10**9, 2 * 10**9, 3 * 10**9], lambda n: 4 * n) == ([10**9, 2 * 10**9], [3 * 10**9])
    assert h200.sizes_that_fit([3 * 10**9], lambda n: 4 * n) == ([3 * 10**9], [])  # 12e9 <= 70.5e9
    assert t4.largest_elements(4, buffers=2) == 10**9
    assert t4.waves_of(80) == 2.0 and h200.waves_of(132) == 1.0


def test_choose_order_and_refusals():
    h200, t4 = hardware.get("H200"), hardware.get("T4")
    assert plan.choose(None, None).gpu.name == "H200"  # the interpreter plans as the reference GPU
    assert plan.choose(None, t4, "Tesla T4").gpu.name == "T4"
    as_t4 = plan.choose("T4", h200, "NVIDIA H200")
    assert as_t4.gpu.name == "T4" and "GPULAB_AS_GPU=T4" in as_t4.why
    assert plan.choose("a100", None).gpu.name == "A100 40GB SXM"
    with pytest.raises(ValueError, match="compute capability 9.0"):
        plan.choose("H200", t4)
    with pytest.raises(ValueError, match="80 GB"):
        plan.choose(
            "A100 80GB SXM",
            hardware.get("L4").__class__(**{**hardware.get("L4").__dict__, "compute_capability": (9, 0)}),
        )
    for bad in ("P100", "Tesla V100-PCIE-16GB", "Seed accelerator", "", None):
        with pytest.raises(ValueError, match="GPULAB_AS_GPU must name a GPU") as err:
            plan.as_gpu_spec(bad)
    listed = str(err.value).split("(one of: ", 1)[1].split("; any case)", 1)[0].split(", ")
    taken = [n for n in hardware.ACCEPTED_NAMES if _as_gpu_takes(n)]
    assert "H100" in taken and "A100" in taken and listed == taken, (listed, taken)
    with pytest.raises(ValueError, match="feature must be"):
        plan.has(t4, "nvlink")
    with pytest.raises(ValueError, match="wanted must be"):
        plan.for_gpu(t4).dtype("int8")


def _python(code: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GPULAB_", "TRITON_INTERPRET"))}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120, check=False
    )


def test_as_gpu_switch_end_to_end():
    r = _python(
        "import gpulab, gpulab.core.plan as p; print(p.current().gpu.name); gpulab.describe()", GPULAB_AS_GPU="T4"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "T4"
    assert "plans for: T4" in r.stdout and "bf16 matmuls: fp16" in r.stdout and "tile loads: pointer" in r.stdout
    bad = _python("import gpulab", GPULAB_AS_GPU="P100")
    assert bad.returncode != 0 and "GPULAB_AS_GPU must name a GPU of gpulab.core.hardware" in bad.stderr


def test_budget_skip_reason_and_feature_skip_by_hand():
    t4, h200 = (plan.for_gpu(plan.as_gpu_spec(n)) for n in ("T4", "H200"))
    assert t4.budget_bytes == int(0.5 * 16e9) and t4.fits(8e9) and not t4.fits(8e9 + 1)
    assert t4.skip_reason(int(8.6e9)) == "needs 8.6 GB; the T4 plan allows 8.0 GB (50% of its 16 GB)"
    assert t4.feature_skip("tma").startswith("skipped on the T4: TMA") and h200.feature_skip("tma") is None


def _as_gpu_takes(name: str) -> bool:
    try:
        return plan.as_gpu_spec(name) is not None
    except ValueError:
        return False
