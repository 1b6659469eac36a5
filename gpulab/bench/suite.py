"""The benchmark suite's measurements: each returns plain records, so the CLI, the notebooks and the
reference data share one code path. GPU only (each calls ``time_ms``, which raises in interpreter mode; the test
clock runs them on the CPU).
"""

from __future__ import annotations

from dataclasses import asdict

import torch
from tqdm.auto import tqdm

from ..core import timing
from ..core.timing import time_ms
from ..kernels.relu import relu, relu_counts
from ..kernels.vector_add import vector_add, vector_add_counts
from ..measure.device import get_profile, matmul_fn
from ..models import roofline as R
from ..models.roofline import KernelPoint

# Sizes placed on lesson 01's roofline.
VECTOR_SIZES = (2**16, 2**20, 2**24, 2**28)
MATMUL_SIZES = (256, 512, 1024, 2048, 4096, 8192)
# What notebook 01 measures live: one vector size of each elementwise kernel below and one above the L2,
# and the matmuls from the CPU-bound to the compute-bound.
LIVE = dict(vector_sizes=(2**20, 2**28), matmul_sizes=(512, 2048, 8192))
# do_bench's budgets for each point and ratio (ms): hundreds of launches of a microsecond kernel, sixty of a 2 ms
# matmul; the ceilings themselves (``device.measure_profile``) take longer budgets.
TIMING = dict(warmup_ms=25, rep_ms=100)


def roofline(progress: bool = True, vector_sizes=VECTOR_SIZES, matmul_sizes=MATMUL_SIZES, matmul_n: int = 8192) -> dict:
    """Lesson 01's measured roofline: ``profile``, the device profile of the GPU that measures
    (``device.get_profile``: never the GPU that GPULAB_AS_GPU plans for, whose roof a measured point could sit
    above), and ``roofline_points``, ``roofline_points(...)`` as dicts. The keys of a reference file, so that a
    notebook reads a measurement and a recording alike. ``matmul_n``: the profile's matmul size when it is
    measured now."""
    profile = get_profile(progress=progress, matmul_n=matmul_n).to_json()
    points = roofline_points(progress, vector_sizes, matmul_sizes)
    return timing.stamp({"profile": profile, "roofline_points": [asdict(p) for p in points]})


def above_roof(profile: dict, points, l2_bytes: float | None = None, slack: float = 1.1) -> list[str]:
    """Names of ``points`` (``KernelPoint``s) faster than ``slack`` x the roof of ``profile`` (its measured
    ``matmul_tflops[p.dtype]`` and ``copy_tbps``): a count of FLOPs or bytes too low. A working set under
    ``l2_bytes`` (default: the profile's L2) answers to the L2's roof, not HBM's, and is left out."""
    l2 = profile["l2_mb"] * 1e6 if l2_bytes is None else l2_bytes
    return [
        p.name
        for p in points
        if p.bytes_moved >= l2
        and p.tflops > slack * R.attainable_tflops(p.intensity, profile["matmul_tflops"][p.dtype], profile["copy_tbps"])
    ]


def roofline_points(progress: bool = True, vector_sizes=VECTOR_SIZES, matmul_sizes=MATMUL_SIZES) -> list[KernelPoint]:
    """Measure real kernels for the roofline (``time_ms`` with ``TIMING``): Triton vector add and ReLU (fp32) at
    ``vector_sizes``, cuBLAS bf16 matmul at ``matmul_sizes``. FLOPs and bytes are counted by hand (the kernels'
    docstrings): vector add n FLOPs / 12n bytes; ReLU n / 8n; matmul 2N^3 FLOPs / 3N^2 * 2 bytes (A, B read, C
    written once, the least any implementation must move).
    """
    jobs = (
        [("vector add", n) for n in vector_sizes]
        + [("relu", n) for n in vector_sizes]
        + [("matmul bf16", n) for n in matmul_sizes]
    )
    dev = timing.device()
    gen = torch.Generator(dev).manual_seed(0)
    points = []
    for kind, n in tqdm(jobs, desc="roofline points", disable=not progress):
        if kind == "matmul bf16":
            t = time_ms(matmul_fn("bf16", n), **TIMING)
            points.append(KernelPoint(f"matmul bf16 {n}^3", 2 * n**3, 3 * n * n * 2, t.median_ms, "bf16", "matmul"))
            continue
        x = torch.randn(n, device=dev, generator=gen)
        if kind == "vector add":
            y = torch.randn(n, device=dev, generator=gen)
            t = time_ms(lambda: vector_add(x, y), **TIMING)
            flops, nbytes = vector_add_counts(n, 4)
        else:
            t = time_ms(lambda: relu(x), **TIMING)
            flops, nbytes = relu_counts(n, "fp32")
        points.append(
            KernelPoint(f"{kind} fp32 n=2^{n.bit_length() - 1}", flops, nbytes, t.median_ms, "fp32", "elementwise")
        )
    return points


def vendor_ratios(n: int = 2**28) -> list[dict]:
    """gpulab's elementwise kernels against torch's, same inputs, same run (``time_ms`` with ``TIMING``): ratio =
    torch time / ours (>= 1 means gpulab is as fast or faster)."""
    gen = torch.Generator(timing.device()).manual_seed(0)
    x = torch.randn(n, device=timing.device(), generator=gen)
    y = torch.randn(n, device=timing.device(), generator=gen)
    rows = []
    for name, ours, theirs, nbytes in [
        ("vector add fp32", lambda: vector_add(x, y), lambda: torch.add(x, y), 12 * n),
        ("relu fp32", lambda: relu(x), lambda: torch.relu(x), 8 * n),
    ]:
        t_ours, t_theirs = time_ms(ours, **TIMING), time_ms(theirs, **TIMING)
        rows.append(
            dict(
                name=name,
                n=n,
                gpulab_ms=t_ours.median_ms,
                torch_ms=t_theirs.median_ms,
                gpulab_tbps=t_ours.rate(nbytes),
                torch_tbps=t_theirs.rate(nbytes),
                ratio=t_theirs.median_ms / t_ours.median_ms,
            )
        )
    return rows
