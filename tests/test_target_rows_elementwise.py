"""The elementwise rows of ``target_kernels`` compile what their launchers launch on a GPU: each row's BLOCK is
the block its launcher passes to the row's kernel when no block is given (``gpulab.ON_GPU`` set, the kernels
replaced by recorders, so none runs)."""

import pytest
import torch

import gpulab
from gpulab.core import hardware, plan
from gpulab.kernels import sincos, strided, transpose, vector_add
from gpulab.measure.target_kernels import LESSON_KERNELS, SIXTEEN

# rows longer than no block: a GPU's default; on gpulab.DEVICE, the only device a launcher takes (on a GPU, CUDA)
_X = torch.rand(3, 2000, generator=torch.Generator().manual_seed(0)).to(gpulab.DEVICE)

#: row -> (kernel module, its launcher called without a block)
LAUNCHERS = {
    "vector add": (vector_add, lambda: vector_add.vector_add(_X, _X)),
    **{f"{op} (unfused)": (sincos, lambda: sincos.sincos_unfused(_X)) for op in ("sin", "cos", "square", "add")},
    "copy by rows": (strided, lambda: strided.matrix_copy(_X, by="rows")),
    "copy by columns": (strided, lambda: strided.matrix_copy(_X.t(), by="columns")),
    "transpose naive": (transpose, lambda: transpose.transpose_naive(_X)),
}


@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_elementwise_row_is_its_launchers_gpu_launch(name, monkeypatch):
    (row,) = [lk for lk in LESSON_KERNELS if lk.name == name]
    module, launch = LAUNCHERS[name]
    launched = []

    class Recorder:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            return lambda *args, **constexprs: self.kernel == row.kernel and launched.append(constexprs)

    monkeypatch.setattr(gpulab, "ON_GPU", True)
    for kernel in [k for k in vars(module) if k.endswith("_kernel")]:  # the module's kernels: none runs
        monkeypatch.setattr(module, kernel, Recorder(kernel))
    launch()
    assert launched, f"{name}: its launcher never launched {row.kernel}"
    p = plan.for_gpu(hardware.get("H200"))
    assert row.dtype == "fp32" and row.more_dtypes == SIXTEEN
    for dtype in (row.dtype, *row.more_dtypes):
        (config,) = row.launches(p, dtype)
        assert (config.num_warps, config.num_stages) == (4, 3)  # Triton's defaults: the launcher passes none
        assert all(c == config.constexprs for c in launched), (name, dtype, launched, config.constexprs)
