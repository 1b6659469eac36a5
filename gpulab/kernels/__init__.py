"""Triton kernels, one operation per file, each with its launcher and its torch reference.

Import ``gpulab`` first (it does so for you): the package sets ``TRITON_INTERPRET=1`` before these
modules define any ``@triton.jit`` function when no GPU is present.
"""

import gpulab as _gpulab  # noqa: F401  (chooses the mode before any kernel is defined)
