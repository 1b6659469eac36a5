"""Hopper's features for the fast kernels: the TMA tensor descriptor and the SM count.

``tma_available()`` is the one answer to "can a kernel load through TMA tensor descriptors here?", shared by
``matmul`` and ``flash_attention``:

- on a GPU: True when its compute capability is >= 9.0 (Hopper and later; the Tensor Memory Accelerator is a
  Hopper unit, CUDA C++ Programming Guide, "Tensor Memory Access") and Triton has
  ``triton.tools.tensor_descriptor.TensorDescriptor`` (Triton >= 3.4);
- in Triton's interpreter: True when ``TensorDescriptor`` is importable, since the interpreter emulates
  descriptor loads on the CPU, so the TMA code paths can be tested without a GPU.

Whether a launcher *chooses* the TMA path by default is its own rule (both take it by default only on a GPU);
``tma_available()`` says only whether the path can run.
"""

from __future__ import annotations

import functools

import gpulab

try:  # host-side TMA descriptors: Triton >= 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older Triton
    TensorDescriptor = None


def tma_available() -> bool:
    """True where the TMA path can run: ``TensorDescriptor`` is importable and either gpulab runs in Triton's
    interpreter (which emulates descriptors) or the GPU's compute capability is >= 9.0."""
    if TensorDescriptor is None:
        return False
    return not gpulab.ON_GPU or gpulab.compute_capability()[0] >= 9


@functools.cache
def num_sms() -> int:
    """SMs of GPU 0; in the interpreter 4 (so a persistent loop visits several tiles per program)."""
    if not gpulab.ON_GPU:
        return 4
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count
