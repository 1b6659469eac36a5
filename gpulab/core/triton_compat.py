"""Triton's interpreter made to compute what the GPU computes, and to accept what Triton 3.6 and 3.9 both accept.

``patch_interpreter()`` installs two wrappers, each once (idempotent), on Triton 3.6 (the GPU image) and 3.9
(here): the interpreter code they wrap is the same in both. It runs wherever the interpreter does: from
``gpulab.kernels`` when ``TRITON_INTERPRET=1`` (a machine without a GPU), and from the exercise checker's
pre-flight (``exercises.kernelcheck``), which runs kernels in the interpreter on a GPU machine too.

1. A kernel's scalar used as an index. Triton 3.6's interpreter converts it with ``int(handle.data)``; a
   reduction such as ``tl.max(t, axis=0)`` leaves a one-element array there, and NumPy 2.4 refuses ``int()`` of
   any array that is not 0-dimensional, so ``for i in range(tl.max(t, axis=0))`` raises ``TypeError: only
   0-dimensional arrays can be converted to Python scalars`` in the interpreter only (the compiled kernel is
   fine). Triton 3.9 squeezes first (``int(handle.data.squeeze())``, triton/runtime/interpreter.py); the wrapper
   of ``interpreter._patch_lang_tensor`` (called at every launch) gives 3.6 the same rule.

2. ``tl.dot`` of fp32 inputs honours ``input_precision``. ``InterpreterBuilder.create_dot`` receives the
   precision and ignores it: it returns ``np.matmul`` in fp32, so every fp32 dot is exact fp32 in the
   interpreter while the GPU's default is TF32. The wrapper does what Triton's NVIDIA backend does on sm_80
   and later:

   - ``"tf32"``: the tensor cores (``mma.sync`` / ``wgmma`` with ``.tf32`` operands) read each fp32 operand
     with its 13 low mantissa bits dropped: TF32 keeps 10 explicit mantissa bits, cut toward zero, not
     rounded (up to 2^-10 relative each, 2^-9 a product). Triton passes the fp32 registers to the
     instruction as they are: no conversion precedes a "tf32" dot (the only ``cvt...tf32`` Triton 3.6 emits is
     the tf32x3 split below, lib/Dialect/TritonGPU/Transforms/F32DotTC.cpp); Triton 3.9's ``tl.dot``
     docstring warns that fp32 inputs "may be truncated to TF32 format ... without rounding which may bias the
     result", and gpulab measured it on an H200 (a teaching fp32 ``tl.dot`` off by more than 2^-10 a product
     at K = 3, beyond what rounding allows, so ``tolerances`` keeps 2^-9; the teaching attention's LSE off by
     about 5e-4 with TF32 dots, which this emulation reproduces, 2.6e-4 to 5.6e-4 on lesson 08's test cases,
     where rounding to nearest would give 0.5e-4 to 2.7e-4). Emulated: both operands cut (bits & 0xFFFFE000;
     NaN kept), then the fp32 ``np.matmul``.
   - ``"tf32x3"``: Triton's F32DotTC pass (the same in 3.6 and 3.9, where ``emuTF32``: sm_80 and later)
     splits ``a = big + small`` with ``big = cvt.rna.tf32.f32(a)`` (PTX ISA, ``cvt``: ``.rna`` rounds to
     nearest, ties away from zero; ``add 0x1000, and 0xFFFFE000`` on finite values) and ``small = a - big``
     in fp32, then ``dot(small_a, big_b)``, ``+ dot(big_a, small_b)``, NaN set to 0, ``+ dot(big_a, big_b)``,
     each a "tf32" dot (the small parts cut again), and adds the accumulator last. Emulated step by step:
     error near fp32 (about 2^-20 a product), three matmuls.
   - ``"ieee"``: exact fp32 products summed in fp32: the interpreter's own ``np.matmul``, unchanged.
   - The default, ``input_precision=None``: ``tl.dot`` takes ``TRITON_F32_DEFAULT`` if set, else "tf32"
     where the target allows it (triton/language/core.py, ``dot``); the interpreter's options and the CUDA
     backend's both allow it, so the interpreter resolves the default as the GPU does, the environment
     variable included. "bf16x3" and "bf16x6" are not in the interpreter's allowed list: it refuses them
     when the kernel is traced (no gpulab kernel uses them). A GPU below sm_80 (a T4) has no TF32 and runs
     fp32 dots as exact FMA: the interpreter models sm_80 and later, where TF32 is the default.

Differences left as they are, each because no gpulab check can see it (the tolerance table,
``gpulab.core.tolerances``, bounds what remains) or because emulating it would cost more than it shows:

- 16-bit ``tl.dot``. fp16 products are exact in fp32 and summed in fp32 on both sides. With
  ``out_dtype=tl.float16`` the GPU rounds the fp16 accumulator once per MMA instruction (k = 16 for fp16);
  the interpreter sums a tile in fp32 (NumPy's float16 ``matmul`` accumulates in float) and rounds twice per
  ``tl.dot`` (the product, then ``+ acc``), K / BLOCK_K * 2 roundings against K / 16: with the interpreter's
  32-wide K tiles the same count, so no check tells them apart. bf16: Triton's interpreter holds bf16 as raw
  uint16 bits and its ``tl.dot`` multiplies those integers (both versions); gpulab's kernels detect this
  (``kernels.matmul_precision.bf16_dot_is_exact``) and upcast bf16 tiles to fp32 first (exact), and a test
  pins the detector's verdict, so this patch leaves that dot alone.
- ``tl.exp``: on the GPU an fp32 ``tl.exp(x)`` is ``ex2.approx.f32(x * log2(e))`` (Triton's NVIDIA
  ``ExpOpConversionApprox``); ``tl.math.exp2`` is ``ex2.approx`` alone. The approximation is within a few
  ulp (about 2^-22 relative), and the fp32 rounding of ``x * log2(e)`` adds up to ``|x| 2^-24`` relative: 6e-7
  at |x| = 10, 5e-6 at |x| = 88. The interpreter's ``np.exp`` is correctly rounded. Every gpulab bound on a
  result through an exp is looser (attention's 2e-5, where p matters only for |s - m| of a few units; the
  sigmoid exercise's 2^-20 on normal inputs, set with the GPU's exp in mind): not emulated.
- fp32 division: Triton lowers ``/`` to ``div.full.f32`` (up to 2 ulp); the interpreter divides exactly. No
  gpulab check holds a quotient to one ulp (the one-ulp elementwise bound is for a single rounding of an
  exactly computed value): not emulated.
- Subnormals. Plain fp32 ``+``, ``*`` and FMA keep subnormals on the GPU (PTX without ``.ftz``);
  ``enable_reflect_ftz`` (default True in both versions' CUDA options) makes libdevice functions flush them,
  and ``tl.math.exp2`` may flush its result. The tolerance table's absolute floor for fp32 is 2^-126, the
  smallest normal, so a flushed subnormal passes every check either way: not emulated.
- FMA contraction. The GPU contracts ``a * b + c`` into one FMA (one rounding) where ``enable_fp_fusion``
  is on: the default in 3.6, and in 3.9 unless ``TRITON_DEFAULT_FP_FUSION`` says otherwise. The interpreter
  rounds the product and the sum separately (``tl.fma`` is exact in both): one extra rounding, 2^-24 |a b|,
  which every gpulab bound covers (they scale with the operands' magnitudes, not with a cancelled result);
  emulating it would mean fusing operations the interpreter runs one by one: not emulated.
- Atomics' order. The interpreter runs the programs of a grid one after another in grid order, so a float
  sum by ``tl.atomic_add`` (flash_attention's dq) is the same on every run; on the GPU the order, and the
  last bits of the sum, vary between runs. A check of run-to-run equality of such a sum proves nothing on
  the CPU; gpulab's bounds on it are relative (ATTENTION_GRAD_REL): not emulated.
"""

