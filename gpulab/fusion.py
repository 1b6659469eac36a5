"""Operator fusion, counted and modelled (Stanford CS336 Lecture 5, "Fuse operations").

- Byte accounting, generic in dtype: a chain of elementwise operations, each launched as its own kernel,
  reads every input and writes every output through HBM; fused, it reads the chain's inputs once and writes
  its output once. For sin(x)^2 + cos(x)^2: 11n element transfers = 44n bytes in fp32, against 2n = 8n bytes.
- A launch-overhead model: t(n) = launches x overhead + bytes / bandwidth. At small n the launches dominate
  (fusion saves launches), at large n the bytes do (fusion saves bytes).
- Resource pressure: what a fused kernel costs in registers per thread, spills, and resident warps.
"""
from __future__ import annotations

import math

import torch

# The seed's chain: (operation, arrays read, arrays written).
SINCOS_OPS = (("sin", 1, 1), ("cos", 1, 1), ("square", 1, 1), ("square", 1, 1), ("add", 2, 1))
FUSED_TRANSFERS = 2  # read x, write y

# H100/H200 (compute capability 9.0) per-SM limits, from NVIDIA's CUDA C++ Programming Guide, "Compute
# Capabilities" table: 64K 32-bit registers per SM, at most 64 resident warps, at most 255 registers/thread.
REGISTERS_PER_SM = 65536
MAX_WARPS_PER_SM = 64
MAX_REGISTERS_PER_THREAD = 255

_DTYPE_NAMES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64,
                "fp8": torch.float8_e4m3fn}


def itemsize(dtype) -> int:
    """Bytes per element of a torch dtype or a name ("fp32", "fp16", "bf16", "fp64", "fp8"). Raises
    ValueError for an unknown name, TypeError for anything else."""
    if isinstance(dtype, str):
        if dtype not in _DTYPE_NAMES:
            raise ValueError(f"dtype must be one of {list(_DTYPE_NAMES)} or a torch.dtype, got {dtype!r}")
        dtype = _DTYPE_NAMES[dtype]
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype or a name, got {type(dtype).__name__}")
    return dtype.itemsize


def _check_n(n) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int (elements), got {n!r}")


def element_transfers(n: int, fused: bool, ops=SINCOS_OPS) -> int:
    """Element transfers through HBM for a chain of elementwise ``ops`` ((name, reads, writes) each) on n
    elements: the sum of every op's reads and writes unfused; read the input and write the output fused.
    Assumes no cache reuse between kernels (the seed's accounting)."""
    _check_n(n)
    if fused:
        return FUSED_TRANSFERS * n
    return n * sum(r + w for _, r, w in ops)


def bytes_moved(n: int, dtype, fused: bool, ops=SINCOS_OPS) -> int:
    """HBM bytes of the chain: element transfers x itemsize. fp32 sin^2+cos^2: 44n unfused, 8n fused."""
    return element_transfers(n, fused, ops) * itemsize(dtype)


def launches(fused: bool, ops=SINCOS_OPS) -> int:
    """Kernel launches: one per op unfused, one fused."""
    return 1 if fused else len(ops)


def model_ms(n: int, dtype="fp32", fused: bool = True, overhead_us: float = 5.0, bandwidth_tbps: float = 4.0,
             ops=SINCOS_OPS) -> float:
    """The model time in ms: launches x overhead_us + bytes / bandwidth_tbps (TB/s, decimal)."""
    for name, v in (("overhead_us", overhead_us), ("bandwidth_tbps", bandwidth_tbps)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a non-negative finite number, got {v!r}")
    if bandwidth_tbps == 0:
        raise ValueError("bandwidth_tbps must be positive")
    return launches(fused, ops) * overhead_us * 1e-3 + bytes_moved(n, dtype, fused, ops) / (bandwidth_tbps * 1e12) * 1e3


def crossover_n(dtype="fp32", fused: bool = True, overhead_us: float = 5.0, bandwidth_tbps: float = 4.0,
                ops=SINCOS_OPS) -> float:
    """The n at which the model's byte time equals its launch time (below it, launches dominate)."""
    per_elem_s = bytes_moved(1, dtype, fused, ops) / (bandwidth_tbps * 1e12)
    return launches(fused, ops) * overhead_us * 1e-6 / per_elem_s


def effective_tbps(n: int, time_ms: float, dtype="fp32") -> float:
    """Effective bandwidth in TB/s on the fused (necessary) bytes, 2n x itemsize: the same yardstick for
    every implementation, so a slower one scores lower."""
    return bytes_moved(n, dtype, True) / (time_ms * 1e-3) / 1e12


# ---- resource pressure ---------------------------------------------------------------------------------

def elements_per_thread(block: int, num_warps: int) -> int:
    """Elements each thread holds for a 1-D block: BLOCK / (32 x num_warps), at least 1."""
    if block <= 0 or num_warps <= 0:
        raise ValueError(f"block and num_warps must be positive, got {block}, {num_warps}")
    return max(1, block // (32 * num_warps))


def resident_warps(n_regs: int, num_warps: int) -> int:
    """Warps per SM that the register file allows for blocks of ``num_warps`` warps using ``n_regs``
    registers per thread (whole blocks only; capped at MAX_WARPS_PER_SM). A model: it ignores the register
    allocation granularity and shared memory."""
    if n_regs <= 0 or num_warps <= 0:
        raise ValueError(f"n_regs and num_warps must be positive, got {n_regs}, {num_warps}")
    blocks = REGISTERS_PER_SM // (n_regs * 32 * num_warps)
    return min(blocks * num_warps, MAX_WARPS_PER_SM // num_warps * num_warps)
