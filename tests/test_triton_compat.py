"""gpulab.core.triton_compat: Triton 3.6's interpreter given 3.9's rule for a kernel's scalar used as an index; both
wrappers installed once. What the dot wrapper computes: tests/test_interpreter_fidelity.py."""

import gpulab  # noqa: F401  # first: it sets TRITON_INTERPRET=1 before triton is imported  # isort: skip
import types

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter

import gpulab.kernels  # noqa: F401  (in the interpreter it installs the patch for every launch below)
from gpulab.core import triton_compat


def test_the_interpreters_index_accepts_a_one_element_array():
    triton_compat.patch_interpreter()
    assert not triton_compat.patch_interpreter(), "installed once"

    class Scope:  # records what the interpreter sets on triton.language's tensor for one launch
        def __init__(self):
            self.attrs = {}

        def set_attr(self, obj, name, value):
            self.attrs[name] = value

    scope = Scope()
    interpreter._patch_lang_tensor(types.SimpleNamespace, scope)
    reduced = types.SimpleNamespace(handle=types.SimpleNamespace(data=np.array([3], dtype=np.int32)))
    assert scope.attrs["__index__"](reduced) == 3  # tl.max(t, axis=0)'s one-element array: NumPy 2.4 refuses int()
    assert scope.attrs["__index__"](types.SimpleNamespace(handle=types.SimpleNamespace(data=np.array(5)))) == 5


def test_the_dot_wrapper_is_installed_once():
    triton_compat.patch_interpreter()
    dot = interpreter.InterpreterBuilder.create_dot
    assert getattr(dot, "_gpulab_dot", False), "create_dot honours input_precision"
    assert not triton_compat.patch_interpreter()
    assert interpreter.InterpreterBuilder.create_dot is dot, "wrapped once, not again at every call"


@triton.jit
def _repeat(x_ptr, t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    t = tl.load(t_ptr + offs, mask=mask, other=0)
    for i in range(tl.max(t, axis=0)):  # a loop bound loaded and reduced: the 3.6 interpreter's failing case
        x = tl.where(i < t, x * 2.0, x)
    tl.store(y_ptr + offs, x, mask=mask)


def test_a_loop_over_a_reduced_bound_runs():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(100, generator=g, dtype=torch.float64).float()
    t = torch.randint(0, 4, (100,), generator=g, dtype=torch.int32)
    x, t = x.to(gpulab.DEVICE), t.to(gpulab.DEVICE)
    y = torch.full_like(x, float("nan"))
    _repeat[(triton.cdiv(100, 64),)](x, t, y, 100, BLOCK=64)
    assert torch.equal(y.cpu().double(), x.cpu().double() * 2.0 ** t.cpu().double())
