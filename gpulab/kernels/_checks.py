"""Input checks shared by the kernel launchers: each message names the argument and what was expected."""

from __future__ import annotations

import torch

import gpulab


def check_tensor(
    name: str,
    t,
    *,
    dtypes=None,
    ndim=None,
    contiguous=True,
    bit_views: bool = False,
    autograd: bool = False,
    torch_op: str = "the torch operation",
) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``t`` is a dense (strided) tensor on gpulab's device as
    described. Unless ``bit_views``, negative and conjugate views are refused too: their memory holds -t or
    conj(t) with a flag saying so (``t.is_neg()``, e.g. ``z.conj().imag``), and a Triton kernel reads the memory,
    so it would compute with the wrong values.

    Unless ``autograd`` (a launcher wrapped in a ``torch.autograd.Function``), a ``t`` that requires grad while
    grad mode is on is refused too: a kernel's output has no ``grad_fn``, so the gradient through it would be
    lost without a word (``relu(x) + x`` would give x a gradient of 1, not 2). The message suggests
    ``torch_op`` for autograd, ``.detach()`` or ``torch.no_grad()``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise ValueError(f"{name} must be a dense (strided) tensor, got layout {t.layout}; call .to_dense() first")
    if not bit_views and (t.is_neg() or t.is_conj()):
        kind, fix = ("negative", "resolve_neg") if t.is_neg() else ("conjugate", "resolve_conj")
        raise ValueError(
            f"{name} is a {kind} view (its memory does not hold its values, and kernels read memory); "
            f"pass {name}.{fix}()"
        )
    if dtypes is not None and t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} must have dtype in ({names}), got {str(t.dtype).replace('torch.', '')}")
    if ndim is not None and t.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(t.shape)}")
    if t.device.type != gpulab.DEVICE:
        raise ValueError(f"{name} must be on device '{gpulab.DEVICE}' (gpulab mode {gpulab.MODE}), got '{t.device}'")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous; call .contiguous() first")
    if not autograd and t.requires_grad and torch.is_grad_enabled():
        raise ValueError(
            f"{name} requires grad, but these Triton kernels have no backward: the result would "
            f"silently carry no gradient. Use {torch_op} for autograd, or pass {name}.detach() "
            "(or call under torch.no_grad())"
        )


def check_same(name_a: str, a, name_b: str, b) -> None:
    """Raise ``ValueError`` unless ``a`` and ``b`` have the same shape and dtype."""
    if a.shape != b.shape:
        raise ValueError(f"{name_a} and {name_b} must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"{name_a} and {name_b} must have the same dtype, got {a.dtype} and {b.dtype}")


def _byte_range(t: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1): the bytes of ``t``'s storage that non-empty ``t`` spans (torch strides are >= 0)."""
    first = t.storage_offset() * t.element_size()
    last = first + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) * t.element_size()
    return first, last + t.element_size()


def check_disjoint(name_a: str, a, name_b: str, b) -> None:
    """Raise ``ValueError`` when strided tensors ``a`` and ``b`` may share memory: both non-empty, one storage
    (``untyped_storage().data_ptr()``) and intersecting byte ranges. Conservative: views whose elements
    interleave without meeting (``b[:, ::2]`` and ``b[:, 1::2]``) are refused too. torch has no public test
    for overlap, hence this one."""
    if a.numel() == 0 or b.numel() == 0 or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return
    (a0, a1), (b0, b1) = _byte_range(a), _byte_range(b)
    if a0 < b1 and b0 < a1:
        raise ValueError(
            f"{name_a} and {name_b} must not share memory, got byte ranges [{a0}, {a1}) and "
            f"[{b0}, {b1}) of one storage; pass {name_a}.clone()"
        )


def check_block(name: str, block) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``block`` is a power-of-two int in [16, 65536] (Triton's
    tl.arange needs a power of two)."""
    if isinstance(block, bool) or not isinstance(block, int):
        raise TypeError(f"{name} must be an int, got {type(block).__name__}")
    check_power_of_two(name, block, 16, 65536)


def check_power_of_two(name: str, value, lo: int = 1, hi: int | None = None) -> None:
    """Raise ``ValueError`` unless ``value`` is an int (not a bool) that is a power of two in [lo, hi] (no upper
    bound when ``hi`` is None): the tile and block sizes Triton's ``tl.arange`` and ``tl.dot`` accept."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int)
        and value >= lo
        and not value & (value - 1)
        and (hi is None or value <= hi)
    )
    if not ok:
        bound = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be a power of two {bound}, got {value!r}")


def check_matmul_operands(a, b, dtypes) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``a: (M, K)`` and ``b: (K, N)`` are 2D tensors on gpulab's device,
    of one dtype in ``dtypes``, agreeing on K (any strides), neither requiring grad (see ``check_tensor``)."""
    check_tensor("a", a, dtypes=dtypes, ndim=2, contiguous=False, torch_op="torch.matmul")
    check_tensor("b", b, dtypes=dtypes, ndim=2, contiguous=False, torch_op="torch.matmul")
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a: (M, K) and b: (K, N) must agree on K, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
