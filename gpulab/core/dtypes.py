"""The one dtype table: a short name, its torch dtype and its bytes per element; ``name_of`` a torch dtype; and
``upcast``.

Names are the field's: "fp32", "tf32" (fp32 storage, TF32 tensor-core inputs), "bf16", "fp16", "fp8"
(E4M3), "fp64". Every model, kernel, suite and tool looks names up here.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import torch

from . import validate


@dataclass(frozen=True)
class DType:
    """One row of the table: ``name``, the ``torch`` dtype that stores it and ``bytes`` per element."""

    name: str
    torch: torch.dtype
    bytes: int


TABLE: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp64", torch.float64, 8),
        DType("fp32", torch.float32, 4),
        DType("tf32", torch.float32, 4),
        DType("bf16", torch.bfloat16, 2),
        DType("fp16", torch.float16, 2),
        DType("fp8", torch.float8_e4m3fn, 1),
    )
}

#: The matmul dtypes of the lessons, in the order tables print them.
MATMUL = ("fp32", "tf32", "bf16", "fp16", "fp8")
#: Elementwise dtypes of the lessons (ReLU, fusion).
ELEMENTWISE = ("fp32", "fp16", "bf16")


def lookup(name: str, *, allowed=None, arg: str = "dtype") -> DType:
    """The table row for ``name``; ``allowed`` narrows the names accepted. Raises ValueError naming ``arg``
    and the names it takes."""
    names = tuple(TABLE) if allowed is None else tuple(allowed)
    if not isinstance(name, str) or name not in names:
        raise ValueError(f"{arg} must be one of {list(names)}, got {name!r}")
    return TABLE[name]


def torch_dtype(name: str, *, allowed=None, arg: str = "dtype") -> torch.dtype:
    """The torch dtype that stores ``name`` (``torch_dtype("bf16") is torch.bfloat16``)."""
    return lookup(name, allowed=allowed, arg=arg).torch


#: Each torch dtype's name in the table, its first row (float32 is "fp32": "tf32" stores float32 too).
_NAMES: dict[torch.dtype, str] = {d.torch: d.name for d in reversed(TABLE.values())}


def name_of(dtype: torch.dtype) -> str:
    """The table's name of a torch dtype (``name_of(torch.bfloat16) == "bf16"``, ``name_of(torch.float32) ==
    "fp32"``); a dtype outside the table by torch's own name (``"int64"``). Raises TypeError for anything but a
    torch dtype."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch dtype, got {type(dtype).__name__} {dtype!r}")
    return _NAMES.get(dtype) or str(dtype).removeprefix("torch.")


def itemsize(dtype, *, allowed=None, arg: str = "dtype") -> int:
    """Bytes per element of ``dtype``: a name in the table (``allowed`` narrows the names accepted, as in
    ``lookup``), any torch dtype, or a positive int of bytes (returned as it is, so a model takes "bf16" or 2).
    Raises ValueError (TypeError for a non-int number) naming ``arg``."""
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize
    if isinstance(dtype, Integral) and not isinstance(dtype, bool):
        return validate.positive_int(arg, dtype)
    return lookup(dtype, allowed=allowed, arg=arg).bytes


def upcast(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float64 on the CPU: the exact value a float64 reference starts from (every fp32, bf16, fp16
    and fp8 value is exact in float64)."""
    return x.detach().to(device="cpu", dtype=torch.float64)
