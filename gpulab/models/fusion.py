"""Operator fusion, counted and modelled (Stanford CS336 Lecture 5, "Fuse operations").

- Byte accounting, generic in dtype: a chain of elementwise operations, each launched as its own kernel,
  reads every input and writes every output through HBM; fused, it reads each of the chain's distinct inputs
  once and writes each of its outputs once, and the intermediates stay in registers. For sin(x)^2 + cos(x)^2:
  11n element transfers = 44n bytes in fp32, against 2n = 8n bytes.
- A launch-overhead model: t(n) = launches x overhead + bytes / bandwidth. At small n the launches dominate
  (fusion saves launches), at large n the bytes do (fusion saves bytes).
- Resource pressure: what a fused kernel costs in registers per thread, spills, and resident warps.
"""

from __future__ import annotations

from ..core import dtypes, hardware, validate

# A chain of elementwise operations: (operation, names of the arrays it reads, names of the arrays it writes),
# in program order. The seed's chain, y = sin(x)^2 + cos(x)^2:
SINCOS_OPS = (
    ("sin", ("x",), ("s",)),
    ("cos", ("x",), ("c",)),
    ("square", ("s",), ("s2",)),
    ("square", ("c",), ("c2",)),
    ("add", ("s2", "c2"), ("y",)),
)

# H100/H200 (compute capability 9.0) per-SM limits, from NVIDIA's CUDA C++ Programming Guide, "Compute
# Capabilities" table: 64K 32-bit registers per SM, at most 64 resident warps, at most 255 registers/thread.
REGISTERS_PER_SM = 65536
MAX_WARPS_PER_SM = 64
MAX_REGISTERS_PER_THREAD = 255
MAX_WARPS_PER_BLOCK = 32  # 1024 threads per block (same table)
MAX_BLOCKS_PER_SM = 32  # resident blocks per SM (same table)
# Shared memory: the SM's capacity is gpulab.core.hardware's (228 KiB on the H200); the CUDA runtime reserves 1 KiB of
# it per resident block from compute capability 8.0 on (CUDA C++ Programming Guide, "Technical Specifications
# per Compute Capability": 227 KB per block of 228 KB per SM on 9.0; gpulab.core.plan.smem_per_block_bytes).
SHARED_PER_SM_BYTES = hardware.get("H200").smem_per_sm_kib * 1024
SHARED_RESERVED_PER_BLOCK_BYTES = 1024

#: The launch-overhead model's default cost of one kernel launch, in µs: a round value of the order a launch
#: from Python costs (a few µs: lesson 04's measurement of this GPU, and the H200's recorded one under
#: "lesson04" / "launch" in gpulab/data, give the figure for a real GPU).
LAUNCH_OVERHEAD_US = 5.0


def _check_ops(ops) -> tuple:
    """ops as a tuple of (name, reads, writes) with reads and writes tuples of array names; raises naming ops."""
    if isinstance(ops, (str, bytes)) or not isinstance(ops, (tuple, list)) or not ops:
        raise ValueError(f"ops must be a non-empty sequence of (name, reads, writes), got {ops!r}")
    out = []
    for k, op in enumerate(ops):
        if not (isinstance(op, (tuple, list)) and len(op) == 3):
            raise ValueError(f"ops[{k}] must be (name, reads, writes), got {op!r}")
        name, reads, writes = op
        for what, arrays in (("reads", reads), ("writes", writes)):
            if not (isinstance(arrays, (tuple, list)) and all(isinstance(a, str) for a in arrays)):
                raise TypeError(f"ops[{k}] ({name!r}): {what} must be a tuple of array names, got {arrays!r}")
        if not writes:
            raise ValueError(f"ops[{k}] ({name!r}) must write at least one array")
        out.append((name, tuple(reads), tuple(writes)))
    return tuple(out)


