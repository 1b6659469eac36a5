"""The benchmark suite's measurements: each returns plain records, so the CLI, the notebooks and the
reference data share one code path. GPU only (each calls ``time_ms``, which raises in interpreter mode).
"""

from __future__ import annotations

from tqdm.auto import tqdm

from ..roofline import KernelPoint
from ..timing import time_ms

# Sizes placed on lesson 01's roofline.
VECTOR_SIZES = (2**16, 2**20, 2**24, 2**28)
MATMUL_SIZES = (256, 512, 1024, 2048, 4096, 8192)


def roofline_points(progress: bool = True) -> list[KernelPoint]:
    """Measure real kernels for the roofline: Triton vector add and ReLU (fp32) at ``VECTOR_SIZES``,
    cuBLAS bf16 matmul at ``MATMUL_SIZES``. FLOPs and bytes are counted by hand (the kernels' docstrings):
    vector add n FLOPs / 12n bytes; ReLU n / 8n; matmul 2N^3 FLOPs / 3N^2 * 2 bytes (A, B read, C written
    once, the least any implementation must move).
    """
    import torch

    from ..device import matmul_fn
    from ..kernels.relu import relu, relu_counts
    from ..kernels.vector_add import vector_add, vector_add_counts

    jobs = (
        [("vector add", n) for n in VECTOR_SIZES]
        + [("relu", n) for n in VECTOR_SIZES]
        + [("matmul bf16", n) for n in MATMUL_SIZES]
    )
    points = []
    for kind, n in tqdm(jobs, desc="roofline points", disable=not progress):
        if kind == "matmul bf16":
            t = time_ms(matmul_fn("bf16", n))
            points.append(KernelPoint(f"matmul bf16 {n}^3", 2 * n**3, 3 * n * n * 2, t.median_ms, "bf16", "matmul"))
            continue
        x = torch.randn(n, device="cuda")
        if kind == "vector add":
            y = torch.randn(n, device="cuda")
            t = time_ms(lambda: vector_add(x, y))
            flops, nbytes = vector_add_counts(n, 4)
        else:
            t = time_ms(lambda: relu(x))
            flops, nbytes = relu_counts(n, "fp32")
        points.append(
            KernelPoint(f"{kind} fp32 n=2^{n.bit_length() - 1}", flops, nbytes, t.median_ms, "fp32", "elementwise")
        )
    return points


def vendor_ratios(n: int = 2**28) -> list[dict]:
    """gpulab's elementwise kernels against torch's, same inputs, same run: ratio = torch time / ours
    (>= 1 means gpulab is as fast or faster)."""
    import torch

    from ..kernels.relu import relu
    from ..kernels.vector_add import vector_add

    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    rows = []
    for name, ours, theirs, nbytes in [
        ("vector add fp32", lambda: vector_add(x, y), lambda: torch.add(x, y), 12 * n),
        ("relu fp32", lambda: relu(x), lambda: torch.relu(x), 8 * n),
    ]:
        t_ours, t_theirs = time_ms(ours), time_ms(theirs)
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
