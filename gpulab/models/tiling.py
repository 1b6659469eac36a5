"""The tiling model: how reusing input tiles on chip cuts the loads of a matmul, and what the tiles cost.

For ``C = A @ B`` with ``A: (M, K)``, ``B: (K, N)`` and ``s`` bytes per element (the seed lecture, CS336
Lecture 5, "Tile the computation to reuse inputs"):

- **no reuse**: each output element reads its own row of ``A`` and column of ``B``: ``2 M N K`` element
  loads, ``2 N^3`` for a square matrix.
- **tiles**: a program computes a ``BM x BN`` output tile; each step along ``K`` loads a ``BM x BK`` tile of
  ``A`` and a ``BK x BN`` tile of ``B`` and reuses them for ``2 BM BN BK`` FLOPs. With square ``T x T`` tiles
  that step's intensity is ``2 T^3 / (2 T^2 s) = T / s`` FLOP/byte (8 for FP32 with ``T = 32``), and the whole
  product loads ``2 N^3 / T`` elements.
- **footprint**: the two input tiles take ``2 T^2 s`` bytes of on-chip storage (``(BM + BN) BK s`` for
  rectangles), per pipeline stage; accumulators and other values need room too. It must fit in the shared
  memory of one SM (``gpulab.core.hardware``: 228 KiB on Hopper).

This counts explicit tile reuse only: output writes, partial edge tiles' savings and reuse supplied by
caches are outside it. It is a model of requested loads, not a prediction of HBM counters.
"""

from __future__ import annotations

from numbers import Integral

from ..core import hardware, validate
from ..core.dtypes import MATMUL, itemsize
from .waves import cdiv


def tile_intensity(T: int, dtype="fp32") -> float:
    """FLOP/byte of one step of square ``T x T`` tiles: ``2 T^3 / (2 T^2 s) = T / s``. Seed: FP32, T=32 -> 8."""
    return validate.positive_int("T", T) / itemsize(dtype, allowed=MATMUL)


def step_intensity(BM: int, BN: int, BK: int, dtype="fp32") -> float:
    """FLOP/byte of one ``K`` step of a ``BM x BN`` output tile: ``2 BM BN BK / ((BM BK + BK BN) s)``
    ``= 2 BM BN / ((BM + BN) s)``; ``BK`` cancels. Equals ``tile_intensity(T)`` when ``BM = BN = T``."""
    BM, BN, BK = (validate.positive_int(name, v) for name, v in (("BM", BM), ("BN", BN), ("BK", BK)))
    return 2 * BM * BN * BK / ((BM * BK + BK * BN) * itemsize(dtype, allowed=MATMUL))


def input_loads(M: int, N: int | None = None, K: int | None = None, tile=None) -> int:
    """Input elements loaded by a tiled matmul, counting every tile load (masked edges load only real elements).

    ``tile=None``: no reuse, ``2 M N K``. ``tile=T`` or ``(BM, BN)``: every output tile reads a ``BM``-row
    strip of ``A`` and a ``BN``-column strip of ``B``: ``ceil(N / BN) M K + ceil(M / BM) K N``, which is
    ``2 N^3 / T`` for a square matrix when ``T`` divides ``N``. ``N`` and ``K`` default to ``M``. Raises
    TypeError/ValueError naming the argument (positive ints; ``tile`` an int or a pair of them).
    """
    N = M if N is None else N
    K = M if K is None else K
    M, N, K = (validate.positive_int(name, v) for name, v in (("M", M), ("N", N), ("K", K)))
    if tile is None:
        return 2 * M * N * K
    if isinstance(tile, (tuple, list)):
        if len(tile) != 2:
            raise ValueError(f"tile must be an int T or a pair (BM, BN), got {tile!r}")
        BM, BN = tile
    elif isinstance(tile, Integral) and not isinstance(tile, bool):
        BM = BN = tile
    else:
        raise TypeError(f"tile must be an int T or a pair (BM, BN), got {tile!r} ({type(tile).__name__})")
    BM, BN = validate.positive_int("tile rows", BM), validate.positive_int("tile columns", BN)
    return cdiv(N, BN) * M * K + cdiv(M, BM) * K * N


def footprint_bytes(T: int, dtype="fp32", BN: int | None = None, BK: int | None = None, stages: int = 1) -> int:
    """On-chip bytes of the input tiles: ``2 T^2 s`` for square tiles; ``(T BK + BK BN) s`` for a ``T x BN``
    output tile with ``BK`` deep steps; times ``stages`` (software pipelining keeps one copy per stage)."""
    BN = T if BN is None else BN
    BK = T if BK is None else BK
    T, BN, BK, stages = (
        validate.positive_int(name, v) for name, v in (("T", T), ("BN", BN), ("BK", BK), ("stages", stages))
    )
    return (T * BK + BK * BN) * itemsize(dtype, allowed=MATMUL) * stages


def shared_memory_bytes(gpu) -> int:
    """Shared memory one SM can hold, in bytes, from ``gpulab.core.hardware`` (a name or a ``GPUSpec``).
    Raises ``ValueError`` where the table has no number (the seed's imaginary accelerator)."""
    spec = gpu if isinstance(gpu, hardware.GPUSpec) else hardware.get(gpu)
    if spec.smem_per_sm_kib is None:
        raise ValueError(f"gpu: {spec.name} has no shared-memory size in gpulab.core.hardware")
    return spec.smem_per_sm_kib * 1024


def fits(footprint: int, gpu) -> bool:
    """True if ``footprint`` bytes fit in one SM's shared memory on ``gpu``."""
    return validate.positive_int("footprint", footprint) <= shared_memory_bytes(gpu)


def largest_square_tile(dtype, gpu, stages: int = 1) -> int:
    """The largest power-of-two ``T`` whose input tiles (``2 T^2 s`` bytes per stage, ``stages`` copies) fit in one
    SM's shared memory on ``gpu``; 0 when not even ``T = 1`` fits (lesson 07's exercise 2 answers the same,
    ``gpulab.exercises.ex07``). Raises as ``footprint_bytes`` and ``shared_memory_bytes``."""
    if not fits(footprint_bytes(1, dtype, stages=stages), gpu):
        return 0
    T = 1
    while fits(footprint_bytes(2 * T, dtype, stages=stages), gpu):
        T *= 2
    return T
