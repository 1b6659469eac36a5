"""The memory hierarchy as numbers: levels and their capacities, the bandwidth staircase, Little's law and
the ridge point across generations. Pure model: no timing, no widgets, no CUDA calls.

- ``hierarchy(spec)``: registers -> L1/shared -> L2 -> device memory (HBM or GDDR) for a GPU of
  ``gpulab.core.hardware``, each with its capacity in bytes, per SM and for the whole device, and a bandwidth
  where the datasheet gives one (the device memory's) or a measurement is passed in.
- The staircase: a kernel that reads a working set of W bytes again and again runs at the bandwidth of
  the smallest level that holds it (``level_for``, ``expected_tbps``); ``fit_plateaus`` reads each level's
  plateau off a measured sweep. The L1 step sits at one SM's capacity when every SM reads the whole
  working set (as ``gpulab.kernels.read_bw.read_sum`` does for small working sets).
- Little's law (Little 1961; Volkov, "Understanding Latency Hiding on GPUs", 2016): bytes in flight =
  bandwidth x latency, so with w warps each keeping b bytes in flight, bandwidth(w) = min(peak, w b /
  latency) (``little_tbps``); ``fit_little`` estimates the latency and the peak from a sweep.
- The ridge point I* = C / B (FLOP per byte: below it a kernel is memory-bound) for every GPU and TPU of the
  table (``ridge_points``): compute grew faster than memory bandwidth (the lecture's "bytes rule").

Units: bytes (capacities, decimal GB where the datasheet prints GB), TB/s (1e12 byte/s), ns, FLOP/byte.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..core import hardware
from ..core.validate import nonnegative, positive, positive_int
from .roofline import ridge_point

KIB = 1024
REGISTER_BYTES = 4  # a CUDA register holds 32 bits


@dataclass(frozen=True)
class Level:
    """One level of the hierarchy: ``capacity`` bytes where it sits (per SM for registers and L1/shared,
    else the device), ``device_bytes`` for the whole GPU, ``tbps`` its read bandwidth (None when unknown),
    ``source`` where the bandwidth comes from ("datasheet", "measured" or "")."""

    name: str
    capacity: int
    scope: str  # "per SM" or "device"
    device_bytes: int
    tbps: float | None = None
    source: str = ""


def _require_memory(spec: hardware.GPUSpec) -> None:
    if not isinstance(spec, hardware.GPUSpec):
        raise TypeError(f"spec must be a gpulab.core.hardware.GPUSpec, got {type(spec).__name__}")
    missing = [f for f in ("sms", "regs_per_sm", "l1_smem_per_sm_kib", "l2_kib", "hbm_gb") if getattr(spec, f) is None]
    if missing:
        raise ValueError(
            f"spec {spec.name!r} has no memory hierarchy in gpulab.core.hardware (missing {', '.join(missing)})"
        )


def hierarchy(spec: hardware.GPUSpec, measured: dict | None = None) -> list[Level]:
    """The four levels of ``spec``, nearest first: registers, L1/shared, L2, device memory.

    measured: optional {level name: TB/s} (for instance ``fit_plateaus`` of a recorded sweep) that fills or
    replaces a level's bandwidth. Raises TypeError for a non-GPUSpec, ValueError when the table lacks the
    GPU's hierarchy or ``measured`` names an unknown level or a non-positive bandwidth.
    """
    _require_memory(spec)
    regs = spec.regs_per_sm * REGISTER_BYTES
    l1 = spec.l1_smem_per_sm_kib * KIB
    levels = [
        Level("registers", regs, "per SM", regs * spec.sms),
        Level("L1/shared", l1, "per SM", l1 * spec.sms),
        Level("L2", spec.l2_kib * KIB, "device", spec.l2_kib * KIB),
        Level("HBM", int(spec.hbm_gb * 1e9), "device", int(spec.hbm_gb * 1e9), spec.hbm_tbps, "datasheet"),
    ]
    names = [lv.name for lv in levels]
    for name, tbps in (measured or {}).items():
        if name not in names:
            raise ValueError(f"measured names an unknown level {name!r}; levels: {names}")
        if tbps is not None:
            i = names.index(name)
            levels[i] = replace(levels[i], tbps=positive(f"measured[{name!r}]", tbps), source="measured")
    return levels


def staircase_levels(spec: hardware.GPUSpec) -> list[Level]:
    """The levels a repeated read walks through as its working set grows: L1 (one SM's), L2, HBM."""
    return hierarchy(spec)[1:]


def level_for(working_set: int, spec: hardware.GPUSpec) -> str:
    """The smallest of L1/shared (one SM's), L2 and HBM that holds ``working_set`` bytes (every SM reading
    the whole working set for the L1 step). Raises ValueError beyond the device memory."""
    w = positive_int("working_set", working_set)
    for lv in staircase_levels(spec):
        if w <= lv.capacity:
            return lv.name
    raise ValueError(f"working_set {w} bytes exceeds {spec.name}'s memory ({spec.hbm_gb} GB)")


def expected_tbps(working_set: int, spec: hardware.GPUSpec, plateaus: dict) -> float | None:
    """The staircase model: the plateau bandwidth (TB/s) of ``level_for(working_set)``, from ``plateaus``
    ({level name: TB/s}, e.g. ``fit_plateaus``); None where ``plateaus`` has no value for that level."""
    return plateaus.get(level_for(working_set, spec))


def fit_plateaus(working_sets, tbps, spec: hardware.GPUSpec, margin: float = 2.0) -> dict:
    """Each level's plateau from a measured sweep: the median bandwidth (TB/s) of the points whose working
    set lies inside the level, more than ``margin`` times above the level below and ``margin`` times below its
    own capacity (the steps are gradual: caches are not perfectly associative, the L2 is split in halves on
    some GPUs). {level name: TB/s or None where no point qualifies}. Raises ValueError for mismatched or
    non-positive input."""
    ws = np.asarray([positive("working_sets", w) for w in working_sets], dtype=float)
    bw = np.asarray([positive("tbps", b) for b in tbps], dtype=float)
    if ws.shape != bw.shape:
        raise ValueError(f"working_sets and tbps must have the same length, got {ws.size} and {bw.size}")
    margin = positive("margin", margin)
    out, below = {}, 0.0
    for lv in staircase_levels(spec):
        inside = (ws > below * margin) & (ws * margin <= lv.capacity) if lv.name != "HBM" else ws > below * margin
        out[lv.name] = float(np.median(bw[inside])) if inside.any() else None
        below = lv.capacity
    return out


# --- Little's law ------------------------------------------------------------------------------------------


def bytes_in_flight(tbps: float, latency_ns: float) -> float:
    """Little's law: the bytes that must be in flight to sustain ``tbps`` TB/s at ``latency_ns`` ns of
    latency (TB/s x ns = 1e3 bytes)."""
    return positive("tbps", tbps) * positive("latency_ns", latency_ns) * 1e3


def little_tbps(warps, bytes_per_warp: float, latency_ns: float, peak_tbps: float):
    """Bandwidth (TB/s) with ``warps`` warps each keeping ``bytes_per_warp`` bytes in flight:
    min(peak, warps x bytes_per_warp / latency). ``warps``: a number or a sequence (returns a list)."""
    b, lat, peak = (
        positive("bytes_per_warp", bytes_per_warp),
        positive("latency_ns", latency_ns),
        positive("peak_tbps", peak_tbps),
    )
    if np.ndim(warps):
        return [min(peak, nonnegative("warps", w) * b / lat / 1e3) for w in warps]
    return min(peak, nonnegative("warps", warps) * b / lat / 1e3)


def warps_to_saturate(peak_tbps: float, latency_ns: float, bytes_per_warp: float) -> float:
    """The warps needed to reach ``peak_tbps``: bytes_in_flight(peak, latency) / bytes_per_warp. Raises
    TypeError/ValueError naming the argument (each a positive number)."""
    peak_tbps = positive("peak_tbps", peak_tbps)
    return bytes_in_flight(peak_tbps, latency_ns) / positive("bytes_per_warp", bytes_per_warp)


def fit_little(warps, tbps, bytes_per_warp: float, linear_below: float = 0.5) -> tuple[float, float]:
    """(latency_ns, peak_tbps) from a latency-hiding sweep: the peak is the highest bandwidth measured; the
    latency is the median of warps x bytes_per_warp / bandwidth over the points below ``linear_below`` x
    peak (the rising, latency-bound side), or over the fewest-warps point when none is that low.
    Raises ValueError for mismatched, empty or non-positive input."""
    w = np.asarray([positive("warps", x) for x in warps], dtype=float)
    bw = np.asarray([positive("tbps", x) for x in tbps], dtype=float)
    if w.shape != bw.shape or w.size == 0:
        raise ValueError(f"warps and tbps must be non-empty and of one length, got {w.size} and {bw.size}")
    b = positive("bytes_per_warp", bytes_per_warp)
    peak = float(bw.max())
    rising = bw < linear_below * peak
    if not rising.any():
        rising = w == w.min()
    latency_ns = float(np.median(w[rising] * b / (bw[rising] * 1e12))) * 1e9
    return latency_ns, peak


# --- A measured record beside the models -------------------------------------------------------------------


def fit_record(data: dict, spec: hardware.GPUSpec | None = None) -> dict:
    """The models of this module fitted to a lesson00 record (``gpulab.bench.lesson00.run``: ``device``,
    ``staircase`` rows of working_set, tbps, l2_only; ``latency`` rows of warps, tbps), for ``spec`` (default: the
    table's entry for the recorded GPU).

    ``plateaus``: {level: TB/s}, None where the GPU is not in the table; the L1 plateau from the working
    sets every program reads whole, the L2 and HBM plateaus from those shared out (each SM reading its own
    share, the usual case: a set every SM reads is served faster by the L2). ``little``: (latency_ns,
    peak_tbps), None when the record has no latency sweep."""
    spec = spec or hardware.find(data["device"]["name"])
    st = data["staircase"]
    plateaus = None
    if spec is not None and spec.l2_kib is not None and st:

        def fit(rows):
            return (
                fit_plateaus([r["working_set"] for r in rows], [r["tbps"] for r in rows], spec)
                if rows
                else dict.fromkeys(("L1/shared", "L2", "HBM"))
            )

        whole = fit([r for r in st if not r["l2_only"]])
        shared = fit([r for r in st if r["l2_only"]])
        plateaus = {"L1/shared": whole["L1/shared"], "L2": shared["L2"], "HBM": shared["HBM"]}
    rows = data["latency"]["rows"]
    little = (
        fit_little([r["warps"] for r in rows], [r["tbps"] for r in rows], data["latency"]["bytes_per_warp"])
        if rows
        else None
    )
    return dict(spec=spec, plateaus=plateaus, little=little)


# --- The ridge point across generations ---------------------------------------------------------------------


def ridge_points() -> list[dict]:
    """The ridge point C / B (FLOP/byte) of every GPU and TPU in ``gpulab.core.hardware`` that has a year (the
    imaginary seed accelerator has none), oldest first: dict(name, kind "GPU"/"TPU", year, dtype, peak_tflops,
    hbm_tbps, ridge). C is the dense 16-bit tensor/MXU peak: bf16, or fp16 where the GPU has no bf16 path
    (V100, T4)."""
    rows = []
    for g in hardware.GPUS.values():
        if g.year is None:
            continue
        dtype = "bf16" if g.peak_tflops.get("bf16") else "fp16"
        rows.append(
            dict(
                name=g.name,
                kind="GPU",
                year=g.year,
                dtype=dtype,
                peak_tflops=g.peak(dtype),
                hbm_tbps=g.hbm_tbps,
                ridge=ridge_point(g.peak(dtype), g.hbm_tbps),
            )
        )
    for t in hardware.TPUS.values():
        rows.append(
            dict(
                name=t.name,
                kind="TPU",
                year=t.year,
                dtype="bf16",
                peak_tflops=t.bf16_tflops,
                hbm_tbps=t.hbm_tbps,
                ridge=ridge_point(t.bf16_tflops, t.hbm_tbps),
            )
        )
    return sorted(rows, key=lambda r: (r["year"], r["kind"], r["name"]))