def chain_arrays(ops=SINCOS_OPS) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(inputs, outputs) of a chain: the arrays it reads before any of its ops writes them (they come from
    HBM), and the arrays it writes that no later op reads (they go to HBM); the rest are intermediates, kept
    in registers when the chain is fused. Names in order of first appearance. Raises naming ``ops``."""
    ops = _check_ops(ops)
    inputs, outputs, written = [], [], set()
    for k, (_, reads, writes) in enumerate(ops):
        later = {a for _, r, _ in ops[k + 1 :] for a in r}
        inputs += [a for a in dict.fromkeys(reads) if a not in written and a not in inputs]
        outputs += [a for a in dict.fromkeys(writes) if a not in later and a not in outputs]
        written.update(writes)
    return tuple(inputs), tuple(outputs)


def element_transfers(n: int, fused: bool, ops=SINCOS_OPS) -> int:
    """Element transfers through HBM for a chain of elementwise ``ops`` ((name, reads, writes) each, reads and
    writes tuples of array names) on n elements. Unfused (one kernel per op): the sum of every op's reads and
    writes. Fused (one kernel): each of the chain's distinct inputs read once and each output written once
    (``chain_arrays``): 2n for sin^2 + cos^2, 3n for x + y. Assumes no cache reuse between kernels (the
    seed's accounting). Raises TypeError/ValueError naming ``n`` (an int >= 0), ``fused`` (a bool) or ``ops``
    (empty, malformed)."""
    n = validate.integer("n", n)
    if validate.one_of("fused", fused, (False, True)):
        inputs, outputs = chain_arrays(ops)
        return n * (len(inputs) + len(outputs))
    return n * sum(len(r) + len(w) for _, r, w in _check_ops(ops))


def bytes_moved(n: int, dtype, fused: bool, ops=SINCOS_OPS) -> int:
    """HBM bytes of the chain: element transfers x itemsize (``dtype``: a name in ``gpulab.core.dtypes``, a torch
    dtype, or bytes per element as a positive int; ``dtypes.itemsize`` raises ValueError naming ``dtype``). fp32 sin^2+cos^2: 44n unfused, 8n fused."""
    return element_transfers(n, fused, ops) * dtypes.itemsize(dtype)


def launches(fused: bool, ops=SINCOS_OPS) -> int:
    """Kernel launches: one per op unfused, one fused. Raises ValueError naming ``ops`` for an empty chain or
    ``fused`` for a non-bool."""
    ops = _check_ops(ops)
    return 1 if validate.one_of("fused", fused, (False, True)) else len(ops)


def model_ms(
    n: int,
    dtype="fp32",
    fused: bool = True,
    overhead_us: float = LAUNCH_OVERHEAD_US,
    bandwidth_tbps: float = 4.0,
    ops=SINCOS_OPS,
) -> float:
    """The model time in ms: launches x overhead_us + bytes / bandwidth_tbps (TB/s, decimal). Raises
    TypeError/ValueError naming ``overhead_us`` (>= 0, finite) or ``bandwidth_tbps`` (> 0, finite)."""
    overhead_us = validate.nonnegative("overhead_us", overhead_us)
    bandwidth_tbps = validate.positive("bandwidth_tbps", bandwidth_tbps)
    # bytes / (TB/s x 1e12) s = bytes / TB/s / 1e9 ms, divided in that order: no intermediate overflows to inf
    return launches(fused, ops) * overhead_us * 1e-3 + bytes_moved(n, dtype, fused, ops) / bandwidth_tbps / 1e9


def crossover_n(
    dtype="fp32",
    fused: bool = True,
    overhead_us: float = LAUNCH_OVERHEAD_US,
    bandwidth_tbps: float = 4.0,
    ops=SINCOS_OPS,
) -> float:
    """The n at which the model's byte time equals its launch time (below it, launches dominate):
    n* = launches x overhead_us x 1e-6 s / (bytes per element / (bandwidth_tbps x 1e12 B/s)), formed as
    launches x overhead_us x bandwidth_tbps x 1e6 / bytes per element, so no intermediate underflows to 0. A
    float; ``math.inf`` where n* lies beyond float's range (launches dominate at every n). Raises as
    ``model_ms``."""
    overhead_us = validate.nonnegative("overhead_us", overhead_us)
    bandwidth_tbps = validate.positive("bandwidth_tbps", bandwidth_tbps)
    per_elem_bytes = bytes_moved(1, dtype, fused, ops)  # >= 1: every op writes an array
    return launches(fused, ops) * overhead_us / per_elem_bytes * bandwidth_tbps * 1e6


def effective_tbps(n: int, time_ms: float, dtype="fp32") -> float:
    """Effective bandwidth in TB/s on the fused (necessary) bytes, 2n x itemsize: the same yardstick for
    every implementation, so a slower one scores lower. Raises TypeError/ValueError naming ``time_ms`` (> 0)."""
    time_ms = validate.positive("time_ms", time_ms)
    return bytes_moved(n, dtype, True) / (time_ms * 1e-3) / 1e12


# ---- resource pressure ---------------------------------------------------------------------------------


def elements_per_thread(block: int, num_warps: int) -> int:
    """Elements each thread holds for a 1-D block: BLOCK / (32 x num_warps), at least 1. Raises naming the
    argument unless both are positive ints."""
    block, num_warps = validate.positive_int("block", block), validate.positive_int("num_warps", num_warps)
    return max(1, block // (32 * num_warps))


def resident_warps(n_regs: int, num_warps: int) -> int:
    """Warps per SM that the register file allows for blocks of ``num_warps`` warps using ``n_regs``
    registers per thread (whole blocks only; capped at MAX_WARPS_PER_SM). A model: it ignores the register
    allocation granularity and shared memory. n_regs: 1..MAX_REGISTERS_PER_THREAD (255; the compiler spills
    beyond it); num_warps: 1..MAX_WARPS_PER_BLOCK (32: 1024 threads). Raises TypeError/ValueError naming the
    argument."""
    n_regs = validate.integer("n_regs", n_regs, low=1, high=MAX_REGISTERS_PER_THREAD)
    num_warps = validate.integer("num_warps", num_warps, low=1, high=MAX_WARPS_PER_BLOCK)
    blocks = REGISTERS_PER_SM // (n_regs * 32 * num_warps)
    return min(blocks * num_warps, MAX_WARPS_PER_SM // num_warps * num_warps)


def resident_warps_shared(shared_bytes: int, num_warps: int) -> int:
    """Warps per SM that shared memory allows for blocks of ``num_warps`` warps each using ``shared_bytes`` of
    shared memory (plus the SHARED_RESERVED_PER_BLOCK_BYTES the runtime reserves per block), on an H200's
    SHARED_PER_SM_BYTES: whole blocks only, at most MAX_BLOCKS_PER_SM blocks and MAX_WARPS_PER_SM warps. The
    shared-memory twin of ``resident_warps``: a kernel's residency is the smaller of the two (and of the warp
    and block caps). shared_bytes: 0 .. one block's limit (SHARED_PER_SM_BYTES - SHARED_RESERVED_PER_BLOCK_BYTES);
    num_warps: 1..MAX_WARPS_PER_BLOCK. Raises TypeError/ValueError naming the argument."""
    limit = SHARED_PER_SM_BYTES - SHARED_RESERVED_PER_BLOCK_BYTES
    shared_bytes = validate.integer("shared_bytes", shared_bytes, low=0, high=limit)
    num_warps = validate.integer("num_warps", num_warps, low=1, high=MAX_WARPS_PER_BLOCK)
    blocks = min(SHARED_PER_SM_BYTES // (shared_bytes + SHARED_RESERVED_PER_BLOCK_BYTES), MAX_BLOCKS_PER_SM)
    return min(blocks * num_warps, MAX_WARPS_PER_SM // num_warps * num_warps)
