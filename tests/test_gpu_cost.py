"""tools/gpu_cost.py counts what cells would cost on a GPU: each Triton specialization compiled once per process,
each autotuner key timed once with every candidate, time_ms calls with their budgets, torch.compile graphs, ncu runs
and full garbage collections; and it leaves gpulab as it found it."""

import json
import sys
from pathlib import Path

import pytest

import gpulab

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gpu_cost  # noqa: E402

pytestmark = pytest.mark.skipif(gpulab.ON_GPU, reason="the cost is counted on a CPU; on a GPU, time it")


def _notebook(tmp_path, *cells: str) -> Path:
    nb = {
        "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": src} for i, src in enumerate(cells)],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "t.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_cells_are_counted_as_a_gpu_would_pay_for_them(tmp_path):
    from gpulab.kernels import sincos

    path = _notebook(
        tmp_path,
        "import gc, gpulab, torch\nfrom gpulab.kernels import relu, sincos\nfrom gpulab import timing\n"
        "x = torch.randn(2**28, device=gpulab.DEVICE)\nrelu.relu(x)\nrelu.relu(x)",  # 2^28 costs nothing: meta
        "timing.time_ms(lambda: relu.relu(x), warmup_ms=5, rep_ms=7)\nrelu.relu(x[:1000])",  # 1000: not 16 | n
        "relu.relu(x.half())\ngc.collect()\ngc.collect(1)",
        "sincos.sincos(x)\nsincos.sincos(x[: 2**27])\nsincos.sincos(x[:96])",
        "f = torch.compile(lambda t: t * 2)\nf(x)\nf(x[:10])\nf(x[:20])",
        "from gpulab import counters\ncounters.report('fusion')\nassert False, 'the cell fails'",
    )
    costs = gpu_cost.cost_notebook(path)
    assert [c.name for c in costs] == [f"Cell {i}" for i in range(6)]
    c0, c1, c2, c3, c4, c5 = costs
    assert (c0.compiles, c0.timed) == (1, 0)  # the second launch reuses the first compile
    assert (c1.compiles, c1.timed, c1.timed_budget_ms) == (1, 1, 12)  # n = 1000 is another specialization
    assert (c2.compiles, c2.gc) == (1, 1)  # fp16: another compile; one full collection, the young one free
    k = len(sincos.AUTOTUNE_CONFIGS)  # 2^28 and 2^27: two keys; 96: the first, untimed
    assert (c3.tuned, c3.bench, c3.compiles, c3.math_compiles) == (2, 2 * k, k, k)
    assert c3.bench_budget_ms > 0 and c3.timed == 0  # the autotuner's timings are benchmarks, not measurements
    assert (c4.graphs, c4.first_graph) == (2, True)  # static at 2^28, then one dynamic graph for every other size
    assert c5.ncu == 1 and c5.error.startswith("AssertionError: the cell fails")
    assert all(c.estimate_s() > 0 for c in costs)


def test_gpulab_is_as_it_was_after_a_count(tmp_path):
    import torch

    from gpulab.core import timing
    from gpulab.kernels import sincos, strided

    before = (gpulab.DEVICE, timing.time_ms, torch.compile, torch.Tensor.item, sincos.gpulab, strided.gpulab)
    gpu_cost.cost_notebook(_notebook(tmp_path, "import gpulab, torch\ntorch.randn(3, device=gpulab.DEVICE).item()"))
    assert before == (gpulab.DEVICE, timing.time_ms, torch.compile, torch.Tensor.item, sincos.gpulab, strided.gpulab)
    assert not timing.is_fake() and torch.ones(2).sum().item() == 2.0


def test_a_suites_headline_is_counted_with_the_steps_gpu_check_runs():
    cost = gpu_cost.cost_suite("lesson05")
    assert cost.name == "lesson05 ways" and cost.timed == 3 * 7 and cost.compiles >= 2 and not cost.error


def test_a_kernels_build_class_follows_what_it_and_its_callees_call():
    from gpulab.kernels import matmul_precision, relu, sigmoid3, sincos

    assert gpu_cost.kernel_kind(matmul_precision.matmul_precision_kernel.fn) == "dot"
    assert gpu_cost.kernel_kind(sincos.sincos_kernel.fn) == "math"  # sin and cos inside _sin_cos, a callee
    assert gpu_cost.kernel_kind(sigmoid3.sigmoid3_kernel.fn) == "math"  # exp inside _sigmoid_and_slope
    assert gpu_cost.kernel_kind(relu.relu_kernel.fn) == "plain"