from __future__ import annotations

import numpy as np

#: The bits of an fp32 that TF32 keeps: sign, exponent, 10 explicit mantissa bits.
TF32_KEEP = np.uint32(0xFFFFE000)
_HALF_TF32_ULP = np.uint32(0x1000)


def _index(self) -> int:
    return int(self.handle.data.squeeze())


def tf32_cut(x: np.ndarray) -> np.ndarray:
    """fp32 -> TF32 as the tensor cores read an fp32 operand: the 13 low mantissa bits dropped (toward zero).
    x: float32 array, any shape; returns a new float32 array of x's shape; NaN stays NaN, inf stays inf."""
    cut = (np.ascontiguousarray(x).view(np.uint32) & TF32_KEEP).view(np.float32)
    return np.where(np.isnan(x), x, cut)


def tf32_rna(x: np.ndarray) -> np.ndarray:
    """fp32 -> TF32 by PTX ``cvt.rna.tf32.f32``: to nearest, ties away from zero (add half a TF32 ulp to the
    bits, then cut), on finite values; inf and NaN as they are; a value within half a TF32 ulp of fp32's
    largest rounds to inf. x: float32 array, any shape; returns a new float32 array of x's shape."""
    bits = np.ascontiguousarray(x).view(np.uint32)
    rounded = ((bits + _HALF_TF32_ULP) & TF32_KEEP).view(np.float32)
    return np.where(np.isfinite(x), rounded, x)


def _tensor_core_dot(create_dot):
    """``InterpreterBuilder.create_dot`` with fp32 inputs taken as the declared input_precision (docstring 2)."""
    from triton.runtime.interpreter import TensorHandle

    def dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        precision = getattr(input_precision, "name", "IEEE")
        if a.data.dtype != np.float32 or b.data.dtype != np.float32 or precision not in ("TF32", "TF32x3"):
            return create_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

        def tf32_dot(x, y, acc):  # one "tf32" dot: operands cut, exact products summed in fp32
            return np.matmul(tf32_cut(x), tf32_cut(y), dtype=np.float32) + acc

        if precision == "TF32":
            return TensorHandle(tf32_dot(a.data, b.data, d.data), d.dtype.scalar)
        with np.errstate(invalid="ignore"):  # inf - inf in a small part: its NaN is dropped below
            a_big, b_big = tf32_rna(a.data), tf32_rna(b.data)
            a_small, b_small = a.data - a_big, b.data - b_big
            part = tf32_dot(a_big, b_small, tf32_dot(a_small, b_big, np.zeros_like(d.data)))
        part = np.where(np.isnan(part), np.float32(0), part)
        return TensorHandle(tf32_dot(a_big, b_big, part) + d.data, d.dtype.scalar)

    dot._gpulab_dot = True
    return dot


def patch_interpreter() -> bool:
    """Install both wrappers of the module docstring on Triton's interpreter (3.6 or 3.9), each only once.
    Returns True if this call installed either, False if both were in place. Raises ImportError if Triton is
    missing."""
    from triton.runtime import interpreter

    installed = False
    orig = interpreter._patch_lang_tensor
    if not getattr(orig, "_gpulab_index", False):

        def patched(tensor, scope):
            orig(tensor, scope)
            scope.set_attr(tensor, "__index__", _index)

        patched._gpulab_index = True
        interpreter._patch_lang_tensor = patched
        installed = True
    builder = interpreter.InterpreterBuilder
    if not getattr(builder.create_dot, "_gpulab_dot", False):
        builder.create_dot = _tensor_core_dot(builder.create_dot)
        installed = True
    return installed
