"""Input checks shared by the kernel launchers: each message names the argument and what was expected."""
from __future__ import annotations

import torch

import gpulab


def check_tensor(name: str, t, *, dtypes=None, ndim=None, contiguous=True, bit_views: bool = False) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``t`` is a dense (strided) tensor on gpulab's device as
    described. Unless ``bit_views``, negative and conjugate views are refused too: their memory holds -t or
    conj(t) with a flag saying so (``t.is_neg()``, e.g. ``z.conj().imag``), and a Triton kernel reads the memory,
    so it would compute with the wrong values."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise ValueError(f"{name} must be a dense (strided) tensor, got layout {t.layout}; call .to_dense() first")
    if not bit_views and (t.is_neg() or t.is_conj()):
        kind, fix = ("negative", "resolve_neg") if t.is_neg() else ("conjugate", "resolve_conj")
        raise ValueError(f"{name} is a {kind} view (its memory does not hold its values, and kernels read memory); "
                         f"pass {name}.{fix}()")
    if dtypes is not None and t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} must have dtype in ({names}), got {str(t.dtype).replace('torch.', '')}")
    if ndim is not None and t.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(t.shape)}")
    if t.device.type != gpulab.DEVICE:
        raise ValueError(f"{name} must be on device '{gpulab.DEVICE}' (gpulab mode {gpulab.MODE}), "
                         f"got '{t.device}'")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous; call .contiguous() first")


def check_same(name_a: str, a, name_b: str, b) -> None:
    """Raise ``ValueError`` unless ``a`` and ``b`` have the same shape and dtype."""
    if a.shape != b.shape:
        raise ValueError(f"{name_a} and {name_b} must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"{name_a} and {name_b} must have the same dtype, got {a.dtype} and {b.dtype}")


def check_block(name: str, block) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``block`` is a power-of-two int in [16, 65536] (Triton's
    tl.arange needs a power of two)."""
    if isinstance(block, bool) or not isinstance(block, int):
        raise TypeError(f"{name} must be an int, got {type(block).__name__}")
    check_power_of_two(name, block, 16, 65536)


def check_power_of_two(name: str, value, lo: int = 1, hi: int | None = None) -> None:
    """Raise ``ValueError`` unless ``value`` is an int (not a bool) that is a power of two in [lo, hi] (no upper
    bound when ``hi`` is None): the tile and block sizes Triton's ``tl.arange`` and ``tl.dot`` accept."""
    ok = (not isinstance(value, bool) and isinstance(value, int) and value >= lo and not value & (value - 1)
          and (hi is None or value <= hi))
    if not ok:
        bound = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be a power of two {bound}, got {value!r}")


def check_matmul_operands(a, b, dtypes) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``a: (M, K)`` and ``b: (K, N)`` are 2D tensors on gpulab's device,
    of one dtype in ``dtypes``, agreeing on K (any strides)."""
    check_tensor("a", a, dtypes=dtypes, ndim=2, contiguous=False)
    check_tensor("b", b, dtypes=dtypes, ndim=2, contiguous=False)
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a: (M, K) and b: (K, N) must agree on K, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
