"""Tile and wave quantization: how many output tiles a matmul makes, and how many waves they take on a GPU.

A tiled matmul writes its ``M x N`` output as tiles of ``tile_m x tile_n``; each tile is one program (a
thread block) that runs on one SM. With ``sms`` SMs and ``blocks_per_sm`` resident tiles per SM, the GPU
runs at most ``slots = sms * blocks_per_sm`` tiles at once: a *wave*. The model (the seed lecture's
"intentionally simplified scheduling model", CS336 Lecture 5, "Why a slightly larger matrix can be awkward")
assumes every tile takes the same time, so the run lasts ``waves = ceil(tiles / slots)`` tile-times.

Two losses follow, both in this module:

- **tile quantization**: edge tiles are partial; a tile past the edge of the matrix still costs a whole
  tile-time. ``tile_efficiency = M * N / (tiles * tile_m * tile_n)``, the useful share of the tiles' area.
- **wave quantization**: the last wave may leave SMs idle. ``wave_efficiency = tiles / (waves * slots)``;
  ``last_wave_occupancy = last_wave_tiles / slots``.

``efficiency = tile_efficiency * wave_efficiency`` is the share of the GPU's tile-times that produce output;
with every tile taking the same time it is the predicted rate divided by the rate of a full, aligned run.

The seed example (256 x 128 tiles, 108 SMs of an A100): ``1792^2`` makes ``7 x 14 = 98`` tiles, one wave;
``1793^2`` makes ``8 x 15 = 120``, two waves, the second with 12 busy SMs. Real kernels can hold several
tiles per SM, use other tile shapes and pay less for a partial tile: the model explains a discontinuity, it
does not predict the time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ..core import hardware, validate

SEED_TILE = (256, 128)  # the seed lecture's output tile, rows x columns
SEED_SMS = 108  # the seed lecture's A100


def cdiv(a: int, b: int) -> int:
    """Ceiling division: the number of size-``b`` pieces that cover ``a`` (``a`` an int >= 0, ``b`` an int >= 1;
    NumPy ints too). Raises TypeError naming the argument for a float, a bool or anything but an int, and ValueError
    for a negative ``a`` or a ``b`` below 1: a count of pieces is defined for sizes only."""
    a, b = validate.integer("a", a), validate.positive_int("b", b)
    return -(-a // b)


def tile_grid(M: int, N: int, tile_m: int, tile_n: int) -> tuple[int, int]:
    """(tiles along M, tiles along N) that cover an ``M x N`` output with ``tile_m x tile_n`` tiles.

    Raises ``TypeError``/``ValueError`` naming the argument unless all four are positive ints.
    """
    M, N, tile_m, tile_n = (
        validate.positive_int(name, v) for name, v in (("M", M), ("N", N), ("tile_m", tile_m), ("tile_n", tile_n))
    )
    return cdiv(M, tile_m), cdiv(N, tile_n)


def sms_of(gpu) -> int:
    """The SM count of ``gpu``: a name that ``gpulab.core.hardware.get`` knows, or a ``GPUSpec``.

    Raises ``KeyError`` for an unknown name and ``ValueError`` for a GPU whose SM count the table lacks
    (the seed's imaginary accelerator).
    """
    spec = gpu if isinstance(gpu, hardware.GPUSpec) else hardware.get(gpu)
    if spec.sms is None:
        raise ValueError(f"gpu: {spec.name} has no SM count in gpulab.core.hardware")
    return spec.sms


@dataclass(frozen=True)
class WavePlan:
    """Tiles and waves of one ``M x N`` output on ``sms`` SMs (see the module docstring for the model)."""

    M: int
    N: int
    tile_m: int
    tile_n: int
    sms: int
    blocks_per_sm: int
    tiles_m: int
    tiles_n: int

    @property
    def tiles(self) -> int:
        return self.tiles_m * self.tiles_n

    @property
    def slots(self) -> int:
        """Tiles that run at once: one wave."""
        return self.sms * self.blocks_per_sm

    @property
    def waves(self) -> int:
        return cdiv(self.tiles, self.slots)

    @property
    def last_wave_tiles(self) -> int:
        """Busy slots (SMs, with one block per SM) in the last wave."""
        return self.tiles - (self.waves - 1) * self.slots

    @property
    def last_wave_occupancy(self) -> float:
        """Share of the slots busy in the last wave, in (0, 1]."""
        return self.last_wave_tiles / self.slots

    @property
    def wave_efficiency(self) -> float:
        """Busy slot-waves over all slot-waves: ``tiles / (waves * slots)``."""
        return self.tiles / (self.waves * self.slots)

    @property
    def tile_efficiency(self) -> float:
        """Useful share of the tiles' area: ``M * N / (tiles * tile_m * tile_n)``."""
        return self.M * self.N / (self.tiles * self.tile_m * self.tile_n)

    @property
    def efficiency(self) -> float:
        """``tile_efficiency * wave_efficiency``: predicted rate / rate of a full, aligned run."""
        return self.tile_efficiency * self.wave_efficiency

    def busy_per_wave(self) -> list[int]:
        """Busy slots in each wave, first to last."""
        return [self.slots] * (self.waves - 1) + [self.last_wave_tiles]

    def summary(self) -> str:
        return (
            f"{self.M} x {self.N} in {self.tile_m} x {self.tile_n} tiles: {self.tiles_m} x {self.tiles_n} = "
            f"{self.tiles} tiles on {self.slots} slots -> {self.waves} wave(s), last wave "
            f"{self.last_wave_tiles}/{self.slots} busy; wave efficiency {self.wave_efficiency:.1%}, "
            f"tile efficiency {self.tile_efficiency:.1%}"
        )


def wave_plan(
    M: int, N: int | None = None, tile=SEED_TILE, *, sms: int | None = None, gpu=None, blocks_per_sm: int = 1
) -> WavePlan:
    """The ``WavePlan`` of an ``M x N`` output (``N`` defaults to ``M``) in ``tile = (tile_m, tile_n)`` tiles.

    Give the machine as ``sms`` (an SM count) or ``gpu`` (a name ``gpulab.core.hardware`` knows, or a
    ``GPUSpec``), not both. ``blocks_per_sm``: tiles resident on one SM at once (the seed's model: 1).
    Raises ``ValueError`` naming the argument for non-positive sizes, a bad tile, or a missing or doubled
    machine, ``TypeError`` for a size that is not an int (NumPy ints are ints); ``KeyError`` for an unknown GPU
    name.
    """
    N = M if N is None else N
    if not (isinstance(tile, (tuple, list)) and len(tile) == 2):
        raise ValueError(f"tile must be a pair (tile_m, tile_n), got {tile!r}")
    if (sms is None) == (gpu is None):
        raise ValueError("give exactly one of sms (an SM count) or gpu (a GPU name or GPUSpec)")
    sms = validate.positive_int("sms", sms) if gpu is None else sms_of(gpu)
    blocks_per_sm = validate.positive_int("blocks_per_sm", blocks_per_sm)
    M, N = validate.positive_int("M", M), validate.positive_int("N", N)
    tile_m, tile_n = validate.positive_int("tile_m", tile[0]), validate.positive_int("tile_n", tile[1])
    tm, tn = tile_grid(M, N, tile_m, tile_n)
    return WavePlan(M, N, tile_m, tile_n, sms, blocks_per_sm, tm, tn)


#: What ``sweep`` can read off a ``WavePlan``: its fields and properties (numbers), not its methods.
QUANTITIES = tuple(f.name for f in fields(WavePlan)) + tuple(
    name for name, v in vars(WavePlan).items() if isinstance(v, property)
)


def sweep(
    ns, tile=SEED_TILE, *, sms: int | None = None, gpu=None, blocks_per_sm: int = 1, what: str = "efficiency"
) -> list[float]:
    """``what`` (one of ``QUANTITIES``: "efficiency", "wave_efficiency", "tiles", "waves", ...) for square
    outputs ``n x n``, one per ``n`` in ``ns``, as a plain list (for plotly). Raises ValueError naming ``what``
    for anything else (a method such as "summary" too)."""
    validate.one_of("what", what, QUANTITIES)
    return [getattr(wave_plan(n, n, tile, sms=sms, gpu=gpu, blocks_per_sm=blocks_per_sm), what) for n in ns]


def predicted_tflops(
    M: int, N: int, K: int, full_rate_tflops: float, tile, *, sms: int | None = None, gpu=None, blocks_per_sm: int = 1
) -> float:
    """The model's rate in TFLOP/s for ``2 M N K`` FLOPs: ``full_rate_tflops * efficiency``.

    ``full_rate_tflops`` is the rate of a full, aligned run of the same kernel (measured, e.g. at a large
    aligned size), positive and finite. ``K`` does not change the efficiency; it is here so the call reads like
    the matmul. Raises as ``wave_plan``, and ValueError naming ``full_rate_tflops`` or ``K``.
    """
    validate.positive_int("K", K)
    full_rate_tflops = validate.positive("full_rate_tflops", full_rate_tflops)
    return full_rate_tflops * wave_plan(M, N, tile, sms=sms, gpu=gpu, blocks_per_sm=blocks_per_sm).efficiency


# ---- a measured sweep beside the model (``measured``: a lesson07 record's ``sweep``) ---------------------


def matmul_tflops(n: int, ms: float) -> float:
    """TFLOP/s of one ``n x n x n`` matmul that takes ``ms`` milliseconds: ``2 n^3`` FLOPs (``matmul.counts``).
    Raises ValueError naming ``n`` or ``ms`` unless both are positive."""
    return 2 * validate.positive_int("n", n) ** 3 / (validate.positive("ms", ms) * 1e-3) / 1e12


def sweep_timing(measured: dict) -> str:
    """How a measured sweep's points were timed: its ``timing`` ("CUDA graph replay": the GPU's time) or, in records made
    before sweeps used graphs, eager calls (each point includes the CPU's launch cost)."""
    return measured.get("timing", "eager calls (each point includes the CPU's launch cost)")


def sweep_rates(measured: dict, method: str) -> list:
    """TFLOP/s per N of ``method`` ("torch" or "gpulab": ``measured[f"{method}_ms"]``), None where the point
    failed (its ms is None)."""
    return [None if ms is None else matmul_tflops(n, ms) for n, ms in zip(measured["ns"], measured[f"{method}_ms"])]


def alignment_split(measured: dict, method: str, multiple: int = 8) -> dict:
    """Mean TFLOP/s of ``method`` over N divisible by ``multiple`` (rows 16-byte aligned in 16-bit) and over
    the other N (NaN where none), and how many points failed."""
    multiple = validate.positive_int("multiple", multiple)
    rates = sweep_rates(measured, method)
    al = [r for n, r in zip(measured["ns"], rates) if r is not None and n % multiple == 0]
    mis = [r for n, r in zip(measured["ns"], rates) if r is not None and n % multiple]
    mean = lambda v: sum(v) / len(v) if v else float("nan")  # noqa: E731
    return {
        "aligned_mean_tflops": mean(al),
        "misaligned_mean_tflops": mean(mis),
        "failed": sum(r is None for r in rates),
    }


def wave_model(measured: dict) -> list[float]:
    """The model's efficiency (tile x wave, ``sweep``) per N of a measured sweep, for its ``tile`` on its
    ``sms``."""
    return sweep(measured["ns"], tuple(measured["tile"]), sms=measured["sms"])


def model_correlation(measured: dict, method: str = "gpulab", multiple: int = 8) -> float:
    """``measured``: a lesson07 record's ``sweep`` (``ns``, ``tile``, ``sms``, ``<method>_ms``). Pearson correlation between the measured TFLOP/s of ``method`` and the wave model's efficiency over the
    N divisible by ``multiple`` (so that alignment does not enter): how much of the wiggle the tile/wave model
    explains. NaN with fewer than three such points or no variation."""
    eff = wave_model(measured)
    pairs = [
        (r, e)
        for n, r, e in zip(measured["ns"], sweep_rates(measured, method), eff)
        if r is not None and n % multiple == 0
    ]
    if len(pairs) < 3:
        return float("nan")
    xs, ys = zip(*pairs)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    cov = sum((x - mx) * (y - my) for x, y in pairs)
    vx, vy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return cov / math.sqrt(vx * vy) if vx and vy else float("nan")
