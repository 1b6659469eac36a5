"""Differences between the Triton releases gpulab supports (3.6 on the GPU image, 3.9 here), bridged in one place.

``patch_interpreter()``: Triton 3.6's interpreter converts a kernel's scalar to a Python int with
``int(handle.data)``; a reduction such as ``tl.max(t, axis=0)`` leaves a one-element array there, and NumPy 2.4
refuses ``int()`` of any array that is not 0-dimensional, so ``for i in range(tl.max(t, axis=0))`` raises
``TypeError: only 0-dimensional arrays can be converted to Python scalars`` in the interpreter only (the compiled
kernel is fine). Triton 3.9 squeezes first (``int(handle.data.squeeze())``, triton/runtime/interpreter.py); this
gives 3.6 the same rule. It wraps ``triton.runtime.interpreter._patch_lang_tensor``, which the interpreter calls at
every launch, and is idempotent.
"""

from __future__ import annotations


def _index(self) -> int:
    return int(self.handle.data.squeeze())


def patch_interpreter() -> bool:
    """Make the interpreter's ``tensor.__index__`` accept one-element arrays (module docstring). Returns True if
    this call installed the wrapper, False if it was already installed. Raises ImportError if Triton is missing."""
    from triton.runtime import interpreter

    orig = interpreter._patch_lang_tensor
    if getattr(orig, "_gpulab_index", False):
        return False

    def patched(tensor, scope):
        orig(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)

    patched._gpulab_index = True
    interpreter._patch_lang_tensor = patched
    return True
