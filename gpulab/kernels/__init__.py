"""Triton kernels, one operation per file, each with its launcher and its torch reference.

Import ``gpulab`` first (it does so for you): the package sets ``TRITON_INTERPRET=1`` before these
modules define any ``@triton.jit`` function when no GPU is present.
"""

import os as _os

import gpulab as _gpulab  # noqa: F401  (chooses the mode before any kernel is defined)

if _os.environ.get("TRITON_INTERPRET") == "1":
    from ..core.triton_compat import patch_interpreter

    # Here and not in gpulab/__init__: importing Triton with TRITON_INTERPRET=1 makes triton.language's own
    # @jit helpers interpreted, and a compile worker (gpulab.measure.targets) clears the variable after `import gpulab`.
    patch_interpreter()
